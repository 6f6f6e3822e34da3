"""Where the service spends its time: py-spy on the running process, cProfile in-process."""

from __future__ import annotations

import cProfile
import pstats
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from benchmarks.support.environment import REPO_ROOT

FRAME = re.compile(r"^(?P<function>.*) \((?P<file>[^()]*?)(?::\d+)?\)$")
TOP = 15
#: Frames every sample passes through (thread and module bootstrap); left out of "inclusive".
PLUMBING = ("(threading.py)", "runpy", "<module>")


def py_spy_path() -> str | None:
    """py-spy from the running interpreter's environment, or on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    return str(beside) if beside.exists() else shutil.which("py-spy")


@dataclass
class PySpyRecording:
    """`py-spy record --format raw` attached to `pid` until `stop()` (SIGINT, which writes)."""

    process: subprocess.Popen[bytes]
    output: Path
    log: Path

    @classmethod
    def start(cls, pid: int, output: Path, rate: int = 100) -> PySpyRecording | None:
        executable = py_spy_path()
        if executable is None:
            return None
        output.parent.mkdir(parents=True, exist_ok=True)
        log = output.with_suffix(".log")
        command = [executable, "record", "--pid", str(pid), "--rate", str(rate)]
        command += ["--nonblocking", "--gil"]
        command += ["--format", "raw", "--output", str(output)]
        with log.open("wb") as handle:
            process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
        return cls(process, output, log)

    def stop(self, timeout: float = 30.0) -> Path | None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.output if self.output.exists() and self.output.stat().st_size else None


def summarise_folded(path: Path, top: int = TOP) -> dict[str, object]:
    """Top functions by own ("self") and inclusive samples from py-spy's collapsed stacks, and
    the share of each thread's entry point (its first frame below the threading plumbing)."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    threads: Counter[str] = Counter()
    total = 0
    for stack, count in _folded_lines(path):
        frames = [_frame_name(frame) for frame in stack.split(";")]
        useful = [frame for frame in frames if not any(m in frame for m in PLUMBING)]
        total += count
        own[frames[-1]] += count
        threads[useful[0] if useful else frames[0]] += count
        for frame in set(useful):
            inclusive[frame] += count
    return {
        "samples": total,
        "self": _shares(own, total, top),
        "inclusive": _shares(inclusive, total, top),
        "threads": _shares(threads, total, top),
    }


def _folded_lines(path: Path) -> list[tuple[str, int]]:
    lines = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if stack and count_text.isdigit():
            lines.append((stack, int(count_text)))
    return lines


def cprofile_top(profile: cProfile.Profile, top: int = TOP) -> dict[str, object]:
    """Top functions of a cProfile run by own time and cumulative time."""
    stats = pstats.Stats(profile)
    total = sum(entry[2] for entry in stats.stats.values())  # type: ignore[attr-defined]
    rows = [(_pstats_name(key), entry[2], entry[3]) for key, entry in stats.stats.items()]  # type: ignore[attr-defined]
    by_own = sorted(rows, key=lambda row: row[1], reverse=True)[:top]
    by_cumulative = sorted(rows, key=lambda row: row[2], reverse=True)[:top]
    return {
        "seconds": total,
        "self": [[name, round(100 * own / total, 1)] for name, own, _ in by_own],
        "inclusive": [[name, round(100 * cum / total, 1)] for name, _, cum in by_cumulative],
    }


def profile_table(title: str, summary: dict[str, object]) -> dict[str, object]:
    """A details table (rank, self %, function, inclusive %, function) for the markdown."""
    own, inclusive = summary["self"], summary["inclusive"]
    assert isinstance(own, list) and isinstance(inclusive, list)
    rows = [
        [rank + 1, f"{a[1]:.1f} %", f"`{a[0]}`", f"{b[1]:.1f} %", f"`{b[0]}`"]
        for rank, (a, b) in enumerate(zip(own, inclusive, strict=False))
    ]
    columns = ["#", "self", "function (self time)", "inclusive", "function (incl. callees)"]
    return {"title": title, "columns": columns, "rows": rows}


def thread_table(title: str, summary: dict[str, object]) -> dict[str, object]:
    """A details table of samples per thread entry point."""
    shares = summary["threads"]
    assert isinstance(shares, list)
    rows = [[f"`{name}`", f"{share:.1f} %"] for name, share in shares]
    return {"title": title, "columns": ["thread entry point", "share of samples"], "rows": rows}


def _frame_name(frame: str) -> str:
    match = FRAME.match(frame.strip())
    if match is None:
        return frame.strip()
    return f"{match['function']} ({_short_path(match['file'])})"


def _pstats_name(key: tuple[str, int, str]) -> str:
    file, _, function = key
    return f"{function} ({_short_path(file)})" if file != "~" else function


def _short_path(file: str) -> str:
    for marker in ("site-packages/", f"{REPO_ROOT}/", "lib/python3.11/"):
        if marker in file:
            return file.split(marker, 1)[1]
    return file


def _shares(counter: Counter[str], total: int, top: int) -> list[list[object]]:
    return [[name, round(100 * count / total, 1)] for name, count in counter.most_common(top)]
