"""The immutable cost-matrix snapshot that publishers serve as is."""

from __future__ import annotations

import gzip
import hashlib
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import orjson

from service.analysis.link_analysis import LinkAnalysis
from service.analysis.predictor import ModelInfo
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import StateView

LinkRecord = dict[str, Any]


@dataclass(frozen=True)
class CostMatrix:
    """One computed matrix: link records plus the full JSON body, serialised once."""

    generated_at: float
    model: ModelInfo | None
    links: tuple[LinkRecord, ...]
    body: bytes = field(repr=False)
    etag: str

    @property
    def congested_count(self) -> int:
        return sum(1 for link in self.links if link["congested"])

    @cached_property
    def gzip_body(self) -> bytes:
        """The body gzip-compressed, computed once per snapshot on first request."""
        return gzip.compress(self.body, compresslevel=5)

    def document(self, links: list[LinkRecord] | tuple[LinkRecord, ...]) -> dict[str, Any]:
        """The /costmatrix JSON document for a subset of links."""
        return matrix_document(self.generated_at, self.model, links)


def matrix_document(
    generated_at: float, model: ModelInfo | None, links: list[LinkRecord] | tuple[LinkRecord, ...]
) -> dict[str, Any]:
    return {
        "generated_at": generated_at,
        "window_minutes": WINDOW_MINUTES,
        "model": None if model is None else vars(model).copy(),
        "links": list(links),
    }


def build_cost_matrix(
    view: StateView, analysis: LinkAnalysis, model: ModelInfo | None, generated_at: float
) -> CostMatrix:
    """Freeze one analysis pass into link records and their pre-serialised JSON body."""
    links = tuple(build_link_records(view, analysis, model is not None))
    body = orjson.dumps(matrix_document(generated_at, model, links))
    etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
    return CostMatrix(generated_at, model, links, body, etag)


def build_link_records(view: StateView, a: LinkAnalysis, has_model: bool) -> list[LinkRecord]:
    columns = {
        "cost": _rounded(a.cost, 4),
        "empirical": _rounded(a.empirical, 6),
        "utilisation": _rounded(a.utilisation, 4),
        "mean": _rounded(a.delay_mean, 4),
        "median": _rounded(a.delay_median, 4),
        "std": _rounded(a.delay_std, 4),
        "min": _rounded(a.delay_min, 4),
        "p95": _rounded(a.delay_p95, 4),
        "loss": _rounded(a.loss, 6),
        "samples": a.samples.tolist(),
        "last": [int(x) if x >= 0 else None for x in a.last_measurement.tolist()],
        "congested": a.congested.tolist(),
        "stale": a.stale.tolist(),
        "clock": a.clock_suspect.tolist(),
        "complete": a.has_features.tolist(),
    }
    return [_link_record(view, columns, row, has_model) for row in range(len(view))]


def _link_record(view: StateView, c: dict[str, list], row: int, has_model: bool) -> LinkRecord:
    return {
        "source": view.sources[row],
        "destination": view.destinations[row],
        "source_host": view.source_hosts[row],
        "destination_host": view.destination_hosts[row],
        "source_site": view.source_sites[row],
        "destination_site": view.destination_sites[row],
        "cost": c["cost"][row],
        "empirical": c["empirical"][row],
        "congested": c["congested"][row],
        "utilisation": c["utilisation"][row],
        "utilisation_reason": _utilisation_reason(has_model, c["complete"][row]),
        "delay_ms": {k: c[k][row] for k in ("mean", "median", "std", "min", "p95")},
        "packet_loss": c["loss"][row],
        "samples": c["samples"][row],
        "last_measurement": c["last"][row],
        "stale": c["stale"][row],
        "clock_suspect": c["clock"][row],
    }


def _utilisation_reason(has_model: bool, complete: bool) -> str | None:
    if not has_model:
        return "no_model"
    return None if complete else "insufficient_data"


def _rounded(values: np.ndarray, digits: int) -> list[float | None]:
    """JSON-ready floats, NaN as None."""
    return [None if math.isnan(x) else round(x, digits) for x in values.astype(np.float64).tolist()]
