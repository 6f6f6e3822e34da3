"""`nettel simulate`'s demo feed: a synthetic perfSONAR mesh (family A) published to a broker
every minute, and the mesh's sites written as the files `nettel serve` reads.

`training.commands.simulate` registers the command with these options and its own (family C
captures, the decision benchmark) and hands the run here when neither is asked for. The
simulator and the STOMP client are imported when the feed runs, not for `nettel --help`.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from pathlib import Path

from service.config import comma_separated, parse_address
from service.errors import ConfigError
from service.log_format import configure_logging
from simulation.defaults import DEFAULT_SITES


def add_demo_feed_options(simulate: argparse.ArgumentParser) -> None:
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
        "--fault",
        action="append",
        default=[],
        metavar="KIND:TARGET:START_MINUTE[:VALUE][:DURATION]",
        help="inject a fault (repeatable): KIND complete-loss, loss (VALUE %%, default 5), delay "
        "(ms, 30), clock (ms ahead, 150), firewall, cut-off, throughput-drop (%%, 75) or "
        "path-change; TARGET a site, host, address or "
        "'SOURCE>DESTINATION' (quoted); START_MINUTE counts from the first minute sent; "
        "DURATION minutes (default: to the end). What each publishes: docs/alarms.md",
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


def demo_feed_passcode(path: Path | None) -> str | None:
    """The demo feed's STOMP passcode, as `serve` takes one: the file wins over the environment."""
    if path is None:
        return os.environ.get("NETTEL_BROKER_PASSWORD")
    try:
        return path.read_text().strip()
    except OSError as error:
        raise ConfigError(f"--password-file: {error.strerror or error}: {path}") from None


def run_demo_feed_command(args: argparse.Namespace) -> int:
    """Write the mesh's files that were asked for, then publish the feed until it ends or
    SIGTERM (or Ctrl-C) stops it."""
    from simulation.demo_feed import run_demo_feed

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
    from simulation.faults import plan_fault_flags
    from simulation.simulator import build_mesh

    mesh = build_mesh(args.sites, args.seed)
    try:
        faults = plan_fault_flags(args.fault, mesh)
    except ValueError as error:
        raise ConfigError(str(error)) from None
    configure_logging()
    if args.write_topology is not None or args.write_rse_map is not None:
        from simulation.mesh_inventory import write_cric_export, write_rse_map

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
            faults=faults,
            user=args.user,
            password=demo_feed_passcode(args.password_file),
            stop=stop,
        )
    except KeyboardInterrupt:
        stop.set()
    return 0
