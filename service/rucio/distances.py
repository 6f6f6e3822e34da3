"""What `nettel rucio-sync` writes into Rucio's distances: pure functions, no I/O.

For an ordered pair of RSEs at different sites (data flows from the source RSE's site to the
destination's), the distance is the operator's baseline plus a congestion penalty, the integer
step of the cost's *level* (`penalty_level`):

    level(cost) = 0                                              cost missing or <= calm
                = log2(cost / calm)                              calm < cost <= fine
                = F + (max_penalty - F) * (cost - fine) / (1 - fine)   cost > fine,
                  with F = log2(fine / calm)
    penalty(cost) = min(max_penalty, ceil(level(cost)))

With the defaults (calm 0.005, fine 0.2, max_penalty 30) calm costs climb one step per doubling
(0.01 -> 1, 0.02 -> 2, 0.04 -> 3, 0.08 -> 4, 0.16 -> 5), so Rucio keeps the order the cost
gives among calm paths, and from 0.2 on each step is 0.8 / (30 - F) ~ 0.032 of cost, up to 30
(three of Rucio's hop penalties) at cost 1. `fine <= calm` gives the linear mapping
`ceil(max_penalty * (cost - calm) / (1 - calm))` of earlier versions.

The baseline is the value the pair had in Rucio before rucio-sync first wrote it (or the one a
baseline file gives), kept in the state file, so a link that calms returns exactly to it.
Hysteresis (`worth_writing`): a change of fewer than `min_change` steps is not written, and a
change is written only once the level is `hysteresis` of a step past the boundary it crossed
(a cost that hovers at a boundary does not flip the distance at every sync); a return to the
baseline is always written.

A sync visits (reads, then maybe writes) the pairs that need it: those whose distance should
change, and, the first time they are seen, those that have a penalty, a given baseline, or (with
add_missing) no record yet; and a rotating slice of the managed pairs (`reread_slice`), so that
a Rucio whose distances changed behind rucio-sync's back is repaired within a bounded number of
syncs. Before writing, the value read back from Rucio is checked against the state's: the
baseline, the distance recorded or pending, or a distance rucio-sync wrote earlier (a restored
database, a reset) is rucio-sync's own and is corrected; any other value was set by someone else
and becomes the pair's baseline.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: (source RSE, destination RSE)
Pair = tuple[str, str]
STATE_FORMAT = "nettel-rucio-sync"
STATE_VERSION = 1
#: A pair found without a distance row is read again after this long (operators add rows).
MISSING_ROW_RECHECK_SECONDS = 3600.0
#: Penalties (distance - baseline) up to this are remembered per pair when written (a bit each),
#: so that a restored database's older value is recognised as rucio-sync's own.
HISTORY_BITS = 63


@dataclass(frozen=True)
class PenaltyPolicy:
    """How a cost becomes a penalty, and which changes are worth a write."""

    max_penalty: int = 30
    calm_cost: float = 0.005
    min_change: int = 1
    fine_cost: float = 0.2
    hysteresis: float = 0.5

    def __post_init__(self) -> None:
        if self.max_penalty < 1 or self.min_change < 1 or not 0.0 <= self.calm_cost < 1.0:
            raise ValueError("need max_penalty >= 1, min_change >= 1 and 0 <= calm_cost < 1")
        if not 0.0 <= self.fine_cost < 1.0 or not 0.0 <= self.hysteresis < 1.0:
            raise ValueError("need 0 <= fine_cost < 1 and 0 <= hysteresis < 1")
        if self.fine_cost > self.calm_cost:
            if self.calm_cost <= 0.0:
                raise ValueError(
                    "fine_cost needs calm_cost > 0 (its steps double the cost from calm_cost); "
                    "fine_cost 0 gives the linear mapping"
                )
            if self.max_penalty < self.fine_steps:
                raise ValueError(
                    f"max_penalty {self.max_penalty} is below the {self.fine_steps:.2f} steps "
                    f"from calm_cost {self.calm_cost} to fine_cost {self.fine_cost}"
                )

    @property
    def fine_steps(self) -> float:
        """The level at fine_cost: log2(fine_cost / calm_cost) (0: no doubling ladder)."""
        if self.fine_cost <= self.calm_cost:
            return 0.0
        return math.log2(self.fine_cost / self.calm_cost)


def penalty_level(cost: float | None, policy: PenaltyPolicy) -> float:
    """The continuous level whose ceiling is the penalty: 0 for no data or a calm cost.

    >>> [round(penalty_level(c, PenaltyPolicy()), 3) for c in (None, 0.005, 0.01, 0.2, 0.6, 1.0)]
    [0.0, 0.0, 1.0, 5.322, 17.661, 30.0]
    """
    if cost is None or not math.isfinite(cost) or cost <= policy.calm_cost:
        return 0.0
    cost = min(cost, 1.0)
    top = float(policy.max_penalty)
    steps = policy.fine_steps
    if steps == 0.0:
        return top * (cost - policy.calm_cost) / (1.0 - policy.calm_cost)
    if cost <= policy.fine_cost:
        return math.log2(cost / policy.calm_cost)
    return steps + (top - steps) * (cost - policy.fine_cost) / (1.0 - policy.fine_cost)


def penalty(cost: float | None, policy: PenaltyPolicy) -> int:
    """The congestion penalty of a site-level cost in [0, 1] (None: no data, no penalty): an
    integer in [0, max_penalty], non-decreasing in the cost.

    >>> [penalty(c, PenaltyPolicy()) for c in (None, 0.0, 0.005, 0.01, 0.05, 0.1, 0.2, 0.5, 1.0)]
    [0, 0, 0, 1, 4, 5, 6, 15, 30]
    >>> linear = PenaltyPolicy(max_penalty=10, calm_cost=0.2, fine_cost=0.0)  # earlier default
    >>> [penalty(c, linear) for c in (None, 0.0, 0.2, 0.21, 0.5, 0.6, 1.0, 3.0)]
    [0, 0, 0, 1, 4, 5, 10, 10]
    """
    level = penalty_level(cost, policy)
    if level <= 0.0:
        return 0
    return min(policy.max_penalty, max(1, math.ceil(round(level, 9))))


@dataclass(frozen=True)
class PairRecord:
    """A pair rucio-sync manages: its baseline, the distance Rucio holds, a write that may have
    reached Rucio without being confirmed (sent, then the process stopped), and the penalties
    rucio-sync has written to it under this baseline (bit i: baseline + i)."""

    baseline: int
    distance: int
    pending: int | None = None
    written: int = 0

    def is_own(self, value: int) -> bool:
        """Whether `value` is the baseline or a distance rucio-sync wrote (or is writing)."""
        if value in (self.baseline, self.distance, self.pending):
            return True
        offset = value - self.baseline
        return 0 < offset <= HISTORY_BITS and bool(self.written >> offset & 1)


@dataclass
class SyncState:
    """The state file's contents: which Rucio, each managed pair, pairs found without a row, and
    how many syncs were made (the rotation of re-reads)."""

    rucio_url: str
    pairs: dict[Pair, PairRecord] = field(default_factory=dict)
    missing: dict[Pair, float] = field(default_factory=dict)
    syncs: int = 0


@dataclass(frozen=True)
class Visit:
    """A pair to read from Rucio this sync, the penalty its cost gives now and that penalty's
    level (None: hysteresis on whole steps only)."""

    pair: Pair
    penalty: int
    level: float | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Decision:
    """What to do with a visited pair once its Rucio value is known."""

    record: PairRecord | None  # None: no row, nothing managed
    write: int | None = None  # the distance to send; None: nothing to send
    add: bool = False  # the row is missing: POST (add_distance) rather than PUT
    adopted: bool = False  # Rucio held a value rucio-sync never wrote: the new baseline
    drifted: bool = False  # Rucio held an older value of rucio-sync's own (restore, reset)


def rse_pairs(rse_sites: Mapping[str, str]) -> list[Pair]:
    """Ordered pairs of RSEs at different sites, sorted.

    >>> rse_pairs({"A_DISK": "A", "A_TAPE": "A", "B_DISK": "B"})
    [('A_DISK', 'B_DISK'), ('A_TAPE', 'B_DISK'), ('B_DISK', 'A_DISK'), ('B_DISK', 'A_TAPE')]
    """
    rses = sorted(rse_sites)
    return [(s, d) for s in rses for d in rses if rse_sites[s] != rse_sites[d]]


def site_costs(site_links: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], float]:
    """(source site, destination site) -> cost of the links nettel has fresh data for (a
    stale site pair, or one without a cost, counts as no data).

    >>> site_costs([{"source": "A", "destination": "B", "cost": 0.5, "stale": False},
    ...             {"source": "B", "destination": "A", "cost": 0.9, "stale": True},
    ...             {"source": "A", "destination": "C", "cost": None, "stale": False}])
    {('A', 'B'): 0.5}
    """
    return {
        (link["source"], link["destination"]): float(link["cost"])
        for link in site_links
        if link.get("cost") is not None and not link.get("stale", False)
    }


def reread_slice(pairs: Iterable[Pair], sync_number: int, every: int) -> set[Pair]:
    """The pairs a sync reads again whatever their cost: those whose stable hash falls in this
    sync's slice, so that each pair is read once every `every` consecutive syncs.

    >>> pairs = [(f"S{i}", "D") for i in range(100)]
    >>> sorted(len(reread_slice(pairs, n, 4)) for n in range(4))
    [25, 25, 25, 25]
    >>> set().union(*(reread_slice(pairs, n, 4) for n in range(4, 8))) == set(pairs)
    True
    """
    turn = sync_number % every
    return {pair for pair in pairs if _pair_hash(pair) % every == turn}


def _pair_hash(pair: Pair) -> int:
    return zlib.crc32(f"{pair[0]}\0{pair[1]}".encode())


def plan_visits(
    pairs: Iterable[Pair],
    rse_sites: Mapping[str, str],
    costs: Mapping[tuple[str, str], float],
    state: SyncState,
    policy: PenaltyPolicy,
    *,
    baselines: Mapping[Pair, int],
    add_missing: bool,
    now: float,
    reread: Collection[Pair] = frozenset(),
    max_changes: int | None = None,
) -> list[Visit]:
    """The pairs this sync must read (and may write), with their penalties: the pairs whose
    distance should change, largest change first and at most `max_changes` of them (the others
    wait for the next sync), then the managed pairs of `reread` not among them."""
    changes: list[tuple[int, Visit]] = []
    rereads = []
    for pair in pairs:
        cost = costs.get((rse_sites[pair[0]], rse_sites[pair[1]]))
        level = penalty_level(cost, policy)
        visit = Visit(pair, penalty(cost, policy), level)
        record = state.pairs.get(pair)
        if record is None:
            checked = state.missing.get(pair)
            if checked is not None and now - checked < MISSING_ROW_RECHECK_SECONDS:
                continue
            if add_missing or pair in baselines:
                changes.append((visit.penalty, visit))
            elif worth_writing(visit.penalty, 0, visit.penalty, policy, level):
                changes.append((visit.penalty, visit))
            continue
        target = baselines.get(pair, record.baseline) + visit.penalty
        if record.pending is not None or worth_writing(
            target, record.distance, visit.penalty, policy, level
        ):
            changes.append((abs(target - record.distance), visit))
        elif pair in reread:
            rereads.append(visit)
    changes.sort(key=lambda item: -item[0])  # stable: pairs in their order within a size
    chosen = changes if max_changes is None else changes[:max_changes]
    return [visit for _, visit in chosen] + rereads


def worth_writing(
    target: int, current: int, pain: int, policy: PenaltyPolicy, level: float | None = None
) -> bool:
    """Hysteresis: a change of at least `min_change` steps whose level (when given) is at least
    `hysteresis` of a step past the boundary it crossed; any return to the baseline.

    >>> policy = PenaltyPolicy(min_change=1, hysteresis=0.5)
    >>> worth_writing(8, 7, 5, policy), worth_writing(8, 7, 5, policy, level=4.3)
    (True, False)
    >>> worth_writing(8, 7, 5, policy, level=4.6), worth_writing(3, 4, 0, policy, level=0.0)
    (True, True)
    """
    if target == current:
        return False
    if pain == 0:
        return True
    if abs(target - current) < policy.min_change:
        return False
    if level is None:
        return True
    written = current - (target - pain)  # the penalty Rucio holds, on this baseline
    if target > current:
        return level > written + policy.hysteresis
    return level <= written - 1 - policy.hysteresis


def decide(
    visit: Visit,
    record: PairRecord | None,
    observed: int | None,
    *,
    policy: PenaltyPolicy,
    given_baseline: int | None,
    add_missing: bool,
    added_baseline: int,
) -> Decision:
    """What a visited pair needs, from Rucio's value (`observed`, None: no row) and its record.

    >>> decision = decide(Visit(("A", "B"), 4), None, 3, policy=PenaltyPolicy(),
    ...                   given_baseline=None, add_missing=False, added_baseline=10)
    >>> decision.record, decision.write
    (PairRecord(baseline=3, distance=3, pending=None, written=0), 7)
    """
    if observed is None:
        if not add_missing:
            return Decision(None)
        baseline = added_baseline if given_baseline is None else given_baseline
        return Decision(PairRecord(baseline, baseline), baseline + visit.penalty, add=True)
    adopted = drifted = False
    written = 0
    if given_baseline is not None:
        baseline = given_baseline
        if record is not None and record.baseline == given_baseline:
            written = record.written
    elif record is None:
        baseline = observed
    elif record.is_own(observed):
        baseline, written = record.baseline, record.written
        drifted = observed not in (record.distance, record.pending)
    else:
        baseline, adopted = observed, True
    target = baseline + visit.penalty
    write = target if worth_writing(target, observed, visit.penalty, policy, visit.level) else None
    return Decision(PairRecord(baseline, observed, None, written), write, adopted=adopted,
                    drifted=drifted)  # fmt: skip


def with_pending(record: PairRecord, distance: int) -> PairRecord:
    """The record while `distance` is being written (saved before the write is sent)."""
    return replace(record, pending=distance)


def confirmed(record: PairRecord, distance: int) -> PairRecord:
    """The record once Rucio accepted `distance` (remembered among the pair's written values)."""
    offset = distance - record.baseline
    written = record.written | (1 << offset if 0 < offset <= HISTORY_BITS else 0)
    return PairRecord(record.baseline, distance, None, written)


def encode_state(state: SyncState) -> str:
    """The state file: JSON, pairs nested source -> destination, sorted.

    >>> text = encode_state(SyncState("https://rucio", {("A", "B"): PairRecord(3, 7)}))
    >>> json.loads(text)["pairs"]
    {'A': {'B': {'baseline': 3, 'distance': 7}}}
    """
    pairs: dict[str, dict[str, dict[str, int]]] = {}
    for (source, destination), record in sorted(state.pairs.items()):
        entry = {"baseline": record.baseline, "distance": record.distance}
        if record.pending is not None:
            entry["pending"] = record.pending
        if record.written:
            entry["written"] = record.written
        pairs.setdefault(source, {})[destination] = entry
    missing: dict[str, dict[str, float]] = {}
    for (source, destination), checked in sorted(state.missing.items()):
        missing.setdefault(source, {})[destination] = checked
    document = {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "rucio_url": state.rucio_url,
        "pairs": pairs,
        "missing": missing,
        "syncs": state.syncs,
    }
    return json.dumps(document)


def decode_state(text: str) -> SyncState:
    """The inverse of `encode_state`; ValueError naming what is wrong."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("format") != STATE_FORMAT:
        raise ValueError(f"not a {STATE_FORMAT} state file")
    if document.get("version") != STATE_VERSION:
        raise ValueError(f"state version {document.get('version')!r}, expected {STATE_VERSION}")
    try:
        pairs = {
            (source, destination): PairRecord(
                _integer(entry["baseline"]),
                _integer(entry["distance"]),
                _pending(entry),
                _integer(entry.get("written", 0)),
            )
            for source, row in document["pairs"].items()
            for destination, entry in row.items()
        }
        missing = {
            (source, destination): float(checked)
            for source, row in document.get("missing", {}).items()
            for destination, checked in row.items()
        }
        syncs = _integer(document.get("syncs", 0))
        return SyncState(str(document["rucio_url"]), pairs, missing, syncs)
    except (KeyError, TypeError, AttributeError, ValueError) as error:
        raise ValueError(f"malformed pairs: {error!r}") from None


def parse_baselines(document: object) -> dict[Pair, int]:
    """A baseline file's mapping `SOURCE_RSE: {DESTINATION_RSE: distance}`; ValueError if not.

    >>> parse_baselines({"A_DISK": {"B_DISK": 3, "C_DISK": 5}})
    {('A_DISK', 'B_DISK'): 3, ('A_DISK', 'C_DISK'): 5}
    """
    if not isinstance(document, dict) or not all(
        isinstance(row, dict) for row in document.values()
    ):
        raise ValueError("expected a mapping SOURCE_RSE: {DESTINATION_RSE: distance}")
    baselines = {}
    for source, row in document.items():
        for destination, distance in row.items():
            value = _integer(distance)
            if value < 0:
                raise ValueError(f"{source} -> {destination}: distance {value} is negative")
            baselines[(str(source), str(destination))] = value
    return baselines


def _integer(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{value!r} is not an integer distance")
    return value


def _pending(entry: Mapping[str, object]) -> int | None:
    pending = entry.get("pending")
    return None if pending is None else _integer(pending)
