"""How much CPU other processes took while a measurement ran (the machine may be shared).

Busy time comes from /proc/stat (all cores); the suite's own time from getrusage of this process
and of its waited-for children (brokers, services, load generators are all reaped before a
measurement ends). The difference, divided by the wall time, is the average number of cores
that processes outside the suite kept busy.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass

from benchmarks.support.proc import CLOCK_TICKS


@dataclass(frozen=True)
class CpuSample:
    wall: float
    busy: float
    own: float
    load_average: float


def sample_cpu() -> CpuSample:
    return CpuSample(time.monotonic(), _busy_seconds(), _own_seconds(), os.getloadavg()[0])


def other_cores(start: CpuSample, end: CpuSample) -> float:
    """Average cores used by processes outside the suite between two samples (>= 0)."""
    wall = end.wall - start.wall
    if wall <= 0:
        return 0.0
    return max(0.0, ((end.busy - start.busy) - (end.own - start.own)) / wall)


def _busy_seconds() -> float:
    with open("/proc/stat") as handle:
        fields = handle.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLOCK_TICKS


def _own_seconds() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total
