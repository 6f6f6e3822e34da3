"""All-time per-link statistics: archived moments merged with the minutes still in the window."""

from __future__ import annotations

import numpy as np

from service.analysis.features import AllTimeStats
from service.state.running_stats import merge_moments, window_moments


def compute_all_time_stats(
    archive: dict[str, np.ndarray], delay_slots: np.ndarray, loss_slots: np.ndarray
) -> AllTimeStats:
    """Exact all-time mean, population std and minimum of delay, mean and std of loss."""
    n_d, mean_d, m2_d = merge_moments(
        archive["delay_n"], archive["delay_mean"], archive["delay_m2"], *window_moments(delay_slots)
    )
    n_l, mean_l, m2_l = merge_moments(
        archive["loss_n"], archive["loss_mean"], archive["loss_m2"], *window_moments(loss_slots)
    )
    with np.errstate(all="ignore"):
        window_min = np.nanmin(np.where(np.isnan(delay_slots), np.inf, delay_slots), axis=1)
        delay_min = np.minimum(archive["delay_min"], window_min)
        return AllTimeStats(
            delay_mean=np.where(n_d > 0, mean_d, np.nan),
            delay_std=np.where(n_d > 0, np.sqrt(m2_d / n_d), np.nan),
            delay_min=np.where(np.isfinite(delay_min), delay_min, np.nan),
            loss_mean=np.where(n_l > 0, mean_l, np.nan),
            loss_std=np.where(n_l > 0, np.sqrt(m2_l / n_l), np.nan),
        )
