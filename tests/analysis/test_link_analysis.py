"""analyse_links over a LinkState fed constructed data, with a fake batched predictor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.analysis import link_analysis
from service.analysis.features import FEATURE_NAMES, AllTimeStats
from service.analysis.link_analysis import STALE_AFTER_SECONDS, LinkAnalysis, analyse_links
from service.analysis.predictor import ModelInfo
from service.errors import RejectReason
from service.parse.histogram import compute_histogram_stats
from service.state.link_state import LinkState
from tests.message_factory import BASE_MINUTE, delay_message, link, loss_message

N = BASE_MINUTE
NOW = N * 60 + 30
FULL = link("192.0.2.1", "198.51.100.1", "full.a", "full.b")
SHORT = link("192.0.2.2", "198.51.100.1", "short.a", "full.b")


class FakePredictor:
    """Utilisation = smoothed delay / 100; records every call."""

    info = ModelInfo(name="fake", version="1", sha256="0" * 64, created="2024-01-01")
    calibration = None

    def __init__(self, feature_names: tuple[str, ...] = FEATURE_NAMES) -> None:
        self.feature_names = feature_names
        self.calls: list[np.ndarray] = []

    def predict(self, rows: np.ndarray) -> np.ndarray:
        self.calls.append(rows.copy())
        return rows[:, 0] / 100


def feed(state: LinkState, endpoints, minutes: range, delay_of, loss: float = 0.01) -> None:
    for minute in minutes:
        now = minute * 60 + 30
        state.apply(delay_message({minute * 60: delay_of(minute)}, endpoints), now)
        state.apply(loss_message({minute * 60: loss}, endpoints), now)


def two_link_state() -> LinkState:
    """FULL: 32 minutes, delay 10..41 ms, loss 0.01; SHORT: 3 minutes at 5 ms, loss 0."""
    state = LinkState()
    feed(state, FULL, range(N - 31, N + 1), lambda m: 10.0 + m - (N - 31))
    feed(state, SHORT, range(N - 2, N + 1), lambda m: 5.0, loss=0.0)
    return state


def test_one_batched_predictor_call_for_complete_rows_only() -> None:
    state = two_link_state()
    second_full = link("192.0.2.3", "198.51.100.1", "full2.a", "full.b")
    feed(state, second_full, range(N - 31, N + 1), lambda m: 50.0)
    predictor = FakePredictor()
    result = analyse_links(state.view(NOW), predictor)
    assert len(predictor.calls) == 1
    assert predictor.calls[0].shape == (2, len(FEATURE_NAMES))
    assert result.has_features.tolist() == [True, False, True]
    # Smoothed delay of FULL: mean of the last 15 minutes 27..41 = 34.
    assert result.utilisation[0] == pytest.approx(0.34, rel=1e-12)
    assert math.isnan(result.utilisation[1])
    assert result.utilisation[2] == pytest.approx(0.50, rel=1e-12)


def test_latest_values_all_time_and_filter_for_the_full_link() -> None:
    result = analyse_links(two_link_state().view(NOW), FakePredictor())
    assert result.delay_mean.tolist() == [41.0, 5.0]
    assert result.delay_median.tolist() == [41.0, 5.0]
    assert result.delay_std.tolist() == [0.0, 0.0]
    assert result.delay_min.tolist() == [41.0, 5.0]
    assert result.delay_p95.tolist() == [41.0, 5.0]
    assert result.loss[0] == pytest.approx(0.01, rel=1e-6)  # float32 storage
    assert result.loss[1] == 0.0
    assert result.all_time.delay_mean[0] == pytest.approx(25.5, rel=1e-12)
    assert result.all_time.delay_std[0] == pytest.approx(math.sqrt(1023 / 12), rel=1e-12)
    assert result.all_time.delay_min.tolist() == [10.0, 5.0]
    assert result.all_time.delay_std[1] == 0.0
    # FULL: 41 >= 10 + 9.23 and loss 0.01 >= 1e-4 -> congested, score 0.01 * 41.
    assert result.congested.tolist() == [True, False]
    assert result.empirical[0] == pytest.approx(0.41, rel=1e-6)
    assert result.empirical[1] == 0.0
    assert result.samples.tolist() == [32, 3]
    assert result.last_measurement.tolist() == [N * 60.0, N * 60.0]
    assert result.stale.tolist() == [False, False]
    assert result.clock_suspect.tolist() == [False, False]


def test_cost_combines_utilisation_loss_base_delay_and_floor() -> None:
    result = analyse_links(two_link_state().view(NOW), FakePredictor())
    # FULL: the filter says congested (41 ms against a minimum of 10) and the fake model has no
    # calibration, so the filter's floor of 0.5 is above 1 - exp(-h) = 0.2019...
    loss = float(np.float32(0.01))
    hazard = 0.5653 * 0.34**4 + 0.05385 * loss / 0.01 + 0.2368 * math.log(2.0)
    assert 1 - math.exp(-hazard) == pytest.approx(0.2019, abs=1e-4)
    assert result.cost[0] == 0.5
    # SHORT: no loss, no estimate; its base delay of 5 ms alone costs 1 - exp(-0.2368 log 1.5)
    assert result.cost[1] == pytest.approx(1 - math.exp(-0.2368 * math.log(1.5)), rel=1e-9)


def test_without_predictor_utilisation_is_nan_and_cost_ignores_it() -> None:
    result = analyse_links(two_link_state().view(NOW), None)
    assert np.isnan(result.utilisation).all()
    loss = float(np.float32(0.01))
    hazard = 0.05385 * loss / 0.01 + 0.2368 * math.log(2.0)
    assert result.cost[1] == pytest.approx(1 - math.exp(-0.2368 * math.log(1.5)), rel=1e-9)
    assert result.cost[0] == 0.5 > 1 - math.exp(-hazard)  # the filter's floor


def test_predictor_not_called_when_no_row_is_complete() -> None:
    state = LinkState()
    feed(state, SHORT, range(N - 2, N + 1), lambda m: 5.0)
    predictor = FakePredictor()
    result = analyse_links(state.view(NOW), predictor)
    assert predictor.calls == []
    assert np.isnan(result.utilisation).all()


def test_stale_after_five_minutes_without_data() -> None:
    state = two_link_state()
    last = N * 60
    assert STALE_AFTER_SECONDS == 300
    assert analyse_links(state.view(last + 300), None).stale.tolist() == [False, False]
    assert analyse_links(state.view(last + 301), None).stale.tolist() == [True, True]
    # Fresh data on one link only.
    state.apply(loss_message({(N + 6) * 60: 0.0}, FULL), (N + 6) * 60 + 10)
    assert analyse_links(state.view((N + 6) * 60 + 10), None).stale.tolist() == [False, True]


def test_clock_suspect_when_negative_delays_were_seen() -> None:
    state = two_link_state()
    skewed = compute_histogram_stats([(-3.0, 10), (4.0, 590)])
    assert skewed is not None and skewed.clock_suspect
    state.apply(delay_message({(N - 10) * 60: skewed}, SHORT), NOW)
    result = analyse_links(state.view(NOW), None)
    assert result.clock_suspect.tolist() == [False, True]
    # The flag clears once the suspect minute has left the 32-minute window.
    feed(state, SHORT, range(N + 1, N + 23), lambda m: 5.0)
    later = analyse_links(state.view((N + 22) * 60 + 30), None)
    assert later.clock_suspect.tolist() == [False, False]


def test_link_whose_datapoints_are_all_rejected_gets_no_row() -> None:
    state = LinkState()
    outcome = state.apply(loss_message({0: 0.1}, FULL), NOW)  # too old
    assert outcome.applied == 0 and outcome.rejected == [RejectReason.TOO_OLD]
    assert len(state) == 0 and len(analyse_links(state.view(NOW), None).cost) == 0


def test_analysis_in_blocks_equals_analysis_in_one_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    state = two_link_state()
    feed(state, link("192.0.2.3", "198.51.100.1", "c.a", "full.b"), range(N - 20, N), lambda m: 7.0)
    view = state.view(NOW)
    whole = analyse_links(view, FakePredictor())
    monkeypatch.setattr(link_analysis, "BLOCK_LINKS", 2)  # blocks of 2 and 1 links
    predictor = FakePredictor()
    blocked = analyse_links(view, predictor)
    assert len(predictor.calls) == 1  # still one predictor call for every link
    for name in LinkAnalysis.__dataclass_fields__:
        if name == "all_time":
            for stat in AllTimeStats.__dataclass_fields__:
                expected = getattr(whole.all_time, stat)
                np.testing.assert_array_equal(getattr(blocked.all_time, stat), expected)
        else:
            np.testing.assert_array_equal(getattr(blocked, name), getattr(whole, name))
    assert len(blocked.cost) == 3


def test_nettel_filter_judges_the_smoothed_minute_where_the_default_judges_the_newest() -> None:
    """A 30 ms spike after 31 flat minutes at 10 ms: all-time min 10, std ~3.5 ms. The newest
    minute (30 ms) is above min + std; its 15-minute average (14 x 10 + 30) / 15 is not."""
    state = two_link_state()
    spike = link("192.0.2.4", "198.51.100.1", "spike.a", "full.b")
    feed(state, spike, range(N - 31, N + 1), lambda m: 30.0 if m == N else 10.0)
    view = state.view(NOW)
    newest = analyse_links(view, None)
    smoothed = analyse_links(view, None, empirical_filter="netTel")
    assert newest.congested.tolist() == [True, False, True]
    assert smoothed.congested.tolist() == [True, False, False]
    # FULL ramps 10..41 ms at loss 0.01: newest minute 41 ms, smoothed 27..41 -> 34 ms.
    assert newest.empirical[0] == pytest.approx(0.01 * 41, rel=1e-6)
    assert smoothed.empirical[0] == pytest.approx(0.01 * 34, rel=1e-6)
    assert newest.empirical[2] == pytest.approx(0.01 * 30, rel=1e-6)
    assert smoothed.empirical[2] == 0.0
    # Only the filter's input changes: the reported newest delay and loss are the same.
    assert smoothed.delay_mean.tolist() == newest.delay_mean.tolist()
    assert smoothed.loss.tolist() == newest.loss.tolist()
    # The model's input is the newest minute's verdict whichever filter is configured: one
    # feature definition for serving and training.
    np.testing.assert_array_equal(smoothed.features, newest.features)


def test_newest_minute_features_see_a_spike_the_smoothed_history_blurs() -> None:
    state = two_link_state()
    spike = link("192.0.2.4", "198.51.100.1", "spike.a", "full.b")
    feed(state, spike, range(N - 31, N + 1), lambda m: 30.0 if m == N else 10.0)
    features = analyse_links(state.view(NOW), None).features
    column = {name: features[:, i] for i, name in enumerate(FEATURE_NAMES)}
    # FULL (10..41 ms ramp, loss 0.01) and the spike link (10 ms, then 30 ms) are congested.
    assert column["newest_filter_congested"][[0, 2]].tolist() == [1.0, 1.0]
    assert column["newest_delay_above_min"][[0, 2]].tolist() == [31.0, 20.0]
    assert column["newest_loss"][2] == pytest.approx(0.01, rel=1e-6)
    # Single-valued minutes: no spread, no tail.
    assert column["newest_delay_std"][[0, 2]].tolist() == [0.0, 0.0]
    assert column["newest_mean_above_median"][[0, 2]].tolist() == [0.0, 0.0]
    # The smoothed delay moved by only (30 - 10) / 15 ms above the flat minutes.
    assert column["delay_mean_smoothed"][2] == pytest.approx(10.0 + 20.0 / 15, rel=1e-12)
