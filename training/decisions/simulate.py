"""`nettel simulate --family C --decisions DIR`: every policy's runs, in worker processes.

Each job is one policy's closed-loop run of one scenario, or one oracle probe (a sampled request
forced onto one candidate). A scenario's jobs run in one of `processes` spawned workers (ns-3's
simulator is one per process): the worker simulates the warm-up once, then forks a child per
job from there. Each scenario's lines are appended to DIR/runs.jsonl as it finishes, so a
stopped run resumes where it stopped: jobs already in the file are not run again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from functools import partial
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from service.analysis.features import FEATURE_NAMES
from service.config import DEFAULT_BUNDLE
from service.model.bundle import ModelBundle, load_bundle
from simulation.decision_world import DecisionScenario, draw_scenario
from training.dataset import DEFAULT_START_MINUTE
from training.decisions.run import (
    ORACLE_BASE_POLICY,
    ClosedLoop,
    follow_policy,
    oracle_duration,
    oracle_sample,
)

RUNS_FILE = "runs.jsonl"
MANIFEST = "decisions.json"


@dataclass(frozen=True)
class ScenarioKey:
    seed: int
    index: int
    herding: bool
    throughput_tests: bool = False

    @property
    def name(self) -> str:
        return f"{'herding' if self.herding else 'scenario'}-{self.seed}-{self.index:03d}"

    def draw(self) -> DecisionScenario:
        return draw_scenario(self.seed, self.index, self.herding, self.throughput_tests)

    def record(self) -> dict[str, Any]:
        """The key as a runs line holds it (throughput_tests only when set)."""
        plain = {"seed": self.seed, "index": self.index, "herding": self.herding}
        return plain | ({"throughput_tests": True} if self.throughput_tests else {})


@dataclass(frozen=True)
class Job:
    scenario: ScenarioKey
    policy: str  # a policy name, or "oracle"
    request: int = -1
    path: int = -1

    @property
    def key(self) -> str:
        tail = f"/{self.request}/{self.path}" if self.policy == "oracle" else ""
        return f"{self.scenario.name}/{self.policy}{tail}"


def plan_jobs(keys: list[ScenarioKey], policies: tuple[str, ...], oracle: bool) -> list[Job]:
    """Every policy run of every scenario, then (with `oracle`) every oracle probe."""
    jobs = [Job(key, policy) for key in keys for policy in policies]
    if oracle:
        for key in keys:
            scenario = key.draw()
            jobs.extend(
                Job(key, "oracle", request, path)
                for request in oracle_sample(scenario)
                for path in range(len(scenario.paths))
            )
    return jobs


_PREDICTOR: ModelBundle | None = None


def run_scenario(jobs: list[Job]) -> list[dict[str, Any]]:
    """The jobs of one scenario in this process: the loop is warmed up once, then each job runs
    in a forked child from that point (the children's worlds are copies; this one's stays at
    the end of the warm-up); their JSON lines."""
    global _PREDICTOR
    if _PREDICTOR is None:
        _PREDICTOR = load_bundle(DEFAULT_BUNDLE, FEATURE_NAMES)
    scenario = jobs[0].scenario.draw()
    started = time.process_time()
    with ClosedLoop(scenario, _PREDICTOR, DEFAULT_START_MINUTE) as loop:
        loop.warm_up()
        warm_cpu = time.process_time() - started
        return [
            in_child(partial(_line, loop, job)) | {"warm_up_cpu_seconds": round(warm_cpu, 2)}
            for job in jobs
        ]


def _line(loop: ClosedLoop, job: Job) -> dict[str, Any]:
    started = time.process_time()
    line: dict[str, Any] = {"job": job.key, "scenario": job.scenario.record(), "policy": job.policy}
    if job.policy == "oracle":
        outcomes = follow_policy(loop, ORACLE_BASE_POLICY, forced=(job.request, job.path))
        duration = oracle_duration(outcomes, job.request)
        line |= {"request": job.request, "path": job.path, "duration_s": duration}
    else:
        outcomes = follow_policy(loop, job.policy)
        line |= {"outcomes": [asdict(o) | {"duration_s": o.duration_s} for o in outcomes]}
        line["summary"] = loop.scenario.summary()
        if loop.scenario.throughput_tests is not None:
            line["throughput_tests"] = loop.throughput_results()
    line["cpu_seconds"] = round(time.process_time() - started, 2)
    return line


def in_child(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`work()` in a forked child (its simulation a copy of this process's); its result."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        status = 1
        try:
            os.close(read_end)
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(json.dumps(work(), separators=(",", ":")).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if status != 0 or not data:
        raise RuntimeError(f"a decision run's process failed (wait status {status})")
    result: dict[str, Any] = json.loads(data)
    return result


def done_jobs(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line)["job"] for line in path.read_text().splitlines() if line.strip()}


def run_jobs(jobs: list[Job], processes: int) -> Iterator[list[dict[str, Any]]]:
    """Each scenario's lines, as its jobs finish; one scenario per worker process at a time."""
    by_scenario: dict[ScenarioKey, list[Job]] = {}
    for job in jobs:
        by_scenario.setdefault(job.scenario, []).append(job)
    groups = list(by_scenario.values())
    if processes <= 1:
        yield from map(run_scenario, groups)
        return
    context = get_context("spawn")  # a fresh interpreter per worker, forked only once warmed up
    with context.Pool(processes) as pool:
        yield from pool.imap_unordered(run_scenario, groups, chunksize=1)


def simulate_decisions(
    output: Path,
    jobs: list[Job],
    processes: int,
    progress: Callable[[int, int, float], None] | None = None,
) -> int:
    """Run the jobs not yet in output/runs.jsonl, appending each; the number run."""
    output.mkdir(parents=True, exist_ok=True)
    runs = output / RUNS_FILE
    todo = [job for job in jobs if job.key not in done_jobs(runs)]
    started = time.monotonic()
    done = 0
    with runs.open("a") as sink:
        for lines in run_jobs(todo, processes):
            sink.writelines(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)
            sink.flush()
            done += len(lines)
            if progress is not None:
                progress(done, len(todo), time.monotonic() - started)
    return len(todo)
