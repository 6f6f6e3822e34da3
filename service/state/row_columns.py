"""Named numpy columns over link rows, each with the value an empty row holds.

The per-link state beside the delay and loss buffers (throughput results, paths) keeps its arrays
here: grown by doubling as links arrive, compacted in row order when links retire (the rows
`LinkState` keeps), and listed by name for the state snapshot. Datapoints of a batch are
grouped by row with `first_of_each` and `newest_of_each`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ColumnSpec:
    """A column: its element type, its shape after the row axis, and an empty row's value."""

    dtype: type[np.generic]
    fill: float
    width: tuple[int, ...] = ()

    @property
    def row_bytes(self) -> int:
        return int(np.dtype(self.dtype).itemsize * np.prod(self.width, dtype=np.int64))


class RowColumns(Mapping[str, np.ndarray]):
    """Columns by name (a read-only mapping of the arrays, `capacity` rows each)."""

    def __init__(self, specs: Mapping[str, ColumnSpec], capacity: int) -> None:
        self.specs = dict(specs)
        self.capacity = 0
        self._arrays = {
            name: np.empty((0, *spec.width), spec.dtype) for name, spec in self.specs.items()
        }
        self.grow_to(capacity)

    def __getitem__(self, name: str) -> np.ndarray:
        return self._arrays[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._arrays)

    def __len__(self) -> int:
        return len(self._arrays)

    def ensure_row(self, row: int) -> None:
        """Room for `row`, the next row given out (the rows after it are empty)."""
        if row >= self.capacity:
            self.grow_to(max(row + 1, 2 * self.capacity), used=row)

    def grow_to(self, capacity: int, used: int | None = None) -> None:
        """Room for `capacity` rows, the first `used` (all, when None) kept. A column whose
        empty value is 0 grows into zeroed memory the allocator hands out untouched (calloc),
        and its rows are copied only when one holds something: the rows of links without
        results take no resident memory."""
        for name, spec in self.specs.items():
            old = self._arrays[name][:used]
            if spec.fill == 0:
                grown = np.zeros((capacity, *spec.width), spec.dtype)
                if old.any():
                    grown[: len(old)] = old
            else:
                grown = np.full((capacity, *spec.width), spec.fill, spec.dtype)
                grown[: len(old)] = old
            self._arrays[name] = grown
        self.capacity = capacity

    def keep_rows(self, keep: np.ndarray, n: int) -> None:
        """Move rows `keep` (ascending, below `n`) to the front and empty rows len(keep) to n."""
        kept = len(keep)
        for name, spec in self.specs.items():
            array = self._arrays[name]
            array[:kept] = array[keep]
            array[kept:n] = spec.fill

    def restore(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Fill the first rows from `arrays` (one per column, all of the same length)."""
        for name, values in arrays.items():
            self.ensure_row(len(values) - 1)
            self._arrays[name][: len(values)] = values

    def nbytes_per_row(self) -> int:
        return sum(spec.row_bytes for spec in self.specs.values())


def first_of_each(rows: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Mask of the first datapoint (in the given order) of each (row, time)."""
    order = np.lexsort((np.arange(len(rows)), times, rows))
    r, t = rows[order], times[order]
    first = np.ones(len(rows), dtype=bool)
    first[1:] = (r[1:] != r[:-1]) | (t[1:] != t[:-1])
    mask = np.zeros(len(rows), dtype=bool)
    mask[order[first]] = True
    return mask


def newest_of_each(rows: np.ndarray, times: np.ndarray, among: np.ndarray) -> np.ndarray:
    """Indices of the newest datapoint of each row among the `among` mask (of equal times, the
    last given), in row order."""
    candidates = np.flatnonzero(among)
    order = candidates[np.lexsort((candidates, times[candidates], rows[candidates]))]
    r = rows[order]
    last = np.ones(len(order), dtype=bool)
    last[:-1] = r[1:] != r[:-1]
    return order[last]
