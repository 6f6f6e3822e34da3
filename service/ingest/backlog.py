"""When ingest counts as behind: a back-fill or burst is being worked off.

Frames can wait in two places: in the frame batcher (received, not yet applied) or, when the
receiver thread itself is the bottleneck, at the broker's side of the connection, unread in the
socket. The matrix cycle holds data-triggered recomputes back while either holds a backlog.
"""

from __future__ import annotations

#: Received frames waiting beyond this (four of the frame batcher's batches) mean a backlog.
BACKLOG_FRAMES = 2048
#: Unread bytes in the broker's socket beyond this mean a backlog. A receiver keeping up with
#: 5,000 msg/s left at most ~75 KB there between reads; draining a back-fill, up to 1.5 MB.
BACKLOG_UNREAD_BYTES = 256 * 1024


def ingest_is_behind(queued_frames: int, unread_bytes: int) -> bool:
    return queued_frames > BACKLOG_FRAMES or unread_bytes > BACKLOG_UNREAD_BYTES
