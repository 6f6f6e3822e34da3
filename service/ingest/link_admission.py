"""Which new links the state takes: at most `max_links` in all, and at most `per_minute` new
ones a minute from each producer.

A producer is the end that measured, as the message names it (the bus's `input_source`, else
the source address), except for pScheduler runs posted over HTTP: their producer is the HTTP
client (the connection's peer, or X-Forwarded-For from a `--trusted-proxies` address), so one
client cannot add links beyond its budget by naming other source hosts. Messages for links the
state has already are never refused here; a refused link's datapoints are counted
(`link_limit`, `new_link_rate`) and dropped, and its next message tries again. Retirement frees
rows.
An archive's history (`--backfill-from`) and a journal's replay at start (`replaying`) were
admitted or configured before: only the cap applies to them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from service.errors import RejectReason
from service.ingest.rate_limit import ClientRateLimiter
from service.parse.records import LinkEndpoints, NamedEndpoints
from service.topology.topology import host_key

#: Producers whose new-link budget is remembered; beyond, the least recently seen is forgotten.
MAX_PRODUCERS = 65_536


class LinkAdmission:
    """`LinkState.admission`: why a new link is refused, or None to take it.

    >>> clock = iter([0.0, 0.0, 0.0, 60.0]).__next__
    >>> admission = LinkAdmission(max_links=3, per_minute=2, clock=clock)
    >>> link = LinkEndpoints("192.0.2.1", "192.0.2.2", "ps.a.org", "ps.b.org")
    >>> [admission(link, links) for links in (0, 1, 2)]
    [None, None, <RejectReason.NEW_LINK_RATE: 'new_link_rate'>]
    >>> admission(link, 3)  # a minute later the producer may add again, but the state is full
    <RejectReason.LINK_LIMIT: 'link_limit'>
    >>> admission(link, 2, history=True)  # an archive's links: the cap only
    >>> admission(link, 2, producer="198.51.100.7")  # an HTTP client's budget of its own

    """

    def __init__(
        self,
        max_links: int,
        per_minute: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_links = max_links
        self._producers = ClientRateLimiter(per_minute / 60.0, per_minute, MAX_PRODUCERS, clock)
        self._replaying = False

    def __call__(
        self,
        link: LinkEndpoints | NamedEndpoints,
        links: int,
        history: bool = False,
        producer: str | None = None,
    ) -> RejectReason | None:
        """Why the state, holding `links` links, refuses the new `link` (None: it takes it);
        `producer`: who sent it when not its source host (an HTTP client)."""
        if links >= self.max_links:
            return RejectReason.LINK_LIMIT
        if history or self._replaying:
            return None
        if not self._producers.admit(producer or producer_of(link)):
            return None
        return RejectReason.NEW_LINK_RATE

    @contextmanager
    def replaying(self) -> Iterator[None]:
        """Only the cap applies within the block (a journal replayed before ingest starts)."""
        self._replaying = True
        try:
            yield
        finally:
            self._replaying = False


def producer_of(link: LinkEndpoints | NamedEndpoints) -> str:
    """Who reported `link`: its source's host name as the message gives it."""
    return host_key(link.source_host) or link.source
