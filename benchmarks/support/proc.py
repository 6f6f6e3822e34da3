"""Readings of processes from /proc: CPU time, memory, children (Linux)."""

from __future__ import annotations

import os
from pathlib import Path

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a live process has used so far (0.0 once it is gone)."""
    try:
        fields = _stat_fields(pid)
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of a process and its live children (RabbitMQ's Erlang VM is the child of
    the `rabbitmq-server` shell)."""
    return cpu_seconds(pid) + sum(cpu_seconds(child) for child in children_of(pid))


def children_of(pid: int) -> list[int]:
    """Live child processes of `pid` (e.g. the service's parser processes)."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int(_stat_fields(int(entry.name))[1])
            except OSError:
                continue
            if parent == pid:
                children.append(int(entry.name))
    return children


def memory_of(pid: int | str = "self") -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in bytes."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) * 1024
    return values


def _stat_fields(pid: int) -> list[str]:
    """Fields of /proc/PID/stat after the command name (state is field 0)."""
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()


def tree_rss(pid: int) -> int:
    """Summed RSS of `pid` and all its descendants (0 for those that ended meanwhile)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            total += memory_of(current).get("VmRSS", 0)
        except OSError:
            continue
        pending += children_of(current)
    return total
