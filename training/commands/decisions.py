"""`nettel simulate --family C --decisions DIR` and `nettel evaluate --decisions DIR`: the
decision benchmark (which candidate path gets a file across faster; docs/decisions.md)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

from service.errors import ConfigError, NettelError

#: Regular scenarios and herding scenarios `simulate --decisions` runs by default.
DEFAULT_SCENARIOS = 4
DEFAULT_HERDING_SCENARIOS = 2


def add_simulate_decision_options(simulate: argparse.ArgumentParser) -> None:
    simulate.add_argument(
        "--decisions",
        type=Path,
        default=None,
        metavar="DIR",
        help="--family C: run the decision benchmark's scenarios (every policy, each in an ns-3 "
        "simulation of its own, and the oracle's re-simulations), appending to DIR/runs.jsonl; "
        "resumes a stopped run",
    )
    simulate.add_argument(
        "--scenarios",
        type=int,
        default=DEFAULT_SCENARIOS,
        help="--decisions: regular scenarios (default %(default)s)",
    )
    simulate.add_argument(
        "--herding-scenarios",
        type=int,
        default=DEFAULT_HERDING_SCENARIOS,
        help="--decisions: scenarios whose requests alone would saturate one path "
        "(default %(default)s)",
    )
    simulate.add_argument(
        "--policies",
        default=None,
        help="--decisions: comma-separated policies (default: all)",
    )
    simulate.add_argument(
        "--throughput-tests",
        action="store_true",
        help="--decisions: run perfSONAR's throughput tests on every candidate path (a 20 s "
        "TCP test every 4 h of the compressed day; docs/decisions.md section 7); needed by the "
        "throughput policies",
    )
    simulate.add_argument(
        "--no-oracle",
        dest="oracle",
        action="store_false",
        help="--decisions: skip the oracle's re-simulations",
    )


def run_simulate_decisions(args: argparse.Namespace) -> int:
    from training.decisions.policies import POLICIES, THROUGHPUT_POLICIES
    from training.decisions.simulate import ScenarioKey, plan_jobs, simulate_decisions

    if args.family != "C":
        raise ConfigError("simulate: --decisions runs on family C's physics: add --family C")
    if args.scenarios < 0 or args.herding_scenarios < 0 or args.processes < 1:
        raise ConfigError("simulate: --scenarios, --herding-scenarios >= 0, --processes >= 1")
    tests = args.throughput_tests
    default = [p for p in POLICIES if tests or p not in THROUGHPUT_POLICIES]
    policies = tuple(default) if args.policies is None else tuple(args.policies.split(","))
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        raise ConfigError(f"simulate: unknown --policies {unknown}; known: {sorted(POLICIES)}")
    untested = sorted(set(policies) & set(THROUGHPUT_POLICIES)) if not tests else []
    if untested:
        raise ConfigError(f"simulate: --policies {untested} need --throughput-tests")
    keys = [ScenarioKey(args.seed, i, False, tests) for i in range(args.scenarios)]
    keys += [ScenarioKey(args.seed, i, True, tests) for i in range(args.herding_scenarios)]
    jobs = plan_jobs(keys, policies, args.oracle)

    def progress(done: int, total: int, seconds: float) -> None:
        print(f"simulate: {done}/{total} decision runs ({seconds:.0f} s)", flush=True)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        ran = simulate_decisions(args.decisions, jobs, args.processes, progress)
    except (ValueError, RuntimeError, OSError) as error:
        raise ConfigError(f"simulate: {error}") from None
    print(f"simulate: {ran} runs added to {args.decisions} ({len(jobs) - ran} already there)")
    return 0


def add_evaluate_decision_options(evaluate: argparse.ArgumentParser) -> None:
    evaluate.add_argument(
        "--decisions",
        type=Path,
        nargs="+",
        default=None,
        metavar="DIR",
        help="print the decision benchmark's transfer times by policy from DIR/runs.jsonl "
        "(`nettel simulate --family C --decisions DIR`); several DIRs are pooled",
    )
    evaluate.add_argument(
        "--fit-cost",
        action="store_true",
        help="with --decisions: apply docs/decisions.md's rule to the runs' transfers: every "
        "candidate cost shape's leave-one-scenario-out error, the chosen shape's weights and "
        "whether it is shipped",
    )
    evaluate.add_argument(
        "--fit-throughput",
        action="store_true",
        help="with --decisions (runs with --throughput-tests): apply docs/decisions.md section "
        "7's rule: every shape of the aged throughput term's leave-one-scenario-out error, the "
        "chosen shape's weights and whether it beats the served cost alone",
    )
    evaluate.add_argument(
        "--without-tests",
        type=Path,
        default=None,
        metavar="DIR",
        help="with --decisions (runs with --throughput-tests): also compare the served policy "
        "against its runs of the same scenarios without tests in DIR/runs.jsonl",
    )


def run_evaluate_decisions(args: argparse.Namespace) -> int:
    from training.decisions.report import decision_report, format_figures

    if args.fit_cost:
        return _fit_cost(args.decisions)
    if args.fit_throughput:
        return _fit_throughput(args.decisions)
    try:
        report = decision_report(args.decisions)
        comparisons = _throughput_comparisons(args.decisions, args.without_tests, list(report))
    except (ValueError, KeyError, NettelError) as error:
        raise ConfigError(f"evaluate: {error}") from None
    for kind, figures in report.items():
        print(format_figures(figures, f"{kind} scenarios ({', '.join(map(str, args.decisions))})"))
        print()
    for table in comparisons:
        print(table)
        print()
    return 0


def _throughput_comparisons(
    directories: list[Path], without_tests: Path | None, kinds: list[str]
) -> list[str]:
    """The paired tables of runs with throughput tests (none for runs without)."""
    from training.decisions.report import (
        THROUGHPUT_COMPARED,
        format_comparisons,
        read_runs,
        scenario_means,
        throughput_comparisons,
    )

    lines = [line for d in directories for line in read_runs(d)]
    if not any("throughput_tests" in line for line in lines):
        if without_tests is not None:
            raise ValueError("--without-tests: the --decisions runs have no throughput tests")
        return []
    before = None if without_tests is None else read_runs(without_tests)
    tables = []
    for kind in kinds:
        comparisons = throughput_comparisons(lines, kind, before)
        if comparisons:
            tables.append(format_comparisons(comparisons, f"{kind} scenarios, paired"))
            policies = ("served", *THROUGHPUT_COMPARED)
            tables.append(scenario_means(lines, policies, kind))
    return tables


def _fit_cost(directories: list[Path]) -> int:
    from training.decisions.cost_fit import choose_shape, format_fit, outcome_rows
    from training.decisions.report import read_runs

    try:
        rows = outcome_rows([line for d in directories for line in read_runs(d)])
        if len(rows) == 0:
            raise ValueError("no completed transfer with a served view in the runs")
        print(format_fit(choose_shape(rows)))
    except (ValueError, KeyError) as error:
        raise ConfigError(f"evaluate: {error}") from None
    return 0


def _fit_throughput(directories: list[Path]) -> int:
    from training.decisions.report import read_runs
    from training.decisions.throughput import (
        choose_throughput_shape,
        format_throughput_fit,
        reference_throughput,
        throughput_rows,
    )

    try:
        lines = [line for d in directories for line in read_runs(d)]
        report = choose_throughput_shape(throughput_rows(lines), reference_throughput(lines))
        print(format_throughput_fit(report))
    except (ValueError, KeyError) as error:
        raise ConfigError(f"evaluate: {error}") from None
    return 0
