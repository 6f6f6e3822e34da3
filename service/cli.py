"""The `nettel` command: serve, backfill, simulate, costmatrix, rucio-sync, train, evaluate.

Each command's options are registered from `service.commands`; what a command runs (the
runtime, `training`, `simulation`) is imported only when it runs, so `nettel serve` never
imports training, Keras or h5py at start (`tests/test_architecture.py`).
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from service.commands.costmatrix import add_costmatrix_command
from service.commands.dataset import add_dataset_command
from service.commands.rucio_sync import add_rucio_sync_command
from service.commands.setting_flags import add_setting_flags, given_settings
from service.commands.training import (
    add_evaluate_command,
    add_simulate_capture_options,
    add_train_command,
    run_simulate_capture,
)
from service.config import (
    ENV_ONLY_SETTINGS,
    Settings,
    comma_separated,
    load_settings,
    parse_address,
)
from service.errors import ConfigError
from service.log_format import configure_logging
from simulation.defaults import DEFAULT_SITES

#: What `nettel backfill` takes: the state, what its journal's replay needs, and the archive.
BACKFILL_COMMAND_SETTINGS = (
    "state_dir",
    "topology",
    "psconfig_site_key",
    "delay_topic",
    "loss_topic",
    "backfill_from",
    "backfill_bound",
    "backfill_timeout",
    "backfill_page_size",
    "backfill_concurrency",
    "backfill_parse_processes",
    "backfill_history",
    "log_level",
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.run(args) or 0)
    except ConfigError as error:
        print(f"nettel: {error}", file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nettel",
        description="Streaming perfSONAR telemetry to a live link cost matrix.",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    commands.add_parser = functools.partial(commands.add_parser, allow_abbrev=False)  # type: ignore[method-assign]
    _add_serve(commands)
    _add_backfill(commands)
    _add_simulate(commands)
    add_costmatrix_command(commands)
    add_rucio_sync_command(commands)
    add_train_command(commands)
    add_evaluate_command(commands)
    add_dataset_command(commands)
    return parser


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="consume perfSONAR from the broker and serve /costmatrix and /metrics",
        description="Every option can also be set with the NETTEL_<OPTION> environment variable.",
    )
    add_setting_flags(
        serve, [name for name in Settings.model_fields if name not in ENV_ONLY_SETTINGS]
    )
    serve.set_defaults(run=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    from service.memory import relax_garbage_collection
    from service.parse.histogram_scan import SCANNER_IMPLEMENTATION
    from service.publish.app import create_app
    from service.publish.http_server import bind_listener, serve_http
    from service.publish.lifespan import service_lifespan
    from service.runtime import build_runtime

    settings = load_settings(**given_settings(args, Settings))
    listener = bind_listener(*settings.listen)  # before anything connects to a broker
    configure_logging(settings.log_level)
    log = logging.getLogger("nettel")
    scanner = {"histogram_scanner": SCANNER_IMPLEMENTATION}
    if SCANNER_IMPLEMENTATION == "c":
        log.info("histogram scanner: C extension", extra=scanner)
    else:
        log.warning("histogram scanner: Python, C extension not built (slower)", extra=scanner)
    runtime = build_runtime(settings)
    app = create_app(runtime, lifespan=service_lifespan)
    relax_garbage_collection()
    host, port = settings.listen
    log.info("serving", extra={"url": f"http://{host}:{port}"})
    serve_http(app, listener, runtime.http_guard, settings.trusted_proxies)
    return 0


def _add_backfill(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    backfill = commands.add_parser(
        "backfill",
        help="fill the state dir of a stopped service from an esmond-compatible archive",
        description="Restores --state-dir (snapshot and journal), backfills it as `nettel serve "
        "--backfill-from` does at start, writes a snapshot and prints what it did as JSON. Exit "
        "status 1 when an archive request failed or the bound expired. Run it while no "
        "`nettel serve` uses the directory.",
    )
    add_setting_flags(backfill, BACKFILL_COMMAND_SETTINGS)
    backfill.set_defaults(run=_run_backfill)


def _run_backfill(args: argparse.Namespace) -> int:
    import orjson

    from service.ingest.archive_backfill import ArchiveBackfill
    from service.ingest.pipeline import IngestPipeline
    from service.persistence.durability import Persistence, acknowledge_nothing
    from service.persistence.journal import Journal
    from service.persistence.snapshot_store import SnapshotStore
    from service.persistence.state_dir_lock import StateDirLock
    from service.runtime import backfill_settings, restore_state, topic_kinds

    settings = load_settings(**{name: getattr(args, name) for name in BACKFILL_COMMAND_SETTINGS})
    archive = backfill_settings(settings)
    if settings.state_dir is None or archive is None:
        raise ConfigError("nettel backfill needs --state-dir and --backfill-from")
    configure_logging(settings.log_level)
    lock = StateDirLock(settings.state_dir)  # a running serve on the same directory is refused
    try:
        store = SnapshotStore(settings.state_dir)
        state = restore_state(settings, store)
        pipeline = IngestPipeline(state, topic_kinds(settings))
        journal = Journal(store.directory)
        persistence = Persistence(pipeline, store, journal, acknowledge_nothing)
        persistence.replay_journal()
        report = ArchiveBackfill(state, archive).run()
        persistence.stop()  # writes the snapshot, then closes the journal
    finally:
        lock.release()
    print(orjson.dumps(report.summary()).decode())
    return 0 if report.complete else 1


def _add_simulate(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = commands.add_parser(
        "simulate",
        help="publish a synthetic perfSONAR mesh to a broker (demo feed), or write a family-C "
        "(ns-3) capture directory",
    )
    simulate.add_argument("--brokers", default="127.0.0.1:61613", help="host:port[,host:port]")
    simulate.add_argument("--seed", type=int, default=0, help="random seed (deterministic feed)")
    simulate.add_argument(
        "--sites", type=int, default=DEFAULT_SITES, help="sites in the mesh (>= 2)"
    )
    simulate.add_argument("--backfill-minutes", type=int, default=40, help="minutes to back-fill")
    simulate.add_argument(
        "--no-realtime",
        dest="realtime",
        action="store_false",
        help="stop after the back-fill instead of publishing every minute",
    )
    simulate.add_argument(
        "--user",
        default=os.environ.get("NETTEL_BROKER_USER"),
        help="STOMP login [env NETTEL_BROKER_USER]",
    )
    simulate.add_argument(
        "--password-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="file holding the STOMP passcode (else env NETTEL_BROKER_PASSWORD; never given on "
        "the command line, where other users of the machine could read it)",
    )
    simulate.add_argument(
        "--write-topology",
        type=Path,
        default=None,
        metavar="FILE",
        help="first write the mesh's sites as a CRIC rcsite export (for serve --topology)",
    )
    simulate.add_argument(
        "--write-rse-map",
        type=Path,
        default=None,
        metavar="FILE",
        help="first write an RSE map, one <site>_DATADISK per site (for serve --rse-map)",
    )
    simulate.add_argument(
        "--no-feed",
        dest="feed",
        action="store_false",
        help="only write the --write-topology and --write-rse-map files, publish nothing (no "
        "broker needed)",
    )
    add_simulate_capture_options(simulate)
    simulate.set_defaults(run=_run_simulate)


def _simulate_passcode(path: Path | None) -> str | None:
    """The demo feed's STOMP passcode, as `serve` takes one: the file wins over the environment."""
    if path is None:
        return os.environ.get("NETTEL_BROKER_PASSWORD")
    try:
        return path.read_text().strip()
    except OSError as error:
        raise ConfigError(f"--password-file: {error.strerror or error}: {path}") from None


def _run_simulate(args: argparse.Namespace) -> int:
    from simulation.demo_feed import run_demo_feed

    if args.family != "A" or args.output is not None or args.decisions is not None:
        return run_simulate_capture(args)
    if args.sites < 2 or args.backfill_minutes < 0:
        raise ConfigError("--sites must be >= 2 and --backfill-minutes >= 0")
    if not args.feed and args.write_topology is None and args.write_rse_map is None:
        raise ConfigError(
            "--no-feed needs --write-topology or --write-rse-map: there would be nothing to do"
        )
    try:
        brokers = [parse_address(part) for part in comma_separated(args.brokers)]
    except ValueError as error:
        raise ConfigError(f"--brokers: {error}") from None
    configure_logging()
    if args.write_topology is not None or args.write_rse_map is not None:
        from simulation.mesh_inventory import write_cric_export, write_rse_map
        from simulation.simulator import build_mesh

        mesh = build_mesh(args.sites, args.seed)
        if args.write_topology is not None:
            write_cric_export(mesh, args.write_topology)
        if args.write_rse_map is not None:
            write_rse_map(mesh, args.write_rse_map)
    if not args.feed:
        return 0
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        run_demo_feed(
            brokers,
            seed=args.seed,
            sites=args.sites,
            backfill_minutes=args.backfill_minutes,
            realtime=args.realtime,
            user=args.user,
            password=_simulate_passcode(args.password_file),
            stop=stop,
        )
    except KeyboardInterrupt:
        stop.set()
    return 0
