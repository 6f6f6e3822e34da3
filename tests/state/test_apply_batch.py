"""A batch of messages is applied exactly as if each datapoint were applied on its own, in order."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from service.parse.records import ParsedMessage
from service.state.link_buffers import ARCHIVE, SERIES
from service.state.link_state import LinkState
from tests.message_factory import BASE_MINUTE, delay_message, link, loss_message, stats_at

NOW = BASE_MINUTE * 60 + 30
LINKS = [link(source=f"10.0.0.{n}") for n in range(1, 4)]
#: Minutes from far outside the window to the future, so slots collide, evict and refuse.
_MINUTE = st.integers(BASE_MINUTE - 70, BASE_MINUTE + 7)
_DELAY = st.sampled_from([-3.0, 0.5, 5.0, 12.25, 80.0])
_DELAYS = st.dictionaries(_MINUTE.map(lambda m: m * 60), _DELAY, min_size=1, max_size=4)
_LOSSES = st.dictionaries(
    st.integers(0, 59).flatmap(lambda s: _MINUTE.map(lambda m: m * 60 + s)),
    st.sampled_from([0.0, 0.01, 0.5]),
    min_size=1,
    max_size=4,
)
_MESSAGE = st.one_of(
    st.builds(lambda v, e: delay_message(v, e), _DELAYS, st.sampled_from(LINKS)),
    st.builds(lambda v, e: loss_message(v, e), _LOSSES, st.sampled_from(LINKS)),
)


def one_datapoint_each(message: ParsedMessage) -> list[ParsedMessage]:
    """`message` as messages of a single datapoint, in application order (delays, then losses)."""
    parts = [delay_message({ts: stats}, message.link) for ts, stats in message.delays]
    return parts + [loss_message({ts: loss}, message.link) for ts, loss in message.losses]


def arrays_of(state: LinkState) -> dict[str, np.ndarray]:
    b, n = state.buffers, len(state)
    arrays = {f"series.{k}": b.series[k][:n] for k in SERIES}
    arrays |= {f"archive.{k}": b.archive[k][:n] for k in ARCHIVE}
    for name in ("slot_minute", "latest_delay_minute", "latest_p95", "latest_minute"):
        arrays[name] = getattr(b, name)[:n]
    arrays["clock_suspect_minute"] = b.clock_suspect_minute[:n]
    return arrays


@settings(max_examples=150, deadline=None)
@given(st.lists(_MESSAGE, min_size=1, max_size=25))
def test_batch_equals_datapoints_applied_one_by_one(messages: list[ParsedMessage]) -> None:
    batched, sequential = LinkState(), LinkState()
    outcomes = batched.apply_batch(messages, NOW)
    for message, outcome in zip(messages, outcomes, strict=True):
        parts = [sequential.apply(part, NOW) for part in one_datapoint_each(message)]
        assert outcome.applied == sum(part.applied for part in parts)
        assert Counter(outcome.rejected) == Counter(r for part in parts for r in part.rejected)
    assert batched.index.sources == sequential.index.sources
    expected = arrays_of(sequential)
    for name, values in arrays_of(batched).items():
        assert np.array_equal(values, expected[name], equal_nan=True), name


def test_one_batch_can_hold_a_link_many_times() -> None:
    state = LinkState()
    messages = [delay_message({(BASE_MINUTE - k) * 60: float(k)}, LINKS[0]) for k in range(40)]
    outcomes = state.apply_batch([*messages, loss_message({NOW: 0.5}, LINKS[0])], NOW)
    # minute N-32 fits the window but its slot already holds minute N; older ones are refused
    assert [o.applied for o in outcomes] == [1] * 32 + [0] * 8 + [1]
    assert len(state) == 1
    assert state.buffers.series["delay_mean"][0, BASE_MINUTE % 32] == stats_at(0.0).mean
    assert state.buffers.series["loss"][0, BASE_MINUTE % 32] == 0.5
