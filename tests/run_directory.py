"""What the xdist workers of one test run share: the run's directory, and a lock to make
something there once (the first worker that asks makes it, the others wait and read it)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def run_directory(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's directory: under xdist, the one above each worker's base directory; without
    it, the session's base directory."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Held by one process (xdist worker) at a time."""
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
