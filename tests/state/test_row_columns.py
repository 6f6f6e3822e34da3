"""RowColumns: growth keeps the rows in use, empty rows hold each column's empty value, retired
rows close up; grouping a batch's datapoints by row."""

from __future__ import annotations

import numpy as np

from service.state.link_state import LinkState
from service.state.row_columns import ColumnSpec, RowColumns, first_of_each, newest_of_each

SPECS = {
    "count": ColumnSpec(np.int32, 0),
    "ring": ColumnSpec(np.float32, 0.0, (3,)),
    "marker": ColumnSpec(np.int8, -1),
}


def test_growth_keeps_the_rows_given_out_and_fills_the_rest() -> None:
    columns = RowColumns(SPECS, 2)
    columns["count"][:2] = [5, 6]
    columns["ring"][1] = [1.0, 2.0, 3.0]
    columns["marker"][:2] = [7, 8]
    columns.ensure_row(2)
    assert columns.capacity == 4
    assert columns["count"].tolist() == [5, 6, 0, 0]
    assert columns["ring"][1].tolist() == [1.0, 2.0, 3.0] and not columns["ring"][2:].any()
    assert columns["marker"].tolist() == [7, 8, -1, -1]
    columns.ensure_row(3)
    assert columns.capacity == 4  # room already
    assert columns.nbytes_per_row() == 4 + 12 + 1


def test_retired_rows_close_up_and_are_emptied() -> None:
    columns = RowColumns(SPECS, 4)
    columns["count"][:4] = [1, 2, 3, 4]
    columns["marker"][:4] = [1, 2, 3, 4]
    columns.keep_rows(np.array([1, 3]), 4)
    assert columns["count"].tolist() == [2, 4, 0, 0]
    assert columns["marker"].tolist() == [2, 4, -1, -1]


def test_restore_fills_the_first_rows() -> None:
    columns = RowColumns(SPECS, 1)
    columns.restore({"count": np.array([9, 8, 7], np.int32)})
    assert columns.capacity >= 3 and columns["count"][:3].tolist() == [9, 8, 7]


def test_a_state_filled_by_hand_gives_every_part_its_rows() -> None:
    state = LinkState(capacity=1)
    for row in range(5):
        state.ensure_row(row)
    assert state.buffers.capacity >= 5
    assert state.throughput.columns.capacity >= 5 and state.paths.columns.capacity >= 5


def test_datapoints_are_grouped_by_row() -> None:
    rows = np.array([2, 0, 2, 2, 0])
    times = np.array([10, 5, 10, 30, 5])
    assert first_of_each(rows, times).tolist() == [True, True, False, True, False]
    newest = newest_of_each(rows, times, np.ones(5, dtype=bool))
    assert newest.tolist() == [4, 3]  # row 0: the last of its equal times; row 2: time 30
    assert newest_of_each(rows, times, times < 30).tolist() == [4, 2]
