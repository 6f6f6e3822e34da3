"""The background loop the running parts work on, and the runtime's ordered list of parts."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from service.config import Settings
from service.lifecycle import BackgroundLoop, Hooks
from service.runtime import Runtime, build_runtime


def test_a_loop_steps_every_interval_until_stopped() -> None:
    steps: list[float] = []
    loop = BackgroundLoop("test-loop", lambda: steps.append(time.monotonic()), interval=0.02)
    loop.start()
    deadline = time.monotonic() + 5
    while len(steps) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    loop.stop()
    assert len(steps) >= 3 and not loop.alive
    assert loop.stopping


def test_a_woken_loop_steps_at_once_and_waits_first_when_asked() -> None:
    stepped = threading.Event()
    loop = BackgroundLoop("test-wake", stepped.set, interval=None, wait_first=True)
    loop.start()
    assert not stepped.wait(0.1)  # waits for a wake-up, not a step at start
    loop.wake()
    assert stepped.wait(5)
    loop.stop()
    assert not loop.alive


def test_a_step_sets_its_next_pause() -> None:
    steps: list[int] = []

    def step() -> None:
        steps.append(1)
        loop.pause_next(None if len(steps) == 2 else 0)

    loop = BackgroundLoop("test-pause", step, interval=60)
    loop.start()
    deadline = time.monotonic() + 5
    while len(steps) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)
    assert len(steps) == 2  # the second step asked to wait for a wake-up
    loop.stop()


def test_once_runs_a_call_on_its_own_thread_and_ends() -> None:
    ran_on: list[str] = []
    loop = BackgroundLoop.once("test-once", lambda: ran_on.append(threading.current_thread().name))
    loop.start()
    loop.join()
    assert ran_on == ["test-once"] and not loop.alive


def test_stopping_a_loop_that_never_started_does_nothing() -> None:
    BackgroundLoop("never", lambda: None).stop()


def test_hooks_call_what_they_were_given() -> None:
    calls: list[str] = []
    hooks = Hooks(
        "test", on_start=lambda: calls.append("start"), on_stop=lambda: calls.append("stop")
    )
    hooks.start()
    hooks.stop()
    assert calls == ["start", "stop"]


def every_part(tmp_path: Path) -> Runtime:
    """A runtime with every optional part (nothing is started or connected)."""
    topology = tmp_path / "topology.yaml"
    topology.write_text("CERN: [psl01-gva.cern.ch]\n")
    return build_runtime(
        Settings(
            model="none",
            brokers="127.0.0.1:1",
            state_dir=tmp_path / "state",
            topology=str(topology),
            parse_processes=1,
            warm_from="http://127.0.0.1:1",
            backfill_from="http://127.0.0.1:1/esmond",
            ha_group="group",
        )
    )


def test_the_runtime_holds_every_part_in_start_order(tmp_path: Path) -> None:
    runtime = every_part(tmp_path)
    try:
        assert [part.name for part in runtime.parts] == [
            "publishers",
            "state-dir lock",
            "topology-refresh",
            "parser processes",
            "subscription",
            "warm start",
            "persistence",
            "alarms",
            "matrix-cycle",
            "frame-batcher",
            "bus",
            "pscheduler-http",
            "archive-backfill",
            "ha-election",
        ]
    finally:
        assert runtime.parsers is not None and runtime.state_dir_lock is not None
        runtime.parsers.stop()
        runtime.state_dir_lock.release()


def test_parts_start_in_order_stop_in_reverse_and_a_failed_start_stops_those_started() -> None:
    runtime = build_runtime(Settings(model="none", publish_telemetry=False))
    calls: list[str] = []

    def part(name: str, fails: bool = False) -> Hooks:
        def start() -> None:
            if fails:
                raise RuntimeError(name)
            calls.append(f"start {name}")

        return Hooks(name, on_start=start, on_stop=lambda: calls.append(f"stop {name}"))

    runtime.parts = [part("a"), part("b")]
    runtime.start()
    runtime.stop()
    assert calls == ["start a", "start b", "stop b", "stop a"]
    calls.clear()
    runtime.parts = [part("a"), part("b"), part("c", fails=True), part("d")]
    with pytest.raises(RuntimeError, match="c"):
        runtime.start()
    assert calls == ["start a", "start b", "stop b", "stop a"]
