"""Throughput, retransmits and traces from every input: the bus's topics routed by kind (in the
ingest thread and in parser processes), pScheduler runs over the http archiver, the archive
backfill; refusals counted; the topics configured, one per event type."""

from __future__ import annotations

import copy
import time

import numpy as np
import orjson
import pytest

from devtools.archive_server import ArchivedLink, ArchiveServer
from service.config import load_settings
from service.errors import ConfigError
from service.ingest.archive_backfill import ArchiveBackfill, BackfillSettings
from service.ingest.entry import IngestEntry
from service.ingest.parser_processes import ParserProcesses
from service.ingest.pipeline import PSCHEDULER_DESTINATION, IngestPipeline
from service.parse.records import MeasurementKind
from service.runtime import topic_kinds
from service.state.link_state import LinkState
from tests.data import load_sample

SETTINGS = load_settings()
TOPICS = topic_kinds(SETTINGS)
SOURCE, DESTINATION = "192.0.2.11", "198.51.100.21"
#: The samples' tests and traces, and a moment after the last of them.
FIRST_TEST, SECOND_TEST = 1_795_176_011, 1_795_190_448
FIRST_TRACE, SECOND_TRACE = 1_795_176_314, 1_795_176_914
NOW = SECOND_TEST + 120.0


def frame(sample: str) -> tuple[str, bytes, None]:
    message = load_sample(sample)
    return message["headers"]["destination"], orjson.dumps(message["body"]), None


BUS = [frame(name) for name in ("throughput-raw.json", "packet-retransmits-raw.json")]
TRACES = frame("packet-trace-raw.json")


def test_the_default_topics_are_perfsonars_one_per_event_type() -> None:
    assert TOPICS == {
        "/topic/perfsonar.raw.histogram-owdelay": MeasurementKind.DELAY,
        "/topic/perfsonar.raw.packet-loss-rate": MeasurementKind.LOSS,
        "/topic/perfsonar.raw.throughput": MeasurementKind.THROUGHPUT,
        "/topic/perfsonar.raw.packet-retransmits": MeasurementKind.RETRANSMITS,
        "/topic/perfsonar.raw.packet-trace": MeasurementKind.TRACE,
    }


def test_a_topic_left_empty_is_not_subscribed_and_two_alike_are_refused() -> None:
    assert MeasurementKind.TRACE not in topic_kinds(load_settings(trace_topic="")).values()
    with pytest.raises(ConfigError, match="--trace-topic / NETTEL_TRACE_TOPIC and --throughput"):
        load_settings(trace_topic="/topic/perfsonar.raw.throughput")


def check_state(state: LinkState) -> None:
    """What the samples leave: one link, its latest test and retransmits, its changed path."""
    assert (state.index.sources, state.index.destinations) == ([SOURCE], [DESTINATION])
    results = state.results(NOW)
    assert results.throughput.bps.tolist() == [412_903_544.0]
    assert results.throughput.retransmits.tolist() == [37]
    assert results.paths.since.tolist() == [SECOND_TRACE]
    assert results.paths.changes_last_day.tolist() == [1]
    assert results.paths.reached.tolist() == [1]


def test_bus_frames_are_routed_by_topic_to_their_state() -> None:
    pipeline = IngestPipeline(LinkState(), TOPICS, clock=lambda: NOW)
    assert pipeline.handle_frames([*BUS, TRACES]) == 6
    check_state(pipeline.state)
    counters = pipeline.counters
    assert counters.datapoints_applied == 6 and counters.rejected_by_reason == {}
    assert counters.messages_by_topic == {topic: 1 for topic, _, _ in [*BUS, TRACES]}


def test_parser_processes_give_the_same_state() -> None:
    parsers = ParserProcesses(1)
    try:
        pipeline = IngestPipeline(LinkState(), TOPICS, clock=lambda: NOW, parser=parsers.parse)
        assert pipeline.handle_frames([*BUS, TRACES]) == 6
    finally:
        parsers.stop()
    check_state(pipeline.state)


def test_refused_results_are_counted_by_reason_and_the_rest_stored() -> None:
    pipeline = IngestPipeline(LinkState(), TOPICS, clock=lambda: NOW)
    rates = load_sample("throughput-raw.json")["body"]
    rates["datapoints"] |= {str(SECOND_TEST + 60): -5, str(NOW + 3600): 1e9}
    trace = copy.deepcopy(load_sample("packet-trace-raw.json")["body"])
    trace["datapoints"][str(SECOND_TRACE)][0]["ttl"] = 99
    frames = [
        ("/topic/perfsonar.raw.throughput", orjson.dumps(rates), None),
        ("/topic/perfsonar.raw.packet-trace", orjson.dumps(trace), None),
        ("/topic/perfsonar.raw.packet-trace", b'{"meta": {}, "datapoints": 3}', None),
    ]
    assert pipeline.handle_frames(frames) == 3
    assert pipeline.counters.rejected_by_reason == {
        "throughput_out_of_range": 1,
        "future": 1,
        "too_many_hops": 1,
        "missing_field": 1,
    }


def test_pscheduler_throughput_and_trace_runs_are_applied_not_ignored() -> None:
    pipeline = IngestPipeline(LinkState(), TOPICS, clock=lambda: NOW)
    runs = [
        load_sample(name)["body"]
        for name in ("pscheduler-throughput-run.json", "pscheduler-trace-run.json")
    ]
    frames = [(PSCHEDULER_DESTINATION, orjson.dumps(run), None) for run in runs]
    assert pipeline.handle_frames(frames) == 3  # a rate, its retransmits, a trace
    assert pipeline.handle_frames(frames) == 0  # re-posts
    assert dict(pipeline.counters.runs_by_outcome) == {"applied": 2, "duplicate": 2}
    state = pipeline.state
    assert state.index.source_hosts == ["ps-bandwidth.site-a.example.org"]
    results = state.results(NOW)
    assert results.throughput.bps.tolist() == [389_274_697.967401]
    assert results.throughput.retransmits.tolist() == [159]
    assert results.paths.seen.tolist() == [FIRST_TRACE]
    assert results.paths.reached.tolist() == [-1]  # the link's ends are known by name only


def test_a_trace_run_without_a_usable_path_is_rejected_with_its_reason() -> None:
    pipeline = IngestPipeline(LinkState(), TOPICS, clock=lambda: NOW)
    run = copy.deepcopy(load_sample("pscheduler-trace-run.json")["body"])
    run["result"]["paths"] = [[{"ip": "192.0.2.1", "rtt": "soon"}]]
    assert pipeline.handle_frame(PSCHEDULER_DESTINATION, orjson.dumps(run)) == 0
    assert dict(pipeline.counters.runs_by_outcome) == {"rejected": 1}
    assert pipeline.counters.rejected_by_reason == {"bad_value": 1}


def archived_link() -> ArchivedLink:
    """The bandwidth link in the archive, its records moved to end just before the run."""
    archive = load_sample("esmond-archive-results.json")
    shift = int(time.time()) - 600 - SECOND_TEST
    series = {
        kind: [record | {"ts": record["ts"] + shift} for record in archive[kind]]
        for kind in ("throughput", "packet-retransmits", "packet-trace")
    }
    return ArchivedLink(SOURCE, DESTINATION, "ps-bw-a.example.org", "ps-bw-b.example.net", series)


def test_the_backfill_reads_throughput_retransmits_and_traces_from_the_archive() -> None:
    state = LinkState()
    with ArchiveServer([archived_link()]) as archive:
        settings = BackfillSettings(archive.url, timeout=2.0, bound=20.0, history=6 * 3600.0)
        entry = IngestEntry(IngestPipeline(state, {}))
        report = ArchiveBackfill(entry, settings).run()
        listed = {query.get("event-type") for path, query in archive.requests if path.endswith("/")}
    assert set(MeasurementKind) <= {MeasurementKind(kind) for kind in listed if kind}
    assert report.links == {"filled": 1, "unfinished": 0} and report.rejected == {}
    assert report.datapoints["window"] == 6
    results = state.results(time.time())
    assert results.throughput.bps.tolist() == [412_903_544.0]
    assert results.throughput.retransmits.tolist() == [37]
    assert results.paths.changes_last_day.tolist() == [1]
    _, counts = state.throughput.bin_means(np.array([0]), time.time())
    assert counts.sum() == 2  # both tests in the history (4 h apart: one bin or two)
