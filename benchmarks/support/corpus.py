"""Realistic perfSONAR bus messages for the suite, built from the training simulator.

Delay histograms come from `simulation.simulator` (600 probe packets a minute bucketed to 0.01 ms,
so ~100-150 buckets per histogram on this mesh; the real sample has 35) and are laid out by
`simulation.bus_format` (version 1 headers and body). A mesh of n sites has n(n-1) directed links;
the suite takes the first `n_links`. Histograms are serialised once per (link, minute) and
embedded with `orjson.Fragment`, so building 200,000 bodies costs seconds, not minutes.
"""

from __future__ import annotations

import math
import multiprocessing
import pickle
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from simulation.bus_format import build_delay_message, build_loss_message
from simulation.simulator import Mesh, build_mesh, simulate_minute, simulate_utilisation

SEED = 20_240_601
MAX_DATAPOINTS_PER_MESSAGE = 3
#: Distinct simulated minutes per link; the covered minutes reuse them cyclically (simulating
#: and formatting 15,000 histograms takes ~2 s a minute, which would dominate the suite).
SIMULATED_MINUTES = 4
#: Minute the cached pool is simulated at (a weekday afternoon in UTC; any minute would do).
POOL_FIRST_MINUTE = 28_600_000 + 14 * 60


@dataclass(frozen=True)
class WireMessage:
    destination: str
    headers: dict[str, str]
    body: bytes
    datapoints: int


@dataclass(frozen=True)
class MinuteData:
    """One simulated minute: every link's histogram as JSON bytes (None: all lost) and loss."""

    minute: int
    histograms: list[bytes | None]
    loss: list[float]


@dataclass(frozen=True)
class Corpus:
    messages: list[WireMessage]
    links: int
    minutes: range
    mean_buckets: float

    @property
    def datapoints(self) -> int:
        return sum(m.datapoints for m in self.messages)

    @property
    def body_bytes(self) -> int:
        return sum(len(m.body) for m in self.messages)


def sites_for(n_links: int) -> int:
    """The smallest full mesh with at least `n_links` directed links."""
    return max(2, math.ceil((1 + math.sqrt(1 + 4 * n_links)) / 2))


@lru_cache(maxsize=4)
def mesh_for(n_links: int, seed: int = SEED) -> Mesh:
    return build_mesh(sites_for(n_links), seed)


def simulated_pool(
    n_links: int, count: int, cache_dir: Path | None, seed: int = SEED, workers: int = 2
) -> list[MinuteData]:
    """`count` simulated minutes of `n_links` links, cached in `cache_dir` between runs.

    The pool's minute numbers are arbitrary; callers relabel them to the minutes they cover.
    """
    path = None if cache_dir is None else cache_dir / f"minutes-{n_links}-{count}-{seed}.pickle"
    if path is not None and path.exists():
        return pickle.loads(path.read_bytes())
    pool = simulate_minutes(
        n_links, range(POOL_FIRST_MINUTE, POOL_FIRST_MINUTE + count), seed, workers
    )
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(pool, protocol=pickle.HIGHEST_PROTOCOL))
    return pool


def simulate_minutes(
    n_links: int, minutes: range, seed: int = SEED, workers: int = 2
) -> list[MinuteData]:
    """Histograms and loss of every link for each minute, simulated on `workers` processes."""
    tasks = [(n_links, minute, seed) for minute in minutes]
    if workers <= 1 or len(tasks) == 1:
        return [_simulate_minute_task(task) for task in tasks]
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        return pool.map(_simulate_minute_task, tasks, chunksize=1)


def _simulate_minute_task(task: tuple[int, int, int]) -> MinuteData:
    n_links, minute, seed = task
    mesh = mesh_for(n_links, seed)
    utilisation = simulate_utilisation(mesh, minute, 1, seed)[:, 0]
    measured = simulate_minute(mesh, utilisation, minute, seed)
    histograms = [
        orjson.dumps(h) if (h := measured.histogram(link)) else None for link in range(n_links)
    ]
    return MinuteData(minute, histograms, measured.loss[:n_links].tolist())


def build_ingest_corpus(
    n_messages: int, n_links: int, now: float, cache_dir: Path | None = None, seed: int = SEED
) -> Corpus:
    """Exactly `n_messages` delay and loss messages over `n_links` links, 1-3 datapoints each.

    Every link covers the same recent minutes (ending two minutes before `now`, so the whole
    corpus stays inside the service's 32-minute window for a quarter of an hour), split into
    chunks of 1-3 consecutive minutes per message. Messages are ordered by their newest minute,
    links shuffled within a minute, as a collector mesh would deliver them. Minute k carries the
    histograms simulated for minute k mod SIMULATED_MINUTES of the covered range.
    """
    per_link = math.ceil(n_messages / n_links) + 1
    last = int(now // 60) - 2
    minutes = range(last - per_link + 1, last + 1)
    pool = simulated_pool(n_links, min(SIMULATED_MINUTES, len(minutes)), cache_dir, seed)
    data = [_relabel(pool[i % len(pool)], minute) for i, minute in enumerate(minutes)]
    rng = np.random.default_rng(seed)
    keyed = [m for link in range(n_links) for m in _link_messages(n_links, link, data, rng, seed)]
    keep = np.sort(rng.choice(len(keyed), size=min(n_messages, len(keyed)), replace=False))
    chosen = [keyed[i] for i in keep]
    chosen.sort(key=lambda item: item[0])
    return Corpus([m for _, m in chosen], n_links, minutes, _mean_buckets(data))


def _fragment(data: bytes) -> Any:
    """Pre-serialised JSON that orjson embeds as is."""
    return orjson.Fragment(data)  # type: ignore[attr-defined]


def _relabel(data: MinuteData, minute: int) -> MinuteData:
    return MinuteData(minute, data.histograms, data.loss)


def _link_messages(
    n_links: int, link: int, data: list[MinuteData], rng: np.random.Generator, seed: int
) -> list[tuple[tuple[int, float], WireMessage]]:
    mesh = mesh_for(n_links, seed)
    out = []
    for chunk in _chunks(len(data), rng):
        minutes = [data[i] for i in chunk]
        order = (minutes[-1].minute, float(rng.random()))
        delay = {d.minute * 60: _fragment(h) for d in minutes if (h := d.histograms[link])}
        if delay:
            out.append((order, _wire(build_delay_message(mesh, link, delay), len(delay))))
        loss = {d.minute * 60: d.loss[link] for d in minutes}
        out.append((order, _wire(build_loss_message(mesh, link, loss), len(loss))))
    return out


def _chunks(n: int, rng: np.random.Generator) -> list[list[int]]:
    """0..n-1 cut into consecutive runs of 1 to MAX_DATAPOINTS_PER_MESSAGE."""
    chunks, start = [], 0
    while start < n:
        size = int(rng.integers(1, MAX_DATAPOINTS_PER_MESSAGE + 1))
        chunks.append(list(range(start, min(n, start + size))))
        start += size
    return chunks


def _wire(message: tuple[dict[str, str], dict[str, Any]], datapoints: int) -> WireMessage:
    headers, body = message
    headers = headers | {"persistent": "true"}
    return WireMessage(headers["destination"], headers, orjson.dumps(body), datapoints)


def _mean_buckets(data: list[MinuteData]) -> float:
    counts = [len(orjson.loads(h)) for d in data[:2] for h in d.histograms[:2000] if h]
    return float(np.mean(counts)) if counts else 0.0


def build_live_message(
    n_links: int, link: int, minute: MinuteData, ts: int, delay: bool, seed: int = SEED
) -> WireMessage:
    """A one-datapoint message of `link` at `ts` with the histogram/loss of `minute`."""
    mesh = mesh_for(n_links, seed)
    histogram = minute.histograms[link]
    if delay and histogram is not None:
        return _wire(build_delay_message(mesh, link, {ts: _fragment(histogram)}), 1)
    return _wire(build_loss_message(mesh, link, {ts: minute.loss[link]}), 1)


def build_marker_message(source: str, destination: str, ts: int, loss: float) -> WireMessage:
    """A packet-loss-rate message for a link no mesh host uses (the freshness markers)."""
    meta = {
        "subject_type": "point-to-point",
        "source": source,
        "destination": destination,
        "input_source": f"marker-{source}.bench.invalid",
        "input_destination": f"marker-{destination}.bench.invalid",
        "measurement_agent": source,
        "tool_name": "powstream",
        "time_duration": "60",
        "ip_transport_protocol": "udp",
    }
    headers = {
        "destination": "/topic/perfsonar.raw.packet-loss-rate",
        "event-type": "packet-loss-rate",
        "ts_start": str(ts),
        "summaries": "0",
        "persistent": "true",
    }
    body = orjson.dumps({"meta": meta, "datapoints": {str(ts): loss}})
    return WireMessage(headers["destination"], headers, body, 1)
