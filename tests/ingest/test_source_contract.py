"""The contract every Source keeps, run over each kind of input nettel has: it delivers what it
reads into the pipeline, counts what it refuses, stops cleanly, and survives a restart without
losing or double-counting anything.

Each kind has a harness that speaks its own wire: the bus source reads the in-memory broker (the
broker contract suite, tests/broker/test_connection_contract.py, shows it acts as the real ones
do), with durable subscriptions and acknowledgements after the journal as `nettel serve` runs
them; the pScheduler intake answers real HTTP requests; the backfill reads a real HTTP archive.
A new kind of source gets a harness here and passes the same tests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Protocol

import httpx
import orjson
import pytest

from devtools.archive_server import ArchiveServer
from devtools.waiting import wait_for
from service.broker.memory_broker import MemoryBroker
from service.config import Settings
from service.ingest.archive_backfill import ArchiveBackfill, BackfillSettings
from service.ingest.entry import IngestEntry
from service.ingest.frame_batcher import FrameBatcher
from service.ingest.pipeline import IngestPipeline
from service.ingest.source import Source
from service.ingest.stomp_source import StompSource, SubscriptionSpec
from service.parse.records import MeasurementKind
from service.persistence.durability import Persistence
from service.persistence.journal import Journal
from service.persistence.snapshot_store import SnapshotStore
from service.publish.app import create_app
from service.runtime import build_runtime
from service.state.link_state import LinkState
from tests.ingest.test_archive_backfill import HISTORY_MINUTES, archived
from tests.message_factory import body, meta
from tests.publish.served_app import serve_app
from tests.run_factory import run_record

LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"
TOKEN = "contract-token-1"
WAIT = 10.0


class Harness(Protocol):
    """One kind of source, fed over its own wire, applying into a state of its own."""

    source: Source
    state: LinkState

    def feed(self, good: int, bad: int = 0) -> None:
        """Make `good` new links' worth of valid input and `bad` malformed items readable by the
        source (a one-shot source reads what is there when it starts)."""

    def handled(self) -> int:
        """Items the pipeline has applied or refused so far."""

    def links(self) -> int:
        """Links in the state."""

    def rejected(self) -> int:
        """Refusals counted for this source's input."""

    def restart(self) -> None:
        """Stop the source and start it again, as a restart of the service does."""


class BusHarness:
    """The bus subscription on the in-memory broker: durable, acknowledged once journaled."""

    def __init__(self, directory: Path, stack: ExitStack) -> None:
        self.broker = MemoryBroker("activemq")
        self.state = LinkState()
        self.pipeline = IngestPipeline(self.state, {LOSS_TOPIC: MeasurementKind.LOSS})
        store = SnapshotStore(directory)
        persistence = Persistence(self.pipeline, store, Journal(store.directory))
        self.batcher = FrameBatcher(self.pipeline.parse_frames, persistence.apply_parsed)
        self.batcher.start()
        stack.callback(self.batcher.stop)
        entry = IngestEntry(self.pipeline, self.batcher)
        spec = SubscriptionSpec(mode="durable", client_id="contract", ack="client")
        self._subscribe = lambda: StompSource(
            self.broker.access(), [LOSS_TOPIC], entry, subscription=spec
        )
        self.source = self._subscribe()
        self.source.connect()
        stack.callback(lambda: self.source.disconnect())
        wait_for(lambda: self.source.connected, WAIT, what="the subscription")
        self.publisher = self.broker.connector(self.broker.access())
        self.publisher.connect()
        self._next = 0

    def feed(self, good: int, bad: int = 0) -> None:
        for _ in range(good):
            self._next += 1
            self.publisher.send(LOSS_TOPIC, loss_body(self._next), headers={"persistent": "true"})
        for _ in range(bad):
            self.publisher.send(LOSS_TOPIC, b"{not json", headers={"persistent": "true"})

    def handled(self) -> int:
        counters = self.pipeline.counters_snapshot()
        return counters.messages_by_topic[LOSS_TOPIC]

    def links(self) -> int:
        return len(self.state)

    def rejected(self) -> int:
        return sum(self.pipeline.counters_snapshot().rejected_by_reason.values())

    def restart(self) -> None:
        """A new subscriber with the same durable subscription, as a restarted service has."""
        self.source.stop()
        self.source.disconnect()
        self.source = self._subscribe()
        self.source.connect()
        wait_for(lambda: self.source.connected, WAIT, what="the subscription again")


class HttpHarness:
    """The pScheduler intake of a built runtime, behind a real HTTP server."""

    def __init__(self, directory: Path, stack: ExitStack) -> None:
        settings = Settings(
            model="none", brokers="none", ingest_token=TOKEN, publish_telemetry=False
        )
        self.runtime = build_runtime(settings)
        assert self.runtime.intake is not None
        self.source = self.runtime.intake
        self.state = self.runtime.state
        self.runtime.batcher.start()
        stack.callback(self.runtime.batcher.stop)
        self.url = stack.enter_context(serve_app(create_app(self.runtime)))
        self.source.start()
        self._next = 0

    def feed(self, good: int, bad: int = 0) -> None:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        with httpx.Client(base_url=self.url, headers=headers) as client:
            for _ in range(good):
                self._next += 1
                response = client.put("/ingest/pscheduler", content=run_of(self._next))
                assert response.status_code == 202
            for _ in range(bad):
                response = client.put("/ingest/pscheduler", content=b'{"run": 1}')
                assert response.status_code == 400

    def handled(self) -> int:
        counters = self.runtime.pipeline.counters_snapshot()
        return sum(counters.runs_by_outcome.values()) + self.rejected()

    def links(self) -> int:
        return len(self.state)

    def rejected(self) -> int:
        return sum(self.runtime.pipeline.counters_snapshot().rejected_by_reason.values())

    def restart(self) -> None:
        self.source.stop()
        self.source.start()


class BackfillHarness:
    """The archive backfill, reading a real HTTP archive; it reads once per start."""

    def __init__(self, directory: Path, stack: ExitStack) -> None:
        self.archive = stack.enter_context(ArchiveServer([]))
        self.state = LinkState()
        self.entry = IngestEntry(IngestPipeline(self.state, {}))
        self.settings = BackfillSettings(
            self.archive.url, timeout=2.0, bound=20.0, history=HISTORY_MINUTES * 60.0
        )
        self.source = ArchiveBackfill(self.entry, self.settings)
        self._next = 0

    def feed(self, good: int, bad: int = 0) -> None:
        for _ in range(good):
            self._next += 1
            link = archived(self._next, minutes=5)
            self.archive.links[link.key] = link
        for _ in range(bad):
            self._next += 1
            link = archived(self._next, minutes=5)
            loss = link.series[MeasurementKind.LOSS.value][:1]
            link.series[MeasurementKind.LOSS.value] = [{"ts": loss[0]["ts"], "val": 7.0}]
            link.series[MeasurementKind.DELAY.value] = []
            self.archive.links[link.key] = link
        self.restart()  # a one-shot source: what it reads is what is there when it runs

    def handled(self) -> int:
        return 0 if self.source.running else self.links() + self.rejected()

    def links(self) -> int:
        return len(self.state)

    def rejected(self) -> int:
        """Refused by the last run (each run reads the whole archive again)."""
        return sum(self.source.report().rejected.values())

    def restart(self) -> None:
        self.source.stop()
        self.source = ArchiveBackfill(self.entry, self.settings)
        self.source.start()
        wait_for(lambda: not self.source.running, WAIT, what="the backfill's end")


def last_minute() -> int:
    """The start (epoch s) of the minute before this one: within every source's window."""
    return int(time.time()) // 60 * 60 - 60


def loss_body(number: int) -> bytes:
    """A loss message of link `number` (its own source address), one minute of loss."""
    address = f"10.7.{number // 250}.{number % 250 + 1}"
    ends = meta(source=address, source_host=f"ps-{number}.bus.example.org")
    return body({str(last_minute()): 0.25}, ends)


def run_of(number: int) -> bytes:
    """A pScheduler latencybg run of link `number` (its own source host), just posted."""
    record = run_record(end=time.time(), run_id=f"contract-{number}")
    record["test"]["spec"]["source"] = f"ps-{number}.contract.example.org"
    return orjson.dumps(record)


HARNESSES = {"bus": BusHarness, "pscheduler-http": HttpHarness, "archive-backfill": BackfillHarness}


@pytest.fixture(params=list(HARNESSES))
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    with ExitStack() as stack:
        made: Harness = HARNESSES[request.param](tmp_path, stack)
        stack.callback(lambda: made.source.stop())
        yield made


def wait_handled(harness: Harness, count: int) -> None:
    wait_for(lambda: harness.handled() >= count, WAIT, what=f"{count} items handled")


def wait_links(harness: Harness, count: int) -> None:
    """Items are counted when parsed and reach the state a moment later (the batcher applies
    them): seen as 2 links of 4 handled beside two busy processes."""
    wait_for(lambda: harness.links() >= count, WAIT, what=f"{count} links in the state")


def test_delivers_what_it_reads_into_the_pipeline(harness: Harness) -> None:
    harness.feed(good=3)
    wait_handled(harness, 3)
    wait_links(harness, 3)
    assert harness.links() == 3
    description = harness.source.describe()
    assert description.kind == harness.source.name and description.reads


def test_counts_what_it_refuses_and_goes_on(harness: Harness) -> None:
    harness.feed(good=1, bad=1)
    wait_handled(harness, 2)
    harness.feed(good=1)
    wait_handled(harness, 3)
    assert harness.rejected() == 1
    wait_links(harness, 2)
    assert harness.links() == 2


def test_stops_cleanly(harness: Harness) -> None:
    before = set(threading.enumerate())
    harness.feed(good=1)
    wait_handled(harness, 1)
    harness.source.stop()
    assert harness.source.describe().running is False
    leftover = [t for t in set(threading.enumerate()) - before if t.name.startswith("archive")]
    assert not [thread for thread in leftover if thread.is_alive()]


def test_survives_a_restart_without_losing_or_double_counting(harness: Harness) -> None:
    harness.feed(good=2)
    wait_handled(harness, 2)
    wait_links(harness, 2)
    before = window_of(harness.state)
    harness.restart()
    harness.feed(good=2)
    wait_handled(harness, 4)
    wait_links(harness, 4)
    assert harness.links() == 4
    after = window_of(harness.state)
    assert {link: after[link] for link in before} == before  # the first two, as they were


def window_of(state: LinkState) -> dict[str, tuple[list[float], float]]:
    """Each link's loss values in the window and its count of archived loss minutes."""
    view = state.view(time.time())
    return {
        source: (
            [round(float(value), 6) for value in view.series["loss"][row] if value == value],
            float(view.archive["loss_n"][row]),
        )
        for row, source in enumerate(view.sources)
    }
