"""The runs taken in lately, so that a run posted again (an archiver's retry) is applied once."""

from __future__ import annotations

from collections import deque

#: Run keys remembered: ~8 minutes of a 250-toolkit mesh's runs (~200/s), about 8 MB.
RECENT_RUNS = 100_000


class RecentRuns:
    """The last `capacity` run keys, each held as its 64-bit hash whatever the key's length.

    >>> runs = RecentRuns(capacity=2)
    >>> [runs.first_time(key) for key in ("a", "b", "a", "c", "a")]
    [True, True, False, True, True]
    """

    def __init__(self, capacity: int = RECENT_RUNS) -> None:
        self._capacity = capacity
        self._order: deque[int] = deque()
        self._seen: set[int] = set()

    def first_time(self, key: str) -> bool:
        """Whether `key` is new; it is remembered either way."""
        digest = hash(key)
        if digest in self._seen:
            return False
        if len(self._order) >= self._capacity:
            self._seen.discard(self._order.popleft())
        self._order.append(digest)
        self._seen.add(digest)
        return True
