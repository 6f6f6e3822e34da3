"""Simulator family B: fluid FIFO queues fed by self-similar traffic, with policers, shapers and
shared hops. Seeded, vectorised over links, no I/O; built on different assumptions than family A
(`simulation.simulator`, M/M/1/K) so that a model trained on one can be tested on the other.

It yields the same measurement interface as family A (`MinuteMeasurements`: 600 probe delays per
link and minute in 0.01 ms buckets, lost probes last) plus a per-minute utilisation label, so the
same dataset code (`training.dataset`) replays it through the service's ingest and analysis.

Hosts and geography
    Taken from `simulation.simulator.build_mesh` with a seed of its own (sites on the globe, base
    delay, jitter, background loss, two drifted clocks), renamed FLUID-nn (hosts
    ps-latency.fluidnn.example.net, 10.128.n.10). Only this way of drawing hosts and the paths'
    fixed delays is shared with family A; nothing that makes delay or loss respond to load is.

Traffic (`simulate_traffic`), offered load / capacity per 10-second slice (6 per minute)
    * Diurnal: ``base + amplitude * ((1 + cos(2 pi (local_hour - peak) / 24)) / 2) ** 2``, a
      sharper day than family A's plain cosine.
    * Self-similar aggregate: ON_OFF_SOURCES on/off sources per link whose on and off periods are
      Pareto with tail index alpha in [1.2, 1.6] (mean on 1 min, mean off 3 min). Aggregating
      heavy-tailed on/off sources gives long-range dependent traffic with Hurst parameter
      H = (3 - alpha) / 2 (Taqqu, Willinger and Sherman 1997), 0.7 to 0.9 here.
    * Elephant transfers: Poisson arrivals (0.03-0.3 per hour, 1-2.5 on congestion-prone links),
      each taking a share 0.3-0.7 of the capacity for a Pareto(1.3) duration (>= 5 min, <= 6 h).

Link kinds (each link one of them)
    * plain (55 %): one FIFO queue at the link's capacity.
    * policed (15 %): a policer at rate P (0.72-0.95 of capacity) drops the share 1 - P/rho of
      every packet (probes too) when the offered load rho exceeds P, and queues nothing.
    * shaped (15 %): a token-bucket shaper at rate S (0.72-0.95) with a deep buffer (40-100 ms)
      and a bucket of 1-5 ms: the queue runs at rate S, a burst within the bucket waits nothing.
    * shared hop (15 %): the path also crosses its source site's uplink, whose load is cross
      traffic of its own (diurnal + on/off) plus 10-30 % of each of those links' carried
      traffic; a probe waits in both queues, and the label (the link's own counter) does not
      see the uplink's load.
    Buffers are shallow (2-10 ms) or deep (30-100 ms), half and half.

Utilisation label
    Carried traffic / capacity, averaged over the minute's slices: min(rho, 1) on plain and
    shared-hop links, min(rho, P) policed, min(rho, S) shaped. It never exceeds 1.

Queue (`queue_waits_ms`), per probe, given the slice's queue load rho_q
    * rho_q < 1: Norros's storage model of a fluid FIFO fed by fractional Brownian motion: the
      queue (in ms of service) exceeds x with probability
      ``rho_q * exp(-(1 - rho_q)^(2H) x^(2-2H) / (2 kappa(H)^2 a rho_q))``, with
      kappa(H) = H^H (1 - H)^(1 - H) and a the link's burstiness (0.02-0.3 ms,
      `BURSTINESS_MS`): a Weibull tail, not family A's geometric one. The factor rho_q is the
      busy probability of the queue. A probe that would wait longer than the buffer is dropped
      (tail drop).
    * rho_q >= 1: the buffer stays nearly full: a probe is lost with the fluid overflow share
      1 - 1/rho_q and otherwise waits 90-100 % of the buffer.
    A probe's delay is base + clock offset + exponential jitter + its waits, bucketed to
    0.01 ms; it is lost to tail drop, overflow, the policer or background loss.

Determinism: the traffic of a (start, length) range and each minute's probes are fixed by the
seed (generators keyed by (seed, stream, index)).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass, replace

import numpy as np

from simulation.defaults import DEFAULT_SITES
from simulation.simulator import (
    BUCKETS_PER_MS,
    PACKETS_PER_MINUTE,
    Mesh,
    MinuteMeasurements,
    build_mesh,
)

SLICES_PER_MINUTE = 6
KINDS = ("plain", "policed", "shaped", "shared_hop")
KIND_SHARES = (0.55, 0.15, 0.15, 0.15)
SHALLOW_BUFFER_MS = (2.0, 10.0)
DEEP_BUFFER_MS = (30.0, 100.0)
SHAPER_BUFFER_MS = (40.0, 100.0)
SHAPER_BUCKET_MS = (1.0, 5.0)
LIMITER_RATE = (0.72, 0.95)
BURSTINESS_MS = (0.02, 0.3)
TAIL_INDEX = (1.2, 1.6)
ON_OFF_SOURCES = 16
MEAN_ON_SLICES = 6.0
MEAN_OFF_SLICES = 18.0
ON_OFF_LOAD = (0.03, 0.15)
BASE_LOAD = (0.05, 0.25)
DIURNAL_AMPLITUDE = (0.05, 0.35)
PEAK_LOCAL_HOUR = (11.0, 16.0)
ELEPHANTS_PER_HOUR = ((0.03, 0.3), (1.0, 2.5))
ELEPHANT_SHARE = (0.3, 0.7)
ELEPHANT_TAIL_INDEX = 1.3
ELEPHANT_MINUTES = (5.0, 360.0)
HOP_CROSS_LOAD = (0.1, 0.35)
HOP_SHARE = (0.1, 0.3)
CONGESTION_PRONE_SHARE = 0.05
MAX_OFFERED = 1.25
OVERLOAD_FILL = (0.9, 1.0)
RHO_MIN = 1e-6

_STREAM_MESH, _STREAM_LINKS, _STREAM_TRAFFIC, _STREAM_PROBES = 100, 101, 102, 103


@dataclass(frozen=True, eq=False)
class FluidMesh:
    """Family A's hosts and paths (`hosts`) with family B's queues, one entry per link.

    Rates and buffers are relative to the link's capacity (rate 1 = line rate) and in ms of
    service at that rate; `limiter_rate` is P for policed, S for shaped links and 1 otherwise.
    `hop` numbers each shared-hop link's uplink (its source site), -1 for the others.
    """

    hosts: Mesh
    kind: np.ndarray
    buffer_ms: np.ndarray
    burstiness_ms: np.ndarray
    hurst: np.ndarray
    limiter_rate: np.ndarray
    bucket_ms: np.ndarray
    hop: np.ndarray
    hop_share: np.ndarray
    hop_buffer_ms: np.ndarray
    hop_burstiness_ms: np.ndarray
    hop_hurst: np.ndarray
    congestion_prone: np.ndarray

    @property
    def n_links(self) -> int:
        return self.hosts.n_links

    def is_kind(self, name: str) -> np.ndarray:
        return np.asarray(self.kind == KINDS.index(name))


@dataclass(frozen=True, eq=False)
class FluidTraffic:
    """Per 10-s slice (links x minutes x SLICES_PER_MINUTE): offered load at each link, the
    queue load of the link's queue and of its uplink (0 without one)."""

    first_minute: int
    offered: np.ndarray
    queue_load: np.ndarray
    hop_load: np.ndarray
    carried: np.ndarray

    @property
    def utilisation(self) -> np.ndarray:
        """The label: carried traffic / capacity averaged over each minute (links x minutes)."""
        mean: np.ndarray = self.carried.mean(axis=2)
        return mean


def build_fluid_mesh(n_sites: int = DEFAULT_SITES, seed: int = 0) -> FluidMesh:
    """Hosts and paths as family A's mesh (own seed), with family B's queues and link kinds."""
    hosts = _renamed(build_mesh(n_sites, seed + 7_919))  # not family A's geography
    rng = _rng(seed, _STREAM_MESH)
    n = hosts.n_links
    kind = rng.choice(len(KINDS), n, p=KIND_SHARES)
    deep = rng.random(n) < 0.5
    buffer_ms = np.where(deep, rng.uniform(*DEEP_BUFFER_MS, n), rng.uniform(*SHALLOW_BUFFER_MS, n))
    shaped = kind == KINDS.index("shaped")
    limited = shaped | (kind == KINDS.index("policed"))
    n_sites_hops = len(hosts.site_names)
    hop_buffer = rng.uniform(*DEEP_BUFFER_MS, n_sites_hops)
    hop_burstiness = _log_uniform(rng, BURSTINESS_MS, n_sites_hops)
    hop_hurst = _hurst(rng, n_sites_hops)
    has_hop = kind == KINDS.index("shared_hop")
    prone = np.zeros(n, dtype=bool)
    prone[rng.choice(n, max(3, round(CONGESTION_PRONE_SHARE * n)), replace=False)] = True
    return FluidMesh(
        hosts=hosts,
        kind=kind,
        buffer_ms=np.where(shaped, rng.uniform(*SHAPER_BUFFER_MS, n), buffer_ms),
        burstiness_ms=_log_uniform(rng, BURSTINESS_MS, n),
        hurst=_hurst(rng, n),
        limiter_rate=np.where(limited, rng.uniform(*LIMITER_RATE, n), 1.0),
        bucket_ms=np.where(shaped, rng.uniform(*SHAPER_BUCKET_MS, n), 0.0),
        hop=np.where(has_hop, hosts.source, -1),
        hop_share=np.where(has_hop, rng.uniform(*HOP_SHARE, n), 0.0),
        hop_buffer_ms=hop_buffer,
        hop_burstiness_ms=hop_burstiness,
        hop_hurst=hop_hurst,
        congestion_prone=prone,
    )


def simulate_traffic(mesh: FluidMesh, first_minute: int, n_minutes: int, seed: int) -> FluidTraffic:
    """Offered, carried and queue loads of every link and uplink, slice by slice."""
    rng = _rng(seed, _STREAM_TRAFFIC, first_minute)
    n, slices = mesh.n_links, n_minutes * SLICES_PER_MINUTE
    times = first_minute + np.arange(slices) / SLICES_PER_MINUTE  # minutes
    longitude = mesh.hosts.longitude_deg
    offered = (
        _diurnal(rng, longitude[mesh.hosts.source], times)
        + on_off_load(rng, n, slices, mesh.hurst, rng.uniform(*ON_OFF_LOAD, n))
        + _elephants(rng, mesh.congestion_prone, slices)
    )
    offered = np.clip(offered, 0.0, MAX_OFFERED)
    rate = mesh.limiter_rate[:, None]
    carried = np.minimum(offered, rate)
    shaped = mesh.is_kind("shaped")[:, None]
    queue_load = np.where(shaped, offered / rate, carried)  # a policer forwards only <= P
    hop_load = _uplink_load(rng, mesh, carried, times)
    shape = (n, n_minutes, SLICES_PER_MINUTE)
    return FluidTraffic(
        first_minute,
        offered.reshape(shape),
        queue_load.reshape(shape),
        hop_load.reshape(shape),
        carried.reshape(shape),
    )


def on_off_load(
    rng: np.random.Generator, n_links: int, slices: int, hurst: np.ndarray, mean_load: np.ndarray
) -> np.ndarray:
    """Sum of ON_OFF_SOURCES Pareto on/off sources per link (links x slices), mean `mean_load`.

    Each source sends at a constant rate while on; on and off periods are Pareto with tail index
    alpha = 3 - 2H and means MEAN_ON_SLICES / MEAN_OFF_SLICES. Each source starts in a random
    phase, so the process is near stationary from the first slice.
    """
    alpha = np.repeat(3.0 - 2.0 * hurst, ON_OFF_SOURCES)  # one row per source
    sources = len(alpha)
    on_share = MEAN_ON_SLICES / (MEAN_ON_SLICES + MEAN_OFF_SLICES)
    periods = int(np.ceil(2 * slices / (MEAN_ON_SLICES + MEAN_OFF_SLICES))) + 8
    on = _pareto(rng, alpha[:, None], MEAN_ON_SLICES, (sources, periods))
    off = _pareto(rng, alpha[:, None], MEAN_OFF_SLICES, (sources, periods))
    phase = rng.uniform(0, MEAN_ON_SLICES + MEAN_OFF_SLICES, sources)
    starts = np.cumsum(on + off, axis=1) - (on + off) - phase[:, None]
    link = np.repeat(np.arange(n_links), ON_OFF_SOURCES)
    busy = _interval_coverage(starts, starts + on, slices, rows=link, n_rows=n_links)
    return busy / (ON_OFF_SOURCES * on_share) * mean_load[:, None]


def _interval_coverage(
    starts: np.ndarray,
    ends: np.ndarray,
    slices: int,
    rows: np.ndarray | None = None,
    n_rows: int | None = None,
    weights: np.ndarray | None = None,
) -> np.ndarray:
    """Time each unit slice 0..slices-1 spends inside the rows' intervals [start, end), summed
    over each row's intervals (rows x slices). Row r of `starts` adds to output row `rows[r]`
    (default r) of `n_rows` (default len(starts)), times `weights[r]` (default 1).

    The coverage of slice k is F(k + 1) - F(k), F the covered length up to t; each bound b adds a
    ramp to F, i.e. (1 - frac(b)) then frac(b) to the second difference, summed with bincount.

    >>> _interval_coverage(np.array([[0.5]]), np.array([[2.0]]), 3).tolist()
    [[0.5, 1.0, 0.0]]
    """
    width = slices + 3
    n_rows = len(starts) if n_rows is None else n_rows
    target = np.arange(len(starts)) if rows is None else rows
    offsets = np.broadcast_to(target[:, None] * width, starts.shape)
    scale = np.broadcast_to(
        (np.ones(len(starts)) if weights is None else weights)[:, None], starts.shape
    )
    index, weight = [], []
    for bound, sign in ((starts, 1.0), (ends, -1.0)):
        clipped = np.clip(bound, 0, slices)
        cell = np.floor(clipped).astype(np.int64)
        frac = clipped - cell
        index += [(offsets + cell + 1).ravel(), (offsets + cell + 2).ravel()]
        weight += [(scale * sign * (1.0 - frac)).ravel(), (scale * sign * frac).ravel()]
    second = np.bincount(np.concatenate(index), np.concatenate(weight), minlength=n_rows * width)
    first = np.cumsum(second.reshape(n_rows, width), axis=1)
    result: np.ndarray = np.maximum(first[:, 1 : slices + 1], 0.0)  # cancel rounding below 0
    return result


def queue_waits_ms(
    rng: np.random.Generator,
    load: np.ndarray,
    buffer_ms: np.ndarray,
    burstiness_ms: np.ndarray,
    hurst: np.ndarray,
    probes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Waits (ms) of `probes` probes per queue state and whether each was dropped.

    The arguments broadcast to one shape S of queue states (e.g. links x slices x 1); the result
    is S with its last axis widened to `probes`. Below capacity a probe waits longer than x with
    probability rho exp(-(1-rho)^(2H) x^(2-2H) / (2 kappa^2 a rho)) (Norros), and one that would
    wait beyond the buffer is dropped; at or above capacity it is dropped with probability
    1 - 1/rho and otherwise waits 90-100 % of the buffer.
    """
    rho, buffer, a, h = np.broadcast_arrays(
        np.maximum(load, RHO_MIN), buffer_ms, burstiness_ms, hurst
    )
    overloaded = rho >= 1.0
    under = np.where(overloaded, 0.5, rho)
    # per queue state: wait = exp(exponent * (log(-log(u / rho)) + log_scale)) when u < rho
    exponent = 1.0 / (2.0 - 2.0 * h)
    log_scale = np.log(2.0 * kappa(h) ** 2 * a * under) - 2.0 * h * np.log1p(-under)
    u = rng.random((*rho.shape[:-1], probes))
    queued = u < under
    with np.errstate(divide="ignore", invalid="ignore"):
        tail = np.log(-np.log(np.where(queued, u / under, 0.5)))
    wait = np.where(queued, np.exp(exponent * (tail + log_scale)), 0.0)
    dropped = ~overloaded & (wait > buffer)
    wait = np.minimum(wait, buffer)
    if overloaded.any():
        fill = OVERLOAD_FILL[0] + (OVERLOAD_FILL[1] - OVERLOAD_FILL[0]) * rng.random(u.shape)
        wait = np.where(overloaded, buffer * fill, wait)
        dropped |= overloaded & (u < 1.0 - 1.0 / rho)
    return wait, dropped


def norros_exceedance(
    load: np.ndarray, x_ms: np.ndarray, burstiness_ms: np.ndarray, hurst: np.ndarray
) -> np.ndarray:
    """P(wait > x) below capacity: rho exp(-(1-rho)^(2H) x^(2-2H) / (2 kappa(H)^2 a rho)).

    >>> float(norros_exceedance(np.array(0.5), np.array(0.0), np.array(1.0), np.array(0.75)))
    0.5
    """
    rho = np.asarray(load, dtype=float)
    exponent = (1 - rho) ** (2 * hurst) * x_ms ** (2 - 2 * hurst) / (2 * kappa(hurst) ** 2)
    result: np.ndarray = rho * np.exp(-exponent / (burstiness_ms * rho))
    return result


def kappa(hurst: np.ndarray) -> np.ndarray:
    """kappa(H) = H^H (1 - H)^(1 - H) of Norros's formula."""
    h = np.asarray(hurst, dtype=float)
    result: np.ndarray = h**h * (1 - h) ** (1 - h)
    return result


def policer_drop_probability(offered: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Share of packets a policer at `rate` drops at offered load `offered`: 1 - rate / offered
    above the rate, else 0.

    >>> policer_drop_probability(np.array([0.5, 1.0, 1.6]), np.array(0.8)).round(3).tolist()
    [0.0, 0.2, 0.5]
    """
    offered = np.asarray(offered, dtype=float)
    result: np.ndarray = np.where(offered > rate, 1.0 - rate / np.maximum(offered, RHO_MIN), 0.0)
    return result


def simulate_fluid_minute(
    mesh: FluidMesh,
    traffic: FluidTraffic,
    minute: int,
    seed: int,
    packets: int = PACKETS_PER_MINUTE,
) -> MinuteMeasurements:
    """Probe results of every link in epoch `minute` (one of `traffic`'s minutes)."""
    column = minute - traffic.first_minute
    rng = _rng(seed, _STREAM_PROBES, minute)
    if packets % SLICES_PER_MINUTE:
        raise ValueError(f"packets per minute must be a multiple of {SLICES_PER_MINUTE}")
    per_slice = packets // SLICES_PER_MINUTE
    n = mesh.n_links

    def per_link(values: np.ndarray) -> np.ndarray:
        return values[:, None, None]

    waits, dropped = queue_waits_ms(
        rng,
        traffic.queue_load[:, column, :, None],
        per_link(mesh.buffer_ms),
        per_link(mesh.burstiness_ms),
        per_link(mesh.hurst),
        per_slice,
    )
    waits = np.maximum(waits - per_link(mesh.bucket_ms), 0.0)
    on_hop = np.flatnonzero(mesh.hop >= 0)
    hop = mesh.hop[on_hop]
    hop_waits, hop_dropped = queue_waits_ms(
        rng,
        traffic.hop_load[on_hop, column, :, None],
        per_link(mesh.hop_buffer_ms[hop]),
        per_link(mesh.hop_burstiness_ms[hop]),
        per_link(mesh.hop_hurst[hop]),
        per_slice,
    )
    waits[on_hop] += hop_waits
    dropped[on_hop] |= hop_dropped
    policer = policer_drop_probability(
        traffic.offered[:, column, :, None], per_link(mesh.limiter_rate)
    )
    kept = (1.0 - policer) * (1.0 - per_link(mesh.hosts.background_loss))
    lost = (dropped | (rng.random(waits.shape) >= kept)).reshape(n, packets)
    waits = waits.reshape(n, packets)
    jitter = rng.standard_exponential((n, packets)) * mesh.hosts.jitter_ms[:, None]
    fixed = (mesh.hosts.base_delay_ms + mesh.hosts.clock_offset_ms)[:, None]
    delays = fixed + jitter + waits
    buckets = np.rint(delays * BUCKETS_PER_MS).astype(np.int32)
    order = np.argsort(lost, axis=1, kind="stable")  # delivered probes first, as family A
    buckets = np.take_along_axis(buckets, order, axis=1)
    return MinuteMeasurements(minute, buckets, packets - lost.sum(axis=1), packets)


def simulate_fluid_minutes(
    mesh: FluidMesh,
    traffic: FluidTraffic,
    seed: int,
    first_minute: int | None = None,
    packets: int = PACKETS_PER_MINUTE,
) -> Iterator[MinuteMeasurements]:
    """Measurements of each minute of `traffic` from `first_minute` (default its first) on."""
    end = traffic.first_minute + traffic.offered.shape[1]
    start = traffic.first_minute if first_minute is None else first_minute
    for minute in range(start, end):
        yield simulate_fluid_minute(mesh, traffic, minute, seed, packets)


def _renamed(mesh: Mesh) -> Mesh:
    """Family B's own site names, host names and addresses (10.128.x.10), so that links of the
    two families never share a name in a mixed dataset."""
    sites = range(1, len(mesh.site_names) + 1)
    return replace(
        mesh,
        site_names=tuple(f"FLUID-{i:02d}" for i in sites),
        host_names=tuple(f"ps-latency.fluid{i:02d}.example.net" for i in sites),
        host_ips=tuple(str(ipaddress.IPv4Address(0x0A800000 + (i << 8) + 10)) for i in sites),
    )


def _diurnal(rng: np.random.Generator, longitude: np.ndarray, times: np.ndarray) -> np.ndarray:
    n = len(longitude)
    base = rng.uniform(*BASE_LOAD, n)[:, None]
    amplitude = rng.uniform(*DIURNAL_AMPLITUDE, n)[:, None]
    peak = rng.uniform(*PEAK_LOCAL_HOUR, n)[:, None]
    local_hour = times / 60 + longitude[:, None] / 15
    day = ((1 + np.cos(2 * np.pi * (local_hour - peak) / 24)) / 2) ** 2
    result: np.ndarray = base + amplitude * day
    return result


def _elephants(rng: np.random.Generator, prone: np.ndarray, slices: int) -> np.ndarray:
    """Elephant transfers' load (links x slices): Poisson arrivals, Pareto durations."""
    kind = prone.astype(int)
    low, high = np.array(ELEPHANTS_PER_HOUR)[kind].T
    per_slice = rng.uniform(low, high) / (60 * SLICES_PER_MINUTE)
    counts = rng.poisson(per_slice * (slices + ELEPHANT_MINUTES[1] * SLICES_PER_MINUTE))
    links = np.repeat(np.arange(len(prone)), counts)
    total = len(links)
    lead = ELEPHANT_MINUTES[1] * SLICES_PER_MINUTE  # transfers that began before the range
    start = rng.uniform(-lead, slices, total)
    minutes = np.minimum(
        ELEPHANT_MINUTES[0] * (1 + rng.pareto(ELEPHANT_TAIL_INDEX, total)), ELEPHANT_MINUTES[1]
    )
    end = start + minutes * SLICES_PER_MINUTE
    share = rng.uniform(*ELEPHANT_SHARE, total)
    return _interval_coverage(
        start[:, None], end[:, None], slices, rows=links, n_rows=len(prone), weights=share
    )


def _uplink_load(
    rng: np.random.Generator, mesh: FluidMesh, carried: np.ndarray, times: np.ndarray
) -> np.ndarray:
    """Each link's uplink load (0 without one): cross traffic plus its links' carried shares."""
    n_sites = len(mesh.hosts.site_names)
    slices = carried.shape[1]
    cross = _diurnal(rng, mesh.hosts.longitude_deg, times) * rng.uniform(*HOP_CROSS_LOAD, n_sites)[
        :, None
    ] / 0.35 + on_off_load(rng, n_sites, slices, mesh.hop_hurst, rng.uniform(*ON_OFF_LOAD, n_sites))
    on_hop = mesh.hop >= 0
    uplink = cross.copy()
    np.add.at(uplink, mesh.hop[on_hop], carried[on_hop] * mesh.hop_share[on_hop, None])
    return np.where(on_hop[:, None], uplink[np.maximum(mesh.hop, 0)], 0.0)


def _pareto(
    rng: np.random.Generator, alpha: np.ndarray, mean: float, shape: tuple[int, int]
) -> np.ndarray:
    """Pareto samples with tail index `alpha` and the given mean (scale mean (alpha-1)/alpha)."""
    scale = mean * (alpha - 1) / alpha
    result: np.ndarray = scale * (1 + rng.pareto(np.broadcast_to(alpha, shape)))
    return result


def _hurst(rng: np.random.Generator, n: int) -> np.ndarray:
    result: np.ndarray = (3.0 - rng.uniform(*TAIL_INDEX, n)) / 2.0
    return result


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float], size: int) -> np.ndarray:
    result: np.ndarray = np.exp(rng.uniform(np.log(bounds[0]), np.log(bounds[1]), size))
    return result


def _rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, stream, index % 2**64])
