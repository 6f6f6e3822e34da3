"""Hysteresis over minutes, for many subjects at once (links, or hosts): columnar counters.

Each minute a subject's condition holds, is clean, or is unknown (no measurement that says).
A subject latches once its condition has held `open_after` measured minutes in a row and
unlatches after `close_after` clean minutes in a row; unknown minutes change nothing. `onset`
is the first minute of the run that latched it (or of the run under way).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Runs are counted up to this (a day in minutes is well below); onset of no run.
_MAX_RUN = np.iinfo(np.int16).max
NO_ONSET = -1


@dataclass
class Latches:
    """Counters per subject (one array entry each), for one kind of condition."""

    held: np.ndarray
    clean: np.ndarray
    latched: np.ndarray
    onset: np.ndarray

    @classmethod
    def empty(cls, size: int) -> Latches:
        return cls(
            held=np.zeros(size, np.int16),
            clean=np.zeros(size, np.int16),
            latched=np.zeros(size, bool),
            onset=np.full(size, NO_ONSET, np.int32),
        )

    def __len__(self) -> int:
        return len(self.latched)

    def step(
        self,
        minute: int,
        condition: np.ndarray,
        clean: np.ndarray,
        open_after: int,
        close_after: int,
    ) -> None:
        """One minute: `condition` and `clean` are masks over the subjects (never both)."""
        starting = condition & (self.held == 0)
        self.onset[starting] = minute
        self.held = np.where(condition, np.minimum(self.held + 1, _MAX_RUN), self.held)
        self.held[clean] = 0
        self.clean = np.where(clean, np.minimum(self.clean + 1, _MAX_RUN), self.clean)
        self.clean[condition] = 0
        self.latched |= self.held >= open_after
        self.latched &= self.clean < close_after
        self.onset[clean & ~self.latched] = NO_ONSET

    def take(self, old: np.ndarray, size: int) -> None:
        """Entry i of the result is old entry `old[i]` (-1: a new subject, nothing counted)."""
        fresh = Latches.empty(size)
        picked = np.full(size, -1, np.int64)
        picked[: len(old)] = old[:size]
        kept = picked >= 0
        for name in ("held", "clean", "latched", "onset"):
            getattr(fresh, name)[kept] = getattr(self, name)[picked[kept]]
        self.held, self.clean, self.latched, self.onset = (
            fresh.held,
            fresh.clean,
            fresh.latched,
            fresh.onset,
        )

    def arrays(self, prefix: str) -> dict[str, np.ndarray]:
        """The counters under names `prefix/<counter>` (for saving)."""
        return {
            f"{prefix}/held": self.held,
            f"{prefix}/clean": self.clean,
            f"{prefix}/latched": self.latched,
            f"{prefix}/onset": self.onset,
        }
