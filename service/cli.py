"""The `nettel` command: serve, backfill, costmatrix and rucio-sync of its own, and the commands
other packages add through the `nettel.commands` entry points (pyproject.toml): simulate,
train, evaluate and dataset, which live with the `training` and `simulation` code they run.

An entry point's module is imported only for its own command, or for help and an unknown
command's error (which list them all), so `nettel serve` never imports training, the simulators,
Keras or h5py (`tests/test_architecture.py`). What a command runs is imported when it runs.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points

from service.commands.costmatrix import add_costmatrix_command
from service.commands.rucio_sync import add_rucio_sync_command
from service.commands.setting_flags import add_setting_flags, given_settings
from service.config import ENV_ONLY_SETTINGS, Settings, load_settings
from service.errors import ConfigError
from service.log_format import configure_logging

#: The entry-point group through which a package adds a command: `name = "module:function"`, the
#: function taking the subparsers and adding the command's parser; `[extras]` after it name the
#: extras of nettel whose packages the command imports when it runs.
COMMAND_GROUP = "nettel.commands"
#: The commands of `service` itself.
OWN_COMMANDS = ("serve", "backfill", "costmatrix", "rucio-sync")

#: What `nettel backfill` takes: the state, what its journal's replay needs, and the archive.
BACKFILL_COMMAND_SETTINGS = (
    "state_dir",
    "topology",
    "psconfig_site_key",
    "delay_topic",
    "loss_topic",
    "throughput_topic",
    "retransmits_topic",
    "trace_topic",
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
    arguments = sys.argv[1:] if argv is None else list(argv)
    command = named_command(arguments)
    try:
        args = build_parser(command).parse_args(arguments)
        return int(args.run(args) or 0)
    except ConfigError as error:
        print(f"nettel: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as error:
        entry = added_commands().get(command or "")
        if entry is None or not entry.extras:
            raise
        extras = ",".join(entry.extras)
        print(
            f"nettel: {command} needs the module {error.name!r}, which is not installed: "
            f"pip install 'nettel[{extras}]'",
            file=sys.stderr,
        )
        return 2


def named_command(arguments: Sequence[str]) -> str | None:
    """The command `arguments` name: the first that is not an option (`nettel` itself takes
    none but --help), or None.

    >>> named_command(["--help"]), named_command(["train", "--seed", "1"])
    (None, 'train')
    """
    return next((argument for argument in arguments if not argument.startswith("-")), None)


def added_commands() -> dict[str, EntryPoint]:
    """The commands other packages add (entry points of COMMAND_GROUP), by name."""
    return {entry.name: entry for entry in entry_points(group=COMMAND_GROUP)}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The `nettel` parser, with the added commands that `command` needs: none for one of
    service's own, only its own for an added one, and all of them otherwise (help, or an unknown
    name, whose error lists every command)."""
    parser = argparse.ArgumentParser(
        prog="nettel",
        description="Streaming perfSONAR telemetry to a live link cost matrix.",
        allow_abbrev=False,
    )
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    commands.add_parser = functools.partial(commands.add_parser, allow_abbrev=False)  # type: ignore[method-assign]
    _add_serve(commands)
    _add_backfill(commands)
    add_costmatrix_command(commands)
    add_rucio_sync_command(commands)
    if command not in OWN_COMMANDS:
        added = added_commands()
        for entry in [added[command]] if command in added else added.values():
            entry.load()(commands)
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
    from service.ingest.entry import IngestEntry
    from service.ingest.pipeline import IngestPipeline
    from service.persistence.durability import Persistence
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
        persistence = Persistence(pipeline, store, journal)
        persistence.replay_journal()
        report = ArchiveBackfill(IngestEntry(pipeline), archive).run()
        persistence.stop()  # writes the snapshot, then closes the journal
    finally:
        lock.release()
    print(orjson.dumps(report.summary()).decode())
    return 0 if report.complete else 1
