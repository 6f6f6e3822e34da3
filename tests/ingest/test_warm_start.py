"""Warm start sources: the newest valid replica snapshot of a shared directory, newer than our own;
failures as outcomes with reasons, never exceptions."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from devtools.activemq import free_port
from service.persistence.snapshot_codec import encode_state
from service.persistence.snapshot_store import SNAPSHOT_NAME, SnapshotStore
from service.persistence.warm_start import (
    WarmOutcome,
    WarmSource,
    WarmStartError,
    warm_start,
    warm_state,
)
from service.topology.topology import Topology
from tests.persistence.test_snapshot_codec import assert_same_state, filled_state


def replica_dir(shared: Path, name: str, links: int, modified: float) -> Path:
    """`shared/name` holding a snapshot of `links` links, last modified at `modified`."""
    store = SnapshotStore(shared / name)
    store.write(encode_state(filled_state(links=links, minutes=40)))
    os.utime(store.path, (modified, modified))
    return store.path


def test_the_newest_valid_peer_snapshot_is_taken_and_a_damaged_one_skipped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    replica_dir(tmp_path, "a", 3, 1000)
    replica_dir(tmp_path, "b", 4, 2000)
    damaged = replica_dir(tmp_path, "c", 5, 3000)
    damaged.write_bytes(damaged.read_bytes()[:-10])
    os.utime(damaged, (3000, 3000))
    with caplog.at_level(logging.WARNING):
        warm = warm_state(WarmSource(str(tmp_path)), Topology())
    assert warm.source == str(tmp_path / "b" / SNAPSHOT_NAME)
    assert warm.size == (tmp_path / "b" / SNAPSHOT_NAME).stat().st_size
    assert_same_state(filled_state(links=4, minutes=40), warm.state)
    assert "peer snapshot skipped" in caplog.text


def test_only_peer_snapshots_newer_than_our_own_are_taken(tmp_path: Path) -> None:
    replica_dir(tmp_path, "peer", 3, 2000)
    own = replica_dir(tmp_path, "own", 4, 1000)
    taken = warm_state(WarmSource(str(tmp_path), own_snapshot=own), Topology())
    assert len(taken.state) == 3
    os.utime(own, (3000, 3000))
    with pytest.raises(WarmStartError) as failure:
        warm_state(WarmSource(str(tmp_path), own_snapshot=own), Topology())
    assert failure.value.outcome is WarmOutcome.NOT_FOUND


def test_failures_are_outcomes_with_reasons_not_exceptions(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    unreachable = WarmSource(f"http://127.0.0.1:{free_port()}", token="x", timeout=2)
    with caplog.at_level(logging.ERROR):
        assert warm_start(unreachable, Topology()).outcome is WarmOutcome.UNREACHABLE
        assert warm_start(WarmSource(str(tmp_path)), Topology()).outcome is WarmOutcome.NOT_FOUND
    reasons = [getattr(record, "reason", "") for record in caplog.records]
    assert reasons[0].startswith("ConnectError")
    assert reasons[1].startswith(f"no valid snapshot in {tmp_path}")
