"""The pure part of `nettel rucio-sync`: penalty, plan, decision, state file contents."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.errors import ConfigError
from service.rucio.distances import (
    PairRecord,
    PenaltyPolicy,
    SyncState,
    Visit,
    confirmed,
    decide,
    decode_state,
    encode_state,
    parse_baselines,
    penalty,
    penalty_level,
    plan_visits,
    reread_slice,
    rse_pairs,
    with_pending,
    worth_writing,
)
from service.rucio.settings import DEFAULT_INTERVAL_SECONDS, RucioSyncSettings
from service.rucio.sync import REREAD_SYNCS, StateFile

#: The linear mapping of earlier versions (calm 0.2, 10 steps, whole-step hysteresis of 2).
POLICY = PenaltyPolicy(max_penalty=10, calm_cost=0.2, min_change=2, fine_cost=0.0)
DEFAULT = PenaltyPolicy()
RSE_SITES = {"A_DISK": "A", "B_DISK": "B"}
PAIRS = rse_pairs(RSE_SITES)  # (A_DISK, B_DISK), (B_DISK, A_DISK)
AB = ("A_DISK", "B_DISK")
costs_in_range = st.floats(min_value=0.0, max_value=1.0)


@given(costs_in_range, costs_in_range)
def test_penalty_is_a_bounded_integer_monotone_in_the_cost(low, high):
    low, high = sorted((low, high))
    assert 0 <= penalty(low, POLICY) <= penalty(high, POLICY) <= POLICY.max_penalty
    assert isinstance(penalty(high, POLICY), int)


def test_default_mapping_keeps_the_order_of_calm_costs():
    assert (DEFAULT.max_penalty, DEFAULT.calm_cost, DEFAULT.fine_cost) == (30, 0.005, 0.2)
    assert (DEFAULT.min_change, DEFAULT.hysteresis) == (1, 0.5)
    assert [penalty(c, DEFAULT) for c in (0.01, 0.05, 0.1)] == [1, 4, 5]  # strictly increasing
    costs = (None, float("nan"), float("inf"), 0.0, 0.005, 0.0051, 0.01, 0.02, 0.03, 0.04, 0.08)
    assert [penalty(c, DEFAULT) for c in costs] == [0, 0, 0, 0, 0, 1, 1, 2, 3, 3, 4]
    costs = (0.16, 0.2, 0.25, 0.3, 0.5, 0.7, 0.9, 1.0, 3.0)
    assert [penalty(c, DEFAULT) for c in costs] == [5, 6, 7, 9, 15, 21, 27, 30, 30]
    assert penalty(-1.0, DEFAULT) == 0


@given(st.floats(min_value=0.0050001, max_value=0.1))
def test_each_doubling_of_a_calm_cost_is_one_step(cost):
    assert penalty(2 * cost, DEFAULT) == penalty(cost, DEFAULT) + 1


@given(costs_in_range, costs_in_range)
def test_default_penalty_is_a_bounded_integer_monotone_in_the_cost(low, high):
    low, high = sorted((low, high))
    assert 0 <= penalty(low, DEFAULT) <= penalty(high, DEFAULT) <= DEFAULT.max_penalty
    assert penalty_level(low, DEFAULT) <= penalty_level(high, DEFAULT)


def test_default_steps_against_baselines_and_rucios_hop_penalty():
    """docs/integrations.md's table: a calm path's penalty stays within 6, a congested direct
    path (0.9) costs more than a calm path (0.05 on both hops) one hop (10) longer plus 8 units
    of baseline, and every cost at or above 0.5 costs more than a hop over any calm cost."""
    hop = 10
    assert penalty(0.2, DEFAULT) == 6
    assert penalty(0.9, DEFAULT) - 2 * penalty(0.05, DEFAULT) - hop == 9
    assert penalty(0.5, DEFAULT) - penalty(0.2, DEFAULT) == 9 and penalty(0.52, DEFAULT) == 16


def test_old_linear_mapping_is_kept_with_fine_cost_zero():
    assert [penalty(c, POLICY) for c in (0.2, 0.21, 0.5, 0.6, 1.0)] == [0, 1, 4, 5, 10]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"max_penalty": 0}, "max_penalty"), ({"min_change": 0}, "min_change"),
     ({"calm_cost": 1.0}, "calm_cost"), ({"fine_cost": 1.0}, "fine_cost"),
     ({"hysteresis": 1.0}, "hysteresis"), ({"calm_cost": 0.0}, "fine_cost needs calm_cost > 0"),
     ({"max_penalty": 5}, "max_penalty 5 is below the 5.32 steps")],
)  # fmt: skip
def test_policy_refuses_values_that_make_no_sense(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PenaltyPolicy(**kwargs)


def plan(costs, state, *, baselines=None, add_missing=False, now=0.0):
    return plan_visits(
        PAIRS, RSE_SITES, costs, state, POLICY,
        baselines=baselines or {}, add_missing=add_missing, now=now,
    )  # fmt: skip


def test_unknown_pairs_are_visited_only_when_they_need_a_write():
    state = SyncState("https://rucio")
    assert plan({("A", "B"): 0.1}, state) == []  # calm: Rucio keeps what it has
    assert plan({("A", "B"): 0.25}, state) == []  # penalty 1 < min_change
    assert plan({("A", "B"): 0.5}, state) == [Visit(AB, 4)]
    assert plan({}, state, add_missing=True) == [Visit(AB, 0), Visit(AB[::-1], 0)]
    assert plan({}, state, baselines={AB: 3}) == [Visit(AB, 0)]


def test_known_pairs_follow_hysteresis_but_always_return_to_the_baseline():
    state = SyncState("https://rucio", {AB: PairRecord(baseline=3, distance=7)})  # penalty 4
    assert plan({("A", "B"): 0.55}, state) == []  # penalty 5: 8 is only 1 away from 7
    assert plan({("A", "B"): 0.62}, state) == [Visit(AB, 6)]  # 9: 2 away
    assert plan({("A", "B"): 0.21}, state) == [Visit(AB, 1)]  # 4: 3 away
    assert plan({}, state) == [Visit(AB, 0)]  # no data: back to 3
    calm_but_one_above = SyncState("https://rucio", {AB: PairRecord(3, 4)})
    assert plan({}, calm_but_one_above) == [Visit(AB, 0)]  # 1 away, written all the same


def test_default_hysteresis_writes_a_step_once_the_cost_is_half_a_step_past_it():
    state = SyncState("https://rucio", {AB: PairRecord(baseline=3, distance=3 + 4)})  # 0.04-0.08

    def planned(cost):
        return plan_visits(
            PAIRS, RSE_SITES, {("A", "B"): cost}, state, DEFAULT,
            baselines={}, add_missing=False, now=0.0,
        )  # fmt: skip

    assert planned(0.06) == []  # step 4 itself
    assert planned(0.085) == []  # step 5, level 4.09: within half a step of the boundary
    assert [(v.pair, v.penalty) for v in planned(0.12)] == [(AB, 5)]  # level 4.58
    assert planned(0.035) == []  # step 3, level 2.81
    assert [(v.pair, v.penalty) for v in planned(0.025)] == [(AB, 3)]  # level 2.32
    assert [(v.pair, v.penalty) for v in planned(0.3)] == [(AB, 9)]  # several steps: at once
    assert [(v.pair, v.penalty) for v in planned(0.004)] == [(AB, 0)]  # calm: the baseline
    # without a level (whole steps only), one step is written at once
    assert worth_writing(8, 7, 5, DEFAULT) and not worth_writing(8, 7, 5, DEFAULT, level=4.09)
    unknown = SyncState("https://rucio")
    assert plan_visits(
        PAIRS, RSE_SITES, {("A", "B"): 0.006}, unknown, DEFAULT,
        baselines={}, add_missing=False, now=0.0,
    ) == []  # level 0.26: not worth a first write either  # fmt: skip


def test_largest_changes_are_visited_first_within_the_budget():
    sites = {"A_DISK": "A", "B_DISK": "B", "C_DISK": "C"}
    pairs = rse_pairs(sites)
    costs = {("A", "B"): 0.05, ("A", "C"): 1.0, ("B", "C"): 0.5}
    visits = plan_visits(
        pairs, sites, costs, SyncState("https://rucio"), DEFAULT,
        baselines={}, add_missing=False, now=0.0, max_changes=2,
    )  # fmt: skip
    assert [(v.pair, v.penalty) for v in visits] == [
        (("A_DISK", "C_DISK"), 30),
        (("B_DISK", "C_DISK"), 15),
    ]


def test_every_managed_pair_is_read_again_within_the_rotation():
    managed = {(f"R{i}", f"R{j}"): PairRecord(3, 7) for i in range(12) for j in range(12) if i != j}
    slices = [reread_slice(managed, n, REREAD_SYNCS) for n in range(REREAD_SYNCS)]
    assert set().union(*slices) == set(managed)
    assert sum(map(len, slices)) == len(managed)  # each once
    assert max(map(len, slices)) <= 2 * len(managed) / REREAD_SYNCS
    state = SyncState("https://rucio", {AB: PairRecord(3, 7)})
    visits = plan_visits(
        PAIRS, RSE_SITES, {("A", "B"): 0.5}, state, POLICY,
        baselines={}, add_missing=False, now=0.0, reread={AB, AB[::-1]},
    )  # fmt: skip
    assert visits == [Visit(AB, 4, 3.75)]  # unchanged, read again: its slice's turn


def test_the_interval_default_is_a_minute():
    assert DEFAULT_INTERVAL_SECONDS == 60.0
    assert RucioSyncSettings.model_fields["interval"].default == DEFAULT_INTERVAL_SECONDS


def test_a_pending_write_is_checked_at_the_next_sync():
    state = SyncState("https://rucio", {AB: PairRecord(3, 3, pending=7)})
    assert plan({("A", "B"): 0.5}, state) == [Visit(AB, 4)]


def test_a_pair_without_a_row_is_read_again_only_after_an_hour():
    state = SyncState("https://rucio", missing={AB: 1000.0})
    assert plan({("A", "B"): 1.0}, state, now=1000.0 + 3599) == []
    assert plan({("A", "B"): 1.0}, state, now=1000.0 + 3600) == [Visit(AB, 10)]


def choose(visit, record, observed, *, given=None, add_missing=False):
    return decide(
        visit, record, observed, policy=POLICY, given_baseline=given,
        add_missing=add_missing, added_baseline=10,
    )  # fmt: skip


def test_first_visit_records_rucios_value_as_the_baseline():
    decision = choose(Visit(AB, 4), None, 3)
    assert (decision.record, decision.write, decision.adopted) == (PairRecord(3, 3), 7, False)


def test_a_value_rucio_sync_did_not_write_becomes_the_baseline():
    record = PairRecord(baseline=3, distance=7)
    assert choose(Visit(AB, 0), record, 7).write == 3  # ours: back to the baseline
    assert choose(Visit(AB, 0), PairRecord(3, 3, pending=7), 7).write == 3  # ours, unconfirmed
    edited = choose(Visit(AB, 4), record, 20)  # an operator's
    assert (edited.record, edited.write, edited.adopted) == (PairRecord(20, 20), 24, True)
    given = choose(Visit(AB, 0), record, 20, given=5)  # a baseline file wins
    assert (given.record, given.write, given.adopted) == (PairRecord(5, 20), 5, False)


def test_an_earlier_value_of_rucio_syncs_own_is_corrected_not_adopted():
    """A restored database or a reset holds the baseline or a distance rucio-sync wrote before:
    the baseline stays and the current target is written again."""
    record = confirmed(confirmed(PairRecord(3, 3), 8), 12)  # wrote 8, then 12
    assert record == PairRecord(3, 12, None, (1 << 5) | (1 << 9))
    for restored in (3, 8):
        decision = choose(Visit(AB, 9), record, restored)
        assert (decision.record.baseline, decision.write) == (3, 12)
        assert (decision.drifted, decision.adopted) == (True, False)
    assert choose(Visit(AB, 9), record, 12).drifted is False  # what it holds: nothing to do
    edited = choose(Visit(AB, 9), record, 5)  # never written: an operator's new baseline
    assert (edited.record, edited.write, edited.adopted) == (PairRecord(5, 5), 14, True)
    again = choose(Visit(AB, 9), record, 8, given=3)  # a baseline file keeps the history
    assert (again.record.written, again.write) == (record.written, 12)


def test_missing_rows_are_added_only_with_add_missing():
    assert choose(Visit(AB, 4), None, None) == choose(Visit(AB, 4), PairRecord(3, 7), None)
    assert choose(Visit(AB, 4), None, None).record is None
    added = choose(Visit(AB, 4), None, None, add_missing=True)
    assert (added.record, added.write, added.add) == (PairRecord(10, 10), 14, True)
    assert choose(Visit(AB, 0), None, None, given=2, add_missing=True).write == 2


@given(st.lists(st.one_of(st.none(), costs_in_range), max_size=12), st.integers(0, 50))
def test_a_link_that_calms_returns_exactly_to_its_baseline(costs, baseline):
    """Any run of syncs (a dict stands in for Rucio's rows), then calm: the baseline again."""
    rucio = {AB: baseline, AB[::-1]: baseline}
    state = SyncState("https://rucio")
    for cost in [*costs, 0.0]:
        site_costs = {} if cost is None else {("A", "B"): cost}
        for visit in plan(site_costs, state):
            decision = choose(visit, state.pairs.get(visit.pair), rucio[visit.pair])
            assert decision.record is not None
            state.pairs[visit.pair] = decision.record
            if decision.write is not None:
                state.pairs[visit.pair] = with_pending(decision.record, decision.write)
                rucio[visit.pair] = decision.write
                state.pairs[visit.pair] = confirmed(decision.record, decision.write)
        assert baseline <= rucio[AB] <= baseline + POLICY.max_penalty
    assert rucio == {AB: baseline, AB[::-1]: baseline}


def test_state_round_trips_through_its_file_format():
    state = SyncState(
        "https://rucio",
        {AB: PairRecord(3, 7, written=1 << 4), AB[::-1]: PairRecord(2, 2, pending=6)},
        {("A_DISK", "C_DISK"): 1234.5},
        syncs=17,
    )
    assert decode_state(encode_state(state)) == state


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("{", "not JSON"),
        ('{"format": "other"}', "not a nettel-rucio-sync state file"),
        ('{"format": "nettel-rucio-sync", "version": 9}', "state version 9"),
        ('{"format": "nettel-rucio-sync", "version": 1, "rucio_url": "u",'
         ' "pairs": {"A": {"B": {"baseline": 1.5, "distance": 2}}}}', "malformed pairs"),
    ],
)  # fmt: skip
def test_a_damaged_state_file_is_refused_with_its_reason(text, reason):
    with pytest.raises(ValueError, match=reason):
        decode_state(text)


def test_state_file_of_another_rucio_is_refused(tmp_path):
    store = StateFile(tmp_path)
    assert store.load("https://rucio-a") == SyncState("https://rucio-a")  # no file yet: empty
    store.save(SyncState("https://rucio-a", {AB: PairRecord(3, 7)}))
    assert store.load("https://rucio-a").pairs == {AB: PairRecord(3, 7)}
    with pytest.raises(ConfigError, match="baselines of Rucio https://rucio-a"):
        store.load("https://rucio-b")
    (tmp_path / "rucio-sync.json").write_text("[]")
    with pytest.raises(ConfigError, match="rucio-sync.json: not a nettel-rucio-sync state"):
        store.load("https://rucio-a")


@pytest.mark.parametrize(
    ("document", "reason"),
    [(["A"], "expected a mapping"), ({"A": {"B": "3"}}, "not an integer"),
     ({"A": {"B": -1}}, "negative"), ({"A": {"B": True}}, "not an integer")],
)  # fmt: skip
def test_bad_baseline_files_are_refused(document, reason):
    with pytest.raises(ValueError, match=reason):
        parse_baselines(document)
