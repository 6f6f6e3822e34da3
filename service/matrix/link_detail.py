"""One link's buffered 32-minute series, current features and record, its latest throughput
test and its network path, computed on demand."""

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
from service.state.link_state import LinkResults, StateView
from service.state.path_state import PathHop
from service.state.throughput_state import BIN_SECONDS


def build_link_detail(
    view: StateView,
    predictor: UtilisationPredictor | None,
    results: LinkResults | None = None,
    hops: list[PathHop] | None = None,
) -> dict[str, Any]:
    """Detail document of the single link in `view`; `results` and `hops` (its throughput and
    path state, taken with the view) fill `throughput` and `path` (nulls and [] without)."""
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
    link = build_link_records(view, analysis, predictor is not None, results)[0]
    return {
        "link": link,
        "series": series,
        "features": features,
        "throughput": throughput_detail(results, view.taken_at),
        "path": path_detail(results, hops or []),
    }


def throughput_detail(results: LinkResults | None, now: float) -> dict[str, Any]:
    """The latest test of the first link of `results` and AAAS's view of its 4-day bins.

    >>> from service.state.path_state import PathSummary
    >>> from service.state.throughput_state import BandwidthChange, LatestThroughput
    >>> one = lambda value: np.array([value])
    >>> results = LinkResults(0.0, one(0), LatestThroughput(one(4.1e8), one(1000), one(37)),
    ...     BandwidthChange(one(-2.04), one(-0.7667), one(1.2e8), one(6)), None)
    >>> throughput_detail(results, 1090.5)  # doctest: +NORMALIZE_WHITESPACE
    {'bps': 410000000, 'started_at': 1000, 'age_s': 90, 'retransmits': 37,
     'bandwidth': {'bin_days': 4, 'bins': 6, 'newest_bin_mean_bps': 120000000, 'z': -2.04,
                   'change': -0.7667}}
    """
    if results is None or int(results.throughput.time[0]) < 0:
        return {"bps": None, "started_at": None, "age_s": None, "retransmits": None,
                "bandwidth": None}  # fmt: skip
    latest, scores = results.throughput, results.bandwidth
    started = int(latest.time[0])
    retransmits = int(latest.retransmits[0])
    return {
        "bps": round(float(latest.bps[0])),
        "started_at": started,
        "age_s": max(int(now) - started, 0),
        "retransmits": None if retransmits < 0 else retransmits,
        "bandwidth": {
            "bin_days": BIN_SECONDS // 86_400,
            "bins": int(scores.bins[0]),
            "newest_bin_mean_bps": _whole(scores.newest_mean[0]),
            "z": _rounded(scores.z[0], 4),
            "change": _rounded(scores.change[0], 4),
        },
    }


def path_detail(results: LinkResults | None, hops: list[PathHop]) -> dict[str, Any]:
    """The current path of the first link of `results`: its hops from TTL 1 (a hop that did not
    answer has a null address), whether it reaches the destination, since when it has been the
    path (its first trace: the last change, or the first trace when it never changed), its
    latest trace and the changes of the last 24 hours."""
    paths = None if results is None else results.paths
    if paths is None or int(paths.seen[0]) < 0:
        return {"hops": [], "reaches_destination": None, "since": None, "traced_at": None,
                "changes_last_24h": 0}  # fmt: skip
    reached = int(paths.reached[0])
    return {
        "hops": [
            {
                "ttl": hop.ttl,
                "address": hop.address or None,
                "rtt_ms": None if math.isnan(hop.rtt_ms) else hop.rtt_ms,
                "asn": hop.asn or None,
            }
            for hop in hops
        ],
        "reaches_destination": None if reached < 0 else bool(reached),
        "since": int(paths.since[0]),
        "traced_at": int(paths.seen[0]),
        "changes_last_24h": int(paths.changes_last_day[0]),
    }


def _whole(value: float) -> int | None:
    return None if math.isnan(value) else round(value)


def _rounded(value: float, digits: int) -> float | None:
    return None if math.isnan(value) else round(float(value), digits)


def _json_floats(values: np.ndarray) -> list[float | None]:
    return [None if math.isnan(x) else round(x, 6) for x in values.tolist()]
