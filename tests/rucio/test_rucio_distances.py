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
    plan_visits,
    rse_pairs,
    with_pending,
)
from service.rucio.sync import StateFile

POLICY = PenaltyPolicy(max_penalty=10, calm_cost=0.2, min_change=2)
RSE_SITES = {"A_DISK": "A", "B_DISK": "B"}
PAIRS = rse_pairs(RSE_SITES)  # (A_DISK, B_DISK), (B_DISK, A_DISK)
AB = ("A_DISK", "B_DISK")
costs_in_range = st.floats(min_value=0.0, max_value=1.0)


@given(costs_in_range, costs_in_range)
def test_penalty_is_a_bounded_integer_monotone_in_the_cost(low, high):
    low, high = sorted((low, high))
    assert 0 <= penalty(low, POLICY) <= penalty(high, POLICY) <= POLICY.max_penalty
    assert isinstance(penalty(high, POLICY), int)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"max_penalty": 0}, "max_penalty"), ({"min_change": 0}, "min_change"),
     ({"calm_cost": 1.0}, "calm_cost")],
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
        {AB: PairRecord(3, 7), AB[::-1]: PairRecord(2, 2, pending=6)},
        {("A_DISK", "C_DISK"): 1234.5},
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
