"""`nettel simulate --family C --decisions DIR`: every policy's runs, in worker processes.

Each job is one policy's closed-loop run of one scenario, or one oracle probe (a sampled request
forced onto one candidate). Jobs run in `processes` spawned workers (ns-3's simulator is one per
process) and each finished job is appended as one JSON line to DIR/runs.jsonl, so a stopped run
resumes where it stopped: jobs already in the file are not run again.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from service.analysis.features import FEATURE_NAMES
from service.config import DEFAULT_BUNDLE
from service.model.bundle import ModelBundle, load_bundle
from simulation.decision_world import draw_scenario
from training.dataset import DEFAULT_START_MINUTE
from training.decisions.run import oracle_probe, oracle_sample, run_policy

RUNS_FILE = "runs.jsonl"
MANIFEST = "decisions.json"


@dataclass(frozen=True)
class ScenarioKey:
    seed: int
    index: int
    herding: bool

    @property
    def name(self) -> str:
        return f"{'herding' if self.herding else 'scenario'}-{self.seed}-{self.index:03d}"


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
            scenario = draw_scenario(key.seed, key.index, key.herding)
            jobs.extend(
                Job(key, "oracle", request, path)
                for request in oracle_sample(scenario)
                for path in range(len(scenario.paths))
            )
    return jobs


_PREDICTOR: ModelBundle | None = None


def run_job(job: Job) -> dict[str, Any]:
    """One job in this process: its JSON line."""
    global _PREDICTOR
    if _PREDICTOR is None:
        _PREDICTOR = load_bundle(DEFAULT_BUNDLE, FEATURE_NAMES)
    key = job.scenario
    scenario = draw_scenario(key.seed, key.index, key.herding)
    started = time.process_time()
    line: dict[str, Any] = {"job": job.key, "scenario": asdict(key), "policy": job.policy}
    if job.policy == "oracle":
        duration = oracle_probe(scenario, job.request, job.path, _PREDICTOR, DEFAULT_START_MINUTE)
        line |= {"request": job.request, "path": job.path, "duration_s": duration}
    else:
        outcomes = run_policy(scenario, job.policy, _PREDICTOR, DEFAULT_START_MINUTE)
        line |= {"outcomes": [asdict(o) | {"duration_s": o.duration_s} for o in outcomes]}
        line["summary"] = scenario.summary()
    line["cpu_seconds"] = round(time.process_time() - started, 2)
    return line


def done_jobs(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {json.loads(line)["job"] for line in path.read_text().splitlines() if line.strip()}


def run_jobs(jobs: list[Job], processes: int) -> Iterator[dict[str, Any]]:
    if processes <= 1:
        yield from map(run_job, jobs)
        return
    context = get_context("spawn")  # ns-3 and cppyy do not survive a fork
    with context.Pool(processes, maxtasksperchild=None) as pool:
        yield from pool.imap_unordered(run_job, jobs, chunksize=1)


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
    with runs.open("a") as sink:
        for done, line in enumerate(run_jobs(todo, processes), start=1):
            sink.write(json.dumps(line, separators=(",", ":")) + "\n")
            sink.flush()
            if progress is not None:
                progress(done, len(todo), time.monotonic() - started)
    return len(todo)
