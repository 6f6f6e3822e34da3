"""Link retirement: links without a datapoint for `retire_after` seconds leave the state.

Checked after each matrix cycle (a comparison over one column, not per message); the next cycle's
matrix, and every view built from it, no longer has the retired links.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from service.state.link_state import LinkState


class LinkRetirement:
    """Retires idle links of `state`; `check` is meant to run periodically."""

    def __init__(
        self,
        state: LinkState,
        retire_after: float,
        clock: Callable[[], float] = time.time,
        log: logging.Logger | None = None,
    ) -> None:
        self._state = state
        self._retire_after = retire_after
        self._clock = clock
        self._log = log or logging.getLogger("nettel.retirement")

    def after_cycle(self, cycle_seconds: float) -> None:
        """`check` as a matrix cycle observer (the cycle's duration does not matter here)."""
        self.check()

    def check(self) -> int:
        """Retire the links idle for `retire_after` now; returns how many."""
        retired = self._state.retire_idle(self._clock() - self._retire_after)
        if retired:
            self._log.info(
                "idle links retired",
                extra={"links": retired, "retire_after_seconds": self._retire_after},
            )
        return retired
