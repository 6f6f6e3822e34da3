"""Training rows: the service's own link features joined with the utilisation of the same minute.

Features are never recomputed here. Measurements are replayed minute by minute through the
service's ingest path (`LinkState.apply` of `ParsedMessage` records) and its analysis pass
(`analyse_links`, i.e. `build_windows` -> `compute_all_time_stats` -> `compute_features` and the
empirical filter), so a model sees in training exactly what `nettel serve` computes.

Row (link, t): the features of the view taken at the end of minute t (datapoints of minutes <= t
only) for a link whose newest datapoint is from minute t and whose feature row is complete;
the label is the link's utilisation *during* minute t. The persistence input is the last
utilisation known before minute t began (simulated: minute t - 1; real: the newest router sample
whose interval had ended by then).

Sources: the seeded simulator (default) or captured bus messages plus router files named by a
link map (formats in docs/model.md).
"""

from __future__ import annotations

import ipaddress
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from service.analysis.link_analysis import analyse_links
from service.parse.histogram import HistogramStats
from service.parse.records import LinkEndpoints, MeasurementKind, ParsedMessage
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import LinkState
from simulation.defaults import (
    DEFAULT_DAYS,
    DEFAULT_FAMILY,
    DEFAULT_SITES,
    FAMILY_C_CAPTURE,
    family_members,
    portable_path,
    resolve_portable_path,
)
from simulation.simulator import (
    BUCKETS_PER_MS,
    Mesh,
    MinuteMeasurements,
    build_mesh,
    simulate_histograms,
    simulate_utilisation,
)
from simulation.simulator_fluid import build_fluid_mesh, simulate_fluid_minutes, simulate_traffic
from training.gc_pause import gc_paused
from training.perfsonar_archive import read_perfsonar_archive
from training.readers import (
    UtilisationSeries,
    read_lhcopn_flows_file,
    read_router_csv_file,
    read_site_snmp_json_file,
    read_snmp_counters_file,
    to_minutes,
)

#: Utilisation above which a link counts as congested (netTel's label threshold).
CONGESTED_RATIO = 0.7
TARGETS = ("nettel", "ratio")
MINUTES_PER_DAY = 1440
#: Minutes replayed before the first row, so every 32-minute window is full.
WARMUP_MINUTES = WINDOW_MINUTES
#: 2024-01-01T00:00Z; simulated datasets start here unless told otherwise.
DEFAULT_START_MINUTE = 28_401_120
#: The router map in a family C capture directory (simulation.simulator_ns3 writes it).
PACKET_ROUTER_MAP = "routers/router-map.json"
#: Real data: a link congested in at least this share of its rows counts as congestion prone.
BUSY_SHARE = 0.1
#: Share of a simulated mesh's links whose histograms have perfSONAR 5's 0.1 ms buckets (ten of
#: the simulators' 0.01 ms buckets), so the network learns features robust to both widths.
COARSE_BUCKET_SHARE = 0.3
COARSE_BUCKET_FACTOR = 10
_SPLIT_STREAM = 17
_COARSE_STREAM = 23


def is_congested(utilisation: np.ndarray) -> np.ndarray:
    """The event the classifiers are scored on: utilisation ratio above 70 %."""
    return np.asarray(utilisation) > CONGESTED_RATIO


def compute_target(utilisation: np.ndarray, target: str) -> np.ndarray:
    """Training label: "ratio" is the ratio clipped to [0, 1]; "nettel" also zeroes <= 70 %.

    >>> compute_target(np.array([0.5, 0.7, 0.8, 1.2]), "nettel").tolist()
    [0.0, 0.0, 0.800000011920929, 1.0]
    """
    if target not in TARGETS:
        raise ValueError(f"target must be one of {TARGETS}, not {target!r}")
    ratio = np.clip(utilisation, 0.0, 1.0)
    if target == "nettel":
        ratio = np.where(is_congested(utilisation), ratio, 0.0)
    return ratio.astype(np.float32)


@dataclass(frozen=True, eq=False)
class Dataset:
    """Aligned row arrays plus per-link metadata (indexed by link id).

    `features` is (rows x 50) in FEATURE_NAMES order; `utilisation` the true ratio (unclipped),
    `label` its `target` form; `persistence` the last utilisation known before the row's minute.
    """

    features: np.ndarray
    utilisation: np.ndarray
    label: np.ndarray
    link: np.ndarray
    minute: np.ndarray
    empirical: np.ndarray
    persistence: np.ndarray
    target: str
    link_names: tuple[str, ...]
    prone: np.ndarray
    description: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.label)

    def select(self, mask: np.ndarray) -> Dataset:
        """The rows where `mask` is true (link metadata unchanged)."""
        rows = {name: getattr(self, name)[mask] for name in _ROW_ARRAYS}
        return replace(self, **rows)

    def rows_of(self, links: np.ndarray) -> Dataset:
        return self.select(np.isin(self.link, links))

    def names_of(self, links: np.ndarray) -> list[str]:
        return [self.link_names[i] for i in links]


_ROW_ARRAYS = ("features", "utilisation", "label", "link", "minute", "empirical", "persistence")


@dataclass(frozen=True)
class LinkSplit:
    """Whole links for training and for the held-out evaluation (sorted link ids)."""

    train: np.ndarray
    holdout: np.ndarray
    calibration: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def split_links(
    dataset: Dataset, fraction: float, seed: int, calibration_fraction: float = 0.0
) -> LinkSplit:
    """Hold out `fraction` of the links that have rows, drawn separately among congestion-prone
    and other links so both sets see congested links, then move `calibration_fraction` of them
    from training to calibration the same way; deterministic for a seed."""
    present = np.unique(dataset.link)
    return split_link_ids(present, dataset.prone[present], fraction, seed, calibration_fraction)


def split_link_ids(
    present: np.ndarray,
    busy: np.ndarray,
    fraction: float,
    seed: int,
    calibration_fraction: float = 0.0,
) -> LinkSplit:
    """`split_links` over the sorted link ids `present` (with rows) and whether each is
    congestion prone. The calibration links are drawn from the training links (with the next
    seed), as a share of them that makes `calibration_fraction` of all links."""
    if not 0.0 < fraction < 1.0:
        raise ValueError(f"holdout fraction must be in (0, 1), not {fraction}")
    if not 0.0 <= calibration_fraction < 1.0 - fraction:
        raise ValueError(
            f"calibration fraction must be in [0, {1 - fraction}), not {calibration_fraction}"
        )
    stay, holdout = _hold_out(present, busy, fraction, seed)
    train, train_busy = present[stay], busy[stay]
    if calibration_fraction == 0:
        return LinkSplit(train, holdout)
    share = calibration_fraction / (1.0 - fraction)
    stay, calibration = _hold_out(train, train_busy, share, seed + 1)
    return LinkSplit(train[stay], holdout, calibration)


def _hold_out(
    present: np.ndarray, busy: np.ndarray, fraction: float, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Which of `present` stay (a mask) and the sorted ids drawn out of them."""
    rng = np.random.default_rng([seed, _SPLIT_STREAM])
    drawn = np.concatenate(
        [_draw(rng, present[busy], fraction), _draw(rng, present[~busy], fraction)]
    )
    return ~np.isin(present, drawn), np.sort(drawn)


def _draw(rng: np.random.Generator, links: np.ndarray, fraction: float) -> np.ndarray:
    """round(fraction x n) links, at least 1 (2 from 4 links on) while keeping one for training."""
    n = len(links)
    wanted = max(round(fraction * n), min(2, n // 2), 1 if n >= 2 else 0)
    return rng.choice(links, min(wanted, n - 1) if n >= 2 else 0, replace=False)


def split_by_family(
    dataset: Dataset, fraction: float, seed: int, calibration_fraction: float = 0.0
) -> LinkSplit:
    """`split_links` within each simulator family of the dataset (so a family's held-out and
    calibration links are the same whether it was built alone or mixed). With one family this
    is `split_links`."""
    parts = [
        split_links(dataset.rows_of(links), fraction, seed, calibration_fraction)
        for links in family_links(dataset).values()
    ]
    return LinkSplit(
        *(
            np.sort(np.concatenate([getattr(part, side) for part in parts]))
            for side in ("train", "holdout", "calibration")
        )
    )


def family_links(dataset: Dataset) -> dict[str, np.ndarray]:
    """Link ids of each simulator family in the dataset (real data: one family, "real")."""
    ranges = dataset.description.get("family_links")
    if not ranges:
        real = dataset.description.get("kind") == "real"
        family = dataset.description.get("family", "real" if real else "A")
        return {str(family): np.arange(len(dataset.link_names))}
    return {family: np.arange(lo, hi) for family, (lo, hi) in ranges.items()}


@dataclass(frozen=True)
class DataSource:
    """Where the rows come from: the simulator families (sites, days, seed; family C from its
    capture) or, when `perfsonar_dir` is set, captured bus messages labelled through
    `router_map`. Recorded in the model card, so `nettel evaluate` can rebuild the same rows."""

    sites: int = DEFAULT_SITES
    days: float = DEFAULT_DAYS
    seed: int = 0
    start_minute: int = DEFAULT_START_MINUTE
    perfsonar_dir: Path | None = None
    router_map: Path | None = None
    family: str = DEFAULT_FAMILY
    family_c_capture: Path = FAMILY_C_CAPTURE

    def __post_init__(self) -> None:
        family_members(self.family)  # refuses an unknown family
        if (self.perfsonar_dir is None) != (self.router_map is None):
            raise ValueError("real data needs both a perfSONAR directory and a router map")
        if self.perfsonar_dir is None and (self.sites < 2 or self.days <= 0):
            raise ValueError(
                f"a simulated mesh needs >= 2 sites and > 0 days ({self.sites}, {self.days})"
            )

    @property
    def simulated(self) -> bool:
        return self.perfsonar_dir is None

    def build(self, target: str) -> Dataset:
        if self.perfsonar_dir is None or self.router_map is None:
            return build_family_dataset(
                self.family,
                self.sites,
                self.days,
                self.seed,
                target,
                self.start_minute,
                self.family_c_capture,
            )
        return build_real_dataset(self.perfsonar_dir, self.router_map, target)

    @classmethod
    def from_description(cls, description: dict[str, Any]) -> DataSource:
        """The source a dataset description (as stored in a model card) was built from."""
        if description.get("kind") == "real":
            return cls(
                perfsonar_dir=Path(description["perfsonar_dir"]),
                router_map=Path(description["router_map"]),
            )
        family = description.get("family", "A")
        parts = description.get("families", {family: description})
        simulated = next((d for d in parts.values() if d.get("family") != "C"), None)
        keys = ("sites", "days", "seed", "start_minute")
        capture = parts.get("C", {}).get("capture")
        return cls(
            **({key: simulated[key] for key in keys} if simulated else {}),
            family=family,
            **({"family_c_capture": resolve_portable_path(capture)} if capture else {}),
        )


# --- the replay --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MinuteBatch:
    """Every datapoint measured during `minute`, as parsed messages."""

    minute: int
    messages: list[ParsedMessage]


@dataclass(frozen=True)
class MinuteRows:
    """Links (state rows) with a complete feature row describing `minute`, and their values."""

    minute: int
    rows: np.ndarray
    features: np.ndarray
    empirical: np.ndarray


def replay_minutes(batches: Iterable[MinuteBatch], state: LinkState) -> Iterator[MinuteRows]:
    """Apply each minute's messages, then analyse the view at the minute's end as serving does."""
    for batch in batches:
        now = (batch.minute + 1) * 60.0
        state.apply_batch(batch.messages, now)
        view = state.view(now)
        analysis = analyse_links(view, predictor=None)
        fresh = analysis.has_features & (view.latest_minute == batch.minute)
        yield MinuteRows(
            batch.minute,
            np.flatnonzero(fresh),
            analysis.features[fresh].astype(np.float32),
            analysis.empirical[fresh],
        )


@dataclass(frozen=True)
class LabelGrid:
    """Utilisation (links x minutes from `first_minute`, NaN unknown) and the persistence input."""

    first_minute: int
    utilisation: np.ndarray
    last_known: np.ndarray

    def at(self, rows: np.ndarray, minute: int) -> tuple[np.ndarray, np.ndarray]:
        column = minute - self.first_minute
        if not 0 <= column < self.utilisation.shape[1]:
            return np.full(len(rows), np.nan), np.full(len(rows), np.nan)
        return self.utilisation[rows, column], self.last_known[rows, column]


@dataclass(frozen=True)
class _Parts:
    """Where the rows of a dataset come from: the replayed minutes and their labels."""

    minutes: Iterable[MinuteRows]
    labels: LabelGrid
    first_row_minute: int


def assemble(
    parts: _Parts,
    target: str,
    link_names: tuple[str, ...],
    prone: np.ndarray,
    description: dict[str, Any],
) -> Dataset:
    """Join every replayed minute with its labels into one Dataset."""
    columns: dict[str, list[np.ndarray]] = defaultdict(list)
    for rows in parts.minutes:
        for name, values in _labelled_rows(rows, parts).items():
            columns[name].append(values)
    arrays = {name: _concatenate(columns[name], dtype) for name, dtype in _DTYPES.items()}
    label = compute_target(arrays["utilisation"], target)
    return Dataset(
        **arrays,
        label=label,
        target=target,
        link_names=link_names,
        prone=prone,
        description={**description, "rows": len(label), "target": target},
    )


def _labelled_rows(rows: MinuteRows, parts: _Parts) -> dict[str, np.ndarray]:
    """One minute's row arrays; rows lacking a utilisation or a persistence input are dropped,
    so every baseline scores the same rows, and so are warm-up minutes."""
    utilisation, last_known = parts.labels.at(rows.rows, rows.minute)
    keep = ~np.isnan(utilisation) & ~np.isnan(last_known) & (rows.minute >= parts.first_row_minute)
    values = {
        "features": rows.features,
        "utilisation": utilisation,
        "link": rows.rows,
        "minute": np.full(len(rows.rows), rows.minute),
        "empirical": rows.empirical,
        "persistence": last_known,
    }
    return {name: array[keep] for name, array in values.items()}


_DTYPES = {
    "features": np.float32,
    "utilisation": np.float32,
    "link": np.int32,
    "minute": np.int64,
    "empirical": np.float32,
    "persistence": np.float32,
}


def _concatenate(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    if not parts:
        raise ValueError("no rows: the replay produced no complete feature row with a label")
    return np.concatenate(parts).astype(dtype)


# --- simulated source --------------------------------------------------------------------------


def build_simulated_dataset(
    sites: int,
    days: float,
    seed: int,
    target: str = "nettel",
    start_minute: int = DEFAULT_START_MINUTE,
) -> Dataset:
    """Rows for `days` of a `sites`-site simulated mesh (after a WARMUP_MINUTES warm-up)."""
    mesh = build_mesh(sites, seed)
    first = start_minute - WARMUP_MINUTES
    n_minutes = WARMUP_MINUTES + round(days * MINUTES_PER_DAY)
    utilisation = simulate_utilisation(mesh, first - 1, n_minutes + 1, seed)
    description = _simulated_description(
        "A", "simulation.simulator", mesh.congestion_prone, sites, days, seed, start_minute
    )
    return replay_simulation(mesh, utilisation, first, seed, target, description)


def _simulated_description(
    family: str,
    simulator: str,
    prone: np.ndarray,
    sites: int,
    days: float,
    seed: int,
    start_minute: int,
) -> dict[str, Any]:
    """The model card's account of the rows of a simulated family's mesh."""
    return {
        "kind": "simulated",
        "family": family,
        "note": f"trained and evaluated on SIMULATED links ({simulator}), not real routers",
        "sites": sites,
        "days": days,
        "seed": seed,
        "start_minute": start_minute,
        "warmup_minutes": WARMUP_MINUTES,
        "links": int(prone.size),
        "congestion_prone_links": int(prone.sum()),
        "persistence": "utilisation of the link at minute t - 1",
    }


def replay_simulation(
    mesh: Mesh,
    utilisation: np.ndarray,
    first_minute: int,
    seed: int,
    target: str = "nettel",
    description: dict[str, Any] | None = None,
) -> Dataset:
    """Rows of a simulated mesh driven by `utilisation` (links x minutes from first_minute - 1).

    The extra first column is only the persistence input of `first_minute`; rows start
    WARMUP_MINUTES after `first_minute`.
    """
    labels = LabelGrid(first_minute, utilisation[:, 1:], utilisation[:, :-1])
    measured = simulate_histograms(mesh, labels.utilisation, first_minute, seed)
    return replay_measurements(
        mesh, measured, labels, target, description or {"kind": "simulated", "family": "A"}
    )


def replay_measurements(
    mesh: Mesh,
    measured: Iterable[MinuteMeasurements],
    labels: LabelGrid,
    target: str,
    description: dict[str, Any],
    prone: np.ndarray | None = None,
) -> Dataset:
    """Rows of simulated minutes (any family) replayed through ingest and analysis; `mesh` gives
    the hosts and links, rows start WARMUP_MINUTES after `labels.first_minute`. A seeded
    COARSE_BUCKET_SHARE of the links report 0.1 ms histogram buckets, as perfSONAR 5 does."""
    endpoints = mesh_endpoints(mesh)
    state = link_state_for(endpoints)
    seed = int(description.get("seed", 0))
    description = {
        **description,
        "coarse_bucket_links": int(draw_coarse_links(len(endpoints), seed).sum()),
    }
    minutes = replay_minutes(simulated_batches(measured, endpoints, seed), state)
    sources, destinations = _names(mesh, mesh.source), _names(mesh, mesh.destination)
    names = tuple(f"{s}->{d}" for s, d in zip(sources, destinations, strict=True))
    parts = _Parts(minutes, labels, labels.first_minute + WARMUP_MINUTES)
    busy = mesh.congestion_prone if prone is None else prone
    return assemble(parts, target, names, busy, description)


def simulated_batches(
    measured: Iterable[MinuteMeasurements], endpoints: list[LinkEndpoints], seed: int
) -> Iterator[MinuteBatch]:
    """Each simulated minute as the bus messages ingest applies, the seeded coarse links'
    histograms in 0.1 ms buckets (what a served replay must apply to match the dataset's rows)."""
    coarse = draw_coarse_links(len(endpoints), seed)
    for m in measured:
        yield MinuteBatch(
            m.minute, minute_messages(m.coarsened(coarse, COARSE_BUCKET_FACTOR), endpoints)
        )


def draw_coarse_links(n_links: int, seed: int) -> np.ndarray:
    """Mask of the links whose histograms are written in 0.1 ms buckets (seeded)."""
    return np.random.default_rng([seed, _COARSE_STREAM]).random(n_links) < COARSE_BUCKET_SHARE


def build_family_dataset(
    family: str,
    sites: int,
    days: float,
    seed: int,
    target: str = "nettel",
    start_minute: int = DEFAULT_START_MINUTE,
    family_c_capture: Path = FAMILY_C_CAPTURE,
) -> Dataset:
    """Rows of simulator family A, B or C, or of several side by side ("A+B+C": A's links
    first; "mixed" = "A+B"). A and B are simulated here from sites, days and seed; C is read
    from its capture."""
    builders: dict[str, Callable[[], Dataset]] = {
        "A": lambda: build_simulated_dataset(sites, days, seed, target, start_minute),
        "B": lambda: build_fluid_dataset(sites, days, seed, target, start_minute),
        "C": lambda: build_packet_dataset(family_c_capture, target),
    }
    members = family_members(family)
    if len(members) == 1:
        return builders[family]()
    combined = combine_families({name: builders[name]() for name in members})
    return replace(combined, description={**combined.description, "family": family})


def build_packet_dataset(capture: Path, target: str = "nettel") -> Dataset:
    """Rows of family C: the ns-3 links' bus capture labelled by their bottleneck counters,
    read like real data (`build_real_dataset`) from `capture` and its router map."""
    if not capture.is_dir():
        raise ValueError(
            f"family C capture {capture} is missing: `nettel simulate --family C --output "
            f"{capture}` writes it (docs/simulator-ns3.md)"
        )
    dataset = build_real_dataset(capture, capture / PACKET_ROUTER_MAP, target)
    real = dataset.description
    description = {
        "kind": "simulated",
        "family": "C",
        "note": "trained and evaluated on SIMULATED links (ns-3 packet-level TCP, "
        "simulation.simulator_ns3), not real routers",
        "capture": portable_path(capture),
        "links": real["links"],
        "congestion_prone_links": int(dataset.prone.sum()),
        "messages": real["messages"],
        "first_minute": real["first_minute"],
        "minutes": real["minutes"],
        "persistence": real["persistence"],
    }
    return replace(dataset, description=description)


def build_fluid_dataset(
    sites: int,
    days: float,
    seed: int,
    target: str = "nettel",
    start_minute: int = DEFAULT_START_MINUTE,
) -> Dataset:
    """Rows for `days` of a `sites`-site family-B mesh (simulation.simulator_fluid)."""
    mesh = build_fluid_mesh(sites, seed)
    first = start_minute - WARMUP_MINUTES
    n_minutes = WARMUP_MINUTES + round(days * MINUTES_PER_DAY)
    traffic = simulate_traffic(mesh, first - 1, n_minutes + 1, seed)
    utilisation = traffic.utilisation
    labels = LabelGrid(first, utilisation[:, 1:], utilisation[:, :-1])
    description = _simulated_description(
        "B", "simulation.simulator_fluid", mesh.congestion_prone, sites, days, seed, start_minute
    )
    measured = simulate_fluid_minutes(mesh, traffic, seed, first_minute=first)
    return replay_measurements(
        mesh.hosts, measured, labels, target, description, mesh.congestion_prone
    )


def combine_families(parts: dict[str, Dataset]) -> Dataset:
    """One dataset of several families' datasets, links renumbered in order (same target)."""
    offsets = np.cumsum([0, *(len(d.link_names) for d in parts.values())])
    datasets = list(parts.values())
    rows = {name: np.concatenate([getattr(d, name) for d in datasets]) for name in _ROW_ARRAYS}
    rows["link"] = np.concatenate(
        [d.link + offset for d, offset in zip(datasets, offsets, strict=False)]
    ).astype(np.int32)
    simulated = [d.description for d in datasets if d.description.get("family") != "C"]
    keys = ("kind", "sites", "days", "seed", "start_minute")
    description = {key: simulated[0][key] for key in keys if simulated and key in simulated[0]}
    description.setdefault("kind", "simulated")
    return Dataset(
        **rows,
        target=datasets[0].target,
        link_names=tuple(name for d in datasets for name in d.link_names),
        prone=np.concatenate([d.prone for d in datasets]),
        description={
            **description,
            "family": "+".join(parts),
            "note": "trained and evaluated on SIMULATED links of simulator families "
            + ", ".join(parts),
            "links": int(offsets[-1]),
            "rows": int(sum(len(d) for d in datasets)),
            "target": datasets[0].target,
            "family_links": {
                name: [int(offsets[i]), int(offsets[i + 1])] for i, name in enumerate(parts)
            },
            "families": {name: d.description for name, d in parts.items()},
        },
    )


def _names(mesh: Mesh, hosts: np.ndarray) -> list[str]:
    return [mesh.site_names[h] for h in hosts]


def mesh_endpoints(mesh: Mesh) -> list[LinkEndpoints]:
    ips, hosts = mesh.host_ips, mesh.host_names
    return [
        LinkEndpoints(ips[s], ips[d], hosts[s], hosts[d])
        for s, d in zip(mesh.source.tolist(), mesh.destination.tolist(), strict=True)
    ]


def link_state_for(endpoints: list[LinkEndpoints]) -> LinkState:
    """A LinkState whose row i is link i of `endpoints`."""
    state = LinkState(capacity=max(len(endpoints), 1))
    for endpoint in endpoints:
        state.index.row_for(endpoint)
    return state


def minute_messages(
    measured: MinuteMeasurements, endpoints: list[LinkEndpoints]
) -> list[ParsedMessage]:
    """One loss message per link and one delay message per link that delivered a packet."""
    ts = measured.timestamp
    losses = [
        ParsedMessage(MeasurementKind.LOSS, link, losses=[(ts, loss)])
        for link, loss in zip(endpoints, measured.loss.tolist(), strict=True)
    ]
    delays = [
        ParsedMessage(MeasurementKind.DELAY, link, delays=[(ts, stats)])
        for link, stats in zip(endpoints, compute_minute_stats(measured), strict=True)
        if stats is not None
    ]
    return delays + losses


def compute_minute_stats(measured: MinuteMeasurements) -> list[HistogramStats | None]:
    """Every link's histogram statistics at once (None when all its packets were lost).

    Equal to `compute_histogram_stats` of `measured.histogram(link)` once stored as float32 by
    the link buffers (tests check); the simulator never makes clock-error delays, so nothing is
    dropped. Mean, std and median come from `MinuteMeasurements.delay_statistics`.
    """
    mean, std, median = measured.delay_statistics()
    packets = measured.received
    delivered = np.arange(measured.packets) < packets[:, None]
    ordered = np.sort(np.where(delivered, measured.buckets, np.iinfo(np.int32).max), axis=1)
    p95_rank = np.maximum(np.ceil(0.95 * packets).astype(np.int64), 1)
    minimum = ordered[:, 0] / BUCKETS_PER_MS
    p95 = ordered[np.arange(len(packets)), p95_rank - 1] / BUCKETS_PER_MS
    columns = zip(*(a.tolist() for a in (packets, mean, std, median, minimum, p95)), strict=True)
    return [
        HistogramStats(n, m, s, med, low, high, low < 0, 0) if n else None
        for n, m, s, med, low, high in columns
    ]


# --- real source: captured bus messages + router utilisation ------------------------------------


@gc_paused()
def build_real_dataset(perfsonar_dir: Path, router_map: Path, target: str = "nettel") -> Dataset:
    """Rows from the perfSONAR archive (bus captures, ps_owd/ps_packetloss exports) labelled with
    router utilisation (docs/model.md)."""
    archive = read_perfsonar_archive(perfsonar_dir)
    minutes = sorted({ts // 60 for m in archive.messages for ts, _ in (*m.delays, *m.losses)})
    if not minutes:
        raise ValueError(f"{perfsonar_dir}: no perfSONAR latency datapoints")
    first, n_minutes = minutes[0], minutes[-1] - minutes[0] + 1
    description = {
        "kind": "real",
        "perfsonar_dir": str(perfsonar_dir),
        "router_map": str(router_map),
        "messages": len(archive.messages),
        "records": archive.records,
        "rejected": dict(sorted(archive.rejected.items())),
        "first_minute": first,
        "minutes": n_minutes,
        "persistence": "newest router sample whose interval ended before minute t",
    }
    entries = read_router_map(router_map)
    dataset = replay_archive(archive.messages, entries, first, n_minutes, target, description)
    return replace(dataset, prone=busy_links(dataset, len(dataset.link_names)))


def replay_archive(
    messages: Iterable[ParsedMessage],
    entries: list[MappedLink],
    first_minute: int,
    n_minutes: int,
    target: str,
    description: dict[str, Any],
) -> Dataset:
    """Replay archived messages (in archive order) and label them through the router map; rows
    from `first_minute` + WARMUP_MINUTES on, labels on the grid of `n_minutes` from there.

    Links are independent, so any subset of the links replayed with the same grid gives those
    links' rows of the whole (the Spark job replays groups of links this way).
    """
    state = LinkState()
    minutes = list(replay_minutes(split_by_minute(messages), state))
    labels = mapped_labels(entries, state, first_minute, n_minutes)
    names = tuple(
        f"{s}->{d}" for s, d in zip(state.index.sources, state.index.destinations, strict=True)
    )
    return assemble(
        _Parts(minutes, labels, first_minute + WARMUP_MINUTES),
        target,
        names,
        np.zeros(len(state), bool),
        {**description, "links": len(state)},
    )


def busy_links(dataset: Dataset, n_links: int) -> np.ndarray:
    """Links congested in at least BUSY_SHARE of their rows."""
    rows = np.bincount(dataset.link, minlength=n_links)
    congested = np.bincount(
        dataset.link, weights=is_congested(dataset.utilisation), minlength=n_links
    )
    return congested >= BUSY_SHARE * np.maximum(rows, 1)


def split_by_minute(messages: Iterable[ParsedMessage]) -> list[MinuteBatch]:
    """One single-datapoint message per datapoint, grouped by the minute it measured."""
    by_minute: dict[int, list[ParsedMessage]] = defaultdict(list)
    for message in messages:
        for ts, stats in message.delays:
            by_minute[ts // 60].append(
                ParsedMessage(message.kind, message.link, delays=[(ts, stats)])
            )
        for ts, loss in message.losses:
            by_minute[ts // 60].append(
                ParsedMessage(message.kind, message.link, losses=[(ts, loss)])
            )
    return [MinuteBatch(minute, by_minute[minute]) for minute in sorted(by_minute)]


@dataclass(frozen=True)
class MappedLink:
    """One entry of the router map: which router series measures a perfSONAR link."""

    source: str
    destination: str
    file: Path
    format: str
    capacity_bps: float
    series: str | None = None
    direction: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


_READERS: dict[str, Callable[[MappedLink], list[UtilisationSeries]]] = {
    "router_csv": lambda e: read_router_csv_file(e.file, e.capacity_bps, **e.options),
    "site_snmp_json": lambda e: read_site_snmp_json_file(e.file, e.capacity_bps),
    "lhcopn_flows": lambda e: read_lhcopn_flows_file(e.file, default_capacity_bps=e.capacity_bps),
    "snmp_counters": lambda e: read_snmp_counters_file(e.file, {e.series or "": e.capacity_bps}),
}


def read_router_map(path: Path) -> list[MappedLink]:
    """Entries of a router map file; file paths are relative to the map's directory."""
    document = json.loads(Path(path).read_text())
    entries = []
    for number, item in enumerate(document.get("links", []), start=1):
        try:
            entries.append(
                MappedLink(
                    source=_canonical_ip(item["source"]),
                    destination=_canonical_ip(item["destination"]),
                    file=Path(path).parent / item["file"],
                    format=item["format"],
                    capacity_bps=float(item["capacity_bps"]),
                    series=item.get("series"),
                    direction=item.get("direction"),
                    options=dict(item.get("options", {})),
                )
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"{path}: links[{number}] is invalid: {error}") from None
    return entries


def _canonical_ip(text: str) -> str:
    return str(ipaddress.ip_address(text.strip()))


def load_mapped_series(entry: MappedLink) -> UtilisationSeries:
    """The one series of `entry.file` named by `entry.series` and `entry.direction`."""
    if entry.format not in _READERS:
        raise ValueError(
            f"unknown router data format {entry.format!r}; use one of {sorted(_READERS)}"
        )
    found = [
        series
        for series in _READERS[entry.format](entry)
        if entry.series in (None, series.link) and entry.direction in (None, series.direction)
    ]
    if len(found) != 1:
        raise ValueError(
            f"{entry.file}: {len(found)} series match {entry.series!r} {entry.direction!r}"
        )
    return found[0]


def mapped_labels(
    entries: list[MappedLink], state: LinkState, first_minute: int, n_minutes: int
) -> LabelGrid:
    """Router utilisation on the minute grid for each state row the map names (NaN elsewhere)."""
    utilisation = np.full((len(state), n_minutes), np.nan)
    last_known = np.full((len(state), n_minutes), np.nan)
    for entry in entries:
        row = state.index.rows.get((entry.source, entry.destination))
        if row is not None:
            series = load_mapped_series(entry)
            utilisation[row] = to_minutes(series, first_minute, n_minutes)
            last_known[row] = last_completed_sample(series, first_minute, n_minutes)
    return LabelGrid(first_minute, utilisation, last_known)


def last_completed_sample(
    series: UtilisationSeries, first_minute: int, n_minutes: int
) -> np.ndarray:
    """For each minute, the newest sample whose interval ended by the minute's start (NaN if none).

    >>> from training.readers import build_series
    >>> s = build_series("l", "in", [(0, 0.5), (300, 0.25)], period_s=300)
    >>> last_completed_sample(s, first_minute=4, n_minutes=8).tolist()
    [nan, 0.5, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25]
    """
    starts = (first_minute + np.arange(n_minutes, dtype=np.int64)) * 60
    ends = series.timestamps + series.period_s
    index = np.searchsorted(ends, starts, side="right") - 1
    return np.where(index >= 0, series.utilisation[np.maximum(index, 0)], np.nan)
