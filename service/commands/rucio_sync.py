"""`nettel rucio-sync`: nettel's live costs into Rucio's distances between RSEs (transfers).

Runs beside Rucio's daemons with Rucio credentials (`RUCIO_CONFIG` / rucio.cfg) that `nettel
serve` never holds; reads nettel over its REST API. docs/integrations.md, "Rucio", tells what it
writes and when.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

import yaml
from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile

from service.config import parse_address
from service.errors import ConfigError
from service.log_format import configure_logging
from service.persistence.state_dir_lock import StateDirLock
from service.rucio.distances import Pair, PenaltyPolicy, parse_baselines
from service.rucio.sync import (
    RucioSync,
    StateFile,
    SyncFailed,
    SyncMetrics,
    SyncOptions,
    SyncReport,
    run_loop,
)


def add_rucio_sync_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    command = subparsers.add_parser(
        "rucio-sync",
        help="write nettel's live costs into Rucio's RSE distances (transfer source ranking)",
        description="distance = baseline + penalty(cost) for each ordered pair of RSEs at "
        "different sites that has a distance row; the baseline is kept in --state-dir. Rucio's "
        "client is configured as usual (RUCIO_CONFIG or rucio.cfg).",
    )
    add = command.add_argument
    add("--nettel-url", default="http://127.0.0.1:8080", help="nettel's base URL (or HAProxy's)")
    add("--state-dir", type=Path, required=True, help="where the baselines are kept")
    add("--site-attribute", default="site", help="the RSE attribute naming nettel's site")
    add("--rses", default=None, metavar="EXPRESSION", help="only these RSEs (Rucio expression)")
    add("--baselines", type=Path, default=None, metavar="FILE",
        help="YAML/JSON SOURCE_RSE: {DESTINATION_RSE: distance}: baselines that win over "
        "the values recorded from Rucio")  # fmt: skip
    add("--max-penalty", type=int, default=PenaltyPolicy.max_penalty,
        help="penalty of a cost of 1 (default %(default)s)")  # fmt: skip
    add("--calm-cost", type=float, default=PenaltyPolicy.calm_cost,
        help="costs up to this give no penalty (default %(default)s)")  # fmt: skip
    add("--min-change", type=int, default=PenaltyPolicy.min_change,
        help="smaller changes are not written, except a return to the baseline "
        "(default %(default)s)")  # fmt: skip
    add("--add-missing", action="store_true",
        help="add a distance row to pairs that have none (makes new sources eligible)")  # fmt: skip
    add("--added-baseline", type=int, default=SyncOptions.added_baseline,
        help="baseline of an added row not in --baselines (default %(default)s)")  # fmt: skip
    add("--once", action="store_true", help="sync once and exit (status 1 on errors)")
    add("--interval", type=float, default=300.0, help="seconds between syncs (default 300)")
    add("--dry-run", action="store_true", help="print what would change, write nothing (once)")
    add("--concurrency", type=int, default=SyncOptions.concurrency,
        help="Rucio requests in flight (default %(default)s)")  # fmt: skip
    add("--metrics-listen", default=None, metavar="HOST:PORT", help="serve Prometheus /metrics")
    add("--metrics-file", type=Path, default=None,
        help="write the metrics after each sync (node_exporter textfile collector)")  # fmt: skip
    add("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    command.set_defaults(run=run_rucio_sync)


def sync_options(args: argparse.Namespace) -> SyncOptions:
    """The flags as SyncOptions; ConfigError naming the flag that is wrong."""
    try:
        policy = PenaltyPolicy(args.max_penalty, args.calm_cost, args.min_change)
    except ValueError as error:
        raise ConfigError(f"--max-penalty/--calm-cost/--min-change: {error}") from None
    if args.interval <= 0 or args.concurrency < 1 or args.added_baseline < 0:
        raise ConfigError("need --interval > 0, --concurrency >= 1 and --added-baseline >= 0")
    return SyncOptions(
        nettel_url=args.nettel_url,
        site_attribute=args.site_attribute,
        rse_expression=args.rses,
        policy=policy,
        baselines=_load_baselines(args.baselines) if args.baselines else {},
        add_missing=args.add_missing,
        added_baseline=args.added_baseline,
        concurrency=args.concurrency,
        dry_run=args.dry_run,
    )


def _load_baselines(path: Path) -> dict[Pair, int]:
    try:
        return parse_baselines(yaml.safe_load(path.read_text()))
    except (OSError, yaml.YAMLError, ValueError) as error:
        raise ConfigError(f"--baselines {path}: {error}") from None


def run_rucio_sync(args: argparse.Namespace) -> int:
    from service.rucio.client import RucioDistances

    options = sync_options(args)
    try:
        metrics_address = parse_address(args.metrics_listen) if args.metrics_listen else None
    except ValueError as error:
        raise ConfigError(f"--metrics-listen: {error}") from None
    configure_logging(args.log_level)
    lock = StateDirLock(args.state_dir)
    try:
        registry = CollectorRegistry()
        state = StateFile(args.state_dir)
        sync = RucioSync(options, RucioDistances(), state, SyncMetrics(registry))
        try:
            if metrics_address is not None:
                start_http_server(metrics_address[1], metrics_address[0], registry)
            return _run_syncs(sync, registry, args)
        finally:
            sync.close()
    finally:
        lock.release()


def _run_syncs(sync: RucioSync, registry: CollectorRegistry, args: argparse.Namespace) -> int:
    """Once (exit status 1 on any error) or every --interval until SIGTERM/SIGINT."""

    def sync_and_export() -> SyncReport:
        try:
            return sync.run_once()
        finally:
            if args.metrics_file is not None:
                write_to_textfile(str(args.metrics_file), registry)

    if args.once or args.dry_run:
        try:
            return 0 if sync_and_export().ok else 1
        except SyncFailed as error:
            print(f"nettel rucio-sync: {error}", file=sys.stderr)
            return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run_loop(sync_and_export, args.interval, stop)
    return 0
