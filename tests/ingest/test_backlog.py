"""ingest_is_behind: a backlog in the frame batcher or unread in the broker's socket."""

from __future__ import annotations

from service.ingest.backlog import BACKLOG_FRAMES, BACKLOG_UNREAD_BYTES, ingest_is_behind


def test_either_place_holding_a_backlog_means_behind() -> None:
    assert not ingest_is_behind(BACKLOG_FRAMES, BACKLOG_UNREAD_BYTES)
    assert ingest_is_behind(BACKLOG_FRAMES + 1, 0)
    assert ingest_is_behind(0, BACKLOG_UNREAD_BYTES + 1)
