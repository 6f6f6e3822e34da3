"""The common output of every router reader: one utilisation series per link and direction."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import numpy as np

Direction = Literal["in", "out"]


@dataclass(frozen=True, eq=False)
class UtilisationSeries:
    """Link utilisation samples, each the average over an interval that *starts* at its timestamp.

    - ``link``: the link key (router interface, site description or ``"SRC->DST"`` site pair).
    - ``timestamps``: int64 epoch seconds (UTC), strictly ascending; the start of each interval.
    - ``utilisation``: float64 bits/s divided by capacity bits/s; may exceed 1 slightly;
      NaN where unknown.
    - ``direction``: ``"in"`` or ``"out"`` as seen by the router/site, None for site pairs.
    - ``period_s``: the nominal averaging interval in seconds (300 for 5-minute router averages).

    The arrays are read-only copies, so a series can be shared between threads.
    """

    link: str
    timestamps: np.ndarray
    utilisation: np.ndarray
    direction: Direction | None
    period_s: int

    def __post_init__(self) -> None:
        timestamps = _frozen_array(self.timestamps, np.int64)
        utilisation = _frozen_array(self.utilisation, np.float64)
        if timestamps.ndim != 1 or timestamps.shape != utilisation.shape:
            raise ValueError("timestamps and utilisation must be 1-D arrays of equal length")
        if np.any(np.diff(timestamps) <= 0):
            raise ValueError("timestamps must be strictly ascending")
        if self.direction not in ("in", "out", None):
            raise ValueError(f"direction must be 'in', 'out' or None, not {self.direction!r}")
        if self.period_s <= 0:
            raise ValueError(f"period_s must be positive, not {self.period_s}")
        object.__setattr__(self, "timestamps", timestamps)
        object.__setattr__(self, "utilisation", utilisation)


def build_series(
    link: str,
    direction: Direction | None,
    samples: Iterable[tuple[int, float]],
    period_s: int,
) -> UtilisationSeries:
    """Build a series from (interval start, utilisation) pairs in any order.

    Samples are sorted by time; of several samples with the same timestamp the first one given
    is kept (repeated snapshots and re-delivered messages), the others dropped.

    >>> build_series("l", "in", [(600, 0.2), (0, 0.5), (600, 0.9)], 300).utilisation.tolist()
    [0.5, 0.2]
    """
    ordered = sorted(samples, key=lambda sample: sample[0])
    kept = [s for i, s in enumerate(ordered) if i == 0 or s[0] != ordered[i - 1][0]]
    return UtilisationSeries(
        link=link,
        timestamps=np.array([t for t, _ in kept], dtype=np.int64),
        utilisation=np.array([u for _, u in kept], dtype=np.float64),
        direction=direction,
        period_s=period_s,
    )


def _frozen_array(values: np.ndarray, dtype: type) -> np.ndarray:
    array: np.ndarray = np.array(values, dtype=dtype)
    array.setflags(write=False)
    return array
