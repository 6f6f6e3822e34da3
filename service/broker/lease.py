"""Who publishes: the lease of a high-availability group, as a pure state machine over a clock.

Every replica of a group subscribes to the group's lease queue as an exclusive consumer (the
broker hands its messages to one of them only) and sends a small token there every `interval`
seconds. So whoever receives tokens is the broker's active consumer, and a replica that received
one within the last `timeout` seconds holds the lease. `service.broker.election` wires this to
STOMP; this module only decides, from what happened and when:

- ``standby``: no token lately (or no broker connection): do not publish;
- ``acquiring``: tokens arrive, but for less than `timeout`: the previous holder may still
  believe it holds the lease (it steps down `timeout` after its last token, which the broker
  sent before our first), so wait it out;
- ``leader``: tokens have been arriving for `timeout` and the last came within `timeout`.

A lost broker connection drops to ``standby`` at once. Each call returns the changes of role it
made, as `Transition`s. `OwnTokens` tells from the replica's own tokens whether the queue
really has one active consumer (a RabbitMQ queue declared without it has not).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass


class Role(enum.Enum):
    STANDBY = "standby"
    ACQUIRING = "acquiring"
    LEADER = "leader"


@dataclass(frozen=True)
class LeaseTiming:
    """`interval`: seconds between the tokens each replica sends; `timeout`: seconds without a
    token after which the lease is lost, and the wait before a new holder leads."""

    interval: float
    timeout: float

    def __post_init__(self) -> None:
        if not 0 < self.interval or self.timeout < 2 * self.interval:
            raise ValueError("a lease needs interval > 0 and timeout >= 2 x interval")


@dataclass(frozen=True)
class Transition:
    before: Role
    after: Role
    reason: str


class Lease:
    """The lease as this replica sees it; not thread-safe (its caller holds a lock)."""

    def __init__(self, timing: LeaseTiming, clock: Callable[[], float]) -> None:
        self._timing = timing
        self._clock = clock
        self._role = Role.STANDBY
        self._first_token: float | None = None  # of the current run of tokens
        self._last_token: float | None = None
        self.transitions = 0

    @property
    def role(self) -> Role:
        return self._role

    def token_received(self) -> list[Transition]:
        """A token reached this replica: the broker has made it the active consumer."""
        changes = self.tick()  # a lease that ran out before this token is not carried on
        now = self._clock()
        if self._role is Role.STANDBY:
            self._first_token = self._last_token = now
            return [*changes, self._become(Role.ACQUIRING, "tokens arrive")]
        self._last_token = now
        return [*changes, *self.tick()]

    def connection_lost(self) -> list[Transition]:
        """The broker connection is gone (or new): whatever the broker decides now, not us."""
        return self.step_down("broker connection lost")

    def step_down(self, reason: str) -> list[Transition]:
        """Out of the lease at once (the connection is gone, or the replica left the queue)."""
        self._first_token = self._last_token = None
        if self._role is Role.STANDBY:
            return []
        return [self._become(Role.STANDBY, reason)]

    def tick(self) -> list[Transition]:
        """Re-decide as time passes: lose a lapsed lease, lead once the wait is over."""
        if self._last_token is None or self._first_token is None:
            return []
        now = self._clock()
        if now - self._last_token > self._timing.timeout:
            self._first_token = self._last_token = None
            return [self._become(Role.STANDBY, "no token within the lease timeout")]
        if self._role is Role.ACQUIRING and now - self._first_token >= self._timing.timeout:
            return [self._become(Role.LEADER, "tokens arrived for the lease timeout")]
        return []

    def _become(self, role: Role, reason: str) -> Transition:
        transition = Transition(self._role, role, reason)
        self._role = role
        self.transitions += 1
        return transition


class OwnTokens:
    """Whether the lease queue hands its messages to one consumer at a time, told by this
    replica's own tokens; not thread-safe (its caller holds a lock).

    The active consumer of a single-active-consumer (or exclusive) queue receives every token,
    its own within moments of sending them. So once this replica receives tokens, an own token
    sent since that has not come back while tokens kept arriving for longer than `timeout`
    (when it expires) was given to another consumer: the queue delivers round robin (a RabbitMQ
    queue declared without x-single-active-consumer), and every replica leads. `shared` is true
    while `MISSES_SHOWING_SHARED` such misses fell within the last `window` seconds. Tokens sent
    before the first one received (another replica was the active consumer) do not count, and a
    new connection starts again (`restart`).
    """

    MISSES_SHOWING_SHARED = 2

    def __init__(self, timeout: float, window: float, clock: Callable[[], float]) -> None:
        self._timeout = timeout
        self._window = window
        self._clock = clock
        self._last_number = 0
        self._receiving = False
        self._unreturned: dict[int, float] = {}  # own token -> when sent, while receiving
        self._misses: list[float] = []  # when each miss was seen, oldest first

    def next_token(self) -> int:
        """The number of the token this replica sends now."""
        self._last_number += 1
        if self._receiving:
            self._unreturned[self._last_number] = self._clock()
        return self._last_number

    def received(self, own_number: int | None) -> bool:
        """A token arrived: one of ours (its number) or another replica's (None); True if it
        made `shared` true."""
        was_shared = self.shared
        now = self._clock()
        self._receiving = True
        if own_number is not None:
            self._unreturned.pop(own_number, None)
        missed = [n for n, sent in self._unreturned.items() if now - sent > self._timeout]
        for number in missed:
            del self._unreturned[number]
        if missed:
            kept = [seen for seen in self._misses if seen >= now - self._window]
            self._misses = kept + [now] * len(missed)
        return self.shared and not was_shared

    def restart(self) -> None:
        """A new broker connection: tokens sent before it may have gone anywhere."""
        self._receiving = False
        self._unreturned.clear()
        self._misses.clear()

    @property
    def shared(self) -> bool:
        horizon = self._clock() - self._window
        return sum(seen >= horizon for seen in self._misses) >= self.MISSES_SHOWING_SHARED
