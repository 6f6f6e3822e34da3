"""The rules, for one minute of every link at once: pure functions over numpy arrays.

Each rule says per subject whether its condition held that minute, was clean, or is unknown
(neither mask set), for `Latches` to count. AAAS's thresholds (sand-ci/AlarmsAndAlerts):

- loss: high when 2 % <= loss < 100 %, complete at 100 %. A buffer that overflows drops
  packets only while it is full, so high loss with the delay raised (the minute's median at
  least max(1 ms, 3 x the link's usual jitter) above its baseline mean) is congestion, not a
  loss fault, and counts as clean here;
- delay: the minute's median above max(1.5 x baseline p95, baseline mean + 2 x IQR), once the
  baseline holds `MIN_MEASUREMENTS` minutes; a queue shows itself besides (the delay's spread
  at least max(1 ms, 3 x usual jitter), or 0.5 % loss or more), a longer path or a step does
  not, so high delay with those signs counts as clean; nor is a link judged while a host at
  its ends has its clock off (its delays shift by the clock's error);
- clock, per host: (mean delay of its links out - mean delay of its links in) / 2, AAAS's
  correction, beyond 100 ms either way;
- silent: no datapoint from a link that minute while another link of its source or its
  destination host reported (so a mesh the service stopped hearing from is not silent), for
  links that ever reported delay or loss;
- congestion: the calibrated congestion probability at or above a threshold; a minute whose
  delay is raised without a queue's signs (a step: a model reads it as load) says nothing.

Raised delay, queue signs and the threshold read each link's `LinkNorms` (from its baseline);
a link without a baseline yet is judged raised against the lowest minute median and the
median spread its window holds.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from service.alarms.identities import LinkEnds
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import StateView

HIGH_LOSS = 0.02
COMPLETE_LOSS = 1.0
DELAY_P95_FACTOR = 1.5
DELAY_IQR_FACTOR = 2.0
#: Measurements a delay statistic needs (AAAS: 10 per pair in the evaluated period).
MIN_MEASUREMENTS = 10
CLOCK_CORRECTION_MS = 100.0
#: A delay is raised, and a spread a queue's, at this many times the link's usual jitter (its
#: baseline's typical standard deviation), and at least QUEUE_MIN_MS.
QUEUE_JITTER_FACTOR = 3.0
QUEUE_MIN_MS = 1.0
#: Loss at or above this is a queue's sign beside a raised delay (probes lost to background
#: loss in a minute of 600 stay far below it).
QUEUE_LOSS = 0.005


@dataclass(frozen=True)
class MinuteValues:
    """What every link measured in one minute (NaN where it has no such datapoint)."""

    minute: int
    loss: np.ndarray
    delay_mean: np.ndarray
    delay_median: np.ndarray
    delay_std: np.ndarray
    delay_min: np.ndarray
    present: np.ndarray


@dataclass(frozen=True)
class Verdict:
    """Per subject: the condition held, or was clean (neither: unknown)."""

    condition: np.ndarray
    clean: np.ndarray


@dataclass(frozen=True)
class LinkNorms:
    """Per link, from its baseline (NaN: none to judge by yet): the delay threshold, the mean
    of its minute medians and its usual jitter (ms)."""

    threshold: np.ndarray
    mean: np.ndarray
    jitter: np.ndarray


@dataclass(frozen=True)
class QueueSigns:
    """Per link this minute: its delay raised above its norm, and signs of a queue."""

    raised: np.ndarray
    signs: np.ndarray


def minute_values(view: StateView, minute: int, delay_only: bool = False) -> MinuteValues:
    """Every link's values of `minute` as the view holds them (if its slot still holds it);
    `delay_only`: just the delay median and spread (the rest NaN, `present` all False)."""
    slot = minute % WINDOW_MINUTES
    held = view.slot_minute[:, slot] == minute
    nothing = np.full(len(held), np.nan, np.float32)

    def column(name: str) -> np.ndarray:
        return np.where(held, view.series[name][:, slot], np.float32(np.nan))

    if delay_only:
        median, std = column("delay_median"), column("delay_std")
        return MinuteValues(
            minute, nothing, nothing, median, std, nothing, np.zeros(len(held), bool)
        )
    loss, mean = column("loss"), column("delay_mean")
    return MinuteValues(
        minute=minute,
        loss=loss,
        delay_mean=mean,
        delay_median=column("delay_median"),
        delay_std=column("delay_std"),
        delay_min=column("delay_min"),
        present=~(np.isnan(loss) & np.isnan(mean)),
    )


def link_norms(
    p25: np.ndarray,
    p75: np.ndarray,
    p95: np.ndarray,
    mean: np.ndarray,
    jitter: np.ndarray,
    minutes: np.ndarray,
) -> LinkNorms:
    """AAAS's threshold max(1.5 x p95, mean + 2 x IQR) of each baseline holding enough minutes
    of positive delays (a link whose delays are not positive has a clock problem, not a delay).

    >>> norms = link_norms(*(np.array([v]) for v in (40.0, 44.0, 50.0, 42.0, 0.3, 60.0)))
    >>> norms.threshold.tolist(), norms.mean.tolist(), norms.jitter.tolist()
    ([75.0], [42.0], [0.30000001192092896])
    """
    with np.errstate(invalid="ignore"):
        threshold = np.maximum(DELAY_P95_FACTOR * p95, mean + DELAY_IQR_FACTOR * (p75 - p25))
        usable = (minutes >= MIN_MEASUREMENTS) & (p95 > 0) & (mean > 0)
    return LinkNorms(
        *(np.where(usable, v, np.nan).astype(np.float32) for v in (threshold, mean, jitter))
    )


def queue_signs(values: MinuteValues, norms: LinkNorms, view: StateView) -> QueueSigns:
    """Raised delay and queue signs of every link this minute (see the module)."""
    mean, jitter = norms.mean, norms.jitter
    lossy = values.loss >= HIGH_LOSS
    missing = np.flatnonzero(np.isnan(mean) & lossy)  # few: lossy links without a baseline
    if len(missing):
        mean, jitter = mean.copy(), jitter.copy()
        with np.errstate(invalid="ignore"), _all_nan_allowed():
            mean[missing] = np.nanmin(view.series["delay_median"][missing], axis=1)
            jitter[missing] = np.nanmedian(view.series["delay_std"][missing], axis=1)
    margin = np.maximum(QUEUE_MIN_MS, QUEUE_JITTER_FACTOR * np.where(np.isnan(jitter), 0, jitter))
    with np.errstate(invalid="ignore"):
        raised = values.delay_median - mean >= margin
        signs = (values.delay_std >= margin) | (values.loss >= QUEUE_LOSS)
    return QueueSigns(raised, signs)


def loss_verdicts(values: MinuteValues, queue: QueueSigns) -> tuple[Verdict, Verdict]:
    """(high loss, complete loss) of every link."""
    loss = values.loss
    measured = ~np.isnan(loss)
    with np.errstate(invalid="ignore"):
        complete = loss >= COMPLETE_LOSS
        faulty = (loss >= HIGH_LOSS) & ~complete & ~queue.raised
    return Verdict(faulty, measured & ~complete & ~faulty), Verdict(complete, measured & ~complete)


def delay_verdict(
    values: MinuteValues, norms: LinkNorms, queue: QueueSigns, explained: np.ndarray
) -> Verdict:
    """High delay of every link; `explained`: links whose delay something else accounts for."""
    judged = ~np.isnan(values.delay_median) & ~np.isnan(norms.threshold) & ~explained
    with np.errstate(invalid="ignore"):
        above = values.delay_median > norms.threshold
    return Verdict(judged & above & ~queue.signs, judged & (~above | queue.signs))


def silent_verdict(values: MinuteValues, ends: LinkEnds, measured: np.ndarray) -> Verdict:
    """Links without a datapoint while a link of their source or destination host has one;
    only links that ever reported delay or loss (`measured`): a link known from throughput tests
    or traceroutes alone has no latency test to fall silent."""
    reporting = np.zeros(ends.host_count, bool)
    reporting[ends.source_host[values.present]] = True
    reporting[ends.destination_host[values.present]] = True
    peers = reporting[ends.source_host] | reporting[ends.destination_host]
    return Verdict(~values.present & peers & measured, values.present)


def ever_measured(view: StateView) -> np.ndarray:
    """Links that reported delay or loss at some time: a minute in the window or folded into
    the all-time moments."""
    in_window = (view.slot_minute >= 0).any(axis=1)
    return in_window | (view.archive["delay_n"] > 0) | (view.archive["loss_n"] > 0)


def congestion_verdict(probability: np.ndarray, threshold: float, queue: QueueSigns) -> Verdict:
    """Congestion of every link; a step in the delay (raised without signs) is not evidence."""
    with np.errstate(invalid="ignore"):
        above = probability >= threshold
    step = queue.raised & ~queue.signs
    return Verdict(above & ~step, ~np.isnan(probability) & ~above)


@dataclass(frozen=True)
class ClockCorrections:
    """Per host: AAAS's correction (ms, NaN without links both ways this minute), the verdict,
    and how many of its links had negative delays (a clock behind the far end's)."""

    correction: np.ndarray
    verdict: Verdict
    negative_links: np.ndarray


def clock_corrections(values: MinuteValues, ends: LinkEnds) -> ClockCorrections:
    """(mean delay out - mean delay in) / 2 per host: a clock ahead by d shortens the delays
    of its links out by d and lengthens those in, and the far ends' errors mostly cancel.

    >>> ends = LinkEnds(np.array([0, 1]), np.array([1, 0]), ["a", "b"], [None, None])
    >>> v = MinuteValues(0, *(np.array(x) for x in ([0., 0.], [-140., 160.], [0., 0.],
    ...     [0., 0.], [-141., 159.], [True, True])))
    >>> clock_corrections(v, ends).correction.tolist()
    [-150.0, 150.0]
    """
    hosts = ends.host_count
    measured = ~np.isnan(values.delay_mean)
    delay = np.where(measured, values.delay_mean, 0.0)
    out_sum = np.bincount(ends.source_host, delay, hosts)
    out_count = np.bincount(ends.source_host, measured, hosts)
    in_sum = np.bincount(ends.destination_host, delay, hosts)
    in_count = np.bincount(ends.destination_host, measured, hosts)
    both = (out_count > 0) & (in_count > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        correction = np.where(both, (out_sum / out_count - in_sum / in_count) / 2, np.nan)
    off = np.abs(correction) > CLOCK_CORRECTION_MS
    negative = measured & (np.where(measured, values.delay_min, 0.0) < 0)
    negative_links = np.bincount(ends.source_host, negative, hosts) + np.bincount(
        ends.destination_host, negative, hosts
    )
    return ClockCorrections(correction, Verdict(off, both & ~off), negative_links.astype(int))


def clock_explained(ends: LinkEnds, clock: Verdict) -> np.ndarray:
    """Links with an end whose clock is off this minute."""
    return np.asarray(clock.condition[ends.source_host] | clock.condition[ends.destination_host])


@contextmanager
def _all_nan_allowed() -> Iterator[None]:
    """A window without a delay gives NaN, quietly."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
