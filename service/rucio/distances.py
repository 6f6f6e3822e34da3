"""What `nettel rucio-sync` writes into Rucio's distances: pure functions, no I/O.

For an ordered pair of RSEs at different sites (data flows from the source RSE's site to the
destination's), the distance is the operator's baseline plus a congestion penalty:

    penalty(cost) = 0                                                  cost missing or <= calm
                  = min(max_penalty, ceil(max_penalty * (cost - calm) / (1 - calm)))   otherwise

an integer in [0, max_penalty], non-decreasing in the site-level cost. The baseline is the value
the pair had in Rucio before rucio-sync first wrote it (or the one a baseline file gives), kept in
the state file, so a link that calms returns exactly to it. Hysteresis: a new distance less than
`min_change` away from the current one is not written, except a return to the baseline.

A sync visits (reads, then maybe writes) only the pairs that need it: those whose distance should
change, and, the first time they are seen, those that have a penalty, a given baseline, or (with
add_missing) no record yet. Before writing, the value read back from Rucio is checked against the
state's: a value rucio-sync did not write (nor was about to write, `pending`) was set by someone
else and becomes the pair's baseline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

#: (source RSE, destination RSE)
Pair = tuple[str, str]
STATE_FORMAT = "nettel-rucio-sync"
STATE_VERSION = 1
#: A pair found without a distance row is read again after this long (operators add rows).
MISSING_ROW_RECHECK_SECONDS = 3600.0


@dataclass(frozen=True)
class PenaltyPolicy:
    """How a cost becomes a penalty, and which changes are worth a write."""

    max_penalty: int = 10
    calm_cost: float = 0.2
    min_change: int = 2

    def __post_init__(self) -> None:
        if self.max_penalty < 1 or self.min_change < 1 or not 0.0 <= self.calm_cost < 1.0:
            raise ValueError("need max_penalty >= 1, min_change >= 1 and 0 <= calm_cost < 1")


def penalty(cost: float | None, policy: PenaltyPolicy) -> int:
    """The congestion penalty of a site-level cost in [0, 1] (None: no data, no penalty).

    >>> policy = PenaltyPolicy(max_penalty=10, calm_cost=0.2)
    >>> [penalty(c, policy) for c in (None, 0.0, 0.2, 0.21, 0.5, 0.6, 1.0, 3.0)]
    [0, 0, 0, 1, 4, 5, 10, 10]
    """
    if cost is None or not math.isfinite(cost) or cost <= policy.calm_cost:
        return 0
    scaled = policy.max_penalty * (min(cost, 1.0) - policy.calm_cost) / (1.0 - policy.calm_cost)
    return min(policy.max_penalty, math.ceil(round(scaled, 9)))


@dataclass(frozen=True)
class PairRecord:
    """A pair rucio-sync manages: its baseline, the distance Rucio holds, and a write that may
    have reached Rucio without being confirmed (sent, then the process stopped)."""

    baseline: int
    distance: int
    pending: int | None = None


@dataclass
class SyncState:
    """The state file's contents: which Rucio, each managed pair, pairs found without a row."""

    rucio_url: str
    pairs: dict[Pair, PairRecord] = field(default_factory=dict)
    missing: dict[Pair, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Visit:
    """A pair to read from Rucio this sync, and the penalty its cost gives now."""

    pair: Pair
    penalty: int


@dataclass(frozen=True)
class Decision:
    """What to do with a visited pair once its Rucio value is known."""

    record: PairRecord | None  # None: no row, nothing managed
    write: int | None = None  # the distance to send; None: nothing to send
    add: bool = False  # the row is missing: POST (add_distance) rather than PUT
    adopted: bool = False  # Rucio held a value rucio-sync never wrote: the new baseline


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
) -> list[Visit]:
    """The pairs this sync must read (and may write), with their penalties."""
    visits = []
    for pair in pairs:
        pain = penalty(costs.get((rse_sites[pair[0]], rse_sites[pair[1]])), policy)
        record = state.pairs.get(pair)
        if record is None:
            checked = state.missing.get(pair)
            if checked is not None and now - checked < MISSING_ROW_RECHECK_SECONDS:
                continue
            if pain >= policy.min_change or add_missing or pair in baselines:
                visits.append(Visit(pair, pain))
            continue
        target = baselines.get(pair, record.baseline) + pain
        if record.pending is not None or worth_writing(target, record.distance, pain, policy):
            visits.append(Visit(pair, pain))
    return visits


def worth_writing(target: int, current: int, pain: int, policy: PenaltyPolicy) -> bool:
    """Hysteresis: a change of at least `min_change`, or any return to the baseline."""
    if target == current:
        return False
    return pain == 0 or abs(target - current) >= policy.min_change


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
    (PairRecord(baseline=3, distance=3, pending=None), 7)
    """
    if observed is None:
        if not add_missing:
            return Decision(None)
        baseline = added_baseline if given_baseline is None else given_baseline
        return Decision(PairRecord(baseline, baseline), baseline + visit.penalty, add=True)
    adopted = False
    if given_baseline is not None:
        baseline = given_baseline
    elif record is None:
        baseline = observed
    elif observed in (record.distance, record.pending):
        baseline = record.baseline
    else:
        baseline, adopted = observed, True
    target = baseline + visit.penalty
    write = target if worth_writing(target, observed, visit.penalty, policy) else None
    return Decision(PairRecord(baseline, observed), write, adopted=adopted)


def with_pending(record: PairRecord, distance: int) -> PairRecord:
    """The record while `distance` is being written (saved before the write is sent)."""
    return replace(record, pending=distance)


def confirmed(record: PairRecord, distance: int) -> PairRecord:
    """The record once Rucio accepted `distance`."""
    return PairRecord(record.baseline, distance)


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
                _integer(entry["baseline"]), _integer(entry["distance"]), _pending(entry)
            )
            for source, row in document["pairs"].items()
            for destination, entry in row.items()
        }
        missing = {
            (source, destination): float(checked)
            for source, row in document.get("missing", {}).items()
            for destination, checked in row.items()
        }
        return SyncState(str(document["rucio_url"]), pairs, missing)
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
