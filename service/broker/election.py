"""Leader election of a high-availability group through the broker: the STOMP side of `lease`.

Every replica started with the same `--ha-group NAME` keeps a connection (`link.BrokerLink`:
failover, TLS, heart-beats, reconnecting) on which it

- subscribes to the group's lease queue ``nettel.ha.<NAME>`` so that the broker delivers to
  one subscriber at a time and picks another when that one's connection ends: on ActiveMQ as an
  exclusive consumer of ``/queue/nettel.ha.<NAME>`` (``activemq.exclusive:true``, the queue is
  created on use); on RabbitMQ through ``/amq/queue/nettel.ha.<NAME>``, a queue the operator
  declared with ``x-single-active-consumer: true`` (RabbitMQ's STOMP plugin passes no such
  argument on SUBSCRIBE, so nettel cannot declare it; a missing queue is refused with a
  reason, see docs/high-availability.md);
- sends a pair of tokens there every `interval` seconds (+-25 % at random), expiring after
  `timeout` (so none piles up), numbered: a replica receiving tokens whose own do not come back
  has found a queue that delivers round robin (`lease.OwnTokens`): `lease_shared`, an error in
  the log, `nettel_ha_lease_shared`. A round-robin queue hands the two tokens of a pair to
  different consumers, so a shared queue shows within a few intervals; single tokens could
  settle into an order in which each replica gets exactly its own back (seen for over 20 s on
  a loaded machine).

Only the broker's active consumer receives tokens; `lease.Lease` turns their arrival into the
replica's role, and the replica that leads publishes telemetry. A replica that loses its broker
connection steps down at once; one whose tokens stop (the broker moved the consumer elsewhere)
steps down `timeout` after the last one. A replica takes part only while `eligible` (the
service: ready, i.e. subscribed to the feed with a matrix computed): it joins the lease queue
once eligible, and one not eligible for `timeout` leaves it (UNSUBSCRIBE), so that the broker
hands the lease to a replica that has the data. Role changes are logged ("ha role changed").
Artemis is refused with a clear reason (its exclusive queues are configured on the broker).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable

from service.broker.connection import (
    BrokerAccess,
    BrokerConnection,
    BrokerError,
    ConnectionListener,
    Frame,
)
from service.broker.flavour import Flavour, resolve_flavour
from service.broker.lease import Lease, LeaseTiming, OwnTokens, Role, Transition
from service.broker.link import BrokerLink
from service.config import BrokerFlavour
from service.lifecycle import BackgroundLoop

#: Token gaps are drawn from interval x [1 - TOKEN_JITTER, 1 + TOKEN_JITTER].
TOKEN_JITTER = 0.25
#: Tokens sent back to back each time (see the module's docstring).
TOKENS_PER_SEND = 2

#: Lease timeouts in which OwnTokens' misses must fall to call the lease queue shared.
SHARED_QUEUE_WINDOW = 5
#: Seconds to wait for the broker's answer to the lease SUBSCRIBE.
SUBSCRIBE_TIMEOUT = 10.0
SUBSCRIBE_RECEIPT = "nettel-ha-lease"
LEASE_SUBSCRIPTION = "lease"


class ElectionRefused(BrokerError):
    """The broker has no exclusive consumer nettel can ask for on a STOMP SUBSCRIBE."""


def lease_destination(group: str, flavour: Flavour) -> str:
    """The STOMP destination of `group`'s lease queue on a broker of `flavour`.

    >>> lease_destination("cern", "activemq"), lease_destination("cern", "rabbitmq")
    ('/queue/nettel.ha.cern', '/amq/queue/nettel.ha.cern')
    """
    prefix = "/amq/queue" if flavour == "rabbitmq" else "/queue"
    return f"{prefix}/nettel.ha.{group}"


class _Tokens(ConnectionListener):
    """Tokens to the election; the SUBSCRIBE's receipt, and an ERROR before it, to `_subscribe`."""

    def __init__(self, election: BrokerElection) -> None:
        self._election = election
        self.answered = threading.Event()
        self.refusal: str | None = None

    def on_message(self, frame: Frame) -> None:
        self._election.token_received(frame.body.decode(errors="replace"))

    def on_error(self, frame: Frame) -> None:
        self.refusal = frame.headers.get("message") or str(frame.body)[:200]

    def expect_answer(self) -> None:
        """Forget the answer to an earlier SUBSCRIBE: a new one is sent."""
        self.answered.clear()
        self.refusal = None

    def on_receipt(self, frame: Frame) -> None:
        if frame.headers.get("receipt-id") == SUBSCRIBE_RECEIPT:
            self.answered.set()


class BrokerElection:
    """This replica's part in electing the group's one telemetry publisher."""

    name = "ha-election"

    def __init__(
        self,
        access: BrokerAccess,
        group: str,
        *,
        replica: str,
        timing: LeaseTiming,
        flavour: BrokerFlavour = "auto",
        eligible: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,
        log: logging.Logger | None = None,
    ) -> None:
        self.group = group
        self._eligible = eligible
        self._clock = clock
        #: The connection on which this replica is in the lease queue (None: not in it).
        self._joined_on: BrokerConnection | None = None
        self._ineligible_since: float | None = None
        self._replica = replica
        self._timing = timing
        self._flavour_setting = flavour
        self._flavour: Flavour = "activemq"
        self._log = log or logging.getLogger("nettel.ha")
        self._lock = threading.Lock()
        self._lease = Lease(timing, clock)
        self._own_tokens = OwnTokens(timing.timeout, SHARED_QUEUE_WINDOW * timing.timeout, clock)
        self._tokens = _Tokens(self)
        self._link = BrokerLink(
            access,
            listener=self._tokens,
            on_connect=self._subscribe,
            label="ha election",
            log=self._log,
            log_extra={"group": group},
        )
        self._next_token = 0.0
        self._loop = BackgroundLoop(self.name, self._step, timing.interval / 4)

    @property
    def role(self) -> Role:
        return self._lease.role

    @property
    def leader(self) -> bool:
        return self._lease.role is Role.LEADER

    @property
    def lease_shared(self) -> bool:
        """The lease queue gives tokens to several consumers (misdeclared: each of them leads)."""
        with self._lock:
            return self._own_tokens.shared

    @property
    def transitions(self) -> int:
        """Role changes since start."""
        return self._lease.transitions

    def start(self) -> None:
        self._link.start()
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Step down and leave the group: the broker hands the lease queue to another replica."""
        self._loop.stop(timeout)
        self._link.stop(timeout)
        self._changed(self._lease_call(self._lease.connection_lost))

    def token_received(self, body: str) -> None:
        """A token arrived (the connection's receiving thread); `body` is "<sender> <number>". One
        delivered after this replica left the queue is not a lease."""
        if self._joined_on is None:
            return
        sender, _, number = body.rpartition(" ")
        with self._lock:
            changes = self._lease.token_received()
            ours = sender == self._replica and number.isdigit()
            newly_shared = self._own_tokens.received(int(number) if ours else None)
        self._changed(changes)
        if newly_shared:
            self._log.error(
                "ha lease queue delivers to more than one consumer: every replica of the group "
                "may publish; declare it with x-single-active-consumer "
                "(docs/high-availability.md)",
                extra={"group": self.group, "queue": lease_destination(self.group, self._flavour)},
            )

    def _step(self) -> None:
        """Every quarter lease interval: follow the connection and eligibility, tick the lease,
        and send this replica's tokens when due."""
        connection = self._link.connection
        if connection is None:
            self._changed(self._lease_call(self._lease.connection_lost))
            return
        self._follow_eligibility(connection)
        self._changed(self._lease_call(self._lease.tick))
        if time.monotonic() >= self._next_token:
            self._send_tokens(connection)
            gap = self._timing.interval * random.uniform(1 - TOKEN_JITTER, 1 + TOKEN_JITTER)
            self._next_token = time.monotonic() + gap

    def _follow_eligibility(self, connection: BrokerConnection) -> None:
        """Join the lease queue when eligible; leave it after `timeout` of not being eligible."""
        if self._eligible():
            self._ineligible_since = None
            if self._joined_on is not connection:
                self._join_from_loop(connection)
            return
        if self._joined_on is not connection:
            return
        now = self._clock()
        if self._ineligible_since is None:
            self._ineligible_since = now
        elif now - self._ineligible_since >= self._timing.timeout:
            self._leave(connection)

    def _join_from_loop(self, connection: BrokerConnection) -> None:
        try:
            self._join(connection)
        except (BrokerError, OSError) as error:  # ElectionRefused included
            self._log.warning(
                "ha lease queue not joined", extra={"group": self.group, "error": str(error)}
            )
            self._link.report_lost(connection)

    def _leave(self, connection: BrokerConnection) -> None:
        """UNSUBSCRIBE from the lease queue: the broker makes another consumer the active one."""
        self._joined_on = None
        self._ineligible_since = None
        reason = "not ready: left the lease queue"
        self._changed(self._lease_call(lambda: self._lease.step_down(reason)))
        try:
            connection.unsubscribe(LEASE_SUBSCRIPTION)
        except (BrokerError, OSError):
            self._link.report_lost(connection)

    def _lease_call(self, step: Callable[[], list[Transition]]) -> list[Transition]:
        with self._lock:
            return step()

    def _send_tokens(self, connection: BrokerConnection) -> None:
        timeout_ms = int(self._timing.timeout * 1000)
        if self._flavour == "rabbitmq":
            headers = {"expiration": str(timeout_ms)}
        else:
            headers = {"expires": str(int(time.time() * 1000) + timeout_ms)}
        destination = lease_destination(self.group, self._flavour)
        with self._lock:
            bodies = [
                f"{self._replica} {self._own_tokens.next_token()}" for _ in range(TOKENS_PER_SEND)
            ]
        try:
            for body in bodies:
                connection.send(destination, body, "text/plain", headers)
        except (BrokerError, OSError) as error:
            self._log.warning("ha token not sent", extra={"error": repr(error)})
            self._link.report_lost(connection)

    def _subscribe(self, connection: BrokerConnection) -> None:
        """BrokerLink's step after CONNECT: start from standby, join the lease queue if
        eligible (else the run loop joins once it is)."""
        with self._lock:
            self._own_tokens.restart()
        self._joined_on = None
        self._changed(self._lease_call(self._lease.connection_lost))
        flavour, _ = resolve_flavour(self._flavour_setting, connection.server)
        if flavour == "artemis":
            raise ElectionRefused(
                "--ha-group needs ActiveMQ or RabbitMQ (exclusive consumers on SUBSCRIBE); "
                "the broker is Artemis"
            )
        self._flavour = flavour
        if self._eligible():
            self._join(connection)

    def _join(self, connection: BrokerConnection) -> None:
        """SUBSCRIBE to the lease queue and wait for the broker's answer."""
        flavour = self._flavour
        if flavour == "rabbitmq":
            headers = {"prefetch-count": "1"}
        else:
            headers = {"activemq.exclusive": "true", "activemq.prefetchSize": "1"}
        destination = lease_destination(self.group, flavour)
        self._tokens.expect_answer()
        headers["receipt"] = SUBSCRIBE_RECEIPT
        self._joined_on = connection  # tokens may come before the receipt
        connection.subscribe(destination, id=LEASE_SUBSCRIPTION, ack="auto", headers=headers)
        if not self._tokens.answered.wait(SUBSCRIBE_TIMEOUT):
            self._joined_on = None
            raise ElectionRefused(f"no answer to SUBSCRIBE {destination}")
        if self._tokens.refusal is not None:
            self._joined_on = None
            raise ElectionRefused(
                f"SUBSCRIBE {destination} refused: {self._tokens.refusal} (RabbitMQ: declare the "
                "queue with x-single-active-consumer, see docs/high-availability.md)"
            )

    def _changed(self, transitions: list[Transition]) -> None:
        for change in transitions:
            level = logging.WARNING if change.before is Role.LEADER else logging.INFO
            self._log.log(
                level,
                "ha role changed",
                extra={
                    "group": self.group,
                    "replica": self._replica,
                    "before": change.before.value,
                    "after": change.after.value,
                    "reason": change.reason,
                },
            )
