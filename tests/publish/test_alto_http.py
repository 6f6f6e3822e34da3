"""ALTO over a real HTTP server (uvicorn, the app `nettel serve` builds): every resource and error
against RFC 7285's field names and media types, through the app's own wiring (publishers,
topology networks, per-snapshot views).

Sites: CERN (networks 192.0.2.0/24 and 2001:db8:c::/48, plus a host 198.51.100.77 inside RAL's
network), RAL (198.51.100.0/24, 2001:db8:a::/48), PIC (no networks: its host alone) and a host
without a site. Expected values are worked out by hand from LINKS.
"""

from __future__ import annotations

import http.client as http_client
import re
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from service.config import Settings
from service.publish.app import create_app
from service.runtime import Runtime, build_runtime
from service.topology.topology import Topology
from tests.publish.alto_client import (
    COST_MAP,
    COST_MAP_FILTER,
    DIRECTORY,
    ENDPOINT_COST,
    ENDPOINT_COST_PARAMS,
    ERROR,
    NETWORK_MAP,
    AltoClient,
    AltoErrorReply,
    sort_replicas,
)
from tests.publish.served_app import serve_app
from tests.publish.support import host_link, make_matrix

CERN, RAL, PIC, LONE = "CERN", "RAL", "PIC", "ps.lone.org"
NETWORKS = [
    ("192.0.2.0/24", CERN),
    ("2001:db8:c::/48", CERN),
    ("198.51.100.0/24", RAL),
    ("2001:db8:a::/48", RAL),
]
LINKS = [
    host_link("192.0.2.1", "198.51.100.20", source_site=CERN, destination_site=RAL,
              cost=0.2, delay=10.0, loss=0.0, throughput_bps=4_000_000_000,
              throughput_age_s=7200),
    host_link("192.0.2.2", "198.51.100.20", source_site=CERN, destination_site=RAL,
              cost=0.4, delay=12.0, loss=0.01, throughput_bps=1_000_000_004,
              throughput_age_s=600),
    host_link("198.51.100.20", "192.0.2.1", source_site=RAL, destination_site=CERN,
              cost=0.1, delay=9.0),
    host_link("2001:db8:a::20", "2001:db8:c::1", source_site=RAL, destination_site=CERN,
              cost=0.3, delay=11.0),
    host_link("203.0.113.9", "192.0.2.1", source_site=PIC, destination_site=CERN,
              cost=0.6, delay=30.0),
    host_link("198.51.100.77", "203.0.113.9", source_site=CERN, destination_site=PIC,
              cost=0.5, delay=25.0),
    host_link("100.64.7.7", "192.0.2.1", source_host=LONE, destination_site=CERN,
              cost=0.9, delay=None, loss=None),
]  # fmt: skip
COST = {"cost-mode": "numerical", "cost-metric": "priv:nettel-cost"}
VTAG = re.compile(r"^[\x21-\x7e]{1,64}$")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Runtime]]:
    runtime = build_runtime(Settings(model="none", publish_telemetry=False))
    runtime.state.index.set_topology(Topology.from_inventory([], NETWORKS))
    with serve_app(create_app(runtime)) as url:
        yield url, runtime


@pytest.fixture
def alto(served: tuple[str, Runtime]) -> Iterator[httpx.Client]:
    """A client of the served app, whose latest matrix is LINKS'."""
    served[1].cycle.latest = make_matrix(LINKS)
    with httpx.Client(base_url=served[0]) as client:
        yield client


def lone_pid(alto: httpx.Client) -> str:
    (pid,) = set(alto.get("/alto/networkmap").json()["network-map"]) - {CERN, RAL, PIC}
    return pid


def post(alto: httpx.Client, path: str, body: Any, content_type: str) -> httpx.Response:
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    return alto.post(path, content=content, headers={"Content-Type": content_type})


def endpoint_costs(
    alto: httpx.Client, srcs: list[str], dsts: list[str], cost_type=COST
) -> dict[str, Any]:
    body = {"cost-type": cost_type, "endpoints": {"srcs": srcs, "dsts": dsts}}
    response = post(alto, "/alto/endpointcost", body, ENDPOINT_COST_PARAMS)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == ENDPOINT_COST
    document = response.json()
    assert set(document) == {"meta", "endpoint-cost-map"}
    assert document["meta"]["cost-type"] == cost_type
    return document


def alto_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == ERROR
    document = response.json()
    assert set(document) == {"meta"}
    return document["meta"]


def test_directory_lists_maps_filtered_maps_and_the_endpoint_cost_service(served, alto):
    response = alto.get("/alto")
    assert response.headers["content-type"] == DIRECTORY
    meta, resources = response.json()["meta"], response.json()["resources"]
    cost_types = meta["cost-types"]
    metrics = {"priv:nettel-cost", "delay-ow", "lossrate", "tput"}
    assert {t["cost-metric"] for t in cost_types.values()} == metrics
    service = resources["endpointcost"]
    assert service == {
        "uri": f"{served[0]}/alto/endpointcost",
        "media-type": ENDPOINT_COST,
        "accepts": ENDPOINT_COST_PARAMS,
        "capabilities": {"cost-constraints": False, "cost-type-names": list(cost_types)},
    }
    filtered = {rid: r for rid, r in resources.items() if r.get("accepts") == COST_MAP_FILTER}
    assert len(filtered) == 4
    for resource in filtered.values():
        (name,) = resource["capabilities"]["cost-type-names"]
        assert resource["media-type"] == COST_MAP and resource["uses"] == ["networkmap"]
        assert resource["uri"] == f"{served[0]}/alto/costmap/{cost_types[name]['cost-metric']}"
        assert resource["capabilities"]["cost-constraints"] is False


def test_network_map_pids_carry_the_sites_networks_and_the_hosts_outside_them(alto):
    response = alto.get("/alto/networkmap")
    assert response.headers["content-type"] == NETWORK_MAP
    document = response.json()
    assert document["meta"]["vtag"]["resource-id"] == "networkmap"
    assert VTAG.match(document["meta"]["vtag"]["tag"])
    assert document["network-map"] == {
        CERN: {"ipv4": ["192.0.2.0/24", "198.51.100.77/32"], "ipv6": ["2001:db8:c::/48"]},
        RAL: {"ipv4": ["198.51.100.0/24"], "ipv6": ["2001:db8:a::/48"]},
        PIC: {"ipv4": ["203.0.113.9/32"]},
        lone_pid(alto): {"ipv4": ["100.64.7.7/32"]},
    }


def test_endpoint_costs_are_host_level_when_measured_else_between_the_pids(alto):
    cern_host, cern_other, cern_in_ral = "ipv4:192.0.2.1", "ipv4:192.0.2.3", "ipv4:198.51.100.77"
    ral_host, ral_v6_other, unknown = (
        "ipv4:198.51.100.20",
        "ipv6:2001:db8:a::99",
        "ipv4:192.88.99.1",
    )
    document = endpoint_costs(
        alto,
        [cern_host, cern_other, ral_host, "ipv4:203.0.113.9", unknown],
        [ral_host, ral_v6_other, cern_host, cern_in_ral, unknown],
    )
    assert document["endpoint-cost-map"] == {
        # measured pair 0.2; CERN -> RAL (site mean of 0.2 and 0.4) for the rest
        cern_host: {ral_host: 0.2, ral_v6_other: 0.3},
        cern_other: {ral_host: 0.3, ral_v6_other: 0.3},
        # RAL -> CERN (mean of 0.1 and 0.3), though 198.51.100.77 lies in RAL's network
        ral_host: {cern_host: 0.1, cern_in_ral: 0.2},
        "ipv4:203.0.113.9": {cern_host: 0.6, cern_in_ral: 0.6},
    }
    vtag = document["meta"]["vtag"]
    assert vtag["resource-id"] == "endpointcost" and VTAG.match(vtag["tag"])


def test_endpoint_costs_for_every_metric_keep_the_requests_spelling(alto):
    ral_v6, cern_v6 = "ipv6:2001:DB8:A::20", "ipv6:2001:db8:c:0::1"
    srcs, dsts = [ral_v6, "ipv4:100.64.7.7", "ipv4:192.0.2.2"], [cern_v6, "ipv4:192.0.2.1"]
    delay = endpoint_costs(alto, srcs, dsts, {"cost-mode": "numerical", "cost-metric": "delay-ow"})
    assert delay["endpoint-cost-map"] == {
        ral_v6: {cern_v6: 11000.0, "ipv4:192.0.2.1": 10000.0},  # host level, then RAL -> CERN
    }  # the lone host has no delay; CERN -> CERN is not measured
    loss = endpoint_costs(alto, srcs, ["ipv4:198.51.100.20"], {
        "cost-mode": "numerical", "cost-metric": "lossrate"})  # fmt: skip
    assert loss["endpoint-cost-map"] == {"ipv4:192.0.2.2": {"ipv4:198.51.100.20": 1.0}}


def test_sources_left_out_or_empty_stand_for_the_client_and_destinations_are_required(alto):
    """RFC 7285 section 11.5.1.3: an empty or absent srcs list is the client's own address;
    the dsts list must not be empty."""
    for endpoints in ({"dsts": ["ipv4:192.0.2.1"]}, {"srcs": [], "dsts": ["ipv4:192.0.2.1"]}):
        body = {"cost-type": COST, "endpoints": endpoints}
        response = post(alto, "/alto/endpointcost", body, ENDPOINT_COST_PARAMS)
        assert response.status_code == 200  # 127.0.0.1 -> CERN: measured by no link
        assert response.json()["endpoint-cost-map"] == {}
    body = {"cost-type": COST, "endpoints": {"srcs": ["ipv4:192.0.2.1"], "dsts": []}}
    assert alto_error(post(alto, "/alto/endpointcost", body, ENDPOINT_COST_PARAMS), 400) == {
        "code": "E_INVALID_FIELD_VALUE",
        "field": "endpoints/dsts",
        "value": [],
    }
    body = {"cost-type": COST, "endpoints": {"srcs": ["ipv4:192.0.2.1"]}}
    assert alto_error(post(alto, "/alto/endpointcost", body, ENDPOINT_COST_PARAMS), 400) == {
        "code": "E_MISSING_FIELD",
        "field": "endpoints/dsts",
    }


def test_filtered_cost_map_keeps_the_pids_asked_for(alto):
    path = "/alto/costmap/priv:nettel-cost"
    full = alto.get(path).json()
    lone = lone_pid(alto)
    cases = [
        ({"srcs": [CERN], "dsts": []}, {CERN: {RAL: 0.3, PIC: 0.5}}),
        (
            {"srcs": [], "dsts": [CERN, "NOPE"]},
            {RAL: {CERN: 0.2}, PIC: {CERN: 0.6}, lone: {CERN: 0.9}},
        ),
        ({"srcs": [RAL, PIC], "dsts": [PIC]}, {}),
        ({}, full["cost-map"]),
    ]
    for pids, expected in cases:
        response = post(alto, path, {"cost-type": COST, "pids": pids}, COST_MAP_FILTER)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == COST_MAP
        assert response.json() == {"meta": full["meta"], "cost-map": expected}
    no_pids = post(alto, path, {"cost-type": COST}, COST_MAP_FILTER)
    assert no_pids.json()["cost-map"] == full["cost-map"]


def test_every_reply_has_its_bare_media_type_without_accept_and_with_openalto_headers(alto):
    """alto.client sends no Accept; OpenALTO's client sends `accepts:` and compares the whole
    Content-Type header with the bare media type."""
    connection = http_client.HTTPConnection(alto.base_url.host, alto.base_url.port)
    body = orjson.dumps({"cost-type": COST, "endpoints": {"dsts": ["ipv4:192.0.2.1"]}})
    requests = [
        ("GET", "/alto", None, DIRECTORY),
        ("GET", "/alto/networkmap", None, NETWORK_MAP),
        ("GET", "/alto/costmap/delay-ow", None, COST_MAP),
        ("POST", "/alto/costmap/delay-ow", b"{}", ERROR),
        ("POST", "/alto/endpointcost", body, ENDPOINT_COST),
        ("GET", "/alto/costmap/hopcount", None, ERROR),
    ]
    for method, path, content, media_type in requests:
        headers = {"accepts": f"{media_type},{ERROR}"}
        if content is not None:
            headers["Content-Type"] = (
                ENDPOINT_COST_PARAMS if "endpoint" in path else COST_MAP_FILTER
            )
        connection.request(method, path, body=content, headers=headers)
        response = connection.getresponse()
        response.read()
        assert response.getheader("Content-Type") == media_type, (method, path)
    connection.close()


SYNTAX = {"code": "E_SYNTAX"}
ERRORS = [
    # (body, expected meta; None: every key but syntax-error, which is checked to be there)
    (b"{not json", None),
    (b"[1, 2]", {"code": "E_SYNTAX", "syntax-error": "the request is not a JSON object"}),
    ({"endpoints": {"srcs": [], "dsts": []}}, {"code": "E_MISSING_FIELD", "field": "cost-type"}),
    ({"cost-type": {"cost-mode": "numerical"}, "endpoints": {}},
     {"code": "E_MISSING_FIELD", "field": "cost-type/cost-metric"}),
    ({"cost-type": COST}, {"code": "E_MISSING_FIELD", "field": "endpoints"}),
    ({"cost-type": "priv:nettel-cost", "endpoints": {}},
     {"code": "E_INVALID_FIELD_TYPE", "field": "cost-type", "value": "priv:nettel-cost"}),
    ({"cost-type": COST, "endpoints": {"srcs": "ipv4:192.0.2.1"}},
     {"code": "E_INVALID_FIELD_TYPE", "field": "endpoints/srcs", "value": "ipv4:192.0.2.1"}),
    ({"cost-type": COST, "endpoints": {"dsts": [7]}},
     {"code": "E_INVALID_FIELD_TYPE", "field": "endpoints/dsts", "value": 7}),
    ({"cost-type": COST | {"cost-metric": "hopcount"}, "endpoints": {}},
     {"code": "E_INVALID_FIELD_VALUE", "field": "cost-type/cost-metric", "value": "hopcount"}),
    ({"cost-type": COST | {"cost-mode": "ordinal"}, "endpoints": {}},
     {"code": "E_INVALID_FIELD_VALUE", "field": "cost-type/cost-mode", "value": "ordinal"}),
    ({"cost-type": COST, "constraints": ["le 0.5"], "endpoints": {}},
     {"code": "E_INVALID_FIELD_VALUE", "field": "constraints", "value": ["le 0.5"]}),
    ({"cost-type": COST, "endpoints": {"srcs": ["mac:00:00:5e:00:53:01"]}},
     {"code": "E_INVALID_FIELD_VALUE", "field": "endpoints/srcs",
      "value": "mac:00:00:5e:00:53:01"}),
    ({"cost-type": COST, "endpoints": {"srcs": ["ipv4:2001:db8::1"]}},
     {"code": "E_SYNTAX", "field": "endpoints/srcs", "value": "ipv4:2001:db8::1",
      "syntax-error": "not an ipv4 address"}),
    ({"cost-type": COST, "endpoints": {"dsts": ["192.0.2.1"]}},
     {"code": "E_SYNTAX", "field": "endpoints/dsts", "value": "192.0.2.1",
      "syntax-error": "not a typed endpoint address"}),
    ({"cost-type": COST, "endpoints": {"srcs": [f"ipv4:10.0.{n // 256}.{n % 256}" for n in
                                               range(501)], "dsts": ["ipv4:192.0.2.1"] * 2 + [
        f"ipv4:10.1.{n // 256}.{n % 256}" for n in range(500)]}},
     {"code": "E_INVALID_FIELD_VALUE", "field": "endpoints",
      "value": "501 x 501 pairs, more than 250000"}),
]  # fmt: skip


@pytest.mark.parametrize("body, expected", ERRORS)
def test_endpoint_cost_request_errors(alto, body, expected):
    meta = alto_error(post(alto, "/alto/endpointcost", body, ENDPOINT_COST_PARAMS), 400)
    if expected is None:
        assert meta["code"] == "E_SYNTAX" and meta["syntax-error"]
    else:
        assert meta == expected


def test_filtered_cost_map_request_errors(alto):
    path = "/alto/costmap/delay-ow"
    wrong_metric = post(alto, path, {"cost-type": COST}, COST_MAP_FILTER)
    assert alto_error(wrong_metric, 400) == {
        "code": "E_INVALID_FIELD_VALUE", "field": "cost-type/cost-metric",
        "value": "priv:nettel-cost",
    }  # fmt: skip
    delay = {"cost-mode": "numerical", "cost-metric": "delay-ow"}
    bad_pid = post(
        alto, path, {"cost-type": delay, "pids": {"srcs": ["ps.lone.org"]}}, COST_MAP_FILTER
    )
    assert alto_error(bad_pid, 400) == {
        "code": "E_SYNTAX", "field": "pids/srcs", "value": "ps.lone.org",
        "syntax-error": "not a valid PID name",
    }  # fmt: skip
    pids_list = post(alto, path, {"cost-type": delay, "pids": [CERN]}, COST_MAP_FILTER)
    assert alto_error(pids_list, 400) == {
        "code": "E_INVALID_FIELD_TYPE",
        "field": "pids",
        "value": [CERN],
    }
    unknown = post(alto, "/alto/costmap/hopcount", {"cost-type": delay}, COST_MAP_FILTER)
    assert alto_error(unknown, 404)["code"] == "E_INVALID_FIELD_VALUE"


@pytest.mark.parametrize(
    "path, content_type",
    [
        ("/alto/endpointcost", "application/json"),
        ("/alto/endpointcost", COST_MAP_FILTER),
        ("/alto/costmap/lossrate", ENDPOINT_COST_PARAMS),
        ("/alto/costmap/lossrate", ""),
    ],
)
def test_a_body_of_another_media_type_is_415(alto, path, content_type):
    body = {"cost-type": COST, "endpoints": {"srcs": [], "dsts": []}, "pids": {}}
    meta = alto_error(post(alto, path, body, content_type), 415)
    assert meta["code"] == "E_INVALID_FIELD_VALUE" and meta["field"] == "Content-Type"


def test_media_type_parameters_on_a_request_are_accepted(alto):
    body = {"cost-type": COST, "endpoints": {"dsts": ["ipv4:192.0.2.1"]}}
    response = post(alto, "/alto/endpointcost", body, f"{ENDPOINT_COST_PARAMS}; charset=UTF-8")
    assert response.status_code == 200


def test_an_accept_header_ruling_out_the_reply_is_406(alto):
    for accept in ("application/json", "text/html", f"{COST_MAP};q=0"):
        response = alto.get("/alto/costmap/lossrate", headers={"Accept": accept})
        assert alto_error(response, 406) == {
            "code": "E_INVALID_FIELD_VALUE",
            "field": "Accept",
            "value": accept,
        }
    for accept in ("*/*", "application/*", f"text/html, {COST_MAP}"):
        response = alto.get("/alto/costmap/lossrate", headers={"Accept": accept})
        assert response.status_code == 200


def test_a_body_over_the_limit_is_413(alto):
    body = b'{"cost-type": {}, "pad": "' + b"x" * (1 << 20) + b'"}'
    meta = alto_error(post(alto, "/alto/endpointcost", body, ENDPOINT_COST_PARAMS), 413)
    assert meta == {"code": "E_SYNTAX", "syntax-error": "request body over 1048576 bytes"}


def test_resources_of_the_matrix_answer_503_before_the_first_one(served, alto):
    runtime = served[1]
    runtime.cycle.latest = None
    body = {"cost-type": COST, "endpoints": {"dsts": ["ipv4:192.0.2.1"]}}
    assert post(alto, "/alto/endpointcost", body, ENDPOINT_COST_PARAMS).status_code == 503
    assert alto.get("/alto/networkmap").status_code == 503
    assert alto.get("/alto").status_code == 200


def test_the_network_map_vtag_follows_the_sites_networks(served, alto):
    runtime = served[1]
    first = alto.get("/alto/networkmap").json()
    runtime.cycle.latest = make_matrix(LINKS)  # a new snapshot, the same map: the same tag
    assert alto.get("/alto/networkmap").json() == first
    networks = [*NETWORKS, ("203.0.113.0/24", PIC)]
    runtime.state.index.set_topology(Topology.from_inventory([], networks))
    try:
        runtime.cycle.latest = make_matrix(LINKS)
        second = alto.get("/alto/networkmap").json()
        cost_map = alto.get("/alto/costmap/lossrate").json()
        from_pic = endpoint_costs(alto, ["ipv4:203.0.113.200"], ["ipv4:192.0.2.1"])
    finally:
        runtime.state.index.set_topology(Topology.from_inventory([], NETWORKS))
    assert second["network-map"][PIC] == {"ipv4": ["203.0.113.0/24"]}
    assert second["meta"]["vtag"]["tag"] != first["meta"]["vtag"]["tag"]
    assert cost_map["meta"]["dependent-vtags"] == [second["meta"]["vtag"]]
    assert from_pic["endpoint-cost-map"] == {"ipv4:203.0.113.200": {"ipv4:192.0.2.1": 0.6}}


def test_an_inventory_site_without_measured_links_still_has_its_pid(served, alto):
    """A CRIC site with netroutes but no link in the matrix is in the network map, so a
    client's longest-prefix lookup finds its addresses' site; no cost names it."""
    runtime = served[1]
    networks = [*NETWORKS, ("192.88.99.0/24", "FNAL"), ("2001:db8:f::/48", "FNAL")]
    runtime.state.index.set_topology(Topology.from_inventory([], networks))
    try:
        runtime.cycle.latest = make_matrix(LINKS)
        network_map = alto.get("/alto/networkmap").json()["network-map"]
        cost_map = alto.get("/alto/costmap/priv:nettel-cost").json()["cost-map"]
    finally:
        runtime.state.index.set_topology(Topology.from_inventory([], NETWORKS))
        runtime.cycle.latest = make_matrix(LINKS)
    assert network_map["FNAL"] == {"ipv4": ["192.88.99.0/24"], "ipv6": ["2001:db8:f::/48"]}
    assert "FNAL" not in cost_map and all("FNAL" not in row for row in cost_map.values())


def test_a_replica_sorter_ranks_replicas_for_a_reader_from_the_directory_on(served, alto):
    """What a replica sorter does: directory, network map, PIDs by longest prefix, endpoint
    costs for the candidate replicas, sort; cross-checked against the PIDs' filtered map."""
    client = AltoClient(alto, f"{served[0]}/alto")
    _, lookup = client.network_map()
    replicas = {
        "RAL_DISK": "198.51.100.20",
        "RAL_V6_DISK": "2001:db8:a::20",
        "PIC_DISK": "203.0.113.9",
        "ELSEWHERE_DISK": "192.88.99.1",
    }
    measured_reader, other_reader = "192.0.2.1", "192.0.2.50"
    assert lookup.pid_of(other_reader) == CERN and lookup.pid_of(replicas["RAL_V6_DISK"]) == RAL
    assert lookup.pid_of(replicas["ELSEWHERE_DISK"]) is None
    ranked = ["RAL_DISK", "RAL_V6_DISK", "PIC_DISK", "ELSEWHERE_DISK"]
    assert sort_replicas(client, "priv:nettel-cost", measured_reader, replicas) == ranked
    assert sort_replicas(client, "delay-ow", measured_reader, replicas) == ranked
    costs = client.endpoint_costs("priv:nettel-cost", replicas.values(), [other_reader])
    pid_costs = client.filtered_cost_map("priv:nettel-cost", [RAL, PIC], [CERN])["cost-map"]
    assert costs == {  # none of these pairs is measured: the PIDs' costs
        ip: {other_reader: pid_costs[lookup.pid_of(ip)][CERN]}
        for ip in replicas.values()
        if lookup.pid_of(ip) is not None
    }
    ral = replicas["RAL_DISK"]
    measured = client.endpoint_costs("priv:nettel-cost", [ral], [measured_reader])
    assert measured[ral][measured_reader] == 0.1 != pid_costs[RAL][CERN]  # the host link's


def test_the_client_sees_refusals_as_alto_errors(served, alto):
    client = AltoClient(alto, f"{served[0]}/alto")
    with pytest.raises(AltoErrorReply) as refused:
        client.filtered_cost_map("lossrate", ["not a PID"], [])
    assert refused.value.status == 400 and refused.value.meta["code"] == "E_SYNTAX"


TPUT = {"cost-mode": "numerical", "cost-metric": "tput"}


def test_tput_is_rfc_9439s_throughput_in_bytes_per_second_of_pairs_that_have_a_test(alto):
    directory = alto.get("/alto").json()
    (described,) = [
        t for t in directory["meta"]["cost-types"].values() if t["cost-metric"] == "tput"
    ]
    assert described["cost-mode"] == "numerical"
    assert described["cost-context"]["cost-source"] == "estimation"
    assert set(described["cost-context"]["parameters"]) == {
        "congestion-control-algorithm",
        "estimation",
    }
    assert "hours old" in described["description"]
    cost_map = alto.get("/alto/costmap/tput")
    assert cost_map.headers["content-type"] == COST_MAP
    document = cost_map.json()
    assert document["meta"]["cost-type"] == TPUT
    # CERN -> RAL: the newest of its two host pairs' tests (600 s old): 1,000,000,004 b/s / 8
    assert document["cost-map"] == {CERN: {RAL: 125_000_000.0}}
    costs = endpoint_costs(
        alto, ["ipv4:192.0.2.1", "ipv4:192.0.2.77"], ["ipv4:198.51.100.20"], TPUT
    )
    assert costs["endpoint-cost-map"] == {
        "ipv4:192.0.2.1": {"ipv4:198.51.100.20": 500_000_000.0},  # its own test
        "ipv4:192.0.2.77": {"ipv4:198.51.100.20": 125_000_000.0},  # CERN's (by network) -> RAL
    }
    untested = endpoint_costs(alto, ["ipv4:198.51.100.20"], ["ipv4:192.0.2.1"], TPUT)
    assert untested["endpoint-cost-map"] == {}  # RAL -> CERN has no test: left out
