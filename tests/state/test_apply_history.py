"""LinkState.apply_history: archive data before the window reaches the all-time moments, once."""

from __future__ import annotations

import numpy as np
import pytest

from service.analysis.features import AllTimeStats
from service.analysis.link_analysis import analyse_links
from service.errors import RejectReason
from service.state.link_buffers import ARCHIVE, SERIES, WINDOW_MINUTES
from service.state.link_state import LinkState
from tests.message_factory import BASE_MINUTE, delay_message, loss_message, stats_at

N = BASE_MINUTE
NOW = N * 60 + 30
MINUTES = list(range(N - 89, N + 1))  # 90 minutes: 58 before the window, 32 in it
LATER = list(range(N + 1, N + 41))  # what the bus brings after the backfill
_RNG = np.random.default_rng(16)
DELAYS = dict(zip(MINUTES + LATER, _RNG.uniform(1.0, 80.0, 130).tolist(), strict=True))
LOSSES = dict(zip(MINUTES + LATER, _RNG.uniform(0.0, 0.05, 130).tolist(), strict=True))


def history(minutes: list[int]) -> list:
    """The delay and loss messages of `minutes`, as a backfill reads one link's archive."""
    return [
        delay_message({m * 60: DELAYS[m] for m in minutes}),
        loss_message({m * 60: LOSSES[m] for m in minutes}),
    ]


def fed_live(minutes: list[int]) -> LinkState:
    """A state that received `minutes` from the bus, each 30 s into its minute."""
    state = LinkState()
    for m in minutes:
        state.apply_batch(history([m]), m * 60 + 30)
    return state


def arrays(state: LinkState) -> dict[str, np.ndarray]:
    b = state.buffers
    return (
        {f"series/{k}": b.series[k][:1] for k in SERIES}
        | {f"archive/{k}": b.archive[k][:1] for k in ARCHIVE}
        | {"slot_minute": b.slot_minute[:1]}
    )


def all_time(state: LinkState) -> AllTimeStats:
    return analyse_links(state.view(NOW), None).all_time


def assert_same_state(a: LinkState, b: LinkState) -> None:
    for name, values in arrays(a).items():
        np.testing.assert_array_equal(values, arrays(b)[name], err_msg=name)


def test_a_backfilled_link_equals_one_fed_the_same_minutes_live() -> None:
    state = LinkState()
    outcomes = state.apply_history(history(MINUTES), NOW)
    assert [(o.applied, o.archived, o.rejected) for o in outcomes] == [(90, 57, [])] * 2
    assert state.stored_total == 180
    assert_same_state(state, fed_live(MINUTES))  # bit for bit, archived moments included


def test_all_time_statistics_of_a_backfill_are_exact() -> None:
    state = LinkState()
    state.apply_history(history(MINUTES), NOW)
    delays = np.array([stats_at(DELAYS[m]).mean for m in MINUTES], np.float32).astype(float)
    losses = np.array([LOSSES[m] for m in MINUTES], np.float32).astype(float)
    stats = all_time(state)
    assert stats.delay_mean[0] == pytest.approx(delays.mean(), rel=1e-12)
    assert stats.delay_std[0] == pytest.approx(delays.std(), rel=1e-12)
    assert stats.delay_min[0] == delays.min()
    assert stats.loss_mean[0] == pytest.approx(losses.mean(), rel=1e-12)
    assert stats.loss_std[0] == pytest.approx(losses.std(), rel=1e-12)
    assert state.buffers.archive["delay_n"][0] == 90 - WINDOW_MINUTES


def test_backfilling_twice_counts_nothing_twice() -> None:
    state = LinkState()
    state.apply_history(history(MINUTES), NOW)
    again = state.apply_history(history(MINUTES), NOW)
    assert [(o.applied, o.archived) for o in again] == [(32, 0)] * 2
    assert again[0].rejected == [RejectReason.TOO_OLD] * 58
    assert_same_state(state, fed_live(MINUTES))


def test_live_minutes_after_a_backfill_are_not_counted_twice() -> None:
    """The archive's last 32 minutes arrive again from the bus (re-polls, the broker's backlog),
    then the link lives on for 40 minutes: the moments are those of a link fed live throughout."""
    state = LinkState()
    state.apply_history(history(MINUTES), NOW)
    for m in MINUTES[-WINDOW_MINUTES:] + LATER:
        state.apply_batch(history([m]), m * 60 + 30)
    assert_same_state(state, fed_live(MINUTES + LATER))


def test_a_link_that_has_archived_moments_gets_its_window_only() -> None:
    state = fed_live(MINUTES[:40])  # 8 minutes already archived
    outcomes = state.apply_history(history(MINUTES), NOW)
    assert [(o.applied, o.archived) for o in outcomes] == [(33, 0)] * 2
    assert outcomes[0].rejected == [RejectReason.TOO_OLD] * 57
    assert_same_state(state, fed_live(MINUTES[:40] + MINUTES[-33:]))  # the minutes between: lost


def test_minutes_a_new_link_still_holds_are_left_to_eviction() -> None:
    """A link restored with 10 stale minutes in its window and nothing archived: the backfill
    folds the other minutes before the window; the 10 are archived when the window overwrites
    their slots, so each minute counts once."""
    state = fed_live(MINUTES[:10])
    outcomes = state.apply_history(history(MINUTES), NOW)
    assert [(o.applied, o.archived) for o in outcomes] == [(80, 47)] * 2
    assert outcomes[0].rejected == [RejectReason.TOO_OLD] * 10
    assert state.buffers.archive["delay_n"][0] == 58
    stats = all_time(state)
    delays = np.array([stats_at(DELAYS[m]).mean for m in MINUTES], np.float32).astype(float)
    assert stats.delay_mean[0] == pytest.approx(delays.mean(), rel=1e-12)


def test_a_minute_given_twice_is_folded_once_with_the_last_value() -> None:
    old = N - 60
    message = delay_message({old * 60: 5.0, old * 60 + 20: 9.0})
    (outcome,) = LinkState().apply_history([message], NOW)
    assert (outcome.applied, outcome.archived, outcome.rejected) == (1, 1, [RejectReason.TOO_OLD])
    state = LinkState()
    state.apply_history([message], NOW)
    assert state.buffers.archive["delay_mean"][0] == 9.0
    assert state.buffers.archive["delay_n"][0] == 1


def test_future_datapoints_are_refused_and_history_only_links_get_a_row() -> None:
    state = LinkState()
    (future,) = state.apply_history([loss_message({NOW + 600: 0.1})], NOW)
    assert (future.applied, future.rejected, len(state)) == (0, [RejectReason.FUTURE], 0)
    (old,) = state.apply_history([loss_message({(N - 100) * 60: 0.25})], NOW)
    assert (old.applied, old.archived, len(state)) == (1, 1, 1)
    assert state.buffers.archive["loss_mean"][0] == np.float32(0.25)
