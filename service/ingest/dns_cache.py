"""Host name -> address by DNS, cached: for pScheduler ends the bus has not revealed (opt-in).

`--resolve-dns` (off by default) lets the ingest parse stage look up the host names of runs'
ends. The link index still prefers what the bus revealed; a looked-up address only keys a row
the bus does not know yet. A lookup blocks the parse stage, so each answer, and each failure,
is kept for a while.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from service.parse.addresses import canonical_ip
from service.parse.records import NamedEndpoints

#: host name, IP version (4, 6; 0 = either) -> an address, or None when there is none.
Lookup = Callable[[str, int], str | None]
_FAMILIES = {4: socket.AF_INET, 6: socket.AF_INET6}


def system_lookup(host: str, ip_version: int) -> str | None:
    """The first address the system resolver gives for `host` (of `ip_version` if not 0)."""
    family = _FAMILIES.get(ip_version, socket.AF_UNSPEC)
    try:
        answers = socket.getaddrinfo(host, None, family, socket.SOCK_DGRAM)
    except (OSError, UnicodeError):
        return None
    return canonical_ip(str(answers[0][4][0])) if answers else None


class CachedResolver:
    """Answers of `lookup` kept `ttl` seconds (failures `negative_ttl`), at most `max_entries`.

    Not thread-safe: the ingest parse stage is its one user.
    """

    def __init__(
        self,
        lookup: Lookup = system_lookup,
        ttl: float = 600.0,
        negative_ttl: float = 60.0,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._ttl = ttl
        self._negative_ttl = negative_ttl
        self._max_entries = max_entries
        self._clock = clock
        self._answers: dict[tuple[str, int], tuple[str | None, float]] = {}  # answer, expiry

    def address(self, host: str, ip_version: int = 0) -> str | None:
        now = self._clock()
        answer, expires = self._answers.get((host, ip_version), (None, now))
        if expires > now:
            return answer
        answer = self._lookup(host, ip_version)
        if len(self._answers) >= self._max_entries:
            self._answers.clear()
        ttl = self._ttl if answer else self._negative_ttl
        self._answers[(host, ip_version)] = (answer, now + ttl)
        return answer

    def resolve(self, link: NamedEndpoints) -> NamedEndpoints:
        """`link` with addresses looked up for the ends it names by host name only."""
        source = link.source or self.address(link.source_host, link.ip_version) or ""
        destination = link.destination or self.address(link.destination_host, link.ip_version) or ""
        return link._replace(source=source, destination=destination)
