"""build_cost_matrix records/body/etag, and the filter, site and dense views."""

from __future__ import annotations

import gzip
import math
from typing import Any

import numpy as np
import orjson
import pytest

from service.analysis.calibration import Calibration
from service.analysis.features import FEATURE_NAMES
from service.analysis.link_analysis import analyse_links
from service.analysis.predictor import ModelInfo
from service.matrix.matrix_body import BLOCK_LINKS, encode_body
from service.matrix.snapshot import CostMatrix, _shared_values, build_cost_matrix
from service.matrix.views import aggregate_sites, dense_matrix
from service.parse.records import MeasurementKind, ParsedMessage
from service.publish.schemas import CostMatrixOut, LinkOut
from service.state.link_state import LinkState
from service.topology.topology import Topology
from tests.message_factory import BASE_MINUTE, delay_message, link, loss_message

N = BASE_MINUTE
NOW = N * 60 + 30
MODEL = ModelInfo(name="nettel-mlp", version="3", sha256="ab" * 32, created="2024-05-01")
FULL = link("192.0.2.1", "198.51.100.1", "ps.cern.ch", "ps.ral.uk")
SHORT = link("192.0.2.2", "198.51.100.1", "ps2.cern.ch", "ps.ral.uk")
LONE = link("203.0.113.9", "192.0.2.1", "ps.lone.org", "ps.cern.ch")
TOPOLOGY = Topology.from_mapping({"CERN": ["ps.cern.ch", "ps2.cern.ch"], "RAL": ["ps.ral.uk"]})

RECORD_KEYS = {
    "source",
    "destination",
    "source_host",
    "destination_host",
    "source_site",
    "destination_site",
    "cost",
    "empirical",
    "congested",
    "utilisation",
    "utilisation_reason",
    "congestion_probability",
    "utilisation_low",
    "utilisation_high",
    "delay_ms",
    "packet_loss",
    "samples",
    "last_measurement",
    "stale",
    "clock_suspect",
    "throughput_bps",
    "throughput_age_s",
}


class FakePredictor:
    info = MODEL
    feature_names = FEATURE_NAMES
    #: P = 0.4 x below 0.5; interval +-0.1 below 0.5, +-0.3 above
    calibration = Calibration(
        np.array([0.0, 0.5, 1.0]),
        np.array([0.0, 0.2, 1.0]),
        np.array([0.0, 0.5, 1.0]),
        np.array([0.1, 0.3]),
        0.9,
    )

    def predict(self, rows: np.ndarray) -> np.ndarray:
        return rows[:, 0] / 100


def feed(state: LinkState, endpoints, minutes: range, delay_of, loss: float) -> None:
    for minute in minutes:
        now = minute * 60 + 30
        state.apply(delay_message({minute * 60: delay_of(minute)}, endpoints), now)
        state.apply(loss_message({minute * 60: loss}, endpoints), now)


def build_state() -> LinkState:
    state = LinkState(TOPOLOGY)
    feed(state, FULL, range(N - 31, N + 1), lambda m: 10.0 + m - (N - 31), 0.02)
    feed(state, SHORT, range(N - 2, N + 1), lambda m: 5.0, 0.0)
    feed(state, LONE, range(N - 9, N - 5), lambda m: 2.5, 0.0)  # last data 6 minutes ago
    return state


def build(
    state: LinkState | None = None,
    model: ModelInfo | None = MODEL,
    generated_at: float = 1_700_000_100.0,
) -> CostMatrix:
    view = (state or build_state()).view(NOW)
    analysis = analyse_links(view, FakePredictor() if model else None)
    return build_cost_matrix(view, analysis, model, generated_at)


def test_records_have_every_documented_field_and_validate() -> None:
    matrix = build()
    assert len(matrix.links) == 3
    for record in matrix.links:
        assert set(record) == RECORD_KEYS
        assert set(record["delay_ms"]) == {"mean", "median", "std", "min", "p95"}
        LinkOut.model_validate(record)
    assert RECORD_KEYS == set(LinkOut.model_fields) - {"links"}


def test_record_values_of_the_full_link() -> None:
    record = build().links[0]
    loss = float(np.float32(0.02))  # stored as float32
    # utilisation 0.34, loss 0.02, all-time minimum 10 ms (the delay above it has weight 0)
    hazard = 0.5653 * 0.34**4 + 0.05385 * loss / 0.01 + 0.2368 * math.log(1 + 10 / 10)
    assert round(1 - math.exp(-hazard), 4) == 0.2438  # 0.243762...
    assert record == {
        "source": "192.0.2.1",
        "destination": "198.51.100.1",
        "source_host": "ps.cern.ch",
        "destination_host": "ps.ral.uk",
        "source_site": "CERN",
        "destination_site": "RAL",
        "cost": 0.2438,
        "empirical": 0.82,
        "congested": True,
        "utilisation": 0.34,
        "utilisation_reason": None,
        "congestion_probability": 0.136,
        "utilisation_low": 0.24,
        "utilisation_high": 0.44,
        "delay_ms": {"mean": 41.0, "median": 41.0, "std": 0.0, "min": 41.0, "p95": 41.0},
        "packet_loss": 0.02,
        "samples": 32,
        "last_measurement": N * 60,
        "stale": False,
        "clock_suspect": False,
        "throughput_bps": None,
        "throughput_age_s": None,
    }


def test_utilisation_reason_and_staleness() -> None:
    with_model, without_model = build().links, build(model=None).links
    assert [r["utilisation_reason"] for r in with_model] == [
        None,
        "insufficient_data",
        "insufficient_data",
    ]
    assert [r["utilisation"] for r in with_model][1:] == [None, None]
    assert [r["utilisation_reason"] for r in without_model] == ["no_model"] * 3
    assert [r["utilisation"] for r in without_model] == [None] * 3
    assert [r["stale"] for r in with_model] == [False, False, True]
    assert [r["samples"] for r in with_model] == [32, 3, 4]
    assert [r["last_measurement"] for r in with_model] == [N * 60, N * 60, (N - 6) * 60]
    assert [r["source_site"] for r in with_model] == ["CERN", "CERN", None]
    assert [r["destination_site"] for r in with_model] == ["RAL", "RAL", "CERN"]


def test_body_is_the_json_document_of_the_records() -> None:
    matrix = build()
    document = orjson.loads(matrix.body)
    assert document == {
        "generated_at": 1_700_000_100.0,
        "window_minutes": 32,
        "model": {
            "name": "nettel-mlp",
            "version": "3",
            "sha256": "ab" * 32,
            "created": "2024-05-01",
        },
        "links": list(matrix.links),
    }
    CostMatrixOut.model_validate(document)
    assert orjson.loads(build(model=None).body)["model"] is None
    assert matrix.document(matrix.links[:1])["links"] == [matrix.links[0]]
    assert matrix.congested_count == 1


def test_etag_is_stable_for_same_content_and_changes_with_content() -> None:
    state = build_state()
    first, again = build(state), build(state)
    assert first.body == again.body
    assert first.etag == again.etag
    assert first.etag.startswith('"') and first.etag.endswith('"') and len(first.etag) == 26
    assert build(state, generated_at=1_700_000_110.0).etag != first.etag
    state.apply(loss_message({N * 60: 0.25}, SHORT), NOW)
    assert build(state).etag != first.etag


def test_gzip_body_decompresses_to_body() -> None:
    matrix = build()
    assert gzip.decompress(matrix.gzip_body) == matrix.body
    assert matrix.gzip_body is matrix.gzip_body  # computed once


# --- views on hand-made records -------------------------------------------------------------


def record(
    source: str,
    destination: str,
    src_host: str,
    dst_host: str,
    src_site: str | None,
    dst_site: str | None,
    **values: Any,
) -> dict[str, Any]:
    delay = values.pop("delay_ms", {})
    base = {
        "source": source,
        "destination": destination,
        "source_host": src_host,
        "destination_host": dst_host,
        "source_site": src_site,
        "destination_site": dst_site,
        "cost": 0.0,
        "empirical": 0.0,
        "congested": False,
        "utilisation": None,
        "utilisation_reason": "no_model",
        "congestion_probability": None,
        "utilisation_low": None,
        "utilisation_high": None,
        "delay_ms": {"mean": None, "median": None, "std": None, "min": None, "p95": None, **delay},
        "packet_loss": None,
        "samples": 0,
        "last_measurement": None,
        "stale": False,
        "clock_suspect": False,
        "throughput_bps": None,
        "throughput_age_s": None,
    }
    return {**base, **values}


LINKS = [
    record(
        "10.0.0.1",
        "10.0.1.1",
        "a1.cern.ch",
        "b1.ral.uk",
        "CERN",
        "RAL",
        cost=0.2,
        empirical=0.0,
        utilisation=0.1,
        congestion_probability=0.02,
        utilisation_low=0.0,
        utilisation_high=0.15,
        packet_loss=0.0,
        samples=32,
        last_measurement=1000,
        stale=False,
        delay_ms={"mean": 10.0, "median": 9.0, "std": 1.0, "min": 8.0, "p95": 12.0},
    ),
    record(
        "10.0.0.2",
        "10.0.1.1",
        "a2.cern.ch",
        "b1.ral.uk",
        "CERN",
        "RAL",
        cost=0.7,
        empirical=1.5,
        congested=True,
        utilisation=None,
        packet_loss=0.05,
        samples=20,
        last_measurement=1060,
        stale=True,
        clock_suspect=True,
        delay_ms={"mean": 30.0, "median": 28.0, "std": 4.0, "min": 7.5, "p95": 40.0},
    ),
    record(
        "10.0.1.1",
        "10.0.0.1",
        "b1.ral.uk",
        "a1.cern.ch",
        "RAL",
        "CERN",
        cost=0.1,
        samples=5,
        last_measurement=None,
        stale=True,
    ),
    record(
        "10.0.2.1",
        "10.0.0.1",
        "lone.example.org",
        "a1.cern.ch",
        None,
        "CERN",
        cost=0.4,
        samples=1,
        last_measurement=900,
    ),
]


@pytest.mark.parametrize(
    ("source", "destination", "expected"),
    [
        ("10.0.0.1", None, [0]),
        ("a2.cern.ch", None, [1]),
        ("CERN", None, [0, 1]),
        (None, "a1.cern.ch", [2, 3]),
        (None, "RAL", [0, 1]),
        ("RAL", "CERN", [2]),
        ("lone.example.org", "10.0.0.1", [3]),
        ("CERN", "CERN", []),
        ("nowhere", None, []),
        (None, None, [0, 1, 2, 3]),
    ],
)
def test_select_links_by_ip_host_and_site(source, destination, expected) -> None:
    matrix = CostMatrix(0.0, None, tuple(LINKS), encode_body({"links": []}, LINKS))
    assert matrix.select(source, destination) == [LINKS[i] for i in expected]


def test_the_matrix_knows_the_names_of_either_end() -> None:
    matrix = CostMatrix(0.0, None, tuple(LINKS), encode_body({"links": []}, LINKS))
    known = ("10.0.0.1", "a2.cern.ch", "CERN", "RAL", "lone.example.org")
    assert [matrix.knows(name) for name in (*known, "nowhere", "cern")] == [True] * 5 + [False] * 2


def test_aggregate_sites() -> None:
    sites = aggregate_sites(LINKS)
    assert [(s["source"], s["destination"]) for s in sites] == [
        ("CERN", "RAL"),
        ("RAL", "CERN"),
        ("lone.example.org", "CERN"),
    ]
    cern_ral = sites[0]
    assert cern_ral == {
        "source": "CERN",
        "destination": "RAL",
        "links": 2,
        "cost": 0.45,
        "empirical": 0.75,
        "congested": True,
        "utilisation": 0.1,
        "congestion_probability": 0.02,  # means over the pairs with a value
        "utilisation_low": 0.0,
        "utilisation_high": 0.15,
        "delay_ms": {"mean": 20.0, "median": 18.5, "std": 2.5, "min": 7.5, "p95": 40.0},
        "packet_loss": 0.025,
        "samples": 52,
        "last_measurement": 1060,
        "stale": False,
        "clock_suspect": True,
        "throughput_bps": None,
        "throughput_age_s": None,
    }
    ral_cern = sites[1]
    assert ral_cern["links"] == 1
    assert ral_cern["utilisation"] is None
    assert ral_cern["delay_ms"] == {
        "mean": None,
        "median": None,
        "std": None,
        "min": None,
        "p95": None,
    }
    assert ral_cern["last_measurement"] is None
    assert ral_cern["stale"] is True
    assert sites[2]["cost"] == 0.4 and sites[2]["samples"] == 1
    for site_record in sites:
        LinkOut.model_validate(site_record)


def test_aggregate_sites_rounds_means_to_six_digits() -> None:
    links = [record("1", "2", "h1", "h2", "S", "T", cost=c) for c in (0.1, 0.2, 0.2)]
    assert aggregate_sites(links)[0]["cost"] == 0.166667


def test_dense_matrix_layout() -> None:
    dense = dense_matrix(LINKS)
    nodes = ["10.0.0.1", "10.0.0.2", "10.0.1.1", "10.0.2.1"]
    assert dense["nodes"] == nodes
    assert set(dense) == {"nodes", "cost", "congested", "utilisation"}
    expected_cost = [[None] * 4 for _ in nodes]
    expected_cost[0][2], expected_cost[1][2], expected_cost[2][0], expected_cost[3][0] = (
        0.2,
        0.7,
        0.1,
        0.4,
    )
    assert dense["cost"] == expected_cost
    assert dense["congested"][1][2] is True and dense["congested"][0][2] is False
    assert dense["congested"][2][2] is None
    assert dense["utilisation"][0][2] == 0.1 and dense["utilisation"][1][2] is None


def test_dense_matrix_of_nothing() -> None:
    assert dense_matrix([]) == {"nodes": [], "cost": [], "congested": [], "utilisation": []}


def test_incremental_build_equals_a_full_rebuild_after_changes() -> None:
    """Reusing unchanged records must give byte-identical output to building from scratch."""
    state = LinkState()
    now = float(NOW)
    for number in range(6):
        endpoints = link(source=f"10.1.0.{number}")
        for minute in range(20):
            ts = NOW - (20 - minute) * 60
            state.apply(delay_message({ts: 5.0 + number + minute % 3}, endpoints), now)
    first_view = state.view(now)
    first = build_cost_matrix(first_view, analyse_links(first_view, None), None, now)
    state.apply(loss_message({NOW - 60: 0.05}, link(source="10.1.0.2")), now)
    state.apply(loss_message({NOW - 60: 0.0}, link(source="10.1.0.9")), now)  # a new link
    view = state.view(now + 1)
    analysis = analyse_links(view, None)
    incremental = build_cost_matrix(view, analysis, None, now + 1, previous=first)
    full = build_cost_matrix(view, analysis, None, now + 1)
    assert incremental.body == full.body and incremental.links == full.links
    assert incremental.links[0] is first.links[0]  # an unchanged link's record was reused
    assert incremental.links[2] is not first.links[2]
    assert orjson.loads(incremental.body)["links"] == list(incremental.links)


def assert_spans_hold_each_record(matrix: CostMatrix) -> None:
    spans = matrix.encoded.spans
    assert len(spans) == len(matrix.links)
    for row, ((start, end), record) in enumerate(zip(spans.tolist(), matrix.links, strict=True)):
        assert matrix.encoded.blocks[row // BLOCK_LINKS][start:end] == orjson.dumps(record)


def test_few_changed_links_are_spliced_into_the_last_body_byte_for_byte() -> None:
    """Unchanged links' JSON is copied from the previous body; only changed links are encoded."""
    state = LinkState()
    now = float(NOW)
    tricky_host = 'odd"},{"source":"x\\\\},{'  # record-boundary text inside a host name
    links = [link(source=f"10.2.0.{n}", source_host=f"{tricky_host}{n}") for n in range(40)]
    for number, endpoints in enumerate(links):
        for minute in range(20):
            ts = NOW - (20 - minute) * 60
            state.apply(delay_message({ts: 5.0 + number % 7 + minute % 3}, endpoints), now)
    first_view = state.view(now)
    first = build_cost_matrix(first_view, analyse_links(first_view, None), None, now)
    assert_spans_hold_each_record(first)
    for number in (0, 17, 39):  # first, middle and last link change; one link is new
        state.apply(loss_message({NOW - 60: 0.05}, links[number]), now)
    state.apply(loss_message({NOW - 60: 0.0}, link(source="10.2.0.99")), now)
    view = state.view(now + 1)
    analysis = analyse_links(view, None)

    spliced = build_cost_matrix(view, analysis, None, now + 1, previous=first)

    full = build_cost_matrix(view, analysis, None, now + 1)
    assert spliced.body == full.body == orjson.dumps(spliced.document(spliced.links))
    assert spliced.etag == full.etag
    assert spliced.links[1] is first.links[1] and spliced.links[17] is not first.links[17]
    assert_spans_hold_each_record(spliced)
    assert_spans_hold_each_record(full)
    again = build_cost_matrix(view, analysis, None, now + 2, previous=spliced)
    assert again.body == orjson.dumps(again.document(again.links))
    assert_spans_hold_each_record(again)


def test_a_matrix_of_no_links_is_built_alike_from_scratch_and_from_a_previous_one() -> None:
    view = LinkState().view(float(NOW))
    analysis = analyse_links(view, None)
    first = build_cost_matrix(view, analysis, None, 1.0)
    second = build_cost_matrix(view, analysis, None, 2.0, previous=first)
    for matrix in (first, second):
        assert matrix.body == orjson.dumps(matrix.document(()))
        assert orjson.loads(matrix.body)["links"] == [] and len(matrix.encoded.spans) == 0


# --- throughput fields ------------------------------------------------------------------------


def throughput_message(endpoints, results: dict[int, float]) -> ParsedMessage:
    return ParsedMessage(MeasurementKind.THROUGHPUT, endpoints, throughputs=sorted(results.items()))


def build_with_results(state: LinkState, generated_at: float, previous=None) -> CostMatrix:
    with state.frozen():
        view, results = state.view(generated_at), state.results(generated_at)
    analysis = analyse_links(view, None)
    return build_cost_matrix(view, analysis, None, generated_at, previous, results)


def test_records_carry_the_latest_throughput_and_its_age_in_steps_of_ten_minutes() -> None:
    state = build_state()
    tested = NOW - 2 * 3600 - 17  # a test 2 h 17 s before NOW, and an older one
    state.apply(throughput_message(FULL, {tested - 14_400: 9.1e8, tested: 412_903_544.4}), NOW)
    matrix = build_with_results(state, NOW + 582.9)  # 2 h 9 min 59.9 s after the newest test
    full, short = matrix.links[0], matrix.links[1]
    assert (full["throughput_bps"], full["throughput_age_s"]) == (412_903_544, 7200)
    assert (short["throughput_bps"], short["throughput_age_s"]) == (None, None)
    assert build_with_results(state, NOW + 583).links[0]["throughput_age_s"] == 7800
    assert orjson.loads(matrix.body)["links"][0]["throughput_bps"] == 412_903_544
    LinkOut.model_validate(full)


def test_a_records_age_moves_on_every_ten_minutes_at_its_tests_second() -> None:
    """Until ten minutes after its test's second a record is reused as it is (same object)."""
    state = build_state()
    tested = NOW - 1200 + 25
    state.apply(throughput_message(SHORT, {tested: 1e9}), NOW)
    first = build_with_results(state, NOW)  # 1175 s after the test: age 600
    later_second = build_with_results(state, NOW + 4, previous=first)  # 1179 s: 600
    later_minute = build_with_results(state, NOW + 24, previous=later_second)  # 1199 s: 600
    stepped = build_with_results(state, NOW + 25, previous=later_minute)  # 1200 s: 1200
    assert later_second.links[1] is first.links[1]
    assert later_minute.links[1] is first.links[1]
    assert stepped.links[1] is not first.links[1]
    assert [m.links[1]["throughput_age_s"] for m in (first, stepped)] == [600, 1200]
    assert stepped.body == build_with_results(state, NOW + 25).body  # reuse changes nothing


def test_results_of_other_links_than_the_views_are_refused() -> None:
    state = build_state()
    view = state.view(NOW)
    results = state.results(NOW, [0])
    with pytest.raises(ValueError, match="link results of 1 links for a view of 3"):
        build_cost_matrix(view, analyse_links(view, None), None, NOW, None, results)


def test_a_site_pair_shows_the_newest_test_among_its_host_pairs() -> None:
    links = [
        record("1", "9", "h1", "h9", "S", "T", throughput_bps=9_000_000_000, throughput_age_s=7200),
        record("2", "9", "h2", "h9", "S", "T", throughput_bps=2_000_000_000, throughput_age_s=60),
        record("3", "9", "h3", "h9", "S", "T", throughput_bps=3_000_000_000, throughput_age_s=60),
        record("4", "9", "h4", "h9", "S", "T"),
        record("5", "9", "h5", "h9", "U", "T"),
    ]
    paired, untested = aggregate_sites(links)
    assert (paired["throughput_bps"], paired["throughput_age_s"]) == (3_000_000_000, 60)
    assert (untested["throughput_bps"], untested["throughput_age_s"]) == (None, None)
    single = aggregate_sites(links[:1])[0]
    assert (single["throughput_bps"], single["throughput_age_s"]) == (9_000_000_000, 7200)


def test_a_one_link_site_pair_shares_its_links_rounded_values() -> None:
    delay = {"mean": 1.2345, "median": 1.5, "std": 0.25, "min": 1.0, "p95": 2.0}
    shared = record("1", "2", "h1", "h2", None, None, cost=0.4321, delay_ms=delay)
    (site,) = aggregate_sites([shared])
    assert site["cost"] is shared["cost"] and site["delay_ms"] is shared["delay_ms"]
    delay = {"mean": 1.23456789, "median": 1, "std": None, "min": 0.123456789, "p95": 2}
    rounded = record("1", "2", "h1", "h2", None, None, cost=0.123456789, delay_ms=delay)
    (site,) = aggregate_sites([rounded])
    assert site["cost"] == 0.123457
    assert site["delay_ms"] == {
        "mean": 1.234568,
        "median": 1.0,
        "std": None,
        "min": 0.123456789,
        "p95": 2,
    }
    assert type(site["delay_ms"]["median"]) is float and site["delay_ms"] is not rounded["delay_ms"]


def test_repeated_values_share_one_object_and_signed_zeros_stay() -> None:
    values = np.array([0.25, -0.0, 0.25, 0.0, np.nan, 0.25, -0.0, 0.25])
    shared = _shared_values(values, np.isnan(values))
    assert orjson.dumps(shared) == b"[0.25,-0.0,0.25,0.0,null,0.25,-0.0,0.25]"
    assert shared[0] is shared[2] is shared[5] and shared[1] is shared[6]
    whole = _shared_values(np.full(4, 1_700_000_040), np.array([False, False, True, False]))
    assert whole == [1_700_000_040, 1_700_000_040, None, 1_700_000_040]
    assert whole[0] is whole[3]


def test_a_long_column_is_judged_by_its_sample_and_gives_the_same_values() -> None:
    repeating = np.resize(np.array([0.5, 0.25, np.nan]), 100_000)
    shared = _shared_values(repeating, np.isnan(repeating))
    assert shared[:4] == [0.5, 0.25, None, 0.5] and shared[0] is shared[99_999]
    distinct = np.arange(100_000) / 7.0
    assert _shared_values(distinct, np.zeros(100_000, bool)) == distinct.tolist()
