"""ALTO documents against the shapes of RFC 7285's examples (sections 9.2, 11.2.1.6, 11.2.3.6)."""

from __future__ import annotations

import re

import pytest
from fastapi import FastAPI, HTTPException
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from service.matrix.views import aggregate_sites
from service.publish.alto import (
    METRICS,
    AltoView,
    build_alto_router,
    build_pid_names,
    is_valid_pid,
)
from tests.publish.support import host_link

PID_PATTERN = re.compile(r"^[A-Za-z0-9\-:@_]{1,64}$")
RESOURCE_ID_PATTERN = re.compile(r"^[A-Za-z0-9\-:@_.]{1,64}$")
VTAG_PATTERN = re.compile(r"^[\x21-\x7e]{1,64}$")

CERN, RAL = "CERN", "RAL-LCG2"
LINKS = [
    host_link("192.0.2.1", "2001:db8::1", source_site=CERN, destination_site=RAL,
              cost=0.2, delay=10.0, loss=0.0),
    host_link("192.0.2.2", "2001:db8::1", source_site=CERN, destination_site=RAL,
              cost=0.4, delay=12.0, loss=0.01),
    host_link("2001:db8::1", "192.0.2.1", source_site=RAL, destination_site=CERN, cost=0.1),
    host_link("203.0.113.9", "192.0.2.1", source_host="ps.lone.org", destination_site=CERN,
              cost=0.9, delay=None, loss=None),
]  # fmt: skip


def alto_client(links=LINKS) -> TestClient:
    view = AltoView(links, aggregate_sites(links))
    app = FastAPI()
    app.include_router(build_alto_router(lambda: view))
    return TestClient(app)


def lone_pid() -> str:
    return build_pid_names([CERN, RAL, "ps.lone.org"])["ps.lone.org"]


def test_directory_lists_the_network_map_and_a_cost_map_per_metric():
    response = alto_client().get("/alto")
    assert response.headers["content-type"] == "application/alto-directory+json"
    directory = response.json()
    assert set(directory) == {"meta", "resources"}
    meta, resources = directory["meta"], directory["resources"]
    assert meta["default-alto-network-map"] == "networkmap"
    assert resources["networkmap"] == {
        "uri": "http://testserver/alto/networkmap",
        "media-type": "application/alto-networkmap+json",
    }
    cost_maps = {rid: r for rid, r in resources.items() if rid != "networkmap"}
    type_names = [r["capabilities"]["cost-type-names"][0] for r in cost_maps.values()]
    metrics = {meta["cost-types"][name]["cost-metric"] for name in type_names}
    assert metrics == {"priv:nettel-cost", "delay-ow", "lossrate"}
    for resource_id, resource in cost_maps.items():
        assert RESOURCE_ID_PATTERN.match(resource_id)
        assert set(resource) == {"uri", "media-type", "capabilities", "uses"}
        assert resource["media-type"] == "application/alto-costmap+json"
        assert resource["uses"] == ["networkmap"]
        (type_name,) = resource["capabilities"]["cost-type-names"]
        cost_type = meta["cost-types"][type_name]
        assert cost_type["cost-mode"] == "numerical"
        assert resource["uri"] == f"http://testserver/alto/costmap/{cost_type['cost-metric']}"
    assert meta["cost-types"]["num-delay-ow"]["cost-context"] == {"cost-source": "estimation"}


def test_network_map_has_one_pid_per_site_with_host_prefixes():
    response = alto_client().get("/alto/networkmap")
    assert response.headers["content-type"] == "application/alto-networkmap+json"
    document = response.json()
    assert set(document) == {"meta", "network-map"}
    vtag = document["meta"]["vtag"]
    assert vtag["resource-id"] == "networkmap" and VTAG_PATTERN.match(vtag["tag"])
    assert document["network-map"] == {
        CERN: {"ipv4": ["192.0.2.1/32", "192.0.2.2/32"]},
        RAL: {"ipv6": ["2001:db8::1/128"]},
        lone_pid(): {"ipv4": ["203.0.113.9/32"]},
    }


def test_cost_maps_aggregate_host_pairs_by_site_and_depend_on_the_map_vtag():
    client = alto_client()
    tag = client.get("/alto/networkmap").json()["meta"]["vtag"]["tag"]
    documents = {metric: client.get(f"/alto/costmap/{metric}") for metric in METRICS}
    for metric, response in documents.items():
        assert response.headers["content-type"] == "application/alto-costmap+json"
        assert response.json()["meta"] == {
            "dependent-vtags": [{"resource-id": "networkmap", "tag": tag}],
            "cost-type": {"cost-mode": "numerical", "cost-metric": metric},
        }
    cost = documents["priv:nettel-cost"].json()["cost-map"]
    assert cost == {CERN: {RAL: 0.3}, RAL: {CERN: 0.1}, lone_pid(): {CERN: 0.9}}
    delay = documents["delay-ow"].json()["cost-map"]
    assert delay == {CERN: {RAL: 11000.0}, RAL: {CERN: 10000.0}}  # microseconds
    loss = documents["lossrate"].json()["cost-map"]
    assert loss == {CERN: {RAL: 0.5}, RAL: {CERN: 0.0}}  # percent


def test_unknown_metric_is_an_alto_error():
    response = alto_client().get("/alto/costmap/routingcost")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/alto-error+json"
    assert response.json() == {
        "meta": {"code": "E_INVALID_FIELD_VALUE", "field": "cost-metric", "value": "routingcost"}
    }


def test_maps_answer_503_before_the_first_matrix():
    def no_matrix() -> AltoView:
        raise HTTPException(503, "no cost matrix computed yet")

    app = FastAPI()
    app.include_router(build_alto_router(no_matrix))
    client = TestClient(app)
    assert client.get("/alto/networkmap").status_code == 503
    assert client.get("/alto").status_code == 200


def test_vtag_changes_with_the_pids_and_their_addresses_only():
    tag = AltoView(LINKS, aggregate_sites(LINKS)).vtag
    recosted = [link | {"cost": 0.7} for link in LINKS]
    assert AltoView(recosted, aggregate_sites(recosted)).vtag == tag
    new_site = [*LINKS, host_link("198.51.100.7", "192.0.2.1", source_site="PIC")]
    assert AltoView(new_site, aggregate_sites(new_site)).vtag != tag
    new_address = [*LINKS, host_link("192.0.2.3", "2001:db8::1", source_site=CERN,
                                     destination_site=RAL)]  # fmt: skip
    assert AltoView(new_address, aggregate_sites(new_address)).vtag != tag


def test_valid_names_are_kept_and_others_sanitised_with_a_hash():
    names = build_pid_names(["CERN-PROD", "a:b@c_d", "ps.lone.org", "UK/RAL LCG2"])
    assert names["CERN-PROD"] == "CERN-PROD" and names["a:b@c_d"] == "a:b@c_d"
    assert re.fullmatch(r"ps_lone_org_[0-9a-f]{8}", names["ps.lone.org"])
    assert re.fullmatch(r"UK_RAL_LCG2_[0-9a-f]{8}", names["UK/RAL LCG2"])


def test_names_that_sanitise_alike_stay_distinct():
    names = build_pid_names(["a.b", "a/b", "a_b"])
    assert names["a_b"] == "a_b"
    assert len(set(names.values())) == 3
    assert all(names[key].startswith("a_b_") for key in ("a.b", "a/b"))


def test_long_names_are_truncated_to_64_and_stay_distinct():
    keys = ["x" * 64, "x" * 65, "x" * 100, "x" * 99 + "y"]
    names = build_pid_names(keys)
    assert names["x" * 64] == "x" * 64
    assert all(len(name) <= 64 for name in names.values())
    assert len(set(names.values())) == len(keys)


def test_a_valid_name_equal_to_a_hashed_name_keeps_it_and_the_other_gets_a_longer_hash():
    hashed = build_pid_names(["a.b"])["a.b"]
    names = build_pid_names(["a.b", hashed])
    assert names[hashed] == hashed
    assert names["a.b"] != hashed and names["a.b"].startswith(hashed)
    assert is_valid_pid(names["a.b"])


@given(st.sets(st.text(max_size=80), max_size=12))
def test_pid_names_are_valid_unique_and_independent_of_order(keys):
    names = build_pid_names(keys)
    assert set(names) == keys
    assert all(PID_PATTERN.match(name) for name in names.values())
    assert len(set(names.values())) == len(keys)
    assert build_pid_names(sorted(keys, reverse=True)) == names


@pytest.mark.parametrize("name", ["", "a.b", "x" * 65, "é", "a b"])
def test_invalid_pid_names(name):
    assert not is_valid_pid(name)
