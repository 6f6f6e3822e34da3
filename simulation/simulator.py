"""A seeded perfSONAR mesh: link utilisation and the one-way delay and loss it causes, per minute.

Pure functions over numpy arrays (one entry per directed link); no I/O. The physics:

Mesh (`build_mesh`)
    Sites sit at random points on the globe. Base one-way delay of link i -> j is
    ``HOST_DELAY_MS + great_circle_km(i, j) * route_factor / FIBRE_KM_PER_MS`` (route factor
    1.2-1.45 per direction, light in fibre 200 km/ms), so 1 to ~146 ms. Each link has exponential
    jitter of mean 0.05-0.4 ms, a capacity of 10 or 100 Gb/s, a router buffer holding 20-80 ms of
    queue, a burst service time of 0.2-0.6 ms and a per-packet background loss of 1e-5 to 3e-4.
    Two hosts have drifted clocks: a host whose clock runs d ms behind makes every link into it
    read d ms short and every link out of it d ms long; d exceeds the base delay of the host's
    nearest incoming link by 2-30 ms, so some measured delays are negative (never below -1000 ms).
    About 2 % of the links (at least 3) are congestion prone.

Utilisation (`simulate_utilisation`), offered load / capacity, clipped to [0, 1.3]
    ``base + amplitude * (1 + cos(2 pi (local_hour - peak_hour) / 24)) / 2`` with the local hour
    taken from the source site's longitude, plus short bursts (+0.1-0.4 for 1-5 minutes), plus
    Gaussian noise (sd 0.02); bulk transfers lift a link to a level of 0.7-1.05 (0.8-1.2 when
    congestion prone) for an exponential duration (mean 30 min, 75 when prone, at most 4 h).
    Every random draw comes from a generator keyed by (seed, stream, hour block), so the value of
    a (link, minute) depends only on the mesh, the seed and the minute.

One minute of measurements (`simulate_minute`): each link is an M/M/1/K queue
    with load rho = utilisation, service time s and K = buffer_ms / s places. A probe packet finds
    n packets queued, n truncated-geometric on 0..K-1 with ratio rho, and waits Erlang(n, s),
    capped at the buffer: mean wait grows like s * rho / (1 - rho) and climbs steeply above 80 %,
    and once rho >= 1 the queue sits near the buffer bound. A packet is dropped with the M/M/1/K
    blocking probability ``(1 - rho) rho^K / (1 - rho^(K+1))`` (-> 1 - 1/rho, the overflow share,
    above capacity) or by background loss. Delay = base + clock offset + jitter + wait, bucketed
    to 0.01 ms; lost packets are absent from the histogram.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from simulation.defaults import DEFAULT_SITES

FIBRE_KM_PER_MS = 200.0
EARTH_RADIUS_KM = 6371.0
HOST_DELAY_MS = 1.0
ROUTE_FACTOR = (1.2, 1.45)
JITTER_MS = (0.05, 0.4)
CAPACITIES_BPS = (10e9, 100e9)
CAPACITY_SHARES = (0.8, 0.2)
BUFFER_MS = (20.0, 80.0)
SERVICE_MS = (0.2, 0.6)
BACKGROUND_LOSS = (1e-5, 3e-4)
DRIFTED_HOSTS = 2
CLOCK_MARGIN_MS = (2.0, 30.0)
CONGESTION_PRONE_SHARE = 0.02
MIN_CONGESTION_PRONE = 3

BASE_LOAD = (0.05, 0.30)
DIURNAL_AMPLITUDE = (0.05, 0.30)
PEAK_LOCAL_HOUR = (13.0, 17.0)
NOISE_SD = 0.02
BURST_SLOTS = 2
BURST_PROBABILITY = 0.2
BURST_MINUTES = (1, 5)
BURST_HEIGHT = (0.1, 0.4)
BULK_PROBABILITY = (0.03, 0.25)
BULK_MEAN_MINUTES = (30.0, 75.0)
BULK_MAX_HOURS = 4
BULK_LEVEL = ((0.7, 1.05), (0.8, 1.2))
MAX_UTILISATION = 1.3
#: Minutes from an hour block's first minute within which its events (bursts, bulk transfers
#: and noise) can be active: they start in its 60 minutes and last at most this much more.
_HOUR_REACH_MINUTES = 60 + max(BURST_MINUTES[1], BULK_MAX_HOURS * 60)

PACKETS_PER_MINUTE = 600
BUCKETS_PER_MS = 100
RHO_MIN = 1e-9

_STREAM_MESH, _STREAM_PROFILE, _STREAM_HOUR, _STREAM_PACKETS = range(4)


@dataclass(frozen=True, eq=False)
class Mesh:
    """Hosts (one per site) and every directed link between them, as arrays over links.

    Host arrays (names, IPs, coordinates) are indexed by site; `source` and `destination` map each
    link to its hosts. Units are in the names (ms, bits/s); `clock_offset_ms` is what the two
    hosts' clock disagreement adds to every measured delay of the link.
    """

    site_names: tuple[str, ...]
    host_names: tuple[str, ...]
    host_ips: tuple[str, ...]
    latitude_deg: np.ndarray
    longitude_deg: np.ndarray
    source: np.ndarray
    destination: np.ndarray
    base_delay_ms: np.ndarray
    jitter_ms: np.ndarray
    capacity_bps: np.ndarray
    buffer_ms: np.ndarray
    service_ms: np.ndarray
    background_loss: np.ndarray
    clock_offset_ms: np.ndarray
    congestion_prone: np.ndarray

    @property
    def n_links(self) -> int:
        return len(self.source)

    @property
    def queue_places(self) -> np.ndarray:
        """K of the M/M/1/K queue: how many bursts the buffer holds."""
        return np.maximum(1, np.rint(self.buffer_ms / self.service_ms)).astype(np.int64)


@dataclass(frozen=True, eq=False)
class MinuteMeasurements:
    """One minute of probe results on every link (delays in 0.01 ms buckets, links x packets).

    Link i delivered its first `received[i]` packets; the buckets after those belong to lost ones.
    """

    minute: int
    buckets: np.ndarray
    received: np.ndarray
    packets: int

    @property
    def timestamp(self) -> int:
        return self.minute * 60

    @property
    def loss(self) -> np.ndarray:
        return (self.packets - self.received) / self.packets

    @property
    def delays_ms(self) -> np.ndarray:
        """Delays of all probe packets (links x packets), NaN where the packet was lost."""
        return np.where(self._delivered, self.buckets / BUCKETS_PER_MS, np.nan)

    @property
    def _delivered(self) -> np.ndarray:
        """Links x packets: whether the packet was delivered."""
        return np.arange(self.packets) < self.received[:, None]

    def histogram(self, link: int) -> dict[str, int]:
        """The perfSONAR histogram of `link`: delay in ms as a 2-decimal string -> packet count,
        in ascending order of delay.

        >>> m = MinuteMeasurements(0, np.array([[257, -3, 257], [5, 5, 9]]), np.array([3, 1]), 3)
        >>> m.histogram(0), m.histogram(1)
        ({'-0.03': 1, '2.57': 2}, {'0.05': 1})
        """
        keys, counts, bounds = self._runs
        low, high = bounds[link], bounds[link + 1]
        return dict(zip(keys[low:high], counts[low:high], strict=True))

    @cached_property
    def _sorted_buckets(self) -> np.ndarray:
        """Each link's buckets in ascending order, delivered packets first: the buckets of lost
        packets are replaced by the largest value of the dtype."""
        lost = np.iinfo(self.buckets.dtype).max
        return np.sort(np.where(self._delivered, self.buckets, lost), axis=1)

    @cached_property
    def _runs(self) -> tuple[list[str], list[int], list[int]]:
        """Every link's histogram, from one sort of the minute: the runs of one value in each
        link's sorted delivered buckets, link after link (their keys and packet counts), and
        where each link's runs begin (the last entry: where they end)."""
        ordered = self._sorted_buckets
        n_links, packets = ordered.shape
        starts = self._delivered
        starts[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
        first = np.flatnonzero(starts)  # each run's first packet, row after row
        row = first // packets
        following = np.append(first[1:], n_links * packets)
        counts = np.minimum(following, row * packets + self.received[row]) - first
        bounds = np.concatenate([[0], np.cumsum(starts.sum(axis=1))])
        return _bucket_keys(ordered.ravel()[first]), counts.tolist(), bounds.tolist()

    def coarsened(self, links: np.ndarray, buckets_per_bucket: int) -> MinuteMeasurements:
        """The same minute with the delays of `links` (a mask) floored to buckets
        `buckets_per_bucket` times wider (10: perfSONAR 5's 0.1 ms buckets).

        >>> m = MinuteMeasurements(0, np.array([[257, -3], [257, 1234]]), np.array([2, 2]), 2)
        >>> m.coarsened(np.array([True, False]), 10).buckets.tolist()
        [[250, -10], [257, 1234]]
        """
        width = buckets_per_bucket
        coarse = np.where(links[:, None], self.buckets // width * width, self.buckets)
        return MinuteMeasurements(self.minute, coarse, self.received, self.packets)

    def delay_statistics(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-link mean, population std and median delay (ms) of delivered packets (NaN if none).

        The median is the midpoint of the two middle packets for an even count, as in
        `service.parse.histogram.compute_histogram_stats`.
        """
        delivered = self._delivered
        delays = self._sorted_buckets / BUCKETS_PER_MS  # the same order, lost packets last
        with np.errstate(invalid="ignore"):  # nothing delivered: 0 / 0
            mean = np.where(delivered, delays, 0.0).sum(axis=1) / self.received
            squares = np.where(delivered, (delays - mean[:, None]) ** 2, 0.0)
            std = np.sqrt(squares.sum(axis=1) / self.received)
        rows = np.arange(len(delays))
        low = delays[rows, np.maximum(self.received - 1, 0) // 2]
        high = delays[rows, self.received // 2]
        return mean, std, np.where(self.received > 0, (low + high) / 2, np.nan)


@dataclass(frozen=True, eq=False)
class _HourDraws:
    """Random events drawn for one hour block; start/end are absolute minutes, end exclusive."""

    first_minute: int
    noise: np.ndarray
    burst_start: np.ndarray
    burst_end: np.ndarray
    burst_height: np.ndarray
    bulk_start: np.ndarray
    bulk_end: np.ndarray
    bulk_level: np.ndarray

    def noise_at(self, minutes: np.ndarray) -> np.ndarray:
        offsets = minutes - self.first_minute
        inside = (offsets >= 0) & (offsets < 60)
        return np.where(inside, self.noise[:, np.clip(offsets, 0, 59)], 0.0)

    def bursts_at(self, minutes: np.ndarray) -> np.ndarray:
        active = _active(self.burst_start[..., None], self.burst_end[..., None], minutes)
        return (self.burst_height[..., None] * active).sum(axis=1)

    def bulk_at(self, minutes: np.ndarray) -> np.ndarray:
        active = _active(self.bulk_start[:, None], self.bulk_end[:, None], minutes)
        return self.bulk_level[:, None] * active


def build_mesh(n_sites: int = DEFAULT_SITES, seed: int = 0) -> Mesh:
    """A random mesh of `n_sites` latency hosts (one per site) and all their directed links."""
    if n_sites < 2:
        raise ValueError(f"a mesh needs at least 2 sites, got {n_sites}")
    rng = _rng(seed, _STREAM_MESH)
    latitude, longitude = _site_coordinates(rng, n_sites)
    source, destination = np.nonzero(~np.eye(n_sites, dtype=bool))
    n_links = len(source)
    distance_km = _great_circle_km(latitude, longitude, source, destination)
    base = HOST_DELAY_MS + distance_km * rng.uniform(*ROUTE_FACTOR, n_links) / FIBRE_KM_PER_MS
    return Mesh(
        site_names=tuple(f"SITE-{i + 1:02d}" for i in range(n_sites)),
        host_names=tuple(f"ps-latency.site{i + 1:02d}.example.org" for i in range(n_sites)),
        host_ips=tuple(_host_ip(i) for i in range(n_sites)),
        latitude_deg=latitude,
        longitude_deg=longitude,
        source=source,
        destination=destination,
        base_delay_ms=base,
        jitter_ms=rng.uniform(*JITTER_MS, n_links),
        capacity_bps=rng.choice(CAPACITIES_BPS, n_links, p=CAPACITY_SHARES),
        buffer_ms=rng.uniform(*BUFFER_MS, n_links),
        service_ms=rng.uniform(*SERVICE_MS, n_links),
        background_loss=_log_uniform(rng, BACKGROUND_LOSS, n_links),
        clock_offset_ms=_clock_offsets(rng, base, source, destination, n_sites),
        congestion_prone=_congestion_prone(rng, n_links),
    )


def simulate_utilisation(mesh: Mesh, start_minute: int, n_minutes: int, seed: int) -> np.ndarray:
    """Utilisation (offered load / capacity) of every link, links x minutes from `start_minute`.

    Column k equals `simulate_utilisation(mesh, start_minute + k, 1, seed)[:, 0]` exactly.
    """
    minutes = np.arange(start_minute, start_minute + n_minutes)
    load = _diurnal_load(mesh, minutes, seed)
    bulk = np.zeros_like(load)
    noise = np.zeros_like(load)
    last_block = (start_minute + n_minutes - 1) // 60
    for block in range(start_minute // 60 - BULK_MAX_HOURS, last_block + 1):
        # an hour's events touch only its reach: outside it they would add exact zeros
        reach = slice(
            max(0, block * 60 - start_minute),
            max(0, block * 60 + _HOUR_REACH_MINUTES - start_minute),
        )
        hour = _draw_hour(mesh, seed, block)
        spanned = minutes[reach]
        load[:, reach] += hour.bursts_at(spanned)
        bulk[:, reach] = np.maximum(bulk[:, reach], hour.bulk_at(spanned))
        noise[:, reach] += hour.noise_at(spanned)
    return np.clip(np.maximum(load, bulk) + noise, 0.0, MAX_UTILISATION)


def simulate_minute(
    mesh: Mesh,
    utilisation_column: np.ndarray,
    minute: int,
    seed: int,
    packets: int = PACKETS_PER_MINUTE,
) -> MinuteMeasurements:
    """Probe results of every link in epoch `minute`, given each link's utilisation then."""
    rng = _rng(seed, _STREAM_PACKETS, minute)
    lost = rng.binomial(packets, _loss_probability(mesh, utilisation_column))
    waits = _queueing_delays_ms(rng, mesh, utilisation_column, packets)
    jitter = rng.standard_exponential((mesh.n_links, packets)) * mesh.jitter_ms[:, None]
    delays = (mesh.base_delay_ms + mesh.clock_offset_ms)[:, None] + jitter + waits
    buckets = np.rint(delays * BUCKETS_PER_MS).astype(np.int32)
    return MinuteMeasurements(minute, buckets, packets - lost, packets)


def simulate_histograms(
    mesh: Mesh,
    utilisation: np.ndarray,
    start_minute: int,
    seed: int,
    packets: int = PACKETS_PER_MINUTE,
) -> Iterator[MinuteMeasurements]:
    """Measurements of each minute of `utilisation` (links x minutes) from `start_minute` on."""
    for offset in range(utilisation.shape[1]):
        yield simulate_minute(mesh, utilisation[:, offset], start_minute + offset, seed, packets)


class _BucketKeys:
    """Histogram keys of buckets ("2.57" for bucket 257), each formatted once: kept in an array
    indexed by bucket over the span seen so far (a mesh's delays span a few tens of thousands),
    started again over the buckets asked for when the span would pass `max_span`. A wider span
    is a new one (its first bucket, keys and which of them are formatted): a key never moves.

    >>> keys = _BucketKeys(max_span=2100)
    >>> keys(np.array([257, -3, 1234, 257])), keys.span[0], len(keys.span[1])
    (['2.57', '-0.03', '12.34', '2.57'], -3, 1238)
    >>> keys(np.array([-2000, 5])), keys.span[0], len(keys.span[1])
    (['-20.00', '0.05'], -2000, 2006)
    >>> keys(np.array([0, 5000])), keys.span[0], len(keys.span[1])
    (['0.00', '50.00'], -2000, 2006)
    """

    def __init__(self, max_span: int) -> None:
        self.max_span = max_span
        self.span = (0, np.empty(0, dtype=object), np.empty(0, dtype=bool))

    def __call__(self, buckets: np.ndarray) -> list[str]:
        if not buckets.size:
            return []
        low, high = int(buckets.min()), int(buckets.max()) + 1
        if high - low > self.max_span:
            return [_bucket_key(b) for b in buckets.tolist()]
        first, names, formatted = self._covering(low, high)
        index = buckets - first
        new = np.unique(index[~formatted[index]])
        names[new] = np.array([_bucket_key(b) for b in (new + first).tolist()], dtype=object)
        formatted[new] = True
        return names[index].tolist()

    def _covering(self, low: int, high: int) -> tuple[int, np.ndarray, np.ndarray]:
        """The span, widened if need be to take in buckets `low` to `high` (exclusive)."""
        first, names, formatted = self.span
        end = first + len(names)
        if first <= low and high <= end:
            return self.span
        wider = (min(low, first), max(high, end))
        kept = bool(len(names)) and wider[1] - wider[0] <= self.max_span
        start, stop = wider if kept else (low, high)
        self.span = (start, np.empty(stop - start, dtype=object), np.zeros(stop - start, bool))
        if kept:
            self.span[1][first - start : end - start] = names
            self.span[2][first - start : end - start] = formatted
        return self.span


def _bucket_key(bucket: int) -> str:
    return f"{bucket / BUCKETS_PER_MS:.2f}"


_bucket_keys = _BucketKeys(max_span=1 << 18)


def blocking_probability(utilisation: np.ndarray, places: np.ndarray) -> np.ndarray:
    """Share of packets an M/M/1/K queue drops: (1 - rho) rho^K / (1 - rho^(K+1)).

    >>> blocking_probability(np.array([0.5, 1.0, 2.0]), np.array([1, 4, 60])).round(4)
    array([0.3333, 0.2   , 0.5   ])
    """
    log_rho = np.log(_load_factor(utilisation))
    return -np.expm1(log_rho) * np.exp(places * log_rho) / -np.expm1((places + 1) * log_rho)


def _loss_probability(mesh: Mesh, utilisation: np.ndarray) -> np.ndarray:
    """A probe packet is lost to a full buffer or to background loss."""
    kept = (1 - blocking_probability(utilisation, mesh.queue_places)) * (1 - mesh.background_loss)
    return 1 - kept


def _queueing_delays_ms(
    rng: np.random.Generator, mesh: Mesh, utilisation: np.ndarray, packets: int
) -> np.ndarray:
    """Waits (links x packets): Erlang(n, s) behind n queued bursts, capped at the buffer."""
    log_rho = np.log(_load_factor(utilisation))[:, None]
    places = mesh.queue_places[:, None]
    uniform = rng.random((mesh.n_links, packets))
    # inverse CDF of the truncated geometric P(n) ~ rho^n on 0..K-1
    queued = np.ceil(np.log1p(uniform * np.expm1(places * log_rho)) / log_rho) - 1
    waits = rng.standard_gamma(np.clip(queued, 0, places - 1)) * mesh.service_ms[:, None]
    return np.minimum(waits, mesh.buffer_ms[:, None])


def _load_factor(utilisation: np.ndarray) -> np.ndarray:
    """Utilisation as a queue load, kept off 0 and off exactly 1 where the formulas divide by 0."""
    rho = np.maximum(np.asarray(utilisation, dtype=float), RHO_MIN)
    return np.where(np.abs(rho - 1) < RHO_MIN, 1 - RHO_MIN, rho)


def _diurnal_load(mesh: Mesh, minutes: np.ndarray, seed: int) -> np.ndarray:
    rng = _rng(seed, _STREAM_PROFILE)
    base = rng.uniform(*BASE_LOAD, mesh.n_links)[:, None]
    amplitude = rng.uniform(*DIURNAL_AMPLITUDE, mesh.n_links)[:, None]
    peak_hour = rng.uniform(*PEAK_LOCAL_HOUR, mesh.n_links)[:, None]
    local_hour = minutes / 60 + mesh.longitude_deg[mesh.source][:, None] / 15
    return base + amplitude * (1 + np.cos(2 * np.pi * (local_hour - peak_hour) / 24)) / 2


def _draw_hour(mesh: Mesh, seed: int, block: int) -> _HourDraws:
    rng = _rng(seed, _STREAM_HOUR, block)
    first = block * 60
    noise = rng.normal(0.0, NOISE_SD, (mesh.n_links, 60))
    bursts = _draw_bursts(rng, mesh.n_links, first)
    return _HourDraws(first, noise, *bursts, *_draw_bulk(rng, mesh.congestion_prone, first))


def _draw_bursts(
    rng: np.random.Generator, n_links: int, first: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    shape = (n_links, BURST_SLOTS)
    start = first + rng.integers(0, 60, shape)
    end = start + rng.integers(BURST_MINUTES[0], BURST_MINUTES[1] + 1, shape)
    happens = rng.random(shape) < BURST_PROBABILITY
    return start, end, happens * rng.uniform(*BURST_HEIGHT, shape)


def _draw_bulk(
    rng: np.random.Generator, prone: np.ndarray, first: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bulk transfers starting in this hour: start, end (exclusive) and utilisation level."""
    kind = prone.astype(int)
    start = first + rng.integers(0, 60, len(prone))
    minutes = rng.exponential(np.take(BULK_MEAN_MINUTES, kind))
    end = start + np.ceil(np.minimum(minutes, BULK_MAX_HOURS * 60)).astype(int)
    happens = rng.random(len(prone)) < np.take(BULK_PROBABILITY, kind)
    low, high = np.array(BULK_LEVEL)[kind].T
    return start, end, happens * rng.uniform(low, high)


def _active(start: np.ndarray, end: np.ndarray, minutes: np.ndarray) -> np.ndarray:
    return (minutes >= start) & (minutes < end)


def _rng(seed: int, stream: int, index: int = 0) -> np.random.Generator:
    """A generator keyed by (seed, stream, index): counter-based randomness, negatives allowed."""
    return np.random.default_rng([seed, stream, index % 2**64])


def _site_coordinates(rng: np.random.Generator, n_sites: int) -> tuple[np.ndarray, np.ndarray]:
    """Points spread uniformly over the sphere (latitude, longitude in degrees)."""
    latitude = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, n_sites)))
    return latitude, rng.uniform(-180.0, 180.0, n_sites)


def _great_circle_km(
    latitude: np.ndarray, longitude: np.ndarray, source: np.ndarray, destination: np.ndarray
) -> np.ndarray:
    lat1, lat2 = np.radians(latitude[source]), np.radians(latitude[destination])
    dlon = np.radians(longitude[destination] - longitude[source])
    haversine = np.sin((lat2 - lat1) / 2) ** 2 + np.cos(lat1) * np.cos(lat2) * np.sin(dlon / 2) ** 2
    return 2 * EARTH_RADIUS_KM * np.arcsin(np.sqrt(np.clip(haversine, 0.0, 1.0)))


def _log_uniform(rng: np.random.Generator, bounds: tuple[float, float], size: int) -> np.ndarray:
    return np.exp(rng.uniform(np.log(bounds[0]), np.log(bounds[1]), size))


def _host_ip(host: int) -> str:
    """10.a.b.10 with a unique /24 per host."""
    return str(ipaddress.IPv4Address(0x0A000000 + ((host + 1) << 8) + 10))


def _clock_offsets(
    rng: np.random.Generator,
    base_ms: np.ndarray,
    source: np.ndarray,
    destination: np.ndarray,
    n_sites: int,
) -> np.ndarray:
    """Per-link offset = clock error of receiver - clock error of sender (ms)."""
    drifted = rng.choice(n_sites, min(DRIFTED_HOSTS, n_sites - 1), replace=False)
    from_sane_host = ~np.isin(source, drifted)
    nearest = np.full(n_sites, np.inf)
    np.minimum.at(nearest, destination[from_sane_host], base_ms[from_sane_host])
    error = np.zeros(n_sites)
    error[drifted] = -(nearest[drifted] + rng.uniform(*CLOCK_MARGIN_MS, len(drifted)))
    return error[destination] - error[source]


def _congestion_prone(rng: np.random.Generator, n_links: int) -> np.ndarray:
    count = min(n_links, max(MIN_CONGESTION_PRONE, round(CONGESTION_PRONE_SHARE * n_links)))
    prone = np.zeros(n_links, dtype=bool)
    prone[rng.choice(n_links, count, replace=False)] = True
    return prone
