"""One link's buffered 32-minute series, current features and record, computed on demand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from service.analysis.features import FEATURE_NAMES
from service.analysis.link_analysis import analyse_links, build_windows
from service.analysis.predictor import UtilisationPredictor
from service.analysis.window import order_window
from service.matrix.snapshot import build_link_records
from service.state.link_buffers import WINDOW_MINUTES
from service.state.link_state import StateView


def build_link_detail(view: StateView, predictor: UtilisationPredictor | None) -> dict[str, Any]:
    """Detail document of the single link in `view`."""
    analysis = analyse_links(view, predictor)
    windows = build_windows(view)
    delay_min = order_window(view.slot_minute, view.series["delay_min"], view.latest_minute)
    reference = int(view.latest_minute[0])
    series = {
        "minutes": list(range(reference - WINDOW_MINUTES + 1, reference + 1)),
        "delay_mean": _json_floats(windows.delay_mean[0]),
        "delay_median": _json_floats(windows.delay_median[0]),
        "delay_std": _json_floats(windows.delay_std[0]),
        "delay_min": _json_floats(delay_min[0]),
        "loss": _json_floats(windows.loss[0]),
    }
    features = dict(zip(FEATURE_NAMES, _json_floats(analysis.features[0]), strict=True))
    link = build_link_records(view, analysis, predictor is not None)[0]
    return {"link": link, "series": series, "features": features}


def _json_floats(values: np.ndarray) -> list[float | None]:
    return [None if math.isnan(x) else round(x, 6) for x in values.tolist()]
