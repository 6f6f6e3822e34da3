"""ALTO incremental updates (RFC 8895) over a real HTTP server: update streams, merge patches
and stream control, read by a client written from the RFCs (`alto_update_client`), checked
against the documents the plain ALTO resources serve at the same moment.

Sites: CERN (192.0.2.0/24), RAL (198.51.100.0/24) and PIC (no networks: its host alone). The
second matrix moves CERN -> RAL and drops PIC's only link, so PIC leaves the network map (a new
vtag) and the cost maps.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from devtools.metrics_reader import sample_value
from devtools.waiting import wait_for
from service.config import Settings
from service.matrix.views import aggregate_sites
from service.publish.alto.merge_patch import merge_patch
from service.publish.alto.request_bodies import parse_update_stream
from service.publish.alto.updates import (
    AltoUpdates,
    SharedDocuments,
    Substream,
    TooManyStreams,
    UpdateSource,
)
from service.publish.alto.view import AltoView
from service.publish.app import create_app
from service.publish.lifespan import publishers_lifespan
from service.runtime import Runtime, build_runtime
from service.topology.topology import Topology
from tests.publish.alto_client import (
    COST_MAP,
    ENDPOINT_COST,
    ENDPOINT_COST_PARAMS,
    ERROR,
    AltoClient,
)
from tests.publish.alto_update_client import (
    CONTROL,
    EVENT_STREAM,
    MERGE_PATCH,
    UPDATE_STREAM_PARAMS,
    UpdateStreamClient,
    apply_merge_patch,
    open_update_stream,
)
from tests.publish.served_app import serve_app
from tests.publish.support import host_link, make_matrix

CERN, RAL, PIC = "CERN", "RAL", "PIC"
NETWORKS = [("192.0.2.0/24", CERN), ("198.51.100.0/24", RAL)]
CERN_RAL = host_link(
    "192.0.2.1", "198.51.100.20", source_site=CERN, destination_site=RAL, cost=0.2, delay=10.0
)
RAL_CERN = host_link(
    "198.51.100.20", "192.0.2.1", source_site=RAL, destination_site=CERN, cost=0.1, delay=9.0
)
PIC_CERN = host_link("203.0.113.9", "192.0.2.1", source_site=PIC, destination_site=CERN,
                     cost=0.6, delay=30.0)  # fmt: skip
FIRST = [CERN_RAL, RAL_CERN, PIC_CERN]
SECOND = [CERN_RAL | {"cost": 0.4, "delay_ms": CERN_RAL["delay_ms"] | {"mean": 12.0}}, RAL_CERN]
DELAY = {"cost-mode": "numerical", "cost-metric": "delay-ow"}
ENDPOINTS = {"srcs": ["ipv4:192.0.2.1"], "dsts": ["ipv4:198.51.100.20", "ipv4:198.51.100.99"]}
SUBSTREAMS = {
    "sites": {"resource-id": "networkmap"},
    "cost": {"resource-id": "costmap-nettel-cost"},
    "cern-delays": {
        "resource-id": "filtered-costmap-delay-ow",
        "input": {"cost-type": DELAY, "pids": {"srcs": [CERN]}},
    },
    "replicas": {
        "resource-id": "endpointcost",
        "input": {"cost-type": DELAY, "endpoints": ENDPOINTS},
    },
}


def publish(runtime: Runtime, links: list[Any], at: float) -> None:
    """A new matrix, announced to the cycle's observers of served snapshots as it does."""
    matrix = make_matrix(links, at)
    previous, runtime.cycle.latest = runtime.cycle.latest, matrix
    for observe in runtime.cycle.observers.published:
        observe(previous, matrix)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Runtime]]:
    runtime = build_runtime(Settings(model="none", publish_telemetry=False))
    runtime.state.index.set_topology(Topology.from_inventory([], NETWORKS))
    with serve_app(create_app(runtime, publishers_lifespan)) as url:
        yield url, runtime


@pytest.fixture
def runtime(served: tuple[str, Runtime]) -> Runtime:
    publish(served[1], FIRST, 1000.0)
    return served[1]


@pytest.fixture
def http(served: tuple[str, Runtime]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=served[0], timeout=10) as client:
        yield client


@pytest.fixture
def alto(http: httpx.Client) -> AltoClient:
    return AltoClient(http, "/alto")


def update_stream_uri(alto: AltoClient) -> str:
    """The update stream service, found in the directory as RFC 8895 section 6.3 announces it."""
    return alto.find(EVENT_STREAM, UPDATE_STREAM_PARAMS).uri


def served_documents(alto: AltoClient) -> dict[str, Any]:
    """What the plain resources answer now, per client-id of SUBSTREAMS."""
    filtered = alto.filtered_cost_map("delay-ow", [CERN], [])
    replicas = alto.post(
        alto.find(ENDPOINT_COST, ENDPOINT_COST_PARAMS).uri,
        ENDPOINT_COST_PARAMS,
        {"cost-type": DELAY, "endpoints": ENDPOINTS},
        ENDPOINT_COST,
    )
    return {
        "sites": alto.network_map()[0],
        "cost": alto.get(alto.find(COST_MAP, None, "priv:nettel-cost").uri, COST_MAP),
        "cern-delays": filtered,
        "replicas": replicas,
    }


def read_documents(stream: UpdateStreamClient, client_ids: set[str]) -> list[str]:
    """Read until every one of `client_ids` has had a data update; their order."""
    order: list[str] = []
    while not client_ids <= set(order):
        update = stream.next_update()
        if update.client_id is not None:
            order.append(update.client_id)
    return order


def test_the_directory_announces_an_update_stream_of_every_resource(alto):
    service = alto.find(EVENT_STREAM, UPDATE_STREAM_PARAMS)
    others = {r.resource_id for r in alto.resources if r.resource_id != service.resource_id}
    assert set(service.uses) == others
    entry = alto.directory["resources"][service.resource_id]
    assert entry["capabilities"]["incremental-change-media-types"] == dict.fromkeys(
        others, MERGE_PATCH
    )
    assert entry["capabilities"]["support-stream-control"] is True


def test_substreams_start_in_full_then_follow_by_merge_patch(runtime, http, alto):
    with open_update_stream(http, update_stream_uri(alto), SUBSTREAMS) as stream:
        order = read_documents(stream, set(SUBSTREAMS))
        assert order[0] == "sites"  # the network map before the maps that depend on it
        assert stream.documents == served_documents(alto)
        first_vtag = stream.documents["sites"]["meta"]["vtag"]["tag"]

        publish(runtime, SECOND, 1060.0)
        updates = [u for u in stream.updates_until("replicas") if u.client_id]
        while {u.client_id for u in updates} != set(SUBSTREAMS):
            updates += [u for u in stream.updates_until("replicas") if u.client_id]
        assert {u.media_type for u in updates} == {MERGE_PATCH}
        assert [u.client_id for u in updates].index("sites") == 0
        patches = {u.client_id: u.data for u in updates}
        assert patches["sites"]["network-map"] == {PIC: None}
        assert patches["cost"]["cost-map"] == {PIC: None, CERN: {RAL: 0.4}}
        assert patches["cern-delays"]["cost-map"] == {CERN: {RAL: 12000.0}}
        assert patches["replicas"]["endpoint-cost-map"] == {  # the host link, and the sites'
            "ipv4:192.0.2.1": {"ipv4:198.51.100.20": 12000.0, "ipv4:198.51.100.99": 12000.0}
        }
        assert stream.documents["sites"]["meta"]["vtag"]["tag"] != first_vtag
        assert stream.documents == served_documents(alto)


def test_without_incremental_changes_every_update_is_the_whole_document(runtime, http, alto):
    add = {"cost": {"resource-id": "costmap-nettel-cost", "incremental-changes": False}}
    with open_update_stream(http, update_stream_uri(alto), add) as stream:
        assert stream.next_update().media_type == COST_MAP
        publish(runtime, SECOND, 1060.0)
        update = stream.next_update()
        assert (update.media_type, update.client_id) == (COST_MAP, "cost")
        assert update.data == served_documents(alto)["cost"]


def test_a_client_holding_the_current_network_map_is_not_sent_it_again(runtime, http, alto):
    network_map = alto.network_map()[0]
    add = {
        "sites": {"resource-id": "networkmap", "tag": network_map["meta"]["vtag"]["tag"]},
        "cost": {"resource-id": "costmap-nettel-cost"},
    }
    with open_update_stream(http, update_stream_uri(alto), add) as stream:
        stream.documents["sites"] = network_map
        assert stream.next_update().client_id == "cost"  # no full network map first
        publish(runtime, SECOND, 1060.0)
        patch = stream.next_update()
        assert (patch.media_type, patch.client_id) == (MERGE_PATCH, "sites")
        assert stream.documents["sites"] == alto.network_map()[0]


def test_stream_control_starts_and_stops_substreams(runtime, http, alto):
    with open_update_stream(http, update_stream_uri(alto), {"cost": SUBSTREAMS["cost"]}) as stream:
        assert stream.next_update().client_id == "cost"

        added = stream.control({"add": {"loss": {"resource-id": "costmap-lossrate"}}})
        assert (added.status_code, added.content) == (204, b"")
        started = stream.next_update()
        assert (started.media_type, started.data) == (CONTROL, {"started": ["loss"]})
        loss = stream.next_update()
        assert (loss.media_type, loss.client_id) == (COST_MAP, "loss")
        assert loss.data["meta"]["cost-type"]["cost-metric"] == "lossrate"

        assert stream.control({"remove": ["cost"]}).status_code == 204
        stopped = stream.next_update()
        assert (stopped.media_type, stopped.data) == (CONTROL, {"stopped": ["cost"]})
        publish(runtime, SECOND, 1060.0)
        assert [u.client_id for u in stream.updates_until("loss")] == ["loss"]
        assert set(stream.documents) == {"loss"}


@pytest.mark.parametrize(
    ("request_body", "field"),
    [
        ({"add": {"loss": {"resource-id": "costmap-lossrate"}}}, "add"),  # in use
        ({"remove": ["nope"]}, "remove"),  # not on the stream
        ({"add": {"x": {"resource-id": "nope"}}}, "add/x/resource-id"),
    ],
)
def test_a_refused_control_request_changes_nothing(runtime, http, alto, request_body, field):
    add = {"loss": {"resource-id": "costmap-lossrate"}}
    with open_update_stream(http, update_stream_uri(alto), add) as stream:
        stream.next_update()
        refused = stream.control(request_body)
        assert (refused.status_code, refused.headers["content-type"]) == (400, ERROR)
        assert refused.json()["meta"]["code"] == "E_INVALID_FIELD_VALUE"
        assert refused.json()["meta"]["field"] == field
        publish(runtime, SECOND, 1060.0)
        update = stream.next_update()  # no control update: the next event is loss's patch
        assert (update.media_type, update.client_id) == (MERGE_PATCH, "loss")


def test_control_of_a_closed_or_unknown_stream_is_404(runtime, http, alto):
    with open_update_stream(http, update_stream_uri(alto), {"c": SUBSTREAMS["cost"]}) as stream:
        control_uri = stream.control_uri
        assert stream.control({"remove": []}).status_code == 204
    body = json.dumps({"remove": ["c"]})
    for uri in (control_uri, f"{control_uri}x"):
        gone = http.post(uri, content=body, headers={"Content-Type": UPDATE_STREAM_PARAMS})
        assert (gone.status_code, gone.headers["content-type"]) == (404, ERROR)
    wrong_type = http.post(control_uri, content=body, headers={"Content-Type": "application/json"})
    assert wrong_type.status_code == 415


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({}, "E_MISSING_FIELD", "add"),
        ({"add": {"x": {}}}, "E_MISSING_FIELD", "add/x/resource-id"),
        ({"add": {"x": {"resource-id": "nope"}}}, "E_INVALID_FIELD_VALUE", "add/x/resource-id"),
        ({"add": {"x": {"resource-id": "networkmap", "input": {}}}},
         "E_INVALID_FIELD_VALUE", "add/x/input"),
        ({"add": {"x": {"resource-id": "filtered-costmap-delay-ow"}}},
         "E_MISSING_FIELD", "add/x/input"),
        ({"add": {"x": {"resource-id": "filtered-costmap-delay-ow",
                        "input": {"cost-type": DELAY | {"cost-metric": "lossrate"}}}}},
         "E_INVALID_FIELD_VALUE", "add/x/input/cost-type/cost-metric"),
        ({"add": {"x": {"resource-id": "endpointcost", "input": {"cost-type": DELAY}}}},
         "E_MISSING_FIELD", "add/x/input/endpoints"),
        ({"add": {"x": {"resource-id": "networkmap", "incremental-changes": "no"}}},
         "E_INVALID_FIELD_TYPE", "add/x/incremental-changes"),
        ({"add": {"a,b": {"resource-id": "networkmap"}}}, "E_SYNTAX", "add"),
        ({"add": {"x": {"resource-id": "networkmap"}}, "remove": ["y"]},
         "E_INVALID_FIELD_VALUE", "remove"),
        ({"add": []}, "E_INVALID_FIELD_TYPE", "add"),
    ],
)  # fmt: skip
def test_a_refused_update_stream_request_is_an_alto_error_before_any_event(
    http, alto, body, code, field
):
    reply = http.post(
        update_stream_uri(alto),
        content=json.dumps(body),
        headers={"Content-Type": UPDATE_STREAM_PARAMS},
    )
    assert (reply.status_code, reply.headers["content-type"]) == (400, ERROR)
    assert reply.json()["meta"]["code"] == code
    assert reply.json()["meta"]["field"] == field


def test_update_stream_media_types_are_negotiated(http, alto):
    uri, body = update_stream_uri(alto), json.dumps({"add": {"m": SUBSTREAMS["sites"]}})
    not_json = http.post(uri, content="{", headers={"Content-Type": UPDATE_STREAM_PARAMS})
    assert not_json.json()["meta"]["code"] == "E_SYNTAX"
    wrong_type = http.post(uri, content=body, headers={"Content-Type": "application/json"})
    assert (wrong_type.status_code, wrong_type.headers["content-type"]) == (415, ERROR)
    headers = {"Content-Type": UPDATE_STREAM_PARAMS, "Accept": "application/json"}
    assert http.post(uri, content=body, headers=headers).status_code == 406


def open_update_streams(http: httpx.Client) -> float:
    """`nettel_sse_streams{endpoint="alto_updates"}` on the served /metrics."""
    return sample_value(http.get("/metrics").text, "nettel_sse_streams", endpoint="alto_updates")


def test_open_update_streams_are_counted_on_metrics(runtime, http, alto):
    assert open_update_streams(http) == 0
    with open_update_stream(http, update_stream_uri(alto), {"c": SUBSTREAMS["cost"]}):
        assert open_update_streams(http) == 1
    wait_for(lambda: open_update_streams(http) == 0, timeout=10, what="the stream closed")


def test_a_stream_opened_before_the_first_matrix_gets_it_when_it_comes(served, http, alto):
    url, runtime = served
    runtime.cycle.latest = None
    with open_update_stream(http, update_stream_uri(alto), {"cost": SUBSTREAMS["cost"]}) as stream:
        publish(runtime, FIRST, 1000.0)
        assert stream.next_update().client_id == "cost"
        assert stream.documents["cost"] == served_documents(alto)["cost"]


def test_merge_patch_round_trips_through_rfc_7396():
    old = {"meta": {"v": "1"}, "m": {"A": {"B": 1.0, "C": 2.0}, "D": {"A": 3.0}}, "l": [1, 2]}
    new = {"meta": {"v": "2"}, "m": {"A": {"B": 1.0, "E": 5.0}, "F": {"A": 1.0}}, "l": [2]}
    patch = merge_patch(old, new)
    assert patch == {
        "meta": {"v": "2"},
        "m": {"A": {"C": None, "E": 5.0}, "D": None, "F": {"A": 1.0}},
        "l": [2],
    }
    assert apply_merge_patch(old, patch) == new
    assert merge_patch(new, new) == {}


def test_documents_are_built_once_per_matrix_whatever_the_number_of_substreams():
    built: list[float] = []

    def document(view: Any) -> dict[str, Any]:
        built.append(1.0)
        return {"cost-map": {"A": {"B": len(built)}}}

    source = UpdateSource("cost", "application/alto-costmap+json", document)
    documents = SharedDocuments(lambda matrix: None)
    older, newer = make_matrix([], 1.0), make_matrix([], 2.0)
    followers = [Substream(f"c{i}", source, True, None) for i in range(3)]
    full = {documents.update(older, substream).partition(b"data: ")[2] for substream in followers}
    assert full == {b'{"cost-map":{"A":{"B":1}}}\n\n'} and len(built) == 1
    patches = [documents.update(newer, substream) for substream in followers]
    assert (
        patches[1]
        == b'event: application/merge-patch+json,c1\ndata: {"cost-map":{"A":{"B":2}}}\n\n'
    )
    assert len({patch.partition(b"data: ")[2] for patch in patches}) == 1 and len(built) == 2
    documents.update(older, Substream("late", source, True, None))  # a stream one matrix behind
    documents.update(newer, Substream("new", source, True, None))
    assert len(built) == 3  # the late one's document built aside; the newer one still cached


def aggregated_view(matrix: Any) -> AltoView:
    return AltoView(matrix.links, aggregate_sites(matrix.links), version="v")


def test_streams_end_on_close_and_are_bounded_in_number():
    updates = AltoUpdates(lambda: make_matrix(FIRST), aggregated_view, max_streams=1)
    query = parse_update_stream(json.dumps({"add": {"c": SUBSTREAMS["cost"]}}).encode())

    async def scenario() -> list[bytes]:
        events = updates.events(updates.open(query, None), "http://x/alto/updates/streams/1")
        chunks = [await anext(events), await anext(events)]
        assert updates.open_streams() == 1
        with pytest.raises(TooManyStreams):
            updates.open(query, None)
        updates.close()
        chunks += [chunk async for chunk in events]
        return chunks

    control, cost = asyncio.run(scenario())
    assert control.startswith(b"event: application/alto-updatestreamcontrol+json\ndata: ")
    assert cost.startswith(b"event: application/alto-costmap+json,c\ndata: {")
    assert updates.open_streams() == 0


_json_values = st.recursive(
    st.integers() | st.floats(allow_nan=False) | st.text(max_size=3) | st.booleans(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=12,
)
_documents = st.dictionaries(st.sampled_from("abcd"), _json_values, max_size=4)


@given(old=_documents, new=_documents)
@settings(max_examples=300, deadline=None)
def test_any_merge_patch_applied_by_rfc_7396_gives_the_new_document(old, new):
    assert apply_merge_patch(old, merge_patch(old, new)) == new
