"""ParserProcesses: child processes give the same results as in-thread parsing and survive death."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from devtools.waiting import wait_for
from service.errors import RejectedInput
from service.ingest.parser_processes import MIN_SPLIT, ParserProcesses
from service.parse.perfsonar import parse_messages
from service.parse.records import MeasurementKind
from tests.message_factory import BASE_TS, body, meta, sample_body

REPO_ROOT = Path(__file__).resolve().parents[2]


def mixed_frames(n: int) -> list[tuple[MeasurementKind, bytes]]:
    """Valid delay and loss messages for distinct links, with hostile ones in between."""
    frames = []
    for i in range(n):
        link = meta(source=f"10.1.{i // 250}.{i % 250}")
        if i % 7 == 3:
            frames.append((MeasurementKind.LOSS, b'{"meta": 5'))
        elif i % 2:
            frames.append((MeasurementKind.LOSS, body({BASE_TS: 0.01 * (i % 100)}, link)))
        else:
            histogram = {"1.5": 10 + i % 5, f"{2 + i % 3}.25": 590}
            frames.append((MeasurementKind.DELAY, body({BASE_TS: histogram}, link)))
    return frames


def alive(pid: int) -> bool:
    """Running (a reaped or zombie child counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def comparable(results: list) -> list:
    return [(r.reason, r.detail) if isinstance(r, RejectedInput) else r for r in results]


@pytest.fixture
def two_parsers():
    parsers = ParserProcesses(2)
    yield parsers
    parsers.stop()


def test_results_equal_in_thread_parsing_in_order(two_parsers: ParserProcesses) -> None:
    frames = mixed_frames(3 * MIN_SPLIT + 5)  # split across both children
    frames.append((MeasurementKind.DELAY, sample_body("owdelay-histogram-real.json")))

    results = two_parsers.parse(frames)

    assert comparable(results) == comparable(parse_messages(frames))
    assert round(results[-1].delays[0][1].median, 2) == 2.60
    assert two_parsers.parse([]) == []


def test_a_killed_child_is_replaced_and_the_batch_still_parsed(
    two_parsers: ParserProcesses, caplog: pytest.LogCaptureFixture
) -> None:
    frames = mixed_frames(2 * MIN_SPLIT)
    before = two_parsers.pids
    os.kill(before[0], signal.SIGKILL)
    wait_for(lambda: not alive(before[0]), 5, 0.02, what="the old parser process gone")

    with caplog.at_level(logging.ERROR, "nettel.ingest"):
        results = two_parsers.parse(frames)

    assert comparable(results) == comparable(parse_messages(frames))
    assert "parser process failed" in caplog.text
    after = two_parsers.pids
    assert len(after) == 2 and not set(after) & set(before) and all(map(alive, after))
    assert comparable(two_parsers.parse(frames)) == comparable(results)  # the new children work


def test_children_ignore_stop_signals_meant_for_the_service(two_parsers: ParserProcesses) -> None:
    """A stop sent to the whole process group must not kill them while the service drains."""
    frames = mixed_frames(2 * MIN_SPLIT)
    two_parsers.parse(frames)  # both children are up and in their loop
    pids = two_parsers.pids
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
        os.kill(pid, signal.SIGINT)
    time.sleep(0.3)
    assert all(map(alive, pids))
    assert comparable(two_parsers.parse(frames)) == comparable(parse_messages(frames))
    assert two_parsers.pids == pids


def test_stop_ends_the_children() -> None:
    parsers = ParserProcesses(1)
    (pid,) = parsers.pids
    parsers.parse(mixed_frames(3))
    parsers.stop()
    assert not alive(pid) and parsers.pids == []
    frames = mixed_frames(3)
    assert comparable(parsers.parse(frames)) == comparable(parse_messages(frames))  # in-process


def test_children_end_with_the_interpreter_although_they_ignore_sigterm(tmp_path: Path) -> None:
    """multiprocessing's exit hook SIGTERMs and joins daemon children; the pipes close first."""
    script = (
        "from service.ingest.parser_processes import ParserProcesses\n"
        "from service.parse.records import MeasurementKind\n"
        "parsers = ParserProcesses(2)\n"
        "parsers.parse([(MeasurementKind.LOSS, b'{}')] * 200)  # both children in their loop\n"
    )
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, check=True, timeout=30)
    assert time.monotonic() - started < 20


def test_count_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        ParserProcesses(0)
