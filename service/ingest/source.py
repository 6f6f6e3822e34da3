"""Every way data enters nettel is a `Source`: one verb set, one entry into the pipeline.

A source is started and stopped with the service (`start`, `stop`), says what it reads and how
it is doing (`describe`), and hands what it reads to the one `IngestEntry` it was built with
(`service.ingest.entry`). The bus subscription, the pScheduler HTTP intake and the archive
backfill are sources; a new kind of input is one new module implementing this protocol plus one
line where the runtime lists its sources (`service.runtime.SOURCE_FACTORIES`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from service.ingest.entry import LiveBatch


@dataclass(frozen=True)
class SourceDescription:
    """What a source reads and how it is doing now (JSON-ready: /readyz lists them)."""

    #: The kind of source: "bus", "pscheduler-http", "archive-backfill", ...
    kind: str
    #: What it reads: topics, an endpoint path, an archive URL.
    reads: tuple[str, ...]
    #: Whether it takes input now (started and not stopped; for a backfill: still reading).
    running: bool
    #: Kind-specific state (e.g. whether the bus is connected).
    detail: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reads": list(self.reads),
            "running": self.running,
            "detail": dict(self.detail),
        }


class LiveDelivery(Protocol):
    """Where a source of live frames delivers them (`IngestEntry`; a recorder in its tests)."""

    def deliver(self, batch: LiveBatch) -> bool: ...


class Source(Protocol):
    """An input of the service: it delivers what it reads to its `IngestEntry`."""

    @property
    def name(self) -> str: ...

    def start(self) -> None:
        """Begin taking input (returns at once; the work runs on the source's own threads)."""
        ...

    def stop(self) -> None:
        """Stop taking input; what was already delivered is the pipeline's to apply."""
        ...

    def describe(self) -> SourceDescription: ...
