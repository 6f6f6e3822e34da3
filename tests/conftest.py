"""Shared fixtures: a real ActiveMQ broker and a real `nettel serve` process.

- `activemq` (session): one private broker for the whole run; `activemq.brokers` is the
  `127.0.0.1:PORT` string for `--brokers`. Do not kill it; use `activemq_factory` for fault tests.
- `activemq_factory` (function): `activemq_factory()` starts another private broker in the
  test's tmp dir (kill/restart freely); all are stopped at teardown.
- `nettel_service` (function): `nettel_service(brokers, *extra_args, env=None)` starts
  `python -m service serve` on a free port, waits for `GET /healthz` == 200 and returns a
  `RunningService` (`.url`, `.process`, `.log_path`); stopped at teardown.
- `free_port()`: plain helper (also importable from `service.devtools.activemq`).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from service.devtools.activemq import ActiveMQProcess, free_port, start_activemq

REPO_ROOT = Path(__file__).resolve().parents[1]
SERVICE_START_TIMEOUT = 30.0
SERVICE_STOP_TIMEOUT = 10.0


class ServiceStartError(RuntimeError):
    """`nettel serve` exited or never became healthy; the message carries its log."""


@dataclass
class RunningService:
    """A `nettel serve` subprocess started by the `nettel_service` fixture."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path
    command: list[str]

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = SERVICE_STOP_TIMEOUT) -> int:
        """SIGTERM the process group, SIGKILL after `timeout`; return the exit code."""
        if self.process.poll() is None:
            _signal_group(self.process, signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                _signal_group(self.process, signal.SIGKILL)
        return self.process.wait()


def _signal_group(process: subprocess.Popen[bytes], signum: signal.Signals) -> None:
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        pass


def _launch_service(
    command: list[str], env: Mapping[str, str] | None, log_path: Path
) -> subprocess.Popen[bytes]:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    with log_path.open("wb") as log:
        return subprocess.Popen(
            command,
            cwd=REPO_ROOT,
            env=full_env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _is_healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _wait_healthy(service: RunningService, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if service.process.poll() is not None:
            raise _start_error(service, f"exited with code {service.process.returncode}")
        if _is_healthy(service.url):
            return
        time.sleep(0.2)
    service.stop()
    raise _start_error(service, f"/healthz not 200 within {timeout:.0f} s")


def _start_error(service: RunningService, what: str) -> ServiceStartError:
    command = shlex.join(service.command)
    return ServiceStartError(f"nettel serve {what}\n$ {command}\n--- log ---\n{service.log_text()}")


@pytest.fixture(scope="session")
def activemq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ActiveMQProcess]:
    """One private ActiveMQ broker (STOMP on a free port) for the whole test session."""
    broker = start_activemq(tmp_path_factory.mktemp("activemq"), stomp_port=free_port())
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def activemq_factory(tmp_path: Path) -> Iterator[Callable[..., ActiveMQProcess]]:
    """Start extra private brokers (free ports, tmp dir) that a test may kill and restart."""
    started: list[ActiveMQProcess] = []

    def start(**kwargs: object) -> ActiveMQProcess:
        base_dir = tmp_path / f"activemq-{len(started)}"
        broker = start_activemq(base_dir, stomp_port=free_port(), **kwargs)  # type: ignore[arg-type]
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def nettel_service(tmp_path: Path) -> Iterator[Callable[..., RunningService]]:
    """Start `python -m service serve --brokers BROKERS --listen 127.0.0.1:<free>` and wait
    until it is healthy: `nettel_service(activemq.brokers, "--interval", "1", env={...})`."""
    started: list[RunningService] = []

    def start(
        brokers: str,
        *extra_args: str,
        env: Mapping[str, str] | None = None,
        timeout: float = SERVICE_START_TIMEOUT,
    ) -> RunningService:
        port = free_port()
        log_path = tmp_path / f"nettel-serve-{len(started)}.log"
        command = [sys.executable, "-m", "service", "serve", "--brokers", brokers]
        command += ["--listen", f"127.0.0.1:{port}", *extra_args]
        process = _launch_service(command, env, log_path)
        service = RunningService(f"http://127.0.0.1:{port}", process, log_path, command)
        started.append(service)
        _wait_healthy(service, timeout)
        return service

    yield start
    for service in started:
        service.stop()
