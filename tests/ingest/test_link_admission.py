"""Bounded link state: a flood of fake links through the pipeline stops at --max-links, one
producer adds at most --new-links-per-minute a minute, each refusal is counted with its reason
and logged once a period, known links keep flowing, and retirement makes room again."""

from __future__ import annotations

import logging

import pytest

from service.ingest.link_admission import LinkAdmission
from service.ingest.pipeline import IngestPipeline
from service.parse.records import MeasurementKind
from service.state.link_state import LinkState
from tests.clock import TestClock
from tests.message_factory import BASE_TS, body, link, meta

LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
NOW = BASE_TS + 120.0


def loss_frame(source: int, destination: int, host: str | None = None) -> tuple[str, bytes, None]:
    """A loss message for the fake link 10.0.<source> -> 10.1.<destination>."""
    ends = meta(
        source=f"10.0.{source // 256}.{source % 256}",
        destination=f"10.1.{destination // 256}.{destination % 256}",
        source_host=host,
        destination_host=None,
    )
    return LOSS_TOPIC, body({BASE_TS: 0.0}, ends), None


def pipeline_with(admission: LinkAdmission) -> IngestPipeline:
    state = LinkState()
    state.admission = admission
    return IngestPipeline(state, {LOSS_TOPIC: MeasurementKind.LOSS}, clock=lambda: NOW)


def test_a_flood_of_new_links_stops_at_the_cap(caplog: pytest.LogCaptureFixture) -> None:
    pipeline = pipeline_with(LinkAdmission(max_links=50, per_minute=1_000_000))
    with caplog.at_level(logging.WARNING, "nettel.ingest"):
        pipeline.handle_frames([loss_frame(n, n) for n in range(200)])
    assert len(pipeline.state) == 50
    assert pipeline.counters.rejected_by_reason == {"link_limit": 150}
    assert pipeline.counters.datapoints_applied == 50
    refusals = [r for r in caplog.records if getattr(r, "reason", None) == "link_limit"]
    assert len(refusals) == 1 and "--max-links" in refusals[0].detail  # type: ignore[attr-defined]
    # the links it holds keep taking data
    assert pipeline.handle_frames([loss_frame(n, n) for n in range(50)]) == 50


def test_retirement_makes_room_for_new_links() -> None:
    pipeline = pipeline_with(LinkAdmission(max_links=10, per_minute=1_000))
    pipeline.handle_frames([loss_frame(n, n) for n in range(10)])
    assert pipeline.handle_frame(*loss_frame(99, 99)[:2]) == 0
    assert pipeline.state.retire_idle(cutoff=NOW) == 10
    assert pipeline.handle_frame(*loss_frame(99, 99)[:2]) == 1


def test_one_producer_adds_a_bounded_number_of_links_a_minute(clock: TestClock) -> None:
    pipeline = pipeline_with(LinkAdmission(max_links=1000, per_minute=20, clock=clock))
    flood = [loss_frame(1, n, host="flooder.example.org") for n in range(100)]
    honest = [loss_frame(2, n, host="ps.site-b.example.org") for n in range(10)]
    pipeline.handle_frames(flood + honest)
    assert len(pipeline.state) == 30  # 20 of the flooder's, all 10 of the other producer's
    assert pipeline.counters.rejected_by_reason == {"new_link_rate": 80}
    clock.advance(60.0)  # a minute later: another 20
    pipeline.handle_frames(flood)
    assert len(pipeline.state) == 50


def test_an_archives_history_and_a_journal_replay_are_only_capped() -> None:
    admission = LinkAdmission(max_links=30, per_minute=5)
    assert admission(link(), 10, history=True) is None
    with admission.replaying():
        assert [admission(link(), n) for n in range(10)] == [None] * 10
    assert admission(link(), 30, history=True) == "link_limit"
    assert [admission(link(), n) for n in range(6)][-1] == "new_link_rate"
