"""One analysis pass over every link: windows -> features -> filter -> predictor -> cost."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.analysis.all_time import compute_all_time_stats
from service.analysis.calibration import calibrated_estimates
from service.analysis.cost import compute_cost
from service.analysis.empirical_filter import FilterResult, apply_empirical_filter
from service.analysis.features import (
    FEATURE_NAMES,
    AllTimeStats,
    LinkWindows,
    NewestMinute,
    complete_rows,
    compute_features,
)
from service.analysis.predictor import UtilisationPredictor
from service.analysis.window import window_positions
from service.config import EmpiricalFilterInput
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import StateView

#: A link without a datapoint for this long (seconds) is stale.
STALE_AFTER_SECONDS = 300
#: Links analysed together: a block's dozens of intermediate arrays stay in the CPU cache, so
#: the time per link does not grow once the whole mesh no longer fits there.
BLOCK_LINKS = 4096
_SMOOTHED_DELAY = FEATURE_NAMES.index("delay_mean_smoothed")
_SMOOTHED_LOSS = FEATURE_NAMES.index("loss_smoothed")


@dataclass(frozen=True)
class ObservedLinks:
    """What the measurements alone say about each link, as arrays aligned with the view's rows."""

    delay_mean: np.ndarray
    delay_median: np.ndarray
    delay_std: np.ndarray
    delay_min: np.ndarray
    delay_p95: np.ndarray
    loss: np.ndarray
    all_time: AllTimeStats
    features: np.ndarray
    has_features: np.ndarray
    congested: np.ndarray
    empirical: np.ndarray
    samples: np.ndarray
    last_measurement: np.ndarray
    stale: np.ndarray
    clock_suspect: np.ndarray


@dataclass(frozen=True)
class LinkAnalysis(ObservedLinks):
    """Per-link results of one pass: the observations plus predicted utilisation and cost."""

    utilisation: np.ndarray
    congestion_probability: np.ndarray
    utilisation_low: np.ndarray
    utilisation_high: np.ndarray
    cost: np.ndarray


def build_windows(view: StateView) -> LinkWindows:
    """Every link's series ordered oldest -> newest, ending at the link's latest minute."""
    positions = window_positions(view.slot_minute, view.latest_minute)
    return LinkWindows(
        *(positions.gather(view.series[name]) for name in LinkWindows.__dataclass_fields__)
    )


def analyse_links(
    view: StateView,
    predictor: UtilisationPredictor | None,
    empirical_filter: EmpiricalFilterInput = "newest-minute",
) -> LinkAnalysis:
    """Every link analysed block by block, then one predictor call and the cost for all links.

    `empirical_filter` picks what the delay-and-loss filter's `congested` verdict reads: the
    newest minute (whose verdict is also a feature) or netTel's smoothed delay and loss.
    """
    starts = range(0, len(view), BLOCK_LINKS) or range(1)  # an empty view is one empty block
    blocks = [
        _observe(view.rows(slice(start, start + BLOCK_LINKS)), empirical_filter) for start in starts
    ]
    observed = _concatenate(blocks)
    utilisation = predict_utilisation(predictor, observed.features, observed.has_features)
    calibration = None if predictor is None else predictor.calibration
    probability, low, high = calibrated_estimates(utilisation, calibration)
    excess_delay = observed.delay_mean - observed.all_time.delay_min
    return LinkAnalysis(
        **vars(observed),
        utilisation=utilisation,
        congestion_probability=probability,
        utilisation_low=low,
        utilisation_high=high,
        cost=compute_cost(
            utilisation,
            observed.loss,
            excess_delay,
            observed.all_time.delay_min,
            observed.congested,
            probability,
        ),
    )


def _observe(view: StateView, empirical_filter: EmpiricalFilterInput) -> ObservedLinks:
    windows = build_windows(view)
    # Every occupied slot holds a distinct minute not yet archived, whatever its order.
    all_time = compute_all_time_stats(view.archive, view.series["delay_mean"], view.series["loss"])
    latest = _latest_delay(view)
    loss = _last_present(windows.loss)
    newest_verdict = apply_empirical_filter(
        latest["mean"], loss, all_time.delay_min, all_time.delay_std
    )
    newest = NewestMinute(
        latest["mean"], latest["std"], latest["median"], loss, newest_verdict.congested
    )
    features = compute_features(windows, all_time, newest)
    verdict = _configured_verdict(empirical_filter, newest_verdict, features, all_time)
    last_ts = view.latest_minute.astype(np.float64) * 60.0
    present = ~(np.isnan(windows.delay_mean) & np.isnan(windows.loss))
    return ObservedLinks(
        delay_mean=latest["mean"],
        delay_median=latest["median"],
        delay_std=latest["std"],
        delay_min=latest["min"],
        delay_p95=latest["p95"],
        loss=loss,
        all_time=all_time,
        features=features,
        has_features=complete_rows(features),
        congested=verdict.congested,
        empirical=verdict.score,
        samples=present.sum(axis=1),
        last_measurement=last_ts,
        stale=view.taken_at - last_ts > STALE_AFTER_SECONDS,
        clock_suspect=(view.clock_suspect_minute >= 0)
        & (view.clock_suspect_minute > view.latest_minute - WINDOW_MINUTES),
    )


def _configured_verdict(
    empirical_filter: EmpiricalFilterInput,
    newest_verdict: FilterResult,
    features: np.ndarray,
    all_time: AllTimeStats,
) -> FilterResult:
    """The filter as configured: the newest minute's verdict (the default, also a feature) or
    netTel's on the 15-minute smoothed delay and loss."""
    if empirical_filter != "netTel":
        return newest_verdict
    delay, loss = features[:, _SMOOTHED_DELAY], features[:, _SMOOTHED_LOSS]
    return apply_empirical_filter(delay, loss, all_time.delay_min, all_time.delay_std)


def _concatenate(blocks: list[ObservedLinks]) -> ObservedLinks:
    if len(blocks) == 1:
        return blocks[0]
    joined = {
        name: np.concatenate([getattr(block, name) for block in blocks])
        for name in ObservedLinks.__dataclass_fields__
        if name != "all_time"
    }
    all_time = AllTimeStats(
        **{
            name: np.concatenate([getattr(block.all_time, name) for block in blocks])
            for name in AllTimeStats.__dataclass_fields__
        }
    )
    return ObservedLinks(**joined, all_time=all_time)


def predict_utilisation(
    predictor: UtilisationPredictor | None, features: np.ndarray, has_features: np.ndarray
) -> np.ndarray:
    """One batched predictor call for every link with a complete feature row (the predictor
    reads its inputs out of the FEATURE_NAMES columns by name); NaN elsewhere."""
    utilisation = np.full(len(features), np.nan)
    if predictor is not None and has_features.any():
        utilisation[has_features] = predictor.predict(features[has_features])
    return utilisation


def _latest_delay(view: StateView) -> dict[str, np.ndarray]:
    """Delay statistics of each link's most recent minute with a histogram (NaN if none)."""
    rows = np.arange(len(view))
    slots = view.latest_delay_minute % WINDOW_MINUTES
    held = view.slot_minute[rows, slots] == view.latest_delay_minute
    pick = {
        key: view.series[f"delay_{key}"][rows, slots] for key in ("mean", "median", "std", "min")
    }
    pick["p95"] = view.latest_p95
    return {k: np.where(held & (view.latest_delay_minute >= 0), v, np.nan) for k, v in pick.items()}


def _last_present(window: np.ndarray) -> np.ndarray:
    """Last non-NaN value of each row (NaN for an empty row)."""
    valid = ~np.isnan(window)
    last = window.shape[1] - 1 - np.argmax(valid[:, ::-1], axis=1)
    values = window[np.arange(len(window)), last]
    return np.where(valid.any(axis=1), values, np.nan)
