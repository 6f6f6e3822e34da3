"""`nettel simulate`: the demo feed (simulation.commands), a family-C (ns-3) capture directory
(`--family C --output DIR`), or the decision benchmark's scenarios (`--decisions DIR`).

The command lives here, above the simulators, because its family-C runs line up with the
training dataset's minutes and its decision runs are the benchmark of `training.decisions`.
"""

from __future__ import annotations

import argparse
import signal
import sys

from service.errors import ConfigError
from simulation.commands import add_demo_feed_options, run_demo_feed_command
from training.commands.dataset import local_path
from training.commands.decisions import add_simulate_decision_options, run_simulate_decisions


def add_simulate_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = subparsers.add_parser(
        "simulate",
        help="publish a synthetic perfSONAR mesh to a broker (demo feed), or write a family-C "
        "(ns-3) capture directory",
    )
    add_demo_feed_options(simulate)
    add_simulate_capture_options(simulate)
    simulate.set_defaults(run=run_simulate)


def run_simulate(args: argparse.Namespace) -> int:
    if args.family != "A" or args.output is not None or args.decisions is not None:
        return run_simulate_capture(args)
    return run_demo_feed_command(args)


#: `nettel simulate --family`: A publishes the demo feed (M/M/1/K mesh) to a broker, C writes
#: ns-3 packet-level links to a capture directory.
SIMULATE_FAMILIES = ("A", "C")
DEFAULT_CAPTURE_LINKS = 60
#: 32 minutes of warm-up (the dataset's first row needs a full window) and 4 hours of rows.
DEFAULT_CAPTURE_MINUTES = 272


def add_simulate_capture_options(simulate: argparse.ArgumentParser) -> None:
    """`nettel simulate`'s options for writing a family-C capture directory (generate once)."""
    simulate.add_argument(
        "--family",
        choices=SIMULATE_FAMILIES,
        default="A",
        help="A: the demo feed's M/M/1/K mesh, published to --brokers (default); C: links "
        "simulated packet by packet with ns-3 (needs nettel[ns3]), written to --output",
    )
    simulate.add_argument(
        "--output",
        type=local_path,
        default=None,
        metavar="DIR",
        help="--family C: write bus captures, SNMP counters and a router map to DIR, readable "
        "by `nettel train/evaluate --perfsonar-dir DIR --router-map DIR/routers/router-map.json`",
    )
    simulate.add_argument(
        "--links",
        type=int,
        default=DEFAULT_CAPTURE_LINKS,
        help="--family C: directed links to simulate (default %(default)s)",
    )
    simulate.add_argument(
        "--minutes",
        type=int,
        default=DEFAULT_CAPTURE_MINUTES,
        help="--family C: simulated minutes per link, including the 32-minute warm-up before "
        "the first dataset row (default %(default)s)",
    )
    simulate.add_argument(
        "--processes",
        type=int,
        default=2,
        help="--family C: worker processes, each its own ns-3 simulator (default %(default)s)",
    )
    add_simulate_decision_options(simulate)


def run_simulate_capture(args: argparse.Namespace) -> int:
    """`nettel simulate --family C --output DIR`: simulate the links and write the directory."""
    from service.state.link_buffers import WINDOW_MINUTES
    from simulation.simulator_ns3 import CaptureRequest, write_capture
    from training.dataset import DEFAULT_START_MINUTE

    if args.decisions is not None:
        return run_simulate_decisions(args)
    if args.family != "C" or args.output is None:
        raise ConfigError("simulate: --output writes family C only: use --family C --output DIR")
    if args.minutes <= WINDOW_MINUTES:
        raise ConfigError(
            f"simulate: --minutes must exceed the {WINDOW_MINUTES}-minute warm-up ({args.minutes})"
        )
    if args.links < 1 or args.processes < 1:
        raise ConfigError("simulate: --links and --processes must be >= 1")
    request = CaptureRequest(
        output=args.output,
        links=args.links,
        minutes=args.minutes,
        seed=args.seed,
        processes=args.processes,
        first_minute=DEFAULT_START_MINUTE - WINDOW_MINUTES,
    )

    def progress(done: int, total: int, seconds: float) -> None:
        print(f"simulate: {done}/{total} links written ({seconds:.0f} s)", flush=True)

    # ending on SIGTERM unwinds through the worker pool, which then ends its processes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        manifest = write_capture(request, progress)
    except (ValueError, RuntimeError, OSError) as error:
        raise ConfigError(f"simulate: {error}") from None
    print(
        f"simulate: {args.links} links x {args.minutes} minutes written to {args.output} "
        f"({manifest['cpu_seconds']:.0f} CPU-s, "
        f"{manifest['cpu_seconds_per_link_minute']:.3f} CPU-s per link-minute)"
    )
    return 0
