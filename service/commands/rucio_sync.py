"""`nettel rucio-sync`: nettel's live costs into Rucio's distances between RSEs (transfers).

Runs beside Rucio's daemons with Rucio credentials (`RUCIO_CONFIG` / rucio.cfg) that `nettel
serve` never holds; reads nettel over its REST API. Its settings are flags and
`NETTEL_RUCIO_SYNC_*` variables (`service.rucio.settings`). docs/integrations.md, "Rucio", tells
what it writes and when.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from prometheus_client import CollectorRegistry, start_http_server, write_to_textfile

from service.bounded_yaml import load_bounded_yaml
from service.commands.setting_flags import add_setting_flags, given_settings
from service.config import load_settings_of, setting_name
from service.errors import ConfigError
from service.log_format import configure_logging
from service.persistence.state_dir_lock import StateDirLock
from service.rucio.distances import Pair, parse_baselines
from service.rucio.settings import RucioSyncSettings
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
        "different sites that has a distance row; the baseline is kept in --state-dir. Every "
        "option but --once and --dry-run can also be set with the NETTEL_RUCIO_SYNC_<OPTION> "
        "environment variable. Rucio's client is configured as usual (RUCIO_CONFIG or rucio.cfg).",
    )
    add_setting_flags(command, RucioSyncSettings.model_fields, RucioSyncSettings)
    add = command.add_argument
    add("--once", action="store_true", help="sync once and exit (status 1 on errors)")
    add("--dry-run", action="store_true", help="print what would change, write nothing (once)")
    command.set_defaults(run=run_rucio_sync)


def sync_options(settings: RucioSyncSettings, dry_run: bool) -> SyncOptions:
    """The settings as SyncOptions; ConfigError naming a baselines file that is wrong."""
    return SyncOptions(
        nettel_url=settings.nettel_url,
        site_attribute=settings.site_attribute,
        rse_expression=settings.rses,
        policy=settings.penalty_policy(),
        baselines=_load_baselines(settings.baselines) if settings.baselines else {},
        add_missing=settings.add_missing,
        added_baseline=settings.added_baseline,
        concurrency=settings.concurrency,
        dry_run=dry_run,
    )


def _load_baselines(path: Path) -> dict[Pair, int]:
    try:
        return parse_baselines(load_bounded_yaml(path.read_bytes(), "a baselines file"))
    except (OSError, ValueError) as error:
        name = setting_name("baselines", RucioSyncSettings)
        raise ConfigError(f"{name}: {path}: {error}") from None


def run_rucio_sync(args: argparse.Namespace) -> int:
    from service.rucio.client import RucioDistances

    settings = load_settings_of(RucioSyncSettings, given_settings(args, RucioSyncSettings))
    options = sync_options(settings, args.dry_run)
    configure_logging(settings.log_level)
    lock = StateDirLock(settings.state_dir)
    try:
        registry = CollectorRegistry()
        state = StateFile(settings.state_dir)
        sync = RucioSync(options, RucioDistances(), state, SyncMetrics(registry))
        try:
            if settings.metrics_listen is not None:
                host, port = settings.metrics_listen
                start_http_server(port, host, registry)
            return _run_syncs(sync, registry, settings, once=args.once or args.dry_run)
        finally:
            sync.close()
    finally:
        lock.release()


def _run_syncs(
    sync: RucioSync, registry: CollectorRegistry, settings: RucioSyncSettings, once: bool
) -> int:
    """Once (exit status 1 on any error) or every --interval until SIGTERM/SIGINT."""

    def sync_and_export() -> SyncReport:
        try:
            return sync.run_once()
        finally:
            if settings.metrics_file is not None:
                write_to_textfile(str(settings.metrics_file), registry)

    if once:
        try:
            return 0 if sync_and_export().ok else 1
        except SyncFailed as error:
            print(f"nettel rucio-sync: {error}", file=sys.stderr)
            return 1
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    run_loop(sync_and_export, settings.interval, stop)
    return 0
