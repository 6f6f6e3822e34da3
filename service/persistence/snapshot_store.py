"""Snapshot files on disk: atomic replace (temp file, fsync, rename), corrupt files moved aside."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from service.persistence.snapshot_codec import SnapshotFormatError, decode_state
from service.state.link_state import LinkState
from service.topology.topology import Topology

SNAPSHOT_NAME = "link-state.snapshot"


class SnapshotStore:
    """Reads and writes the one current snapshot in `directory`."""

    def __init__(self, directory: Path, log: logging.Logger | None = None) -> None:
        self.directory = directory
        self.path = directory / SNAPSHOT_NAME
        self._log = log or logging.getLogger("nettel.snapshot")
        directory.mkdir(parents=True, exist_ok=True)

    def write(self, data: bytes) -> None:
        """Replace the snapshot atomically: a crash leaves either the old or the new file."""
        temporary = self.path.with_name(f".{SNAPSHOT_NAME}.{os.getpid()}.tmp")
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)
        directory = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)

    def read(self, topology: Topology) -> LinkState | None:
        """The saved state, or None (no file, or an unusable one that is then moved aside)."""
        if not self.path.exists():
            return None
        try:
            state = decode_state(self.path.read_bytes(), topology)
        except (OSError, SnapshotFormatError) as error:
            aside = self.path.with_name(f"{SNAPSHOT_NAME}.rejected-{int(time.time())}")
            os.replace(self.path, aside)
            self._log.error(
                "state snapshot unusable; moved aside, starting empty",
                extra={"error": str(error), "moved_to": str(aside)},
            )
            return None
        self._log.info("state restored", extra={"links": len(state), "path": str(self.path)})
        return state
