"""The lease state machine of an --ha-group, on a hand-moved clock: exact times of each role;
and OwnTokens telling a round-robin lease queue by own tokens that do not come back."""

from __future__ import annotations

import pytest

from service.broker.election import TOKENS_PER_SEND
from service.broker.lease import Lease, LeaseTiming, OwnTokens, Role, Transition
from tests.clock import TestClock

TIMING = LeaseTiming(interval=2.0, timeout=6.0)


@pytest.fixture
def clock() -> TestClock:
    """The shared test clock, started at 100.0 (the times below are absolute)."""
    return TestClock(100.0)


def tokens_every(lease: Lease, clock: TestClock, seconds: float, until: float) -> list[Transition]:
    """Deliver a token every `seconds` until the clock reaches `until`; the changes made."""
    changes = []
    while clock.now + seconds <= until:
        clock.now += seconds
        changes += lease.token_received()
    return changes


def test_starts_standby_and_ticks_change_nothing(clock):
    lease = Lease(TIMING, clock)
    clock.now += 1000
    assert lease.tick() == [] and lease.role is Role.STANDBY and lease.transitions == 0


def test_first_token_acquires_and_leads_exactly_one_timeout_later(clock):
    lease = Lease(TIMING, clock)
    assert lease.token_received() == [Transition(Role.STANDBY, Role.ACQUIRING, "tokens arrive")]
    tokens_every(lease, clock, 2.0, until=104.0)
    clock.now = 105.999
    assert lease.tick() == [] and lease.role is Role.ACQUIRING
    clock.now = 106.0
    assert lease.tick() == [
        Transition(Role.ACQUIRING, Role.LEADER, "tokens arrived for the lease timeout")
    ]
    assert lease.role is Role.LEADER and lease.transitions == 2


def test_leader_keeps_the_lease_while_tokens_come(clock):
    lease = Lease(TIMING, clock)
    lease.token_received()
    changes = tokens_every(lease, clock, 2.0, until=200.0)
    assert [change.after for change in changes] == [Role.LEADER]
    assert lease.role is Role.LEADER


def test_steps_down_just_after_the_timeout_without_a_token(clock):
    lease = Lease(TIMING, clock)
    lease.token_received()
    tokens_every(lease, clock, 2.0, until=110.0)  # last token at 110
    clock.now = 116.0
    assert lease.tick() == [] and lease.role is Role.LEADER  # exactly the timeout: still held
    clock.now = 116.001
    assert lease.tick() == [
        Transition(Role.LEADER, Role.STANDBY, "no token within the lease timeout")
    ]


def test_a_token_after_a_lapse_starts_the_wait_again(clock):
    lease = Lease(TIMING, clock)
    lease.token_received()
    tokens_every(lease, clock, 2.0, until=110.0)
    clock.now = 130.0  # no tick in between: the token itself must notice the lapse
    assert [(c.before, c.after) for c in lease.token_received()] == [
        (Role.LEADER, Role.STANDBY),
        (Role.STANDBY, Role.ACQUIRING),
    ]
    clock.now = 135.9
    assert lease.token_received() == [] and lease.role is Role.ACQUIRING
    clock.now = 136.0
    assert [c.after for c in lease.tick()] == [Role.LEADER]


def test_acquiring_lapses_back_to_standby(clock):
    lease = Lease(TIMING, clock)
    lease.token_received()
    clock.now += 6.5
    assert [c.after for c in lease.tick()] == [Role.STANDBY]


def test_lost_connection_steps_down_at_once(clock):
    lease = Lease(TIMING, clock)
    lease.token_received()
    tokens_every(lease, clock, 2.0, until=108.0)
    assert lease.role is Role.LEADER
    assert lease.connection_lost() == [
        Transition(Role.LEADER, Role.STANDBY, "broker connection lost")
    ]
    assert lease.connection_lost() == []  # already standby
    clock.now += 1
    assert lease.tick() == [] and lease.role is Role.STANDBY
    assert lease.transitions == 3


def test_stepping_down_gives_its_reason_and_a_later_token_starts_afresh(clock):
    lease = Lease(TIMING, clock)
    lease.token_received()
    tokens_every(lease, clock, 2.0, until=108.0)
    reason = "not ready: left the lease queue"
    assert lease.step_down(reason) == [Transition(Role.LEADER, Role.STANDBY, reason)]
    clock.now += 1
    assert lease.token_received() == [
        Transition(Role.STANDBY, Role.ACQUIRING, "tokens arrive")
    ]  # the wait starts again: no lead carried over


@pytest.mark.parametrize(("interval", "timeout"), [(0.0, 6.0), (2.0, 3.9), (-1.0, 1.0)])
def test_timing_needs_a_timeout_of_two_intervals(interval, timeout):
    with pytest.raises(ValueError, match="timeout >= 2 x interval"):
        LeaseTiming(interval, timeout)


def test_the_single_active_consumer_gets_its_own_tokens_back_and_is_never_shared(clock):
    tokens = OwnTokens(timeout=6.0, window=30.0, clock=clock)
    for _ in range(100):  # its own and another replica's, each every 2 s
        clock.now += 1.0
        assert tokens.received(tokens.next_token()) is False
        clock.now += 1.0
        assert tokens.received(None) is False
    assert tokens.shared is False


def test_round_robin_is_shared_at_the_second_own_token_missing_past_the_timeout(clock):
    tokens = OwnTokens(timeout=6.0, window=30.0, clock=clock)
    assert tokens.next_token() == 1  # sent before any token came: not counted
    clock.now += 1.0
    assert tokens.received(None) is False  # 101: receiving from here
    sent = {tokens.next_token(): clock.now}  # 2 at 101; it goes to the other replica
    clock.now += 2.0
    sent[tokens.next_token()] = clock.now  # 3 at 103, also elsewhere
    clock.now = 107.0  # token 2 is 6 s old: not yet past the timeout
    assert tokens.received(None) is False and tokens.shared is False
    clock.now = 107.5  # token 2 is missed; token 3 not yet
    assert tokens.received(None) is False and tokens.shared is False
    clock.now = 109.5  # token 3 missed too: shared
    assert tokens.received(None) is True and tokens.shared is True
    assert sent == {2: 101.0, 3: 103.0}
    clock.now = 137.0  # the first miss (107.5) has left the 30 s window
    assert tokens.shared is True
    clock.now = 137.6
    assert tokens.shared is False


def test_only_tokens_that_kept_others_coming_count_and_a_new_connection_starts_again(clock):
    tokens = OwnTokens(timeout=6.0, window=30.0, clock=clock)
    tokens.received(None)
    tokens.next_token()
    clock.now += 100.0  # nothing arrived meanwhile: the broker gave nothing to anybody
    assert tokens.shared is False
    tokens.restart()  # the connection broke: what was sent before is forgotten
    clock.now += 1.0
    tokens.received(None)
    own = tokens.next_token()
    clock.now += 7.0
    assert tokens.received(own) is False  # late, but back: not a miss
    tokens.next_token()
    clock.now += 7.0
    assert tokens.received(None) is False and tokens.shared is False  # one miss only


def shared_after_lockstep_round_robin(clock: TestClock, tokens_per_send: int) -> list[bool]:
    """Two replicas sending in lockstep, every 2 s for a minute, into a queue that hands each
    message to the next of them in turn: whether each finds the queue shared."""
    replicas = {name: OwnTokens(timeout=6.0, window=30.0, clock=clock) for name in "ab"}
    turn = 0
    for _ in range(30):
        for sender, tokens in replicas.items():
            for number in [tokens.next_token() for _ in range(tokens_per_send)]:
                receiver = "ab"[turn % 2]
                turn += 1
                replicas[receiver].received(number if receiver == sender else None)
        clock.now += 2.0
    return [tokens.shared for tokens in replicas.values()]


def test_tokens_in_pairs_reveal_a_round_robin_queue_that_single_tokens_can_hide(clock):
    """Why the election sends TOKENS_PER_SEND tokens back to back: single tokens in lockstep
    come back each to its own sender, as from a single-active-consumer queue."""
    assert shared_after_lockstep_round_robin(clock, tokens_per_send=1) == [False, False]
    assert shared_after_lockstep_round_robin(clock, TOKENS_PER_SEND) == [True, True]
