"""Link state with every link's 32-minute buffer full, built directly with numpy.

The index is filled through its API (`LinkIndex.row_for`), as ingest would: IP strings are shared
per host (the parser's IP cache does that) and every link holds its own host-name strings (each
parsed message brings new ones). The buffers get plausible values: per-link base delay 1-150 ms
with sub-millisecond jitter, a few links congested, loss mostly zero, a long archived history.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import numpy as np

from benchmarks.support.corpus import sites_for
from service.parse.records import LinkEndpoints
from service.persistence.snapshot_codec import encode_state
from service.persistence.snapshot_store import SnapshotStore
from service.state.link_buffers import WINDOW_MINUTES, LinkBuffers
from service.state.link_index import LinkIndex
from service.state.link_state import LinkState

SEED = 11


def build_full_state(n_links: int, now: float, seed: int = SEED) -> LinkState:
    """A LinkState grown as ingest grows it (doubling), holding `n_links` full links."""
    state = LinkState()
    fill_index(state.index, n_links)
    for row in range(n_links):  # one row at a time, as ingest adds links
        state.ensure_row(row)
    fill_buffers(state.buffers, n_links, int(now // 60) - 1, np.random.default_rng(seed))
    return state


def write_snapshot(directory: Path, n_links: int, now: float, seed: int = SEED) -> int:
    """A `nettel serve --state-dir` snapshot of `n_links` full links; returns its size."""
    data = encode_state(build_full_state(n_links, now, seed))
    SnapshotStore(directory).write(data)
    return len(data)


def link_endpoints(n_links: int) -> list[tuple[str, str]]:
    """(source IP, destination IP) of the first `n_links` links of a full mesh."""
    ips = [host_ip(i) for i in range(sites_for(n_links))]
    return [(s, d) for s in ips for d in ips if s != d][:n_links]


def host_ip(host: int) -> str:
    return str(ipaddress.IPv4Address(0x0A000000 + ((host + 1) << 8) + 10))


def fill_index(index: LinkIndex, n_links: int) -> None:
    for source, destination in link_endpoints(n_links):
        index.row_for(
            LinkEndpoints(source, destination, _host_name(source), _host_name(destination))
        )


def _host_name(ip: str) -> str:
    """A fresh string object per call, like a JSON parser produces for every message."""
    _, b, c, _ = ip.split(".")
    return f"ps-latency.site{int(b) * 256 + int(c):04d}.example.org"


def fill_buffers(
    buffers: LinkBuffers, n: int, latest_minute: int, rng: np.random.Generator
) -> None:
    minutes = np.arange(latest_minute - WINDOW_MINUTES + 1, latest_minute + 1)
    buffers.slot_minute[:n, minutes % WINDOW_MINUTES] = minutes
    base = rng.uniform(1.0, 150.0, n).astype(np.float32)[:, None]
    jitter = rng.uniform(0.05, 0.4, n).astype(np.float32)[:, None]
    columns = _minute_series(rng, base, jitter, _queueing_ms(rng, n))
    for name, values in columns.items():
        buffers.series[name][:n] = values
    _fill_archive(buffers, n, base[:, 0], jitter[:, 0], rng)
    buffers.latest_delay_minute[:n] = latest_minute
    buffers.latest_p95[:n] = columns["delay_mean"][:, -1] + 2 * jitter[:, 0]
    buffers.latest_minute[:n] = latest_minute
    suspect = rng.random(n) < 0.01
    buffers.clock_suspect_minute[:n] = np.where(suspect, latest_minute - 3, -1)


def _minute_series(
    rng: np.random.Generator, base: np.ndarray, jitter: np.ndarray, queue: np.ndarray
) -> dict[str, np.ndarray]:
    """The window's columns for minutes of `queue`'s shape (links first), from each link's base
    delay and jitter (broadcast to it) and the queueing delay of each minute."""
    mean = base + jitter + queue
    return {
        "delay_mean": mean,
        "delay_median": mean - 0.3 * jitter,
        "delay_std": jitter * rng.uniform(0.8, 3.0, queue.shape).astype(np.float32),
        "delay_min": np.broadcast_to(base, queue.shape),
        "loss": _loss(rng, queue.shape[0], queue),
    }


def _queueing_ms(rng: np.random.Generator, n: int) -> np.ndarray:
    """Mostly idle links; ~5 % with queueing delay of a few ms that varies minute to minute."""
    busy = (rng.random(n) < 0.05)[:, None]
    return (busy * rng.exponential(3.0, (n, WINDOW_MINUTES))).astype(np.float32)


def _loss(rng: np.random.Generator, n: int, queue: np.ndarray) -> np.ndarray:
    lost_packets = rng.poisson(0.05 + queue * 2.0)
    return (lost_packets / 600.0).astype(np.float32)


def _fill_archive(
    buffers: LinkBuffers, n: int, base: np.ndarray, jitter: np.ndarray, rng: np.random.Generator
) -> None:
    count = rng.integers(500, 20_000, n).astype(np.float64)
    archive = buffers.archive
    archive["delay_n"][:n] = count
    archive["delay_mean"][:n] = base + jitter + 0.2
    archive["delay_m2"][:n] = (jitter * 2.0) ** 2 * count
    archive["delay_min"][:n] = base
    archive["loss_n"][:n] = count
    archive["loss_mean"][:n] = rng.uniform(0.0, 2e-4, n)
    archive["loss_m2"][:n] = rng.uniform(0.0, 1e-6, n) * count


def advance_minute(buffers: LinkBuffers, n: int, minute: int, rng: np.random.Generator) -> None:
    """Write `minute` (the one after the newest) into every link's window, drawn from the same
    model as `fill_buffers`: each link's base delay kept, jitter, queueing and loss redrawn. The
    minute it replaces is not folded into the archive (all-time moments stay as they were)."""
    slot = minute % WINDOW_MINUTES
    base = buffers.series["delay_min"][:n, (slot - 1) % WINDOW_MINUTES]
    jitter = rng.uniform(0.05, 0.4, n).astype(np.float32)
    columns = _minute_series(rng, base, jitter, _queueing_ms(rng, n)[:, 0])
    buffers.slot_minute[:n, slot] = minute
    for name, values in columns.items():
        buffers.series[name][:n, slot] = values
    buffers.latest_delay_minute[:n] = minute
    buffers.latest_p95[:n] = columns["delay_mean"] + 2 * jitter
    buffers.latest_minute[:n] = minute
