"""Applies parsed measurements to the link index and buffers, and hands out consistent copies."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from service.errors import RejectReason
from service.parse.records import ParsedMessage
from service.state.link_buffers import ARCHIVE, SERIES, WINDOW_MINUTES, LinkBuffers
from service.state.link_index import LinkIndex
from service.state.topology import Topology

T = TypeVar("T", bound=tuple[int, Any])

#: Datapoints further than this in the future (seconds) are refused.
MAX_FUTURE_SECONDS = 300


@dataclass(slots=True)
class ApplyOutcome:
    """What one message changed: datapoints stored and reasons for the refused ones."""

    applied: int = 0
    rejected: list[RejectReason] = field(default_factory=list)


@dataclass(frozen=True)
class StateView:
    """A copy of every link's state at one moment; analysis works on this, never on live arrays."""

    taken_at: float
    sources: list[str]
    destinations: list[str]
    source_hosts: list[str]
    destination_hosts: list[str]
    source_sites: list[str | None]
    destination_sites: list[str | None]
    slot_minute: np.ndarray
    series: dict[str, np.ndarray]
    archive: dict[str, np.ndarray]
    latest_delay_minute: np.ndarray
    latest_p95: np.ndarray
    latest_minute: np.ndarray
    clock_suspect_minute: np.ndarray
    names_version: int = 0

    def __len__(self) -> int:
        return len(self.sources)


class LinkState:
    """All links' buffers; not thread-safe (the ingest adapter serialises access)."""

    def __init__(self, topology: Topology | None = None, capacity: int = 1024) -> None:
        self.index = LinkIndex(topology or Topology())
        self.buffers = LinkBuffers(capacity)

    def __len__(self) -> int:
        return len(self.index)

    def apply(self, message: ParsedMessage, now: float) -> ApplyOutcome:
        """Store every datapoint of `message` that falls inside the window ending at `now`.

        A link gets a row only once one of its datapoints passes the window check.
        """
        outcome = ApplyOutcome(rejected=[reason for reason, _ in message.rejected])
        delays = self._in_window(outcome, message.delays, now)
        losses = self._in_window(outcome, message.losses, now)
        if not delays and not losses:
            return outcome
        row = self.index.row_for(message.link)
        self.buffers.ensure_row(row)
        stored = [self.buffers.write_delay(row, ts // 60, stats) for ts, stats in delays]
        stored += [self.buffers.write_loss(row, ts // 60, loss) for ts, loss in losses]
        outcome.applied += sum(stored)
        outcome.rejected += [RejectReason.TOO_OLD] * stored.count(False)
        return outcome

    def view(self, now: float, rows: list[int] | None = None) -> StateView:
        """Copy of all links' state (or of `rows` only) for analysis outside the lock."""
        n = len(self.index)
        pick: slice | list[int] = slice(0, n) if rows is None else rows
        b, i = self.buffers, self.index

        def names(values: list) -> list:
            return values[:n] if rows is None else [values[r] for r in rows]

        return StateView(
            taken_at=now,
            sources=names(i.sources),
            destinations=names(i.destinations),
            source_hosts=names(i.source_hosts),
            destination_hosts=names(i.destination_hosts),
            source_sites=names(i.source_sites),
            destination_sites=names(i.destination_sites),
            slot_minute=b.slot_minute[pick].copy(),
            series={k: b.series[k][pick].copy() for k in SERIES},
            archive={k: b.archive[k][pick].copy() for k in ARCHIVE},
            latest_delay_minute=b.latest_delay_minute[pick].copy(),
            latest_p95=b.latest_p95[pick].copy(),
            latest_minute=b.latest_minute[pick].copy(),
            clock_suspect_minute=b.clock_suspect_minute[pick].copy(),
            names_version=i.names_version,
        )

    @staticmethod
    def _in_window(outcome: ApplyOutcome, datapoints: list[T], now: float) -> list[T]:
        """The datapoints inside the window; the others' reasons are added to `outcome`."""
        kept = []
        for datapoint in datapoints:
            reason = window_reject_reason(datapoint[0], now)
            if reason is None:
                kept.append(datapoint)
            else:
                outcome.rejected.append(reason)
        return kept


def window_reject_reason(ts: int, now: float) -> RejectReason | None:
    """Why a datapoint at `ts` cannot be stored at time `now`, or None when it fits the window.

    The window is the 32 complete minutes before the current one (plus the current minute, which
    shares its ring slot with the oldest and replaces it once its data arrives).
    """
    if ts > now + MAX_FUTURE_SECONDS:
        return RejectReason.FUTURE
    if ts // 60 < int(now // 60) - WINDOW_MINUTES:
        return RejectReason.TOO_OLD
    return None
