"""ingest_is_behind: a backlog in the frame batcher, unread in the broker's socket or at the
broker (messages arriving late); and
BacklogWatch: when a backlog seen poll after poll counts as ingest being behind."""

from __future__ import annotations

from service.ingest.backlog import (
    BACKLOG_FRAMES,
    BACKLOG_LAG_SECONDS,
    BACKLOG_UNREAD_BYTES,
    BEHIND_PERSIST_SECONDS,
    BEHIND_QUIET_SECONDS,
    BacklogWatch,
    ingest_is_behind,
)

POLL = 0.1


def test_either_place_holding_a_backlog_means_behind() -> None:
    assert not ingest_is_behind(BACKLOG_FRAMES, BACKLOG_UNREAD_BYTES)
    assert ingest_is_behind(BACKLOG_FRAMES + 1, 0)
    assert ingest_is_behind(0, BACKLOG_UNREAD_BYTES + 1)


def test_messages_arriving_late_mean_behind_and_no_timestamp_means_nothing() -> None:
    assert not ingest_is_behind(0, 0, BACKLOG_LAG_SECONDS)
    assert not ingest_is_behind(0, 0, -30.0)  # a broker clock ahead of ours is no backlog
    assert not ingest_is_behind(0, 0, None)
    assert ingest_is_behind(0, 0, BACKLOG_LAG_SECONDS + 0.1)


def polls(watch: BacklogWatch, start: float, backlogs: list[bool]) -> list[bool]:
    """`watch.behind` at polls POLL seconds apart from `start`."""
    return [watch.behind(start + i * POLL, seen) for i, seen in enumerate(backlogs)]


def test_a_backlog_of_a_poll_or_two_is_not_behind() -> None:
    watch = BacklogWatch()
    assert polls(watch, 0.0, [False, True, True, False, True, False]) == [False] * 6


def test_a_lasting_backlog_is_behind_until_a_quiet_second() -> None:
    watch = BacklogWatch()
    lasting = round(BEHIND_PERSIST_SECONDS / POLL)  # polls after the first sight
    quiet = round(BEHIND_QUIET_SECONDS / POLL)
    assert polls(watch, 0.0, [True] * (lasting + 1)) == [False] * lasting + [True]
    after = polls(watch, (lasting + 1) * POLL, [False] * (quiet + 1))
    assert after[: quiet - 1] == [True] * (quiet - 1) and after[-1] is False
