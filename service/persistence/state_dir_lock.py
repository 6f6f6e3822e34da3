"""One process per state directory: an exclusive advisory lock on ``<state-dir>/lock``.

Two processes on one directory would each replay and rotate the same journal and overwrite each
other's snapshots, so `nettel serve` and `nettel backfill` take the lock (``flock``, released by
the kernel when the process ends, even on SIGKILL) before they read the directory, and a second
process is refused with the holder's pid and host, which the file names. Replicas share a
directory by each taking its own subdirectory (``--state-dir DIR/$CLIENT_ID``).
"""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from service.errors import ConfigError

LOCK_FILE = "lock"


class StateDirLock:
    """Holds `directory`'s lock from construction until `release` (or the process's end)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        handle = (directory / LOCK_FILE).open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise ConfigError(
                f"--state-dir {directory} is in use by {holder}: each process needs a state "
                "directory of its own (replicas: --state-dir DIR/$CLIENT_ID)"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {socket.gethostname()}\n")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        if not self._handle.closed:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
