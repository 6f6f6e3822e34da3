"""The rules on throughput tests and traceroutes: pure functions over every link's results.

They judge the state's results as they are when a minute is evaluated (a throughput test every
few hours, a trace every few minutes), each rule giving per link a condition, clean, or unknown
(neither), as the minute rules do:

- bandwidth (OSG's Alarms and Alerts, AAAS): the mean rate of the newest tests against the means
  of the 4-day bins of the three weeks before: decreased when z <= -2 and the change against the
  mean of the means is -50 % or less, increased when z >= 2 and +50 % or more. AAAS's newest bin
  is about the last day (its bins start 21 days before each daily run), so the newest tests here
  are those of the last day (`RecentTests`: slots of 6 hours, the current and the 3 before),
  set in place of the state's newest epoch-aligned bin (`against_older_bins`), whose mean mixes
  tests before and after a change for days. Unknown where it cannot be said (fewer than two
  bins, no recent test). The rule must still hold after the next test
  (`confirmed_by_next_test`): one test caught in a burst of traffic is no "decrease";
- path changed: the current path (its answering hops, `PathState`'s fingerprint) differs from
  the link's established one, reaches the destination (or cannot be told) and has persisted:
  its latest trace is at least `persist_s` after its first, so it was seen in consecutive
  traces over that time (a path that flaps between two routes never persists); clean when the
  current path is the established one. A link's first path that persists becomes its
  established path (`settled_paths`);
- destination not reached: the current path stops before the destination and has persisted
  the same way; clean when it reaches it.

A link whose latest trace is older than `PATH_STALE_S` says nothing about its path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.alarms.conditions import Verdict
from service.state.path_state import PathSummary
from service.state.throughput_state import BandwidthChange, LatestThroughput

BANDWIDTH_Z = 2.0
BANDWIDTH_CHANGE = 0.5
#: A trace older than this (s) says nothing about a link's path now (traces run every few
#: minutes; an hour is several missed in a row).
PATH_STALE_S = 3600


#: The newest tests are those of this many slots of `RECENT_SLOT_S` (the current and the ones
#: before it: the last 18 to 24 hours).
RECENT_SLOT_S = 21_600
RECENT_SLOTS = 4


@dataclass
class RecentTests:
    """Per link, the latest test counted and a ring of slots of 6 hours (period number, sum of
    the rates, number of tests) of the tests seen since; views of the engine's row arrays."""

    seen: np.ndarray
    period: np.ndarray
    total: np.ndarray
    count: np.ndarray

    def add(self, latest: LatestThroughput) -> None:
        """Count each link's latest test once (a link's tests come hours apart: each is the
        latest at some evaluation; of several arriving at once, e.g. from an archive, only the
        latest is counted)."""
        rows = np.flatnonzero(latest.time > self.seen)
        periods = latest.time[rows] // RECENT_SLOT_S
        slots = periods % RECENT_SLOTS
        stale = self.period[rows, slots] != periods
        self.period[rows[stale], slots[stale]] = periods[stale]
        self.total[rows[stale], slots[stale]] = 0
        self.count[rows[stale], slots[stale]] = 0
        self.total[rows, slots] += latest.bps[rows].astype(self.total.dtype)
        self.count[rows, slots] += 1
        self.seen[rows] = latest.time[rows]

    def mean(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Per link, the mean rate of the tests of the last 18-24 hours (NaN: none) and their
        number.

        >>> ring = [np.zeros((2, 4), t) for t in (np.int32, np.float32, np.int16)]
        >>> recent = RecentTests(np.zeros(2, np.int64), *ring)
        >>> def test(when, bps):
        ...     recent.add(LatestThroughput(np.array([bps, np.nan]), np.array([when, -1]), None))
        >>> test(100, 4e8); test(30_000, 2e8); test(30_000, 2e8)  # the same test twice
        >>> [values.tolist() for values in recent.mean(30_100)]
        [[300000000.0, nan], [2, 0]]
        >>> test(100_000, 1e8); [values.tolist() for values in recent.mean(100_100)]
        [[150000000.0, nan], [2, 0]]
        """
        current = int(now) // RECENT_SLOT_S
        held = (self.period > current - RECENT_SLOTS) & (self.period <= current)
        count = np.where(held, self.count, 0).sum(axis=1)
        total = np.where(held, self.total, 0.0).sum(axis=1, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(count > 0, total / count, np.nan)
        return mean, count


def against_older_bins(bandwidth: BandwidthChange, recent: np.ndarray) -> BandwidthChange:
    """AAAS's z and change of `recent` (a mean rate per link) set in place of the newest bin's
    mean among the bins' means. The older bins' sum and spread follow from the newest bin's
    scores: mean of the means m = newest / (1 + change), their squared deviations (bins - 1) x
    ((newest - m) / z)^2; a z undefined with two bins or more and a newest mean is bins that do
    not vary. NaN where that cannot be said.

    Bin means 1, 1, 1, 1, 1, 0.2 (z -2.04, change -0.7692), the recent mean 0.2, 1 or 3:

    >>> one = lambda value: np.array([value] * 3)
    >>> scores = BandwidthChange(one(-2.041241), one(-0.769231), one(0.2), one(6))
    >>> again = against_older_bins(scores, np.array([0.2, 1.0, 3.0]))
    >>> (again.z.round(2) + 0).tolist(), (again.change.round(4) + 0).tolist()
    ([-2.04, 0.0, 2.04], [-0.7692, 0.0, 1.25])
    """
    newest, bins = bandwidth.newest_mean, bandwidth.bins.astype(np.float64)
    z, change = bandwidth.z, bandwidth.change
    flat = np.isnan(z) & (bins >= 2) & ~np.isnan(newest)
    known = (bins >= 2) & ~np.isnan(newest) & ~np.isnan(recent) & (flat | (z != 0))
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(flat, newest, newest / (1 + change))
        deviation = newest - mean
        squares = np.where(flat, 0.0, (bins - 1) * (deviation / z) ** 2)
        older = bins - 1
        mean_after = (bins * mean - newest + recent) / bins
        shift = mean - mean_after
        older_squares = squares - deviation**2 - 2 * shift * deviation + older * shift**2
        spread = np.sqrt(np.maximum(older_squares + (recent - mean_after) ** 2, 0) / older)
        z_after = np.where(spread > 1e-9 * mean_after, (recent - mean_after) / spread, 0.0)
        change_after = (recent - mean_after) / mean_after
    return BandwidthChange(
        np.where(known, z_after, np.nan),
        np.where(known, change_after, np.nan),
        np.where(known, recent, np.nan),
        bins.astype(bandwidth.bins.dtype),
    )


def bandwidth_verdicts(bandwidth: BandwidthChange) -> tuple[Verdict, Verdict]:
    """(decreased, increased) of every link, AAAS's rule.

    >>> z, change = np.array([-2.04, -2.04, 2.1, 1.0, np.nan]), np.array([-.7, -.4, .6, .6, 0])
    >>> down, up = bandwidth_verdicts(BandwidthChange(z, change, z, z))
    >>> down.condition.tolist(), down.clean.tolist()
    ([True, False, False, False, False], [False, True, True, True, False])
    >>> up.condition.tolist()
    [False, False, True, False, False]
    """
    z, change = bandwidth.z, bandwidth.change
    judged = ~np.isnan(z) & ~np.isnan(change)
    with np.errstate(invalid="ignore"):
        decreased = judged & (z <= -BANDWIDTH_Z) & (change <= -BANDWIDTH_CHANGE)
        increased = judged & (z >= BANDWIDTH_Z) & (change >= BANDWIDTH_CHANGE)
    return Verdict(decreased, judged & ~decreased), Verdict(increased, judged & ~increased)


def confirmed_by_next_test(
    verdict: Verdict, first_test: np.ndarray, latest_test: np.ndarray
) -> Verdict:
    """`verdict` where it has held since a test before the latest one (`first_test`, updated in
    place: the latest test's start when the condition begins, 0 once clean; kept while it says
    nothing).

    >>> first = np.array([0, 100, 100, 0])
    >>> held, clean = [True, True, False, False], [False, False, True, False]
    >>> verdict = Verdict(np.array(held), np.array(clean))
    >>> confirmed = confirmed_by_next_test(verdict, first, np.array([500, 500, 500, 500]))
    >>> confirmed.condition.tolist(), first.tolist()
    ([False, True, False, False], [500, 100, 0, 0])
    """
    first_test[verdict.clean] = 0
    starting = verdict.condition & (first_test == 0)
    first_test[starting] = latest_test[starting]
    return Verdict(verdict.condition & (latest_test > first_test), verdict.clean)


def persisting(paths: PathSummary, now: float, persist_s: float) -> np.ndarray:
    """Links whose current path is recent and has persisted `persist_s` seconds."""
    recent = (paths.seen >= 0) & (paths.seen >= now - PATH_STALE_S)
    mask: np.ndarray = recent & (paths.seen - paths.since >= persist_s)
    return mask


def settled_paths(
    paths: PathSummary, established: np.ndarray, now: float, persist_s: float
) -> np.ndarray:
    """Links without an established path (0) whose current one reaches the destination (or
    cannot be told) and has persisted: it becomes theirs."""
    mask: np.ndarray = (established == 0) & persisting(paths, now, persist_s) & (paths.reached != 0)
    return mask


def path_verdict(
    paths: PathSummary, established: np.ndarray, now: float, persist_s: float
) -> Verdict:
    """Path changed: a persisting current path that reaches the destination (or cannot be
    told) and is not the established one.

    >>> one = lambda *values: np.array(values)
    >>> paths = PathSummary(one(7, 8, 8, 9, 5), one(1000, 1000, 1000, 1000, 1000),
    ...     one(100, 990, 100, 100, 100), one(1, 1, 1, 0, 1), one(1, 1, 1, 1, 0),
    ...     one(9, 9, 9, 9, 9))
    >>> verdict = path_verdict(paths, one(7, 7, 7, 7, 5), now=1010.0, persist_s=600)
    >>> verdict.condition.tolist(), verdict.clean.tolist()
    ([False, False, True, False, False], [True, False, False, False, True])
    """
    recent = (paths.seen >= 0) & (paths.seen >= now - PATH_STALE_S)
    known = established != 0
    moved = persisting(paths, now, persist_s) & (paths.reached != 0) & known
    changed = moved & (paths.fingerprint != established)
    return Verdict(changed, recent & known & (paths.fingerprint == established))


def pending_paths(
    paths: PathSummary, established: np.ndarray, now: float, persist_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """(a changed path, a path stopping before its destination) that has not persisted yet:
    such links count when their host's or destination's links are grouped (traces run at
    phases minutes apart, so a site's links do not all persist in the same minute), but none
    has an alarm of its own yet."""
    recent = (paths.seen >= 0) & (paths.seen >= now - PATH_STALE_S)
    young = recent & ~persisting(paths, now, persist_s)
    changed = young & (established != 0) & (paths.reached != 0)
    return changed & (paths.fingerprint != established), young & (paths.reached == 0)


def unreached_verdict(paths: PathSummary, now: float, persist_s: float) -> Verdict:
    """Destination not reached: a persisting current path that stops before it.

    >>> one = lambda *values: np.array(values)
    >>> paths = PathSummary(one(7, 8, 9, 9), one(1000, 1000, 1000, -1), one(100, 990, 100, -1),
    ...     one(0, 0, 1, -1), one(0, 0, 0, 0), one(30, 30, 9, 0))
    >>> verdict = unreached_verdict(paths, now=1010.0, persist_s=600)
    >>> verdict.condition.tolist(), verdict.clean.tolist()
    ([True, False, False, False], [False, False, True, False])
    """
    recent = (paths.seen >= 0) & (paths.seen >= now - PATH_STALE_S)
    stopped = persisting(paths, now, persist_s) & (paths.reached == 0)
    return Verdict(stopped, recent & (paths.reached == 1))
