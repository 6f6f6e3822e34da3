"""What every measurement gets: sizes, where to write, and how to report progress."""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.sizes import Sizes


@dataclass(frozen=True)
class SuiteContext:
    sizes: Sizes
    output: Path
    quick: bool
    load_generator: str
    began: float = field(default_factory=time.monotonic)
    #: What a run's measurements share, by name (at quick sizes, one broker: see
    #: `benchmarks.support.broker.measurement_broker`), and how to stop it when the run ends.
    shared: dict[str, Any] = field(default_factory=dict)
    closing: ExitStack = field(default_factory=ExitStack)

    @property
    def work(self) -> Path:
        """Scratch space (broker data, state snapshots); emptied by each measurement."""
        return self.output / "work"

    @property
    def logs(self) -> Path:
        return self.output / "logs"

    @property
    def cache(self) -> Path:
        """Simulated histograms kept between runs (they do not depend on the time of the run)."""
        return self.output / "cache"

    def log(self, message: str) -> None:
        elapsed = time.monotonic() - self.began
        print(f"[bench {elapsed:6.1f} s] {message}", file=sys.stderr, flush=True)


class Unavailable(RuntimeError):
    """A measurement's prerequisite (an optional extra, a venv, a shipped file) is missing: the
    suite lists it as not run, with this message, instead of failing."""
