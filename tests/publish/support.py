"""Link records and snapshots built by hand, plus a server-sent-events reader for wire tests."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from service.analysis.predictor import ModelInfo
from service.matrix.cycle import MatrixCycle
from service.matrix.link_record import LinkRecord
from service.matrix.matrix_body import encode_body
from service.matrix.snapshot import CostMatrix, matrix_document

TS = 1_700_000_160


def host_link(
    source: str,
    destination: str,
    *,
    source_host: str | None = None,
    destination_host: str | None = None,
    source_site: str | None = None,
    destination_site: str | None = None,
    cost: float | None = 0.1,
    delay: float | None = 10.0,
    loss: float | None = 0.0,
    utilisation: float | None = None,
    empirical: float | None = 0.0,
    congested: bool = False,
    last: int | None = TS,
    throughput_bps: int | None = None,
    throughput_age_s: int | None = None,
) -> LinkRecord:
    """A host-level link record with the /costmatrix fields."""
    return {
        "source": source,
        "destination": destination,
        "source_host": source_host or f"ps.{source}.example",
        "destination_host": destination_host or f"ps.{destination}.example",
        "source_site": source_site,
        "destination_site": destination_site,
        "cost": cost,
        "empirical": empirical,
        "congested": congested,
        "utilisation": utilisation,
        "utilisation_reason": None if utilisation is not None else "no_model",
        "congestion_probability": None,
        "utilisation_low": None,
        "utilisation_high": None,
        "delay_ms": {"mean": delay, "median": delay, "std": 0.1, "min": delay, "p95": delay},
        "packet_loss": loss,
        "samples": 32,
        "last_measurement": last,
        "stale": False,
        "clock_suspect": False,
        "throughput_bps": throughput_bps,
        "throughput_age_s": throughput_age_s,
    }


def make_matrix(
    links: Sequence[LinkRecord], generated_at: float = TS + 40.0, model: ModelInfo | None = None
) -> CostMatrix:
    encoded = encode_body(matrix_document(generated_at, model, []), links)
    return CostMatrix(generated_at, model, tuple(links), encoded)


def read_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """Server-sent events from a line iterator: {"event", "id", "data"} per event."""
    event: dict[str, Any] = {}
    for line in lines:
        if not line:
            if "data" in event:
                yield event
            event = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            event[name] = value.removeprefix(" ")


def detach_alarm_engine(cycle: MatrixCycle) -> None:
    """Take the alarm engine off the cycle's observers: a test records alarms itself."""
    cycle.observers = replace(cycle.observers, analysed=())
