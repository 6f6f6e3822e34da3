"""`python -m service serve` subprocesses for tests and benchmarks: launch, wait, stop.

Each runs in its own session (so its process group can be signalled), logs to a file, and
listens on a free loopback port.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from devtools.activemq import free_port

REPO_ROOT = Path(__file__).resolve().parents[1]
STOP_TIMEOUT = 15.0


class ServiceError(RuntimeError):
    """The service exited or did not answer in time; the message carries its log tail."""


@dataclass
class ServiceProcess:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    command: list[str]
    launched_at: float = field(default_factory=time.monotonic)

    @property
    def pid(self) -> int:
        return self.process.pid

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise ServiceError(
                f"service exited with {self.process.returncode}\n$ {shlex.join(self.command)}"
                f"\n--- log ---\n{self.log_tail(200)}"
            )

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM the process group (clean shutdown), SIGKILL after `timeout`."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
        return self.process.wait()

    def kill(self) -> int:
        """SIGKILL the process group: a crash, with no clean shutdown (nothing unsubscribes,
        no snapshot is written; the broker sees the connection drop)."""
        _signal_group(self.process, signal.SIGKILL)
        return self.process.wait()


def launch_service(
    brokers: str,
    extra_args: Sequence[str],
    log_path: Path,
    env: Mapping[str, str] | None = None,
    port: int | None = None,
) -> ServiceProcess:
    """Start `python -m service serve --brokers B --listen 127.0.0.1:<port> ...` (a free port
    unless given, e.g. to restart a killed replica where a load balancer expects it)."""
    port = port or free_port()
    command = [sys.executable, "-m", "service", "serve", "--brokers", brokers]
    command += ["--listen", f"127.0.0.1:{port}", *extra_args]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    launched = time.monotonic()
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return ServiceProcess(f"http://127.0.0.1:{port}", process, log_path, command, launched)


def wait_for_status(
    service: ServiceProcess,
    path: str,
    status: int = 200,
    timeout: float = 60.0,
    interval: float = 0.02,
) -> float:
    """Poll `path` until it answers `status`; return the monotonic time it first did."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            service.check_alive()
            try:
                if client.get(service.url + path).status_code == status:
                    return time.monotonic()
            except httpx.HTTPError:
                pass
            time.sleep(interval)
    service.stop()
    raise ServiceError(
        f"{path} did not answer {status} within {timeout:.0f} s\n$ {shlex.join(service.command)}"
        f"\n--- log ---\n{service.log_tail(200)}"
    )


def _signal_group(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass
