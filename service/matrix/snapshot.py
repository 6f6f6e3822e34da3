"""The immutable cost-matrix snapshot that publishers serve as is."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from service.analysis.link_analysis import LinkAnalysis
from service.analysis.predictor import ModelInfo
from service.matrix.link_record import DELAY_KEYS, HOST_RECORD_KEYS, LinkRecord
from service.matrix.matrix_body import MatrixBody, encode_body
from service.matrix.shared_keys import key_sharing_dicts
from service.matrix.views import aggregate_sites
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import LinkResults, StateView


@dataclass(frozen=True)
class CostMatrix:
    """One computed matrix: link records plus the full JSON body, serialised once.

    `columns` (the rounded values behind the records) let the next snapshot rebuild the records
    of changed links only; the others are reused as they are (same objects), and so is their
    JSON in `encoded`.
    """

    generated_at: float
    model: ModelInfo | None
    links: tuple[LinkRecord, ...]
    encoded: MatrixBody = field(repr=False)
    columns: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    names_version: int = 0

    @property
    def etag(self) -> str:
        return self.encoded.etag

    @property
    def body(self) -> bytes:
        """The whole body in one piece (joined on first use; publishers that can send the
        pieces use `encoded.chunks`)."""
        return self.encoded.joined

    @property
    def gzip_body(self) -> bytes:
        return self.encoded.gzipped

    @cached_property
    def congested_count(self) -> int:
        return sum(1 for link in self.links if link["congested"])

    @cached_property
    def site_links(self) -> list[LinkRecord]:
        """The links aggregated by site pair (`aggregate_sites`), built once per snapshot."""
        return aggregate_sites(self.links)

    def prepare_views(self) -> None:
        """Build what queries read (congested count, site pairs, the endpoint index) now, in
        the matrix cycle right after the snapshot is served: only a query in between builds
        what it reads, once."""
        _ = self.congested_count, self.site_links, self._rows_by_endpoint

    @cached_property
    def _rows_by_endpoint(self) -> dict[str, dict[str, list[int]]]:
        """side -> IP, host or site name -> rows, built once per snapshot on first query."""
        index: dict[str, dict[str, list[int]]] = {"source": {}, "destination": {}}
        for row, link in enumerate(self.links):
            for side, names in index.items():
                for key in {link[side], link[f"{side}_host"], link[f"{side}_site"]} - {None}:
                    names.setdefault(key, []).append(row)
        return index

    def select(self, source: str | None, destination: str | None) -> list[LinkRecord]:
        """Links whose source and destination match (IP, host or site); None matches all."""
        rows: set[int] | None = None
        for side, name in (("source", source), ("destination", destination)):
            if name is not None:
                found = set(self._rows_by_endpoint[side].get(name, ()))
                rows = found if rows is None else rows & found
        if rows is None:
            return list(self.links)
        return [self.links[row] for row in sorted(rows)]

    def knows(self, name: str) -> bool:
        """Whether `name` is the IP, host or site of either end of some link."""
        index = self._rows_by_endpoint
        return name in index["source"] or name in index["destination"]

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


#: `throughput_age_s` moves on in whole steps of this many seconds (`throughput_columns`).
AGE_STEP_S = 600
_DIGITS = {
    "cost": 4,
    "empirical": 6,
    "utilisation": 4,
    "probability": 6,  # within 1e-6 of what `nettel evaluate` computes
    "low": 4,
    "high": 4,
    "mean": 4,
    "median": 4,
    "std": 4,
    "min": 4,
    "p95": 4,
    "loss": 6,
}


def build_cost_matrix(
    view: StateView,
    analysis: LinkAnalysis,
    model: ModelInfo | None,
    generated_at: float,
    previous: CostMatrix | None = None,
    results: LinkResults | None = None,
) -> CostMatrix:
    """Freeze one analysis pass; records of links unchanged since `previous` are reused.
    `results` (taken with `view`, of the same rows) give the throughput fields (null without)."""
    columns = _columns(analysis) | throughput_columns(results, len(view), generated_at)
    changed = _changed_rows(columns, view.names_version, model, previous)
    links = list(previous.links[: len(view)]) if previous is not None else []
    links += [{}] * (len(view) - len(links))
    rows = np.flatnonzero(changed).tolist()
    for row, record in zip(rows, _records(view, columns, rows, model is not None), strict=True):
        links[row] = record
    encoded = encode_body(
        matrix_document(generated_at, model, []),
        links,
        rows,
        None if previous is None else previous.encoded,
    )
    return CostMatrix(generated_at, model, tuple(links), encoded, columns, view.names_version)


def build_link_records(
    view: StateView, a: LinkAnalysis, has_model: bool, results: LinkResults | None = None
) -> list[LinkRecord]:
    columns = _columns(a) | throughput_columns(results, len(view), view.taken_at)
    return _records(view, columns, list(range(len(view))), has_model)


def throughput_columns(
    results: LinkResults | None, n: int, generated_at: float
) -> dict[str, np.ndarray]:
    """The latest throughput (bits/s, whole; NaN: none) and its age at `generated_at` in whole
    steps of `AGE_STEP_S` (s; -1: none) of `n` links.

    The age moves on a step at a time, each link's at the second its test started (spread as
    the tests' starts are), not every cycle: a record is rebuilt (and its block of the body
    spliced and hashed again) only when one of its values changes, so an age to the second would
    rebuild every tested link at every recompute. A step of 10 minutes against tests every few
    hours: at 100,000 tested links some 170 records a second, spread over the body's blocks, few
    enough that a slow recompute does not snowball into re-encoding whole blocks.

    >>> from service.state.throughput_state import LatestThroughput
    >>> latest = LatestThroughput(np.array([4.2e8, np.nan]), np.array([1000, -1]), None)
    >>> results = LinkResults(0.0, np.arange(2), latest, None, None)  # type: ignore[arg-type]
    >>> columns = throughput_columns(results, 2, 1000 + 1199.5)
    >>> columns["throughput_bps"].tolist(), columns["throughput_age"].tolist()
    ([420000000.0, nan], [600, -1])
    """
    if results is None:
        return {"throughput_bps": np.full(n, np.nan), "throughput_age": np.full(n, -1, np.int64)}
    if len(results.rows) != n:
        raise ValueError(f"link results of {len(results.rows)} links for a view of {n}")
    latest = results.throughput
    held = latest.time >= 0
    age = np.maximum(np.int64(generated_at) - latest.time, 0) // AGE_STEP_S * AGE_STEP_S
    return {
        "throughput_bps": np.round(latest.bps),
        "throughput_age": np.where(held, age, -1).astype(np.int64),
    }


def _columns(a: LinkAnalysis) -> dict[str, np.ndarray]:
    """Every record value as an array over links, rounded as published."""
    floats = {
        "cost": a.cost,
        "empirical": a.empirical,
        "utilisation": a.utilisation,
        "probability": a.congestion_probability,
        "low": a.utilisation_low,
        "high": a.utilisation_high,
        "mean": a.delay_mean,
        "median": a.delay_median,
        "std": a.delay_std,
        "min": a.delay_min,
        "p95": a.delay_p95,
        "loss": a.loss,
    }
    columns = {k: np.round(v.astype(np.float64), _DIGITS[k]) for k, v in floats.items()}
    return columns | {
        "samples": a.samples,
        "last": a.last_measurement,
        "congested": a.congested,
        "stale": a.stale,
        "clock": a.clock_suspect,
        "complete": a.has_features,
    }


def _changed_rows(
    columns: dict[str, np.ndarray],
    names_version: int,
    model: ModelInfo | None,
    previous: CostMatrix | None,
) -> np.ndarray:
    n = len(columns["cost"])
    if (
        previous is None
        or not previous.columns
        or previous.model != model
        or previous.names_version != names_version
    ):
        return np.ones(n, dtype=bool)
    m = min(n, len(previous.links))
    changed = np.ones(n, dtype=bool)
    changed[:m] = False
    for name, values in columns.items():
        old, new = previous.columns[name][:m], values[:m]
        same = (
            (old == new) | (np.isnan(old) & np.isnan(new)) if new.dtype.kind == "f" else old == new
        )
        changed[:m] |= ~same
    return changed


def _records(
    view: StateView, columns: dict[str, np.ndarray], rows: list[int], has_model: bool
) -> list[LinkRecord]:
    """JSON-ready records of `rows` (NaN as null), built a column at a time."""
    picked = np.asarray(rows, dtype=np.intp)
    p = {name: values[picked] for name, values in columns.items()}
    c = {name: _json_values(values) for name, values in p.items()}
    c["last"] = _whole_values(p["last"], p["last"] >= 0)
    c["throughput_bps"] = _whole_values(p["throughput_bps"], ~np.isnan(p["throughput_bps"]))
    c["throughput_age"] = _whole_values(p["throughput_age"], p["throughput_age"] >= 0)
    names = (
        view.sources,
        view.destinations,
        view.source_hosts,
        view.destination_hosts,
        view.source_sites,
        view.destination_sites,
    )
    delay_values = zip(*(c[k] for k in DELAY_KEYS), strict=True)
    # strict=False inside: each tuple comes from a strict zip of as many columns as keys
    delays = [dict(zip(DELAY_KEYS, v, strict=False)) for v in delay_values]
    reasons = (
        list(map(_REASON_BY_COMPLETENESS.__getitem__, c["complete"]))
        if has_model
        else ["no_model"] * len(rows)
    )
    values = zip(
        *(list(map(name.__getitem__, rows)) for name in names),
        c["cost"], c["empirical"], c["congested"], c["utilisation"], reasons,
        c["probability"], c["low"], c["high"], delays,
        c["loss"], c["samples"], c["last"], c["stale"], c["clock"],
        c["throughput_bps"], c["throughput_age"], strict=True,
    )  # fmt: skip
    return [_host_record(zip(HOST_RECORD_KEYS, record, strict=False)) for record in values]


def _json_values(values: np.ndarray) -> list[Any]:
    """Python values of a column, NaN as None."""
    if values.dtype.kind == "f":
        return _shared_values(values, np.isnan(values))
    if values.dtype.kind in "iu":
        return _shared_values(values, np.zeros(len(values), bool))
    listed: list[Any] = values.tolist()
    return listed


def _whole_values(values: np.ndarray, present: np.ndarray) -> list[Any]:
    """`values` as whole numbers (int, truncated) where `present`, else None."""
    return _shared_values(np.where(present, values, 0).astype(np.int64), ~present)


#: How many values of a column, evenly spaced, judge whether most of its values repeat.
_REPEAT_SAMPLE = 1024


def _shared_values(values: np.ndarray, missing: np.ndarray) -> list[Any]:
    """Python values of a column of numbers, None where `missing`, one object per distinct value
    (bit for bit: -0.0 is not 0.0) when most values repeat: a snapshot keeps them in its records,
    and many columns repeat (costs and losses rounded, most links' newest minute), each object
    24 or 32 bytes; one per value otherwise (delays: sharing would cost time and save little).
    Whether most values repeat is judged on an evenly spaced sample, so that a column of
    distinct values is never sorted whole."""
    bits = values.view(f"i{values.itemsize}") if values.dtype.kind == "f" else values
    sample = bits[:: max(1, len(bits) // _REPEAT_SAMPLE)]
    if 2 * len(np.unique(sample)) > len(sample):
        objects = values.astype(object)
    else:
        distinct, inverse = np.unique(bits, return_inverse=True)
        objects = distinct.view(values.dtype).astype(object)[inverse.reshape(-1)]
    objects[missing] = None
    listed: list[Any] = objects.tolist()
    return listed


#: `utilisation_reason` with a model loaded, by whether the link has all its features.
_REASON_BY_COMPLETENESS = ("insufficient_data", None)
#: Link records, sharing one key table (`shared_keys`).
_host_record = key_sharing_dicts()
