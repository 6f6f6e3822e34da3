"""ArchiveBackfill against a local archive server: exact statistics, partial failure, the bound,
refused records, and no double counting when the same minutes then arrive from the bus."""

from __future__ import annotations

import multiprocessing
import time
from typing import Any

import numpy as np
import pytest

from devtools.archive_server import ArchivedLink, ArchiveServer, Fault
from service.analysis.link_analysis import analyse_links
from service.ingest.archive_backfill import ArchiveBackfill, BackfillSettings
from service.ingest.entry import IngestEntry
from service.ingest.parser_processes import ParserProcesses
from service.ingest.pipeline import IngestPipeline
from service.parse.records import MeasurementKind
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import LinkState
from tests.data import load_sample
from tests.message_factory import body, meta

DELAY, LOSS = MeasurementKind.DELAY, MeasurementKind.LOSS
ARCHIVE = load_sample("esmond-archive.json")
ELMOND_HISTOGRAM = ARCHIVE["histogram-owdelay"][0]["val"]  # the real one, keyed "2.6"
BUS_HISTOGRAM = load_sample("owdelay-histogram-real.json")["body"]["datapoints"]["1700000040"]
LOSSES = [record["val"] for record in ARCHIVE["packet-loss-rate"]]
NOW = float(int(time.time()) // 60 * 60 + 30)  # 30 s into the current minute, fixed per run
HISTORY_MINUTES = 60  # the history these tests read, beyond the default 32 minutes


def minutes_back(count: int) -> list[int]:
    """The epoch seconds of the last `count` minutes up to NOW's, oldest first."""
    current = int(NOW) // 60 * 60
    return [current - 60 * k for k in range(count - 1, -1, -1)]


def loss_at(ts: int) -> float:
    """The sample's loss values, by minute in turn."""
    loss: float = LOSSES[ts // 60 % 3]
    return loss


def archived(number: int, fault: Fault | None = None, minutes: int = 90) -> ArchivedLink:
    """A link with `minutes` of the real histogram and the sample's loss values."""
    stamps = minutes_back(minutes)
    return ArchivedLink(
        f"192.0.2.{number}",
        "198.51.100.20",
        f"ps-{number}.example.org",
        "ps-b.example.net",
        series={
            DELAY.value: [{"ts": ts, "val": ELMOND_HISTOGRAM} for ts in stamps],
            LOSS.value: [{"ts": ts, "val": loss_at(ts)} for ts in stamps],
        },
        fault=fault,
    )


def backfill(state: LinkState, archive: ArchiveServer, **settings: Any) -> ArchiveBackfill:
    options = {"timeout": 2.0, "bound": 20.0, "history": HISTORY_MINUTES * 60.0} | settings
    return ArchiveBackfill(
        entry_of(state), BackfillSettings(archive.url, **options), clock=lambda: NOW
    )


def entry_of(state: LinkState) -> IngestEntry:
    """The ingest entry of a pipeline over `state` (the backfill delivers history batches)."""
    return IngestEntry(IngestPipeline(state, {}))


def test_links_get_a_full_window_and_exact_all_time_statistics() -> None:
    state = LinkState()
    with ArchiveServer([archived(n) for n in (1, 2, 3)]) as archive:
        report = backfill(state, archive).run()
    assert report.summary() | {"seconds": 0, "bytes": 0} == {
        "seconds": 0,
        "links": {"filled": 3, "unfinished": 0},
        "datapoints": {"window": 3 * 2 * 33, "all_time": 3 * 2 * 27, "covered": 0},
        "rejected": {},
        "failed_requests": 0,
        "cut": {},
        "bytes": 0,
    }
    assert report.bytes_read > 3 * 2 * 60 * 20  # 60 records of at least 20 bytes per series
    view = state.view(NOW)
    assert sorted(zip(view.sources, view.source_hosts, strict=True)) == [
        (f"192.0.2.{n}", f"ps-{n}.example.org") for n in (1, 2, 3)
    ]
    assert (view.slot_minute >= NOW // 60 - WINDOW_MINUTES + 1).all()  # 32 minutes, each held
    np.testing.assert_array_equal(view.series["delay_median"], np.float32(2.6))
    np.testing.assert_array_equal(view.series["delay_mean"], np.float32(21991 / 7500))
    stats = analyse_links(view, None).all_time
    losses = np.array([loss_at(ts) for ts in minutes_back(HISTORY_MINUTES)], np.float32)
    losses = losses.astype(float)
    np.testing.assert_allclose(stats.delay_mean, float(np.float32(21991 / 7500)), rtol=1e-12)
    np.testing.assert_allclose(stats.delay_std, 0.0, atol=1e-12)
    np.testing.assert_allclose(stats.loss_mean, losses.mean(), rtol=1e-12)
    np.testing.assert_allclose(stats.loss_std, losses.std(), rtol=1e-12)
    assert (view.archive["delay_n"] == HISTORY_MINUTES - WINDOW_MINUTES).all()


def test_parsing_in_parser_processes_fills_the_same_state() -> None:
    """`--parse-processes` children parse the archive's bodies as they parse the bus's."""
    states = LinkState(), LinkState()
    parsers = ParserProcesses(1)
    try:
        with ArchiveServer([archived(n) for n in (1, 2)]) as archive:
            backfill(states[0], archive).run()
            settings = BackfillSettings(archive.url, history=HISTORY_MINUTES * 60.0)
            ArchiveBackfill(
                entry_of(states[1]), settings, clock=lambda: NOW, parser=parsers.parse
            ).run()
    finally:
        parsers.stop()
    by_source = [dict(zip(s.view(NOW).sources, range(2), strict=True)) for s in states]
    for name in ("delay_mean", "delay_median", "loss"):
        for source, row in by_source[0].items():
            np.testing.assert_array_equal(
                states[0].view(NOW).series[name][row],
                states[1].view(NOW).series[name][by_source[1][source]],
            )


def test_a_backfill_parses_in_children_of_its_own_and_ends_them() -> None:
    """Without a parser given (no bus children), `parse_processes` children parse the bodies
    while the backfill runs: same state as in-process, and none is left after it."""
    states = LinkState(), LinkState()
    alive_while_reading: set[str] = set()

    def clock() -> float:
        alive_while_reading.update(child.name for child in multiprocessing.active_children())
        return NOW

    with ArchiveServer([archived(n) for n in (1, 2)]) as archive:
        in_process = backfill(states[0], archive).run()
        settings = BackfillSettings(archive.url, history=HISTORY_MINUTES * 60.0, parse_processes=1)
        in_child = ArchiveBackfill(entry_of(states[1]), settings, clock=clock).run()
    assert "nettel-parser" in alive_while_reading
    assert "nettel-parser" not in {child.name for child in multiprocessing.active_children()}
    assert in_child.summary() | {"seconds": 0} == in_process.summary() | {"seconds": 0}
    for name in ("delay_mean", "delay_median", "loss"):
        np.testing.assert_array_equal(
            states[0].view(NOW).series[name], states[1].view(NOW).series[name]
        )


def test_a_failing_and_a_stalling_link_are_counted_and_the_others_filled() -> None:
    state = LinkState()
    links = [archived(1), archived(2, "fail"), archived(3), archived(4, "stall"), archived(5)]
    with ArchiveServer(links) as archive:
        started = time.monotonic()
        report = backfill(state, archive, timeout=0.5).run()
        took = time.monotonic() - started
    assert (report.links, report.failed_requests) == (
        {"filled": 3, "failed": 2, "unfinished": 0},
        2,
    )
    assert not report.complete
    assert sorted(state.view(NOW).sources) == ["192.0.2.1", "192.0.2.3", "192.0.2.5"]
    assert took < 5


def bounded_run(archive: ArchiveServer) -> tuple[ArchiveBackfill, float]:
    """A backfill with a 1 s bound and 30 s request timeouts, and how long its run took."""
    filling = backfill(LinkState(), archive, timeout=30.0, bound=1.0)
    started = time.monotonic()
    filling.run()
    return filling, time.monotonic() - started


def test_a_stalled_metadata_listing_ends_with_the_bound() -> None:
    with ArchiveServer([archived(1)], stall_metadata=True) as archive:
        filling, took = bounded_run(archive)
    report = filling.report()
    assert 1.0 <= took < 1.5
    listings = len(MeasurementKind)  # one per event type
    assert (report.links, report.failed_requests, report.complete) == (
        {"unfinished": 0},
        listings,
        False,
    )
    assert report.cuts == {"bound": listings}  # every listing, cut when the bound passed
    assert filling.unready_reason(None) is None


def test_links_still_read_when_the_bound_expires_are_unfinished() -> None:
    with ArchiveServer([archived(1, "stall"), archived(2, "stall"), archived(3)]) as archive:
        filling, took = bounded_run(archive)
    report = filling.report()
    assert 1.0 <= took < 1.5
    assert (report.links, report.failed_requests) == ({"filled": 1, "unfinished": 2}, 0)
    assert report.cuts == {"bound": 2}
    assert not report.complete


def test_malformed_records_are_counted_by_reason_and_skipped() -> None:
    link = archived(1, minutes=40)
    link.series[DELAY.value] = [
        *link.series[DELAY.value][:-3],
        "not a record",
        {"ts": int(NOW) // 60 * 60, "val": {"2.6": 600.5}},
        {"ts": int(NOW) // 60 * 60 + 10},
    ]
    link.series[LOSS.value][-1] = {"ts": int(NOW) // 60 * 60, "val": 1.5}
    state = LinkState()
    with ArchiveServer([link, archived(2, minutes=40)]) as archive:
        report = backfill(state, archive).run()
    assert report.rejected == {
        "not_an_object": 1,
        "bad_value": 1,
        "missing_field": 1,
        "loss_out_of_range": 1,
    }
    assert report.links == {"filled": 2, "unfinished": 0}
    assert report.datapoints == {"window": 2 * 2 * 33 - 3 - 1, "all_time": 2 * 2 * 7, "covered": 0}


def test_a_second_backfill_counts_no_minute_twice() -> None:
    state = LinkState()
    with ArchiveServer([archived(1)]) as archive:
        backfill(state, archive).run()
        before = state.view(NOW)
        report = backfill(state, archive).run()
    after = state.view(NOW)
    assert report.datapoints == {"window": 2 * 32, "all_time": 0, "covered": 2 * 28}
    for name, values in before.archive.items():
        np.testing.assert_array_equal(after.archive[name], values, err_msg=name)
    np.testing.assert_array_equal(after.series["loss"], before.series["loss"])


def bus_frames(stamps: list[int]) -> list[tuple[str, bytes, None]]:
    """The bus messages of link 1 for `stamps`: the real histogram ("2.60") and the losses."""
    link = meta("192.0.2.1", "198.51.100.20", "ps-1.example.org", "ps-b.example.net")
    delays = body({ts: BUS_HISTOGRAM for ts in stamps}, link)
    losses = body({ts: loss_at(ts) for ts in stamps}, link)
    return [("delay", delays, None), ("loss", losses, None)]


@pytest.mark.parametrize("repeats", [1, 2])
def test_minutes_from_both_the_archive_and_the_bus_are_counted_once(repeats: int) -> None:
    """The bus repeats the archive's last 32 minutes (the broker's backlog, re-polls), then the
    link lives on for 40 minutes: state ends as for a link that only ever heard the bus."""
    backfilled, live_only = LinkState(), LinkState()
    with ArchiveServer([archived(1)]) as archive:
        backfill(backfilled, archive, history=90 * 60).run()
    window = minutes_back(33)
    clock = NOW
    pipelines = [
        IngestPipeline(state, {"delay": DELAY, "loss": LOSS}, clock=lambda: clock)
        for state in (backfilled, live_only)
    ]
    for _ in range(repeats):
        pipelines[0].handle_frames(bus_frames(window))
    for ts in minutes_back(90):
        clock = ts + 30.0
        pipelines[1].handle_frames(bus_frames([ts]))
    for ts in [window[-1] + 60 * k for k in range(1, 41)]:
        clock = ts + 30.0
        for pipeline in pipelines:
            pipeline.handle_frames(bus_frames([ts]))
    a, b = backfilled.view(clock), live_only.view(clock)
    np.testing.assert_array_equal(a.slot_minute, b.slot_minute)
    for name in a.series:
        np.testing.assert_array_equal(a.series[name], b.series[name], err_msg=name)
    for name in a.archive:
        np.testing.assert_array_equal(a.archive[name], b.archive[name], err_msg=name)


def test_readiness_waits_for_the_backfill_and_a_matrix_after_it() -> None:
    state = LinkState()
    with ArchiveServer([archived(1)]) as archive:
        filling = backfill(state, archive)
        assert filling.unready_reason(None) == "backfill from the archive in progress"
        report = filling.run()
    assert report.finished_at == NOW
    assert filling.unready_reason(NOW - 1) == "no cost matrix since the backfill"
    assert filling.unready_reason(NOW) is None
    with ArchiveServer([]) as archive:
        empty = backfill(LinkState(), archive)
        empty.run()
    assert empty.unready_reason(None) is None  # nothing applied: any matrix will do
