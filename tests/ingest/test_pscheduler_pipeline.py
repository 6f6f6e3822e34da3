"""pScheduler run frames through IngestPipeline (and the frame batcher's non-blocking offer):
applied like bus messages, counted by outcome, re-posts applied once, journaled and replayed."""

from __future__ import annotations

import threading

from service.ingest.frame_batcher import FrameBatcher
from service.ingest.pipeline import PSCHEDULER_DESTINATION, IngestPipeline, PostedBy
from service.parse.records import MeasurementKind, NamedEndpoints
from service.persistence.durability import Persistence
from service.persistence.journal import Journal
from service.persistence.snapshot_store import SnapshotStore
from service.state.link_state import LinkState
from tests.message_factory import BASE_MINUTE, BASE_TS, DESTINATION_IP, SOURCE_IP, body, histogram
from tests.run_factory import DESTINATION_HOST, SOURCE_HOST, run_body

DELAY_TOPIC = "/topic/perfsonar.raw.histogram-owdelay"
TOPICS = {DELAY_TOPIC: MeasurementKind.DELAY}
NOW = BASE_TS + 150.0
RUN_END = BASE_TS + 65  # its interval began at BASE_TS + 5: minute BASE_MINUTE
RUN = PSCHEDULER_DESTINATION
CLIENT = "192.0.2.200"  # the address that posted a run


def make_pipeline(**kwargs) -> IngestPipeline:
    return IngestPipeline(LinkState(), TOPICS, clock=lambda: NOW, **kwargs)


def outcomes(pipeline: IngestPipeline) -> dict[str, int]:
    return dict(pipeline.counters.runs_by_outcome)


def test_a_run_stores_its_delay_and_loss_in_its_minute() -> None:
    pipeline = make_pipeline()
    assert pipeline.handle_frame(RUN, run_body(RUN_END)) == 2
    counters = pipeline.counters
    assert counters.messages_by_topic == {PSCHEDULER_DESTINATION: 1}
    assert outcomes(pipeline) == {"applied": 1} and counters.datapoints_applied == 2
    assert counters.rejected_by_reason == {}
    view = pipeline.state.view(NOW)
    assert (view.sources, view.destinations) == (
        [f"ipv4:{SOURCE_HOST}"],
        [f"ipv4:{DESTINATION_HOST}"],
    )
    assert (view.source_hosts, view.destination_hosts) == ([SOURCE_HOST], [DESTINATION_HOST])
    slot = BASE_MINUTE % 32
    assert view.slot_minute[0, slot] == BASE_MINUTE
    assert round(float(view.series["delay_mean"][0, slot]), 4) == 2.9321
    assert round(float(view.series["delay_median"][0, slot]), 2) == 2.60
    assert view.series["loss"][0, slot] == 0.0


def test_a_run_posted_again_is_applied_once() -> None:
    pipeline = make_pipeline()
    first = run_body(RUN_END, run_id="r1")
    retry = run_body(RUN_END, run_id="r1")
    assert pipeline.handle_frames([(RUN, first, None), (RUN, retry, None)]) == 2
    assert pipeline.handle_frame(RUN, retry) == 0
    assert pipeline.handle_frame(RUN, run_body(RUN_END, run_id="r2")) == 2  # the next interval
    assert outcomes(pipeline) == {"applied": 2, "duplicate": 2}
    assert pipeline.counters.datapoints_applied == 4


def test_failed_ignored_and_refused_runs_are_counted_apart() -> None:
    pipeline = make_pipeline()
    failed = {"schema": 1, "succeeded": False, "error": "no route", "diags": ""}
    frames = [
        (RUN, run_body(RUN_END, run_id="failed", result=failed), None),
        (RUN, run_body(RUN_END, run_id="rtt", test_type="rtt"), None),
        (RUN, b"{not json", None),
        (RUN, run_body(BASE_TS - 3600, run_id="old"), None),  # both datapoints too old
    ]
    assert pipeline.handle_frames(frames) == 0
    assert outcomes(pipeline) == {"failed": 1, "ignored": 1, "rejected": 2}
    assert pipeline.counters.rejected_by_reason == {"invalid_json": 1, "too_old": 2}
    assert pipeline.counters.messages_by_topic == {PSCHEDULER_DESTINATION: 4}
    assert len(pipeline.state) == 0


def test_a_run_and_the_bus_in_one_batch_share_the_row() -> None:
    pipeline = make_pipeline()
    bus = body({BASE_TS + 60: histogram(9.0)})  # the bus sample's link, with its host names
    assert pipeline.handle_frames([(RUN, run_body(RUN_END), None), (DELAY_TOPIC, bus, None)]) == 3
    view = pipeline.state.view(NOW)
    assert (view.sources, view.destinations) == ([SOURCE_IP], [DESTINATION_IP])


def test_resolve_gives_unrevealed_names_addresses() -> None:
    asked: list[NamedEndpoints] = []

    def resolve(link: NamedEndpoints) -> NamedEndpoints:
        asked.append(link)
        return link._replace(source="192.0.2.77", destination="198.51.100.77")

    pipeline = make_pipeline(resolve=resolve)
    pipeline.handle_frame(RUN, run_body(RUN_END))
    assert asked == [NamedEndpoints(SOURCE_HOST, DESTINATION_HOST, "", "", 4)]
    assert pipeline.state.view(NOW).sources == ["192.0.2.77"]


def test_run_frames_are_journaled_and_replayed(tmp_path) -> None:
    store = SnapshotStore(tmp_path)
    pipeline = make_pipeline()
    persistence = Persistence(pipeline, store, Journal(tmp_path))
    persistence.apply_batch([(RUN, run_body(RUN_END), None)])
    replayed = make_pipeline()
    assert Persistence(replayed, store, Journal(tmp_path)).replay_journal() == 1
    assert outcomes(replayed) == {"applied": 1}
    assert replayed.state.view(NOW).source_hosts == [SOURCE_HOST]


def test_offer_never_blocks_and_refuses_beyond_frames_or_bytes() -> None:
    gate = threading.Event()
    batcher = FrameBatcher(
        lambda frames: gate.wait(5) and frames, lambda frames: None, max_queued=3
    )
    body = run_body(RUN_END)
    run, empty = [(RUN, body, PostedBy(CLIENT))], [(RUN, b"{}", PostedBy(CLIENT))]
    assert batcher.offer(run, 2 * len(body))
    assert batcher.offer(run, 2 * len(body))
    assert not batcher.offer(run, 2 * len(body))  # bytes
    assert batcher.queued_bytes() == 2 * len(body)
    assert batcher.offer(empty, 10 * len(body))
    assert not batcher.offer(empty, 10 * len(body))  # frames
    batcher.start()
    gate.set()
    batcher.stop()
    assert batcher.queued() == 0 and batcher.queued_bytes() == 0
