"""The rules on throughput tests and traceroutes: pure functions over every link's results.

They judge the state's results as they are when a minute is evaluated (a throughput test every
few hours, a trace every few minutes), each rule giving per link a condition, clean, or unknown
(neither), as the minute rules do:

- bandwidth (OSG's Alarms and Alerts, AAAS): the newest 4-day bin's mean rate against the means
  of the bins of the last three weeks (`ThroughputState.bandwidth_change`): decreased when
  z <= -2 and the change against the mean of the means is -50 % or less, increased when z >= 2
  and +50 % or more; unknown where z is not defined (fewer than two bins with results, none in
  the newest, or no spread). The rule must still hold after the next test
  (`confirmed_by_next_test`): right after a bin begins its mean is one test's, and one test
  caught in a burst of traffic would otherwise be a "decrease";
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

import numpy as np

from service.alarms.conditions import Verdict
from service.state.path_state import PathSummary
from service.state.throughput_state import BandwidthChange

BANDWIDTH_Z = 2.0
BANDWIDTH_CHANGE = 0.5
#: A trace older than this (s) says nothing about a link's path now (traces run every few
#: minutes; an hour is several missed in a row).
PATH_STALE_S = 3600


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
