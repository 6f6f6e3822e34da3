"""`nettel costmatrix`: print a running service's site-level matrix as an aligned table.

Rows are site pairs, costliest first; `--site X` keeps the pairs with X at either end (a
site, or a host without one: at the site level it stands for itself) and `--top N` the first N
rows. Exit status 1 when the service cannot answer or names no such site or host.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

import httpx

COLUMNS = ("SOURCE", "DESTINATION", "LINKS", "COST", "DELAY_MS", "LOSS_%", "UTIL", "CONG", "AGE")
LEFT_ALIGNED = {"SOURCE", "DESTINATION", "CONG"}


def add_costmatrix_command(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    command = subparsers.add_parser(
        "costmatrix", help="print the current site-level cost matrix of a running service"
    )
    command.add_argument("--url", default="http://127.0.0.1:8080", help="service base URL")
    command.add_argument("--site", default=None, help="only pairs with this site at either end")
    command.add_argument("--top", type=int, default=None, help="only the N costliest pairs")
    command.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    return run_costmatrix(args.url, site=args.site, top=args.top)


def run_costmatrix(
    url: str, *, site: str | None = None, top: int | None = None, out: TextIO = sys.stdout
) -> int:
    """Fetch `/costmatrix?level=site` from `url` and print it; 1 when the service cannot answer
    or has no site (or host) `site`."""
    try:
        response = httpx.get(f"{url.rstrip('/')}/costmatrix", params={"level": "site"}, timeout=10)
        response.raise_for_status()
    except httpx.HTTPError as error:
        print(f"nettel: cannot get the cost matrix from {url}: {error}", file=sys.stderr)
        return 1
    links = response.json()["links"]
    if site is not None and site not in (names := site_names(links)):
        shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
        print(
            f"nettel: no site or host {site!r} in the matrix ({shown or 'empty'})", file=sys.stderr
        )
        return 1
    out.write(format_table(select_links(links, site, top), now=time.time()))
    return 0


def site_names(links: Sequence[dict[str, Any]]) -> list[str]:
    """The sites (and hosts without one) at either end of the site-level pairs, sorted.

    >>> site_names([{"source": "RAL", "destination": "CERN"}])
    ['CERN', 'RAL']
    """
    return sorted({link[side] for link in links for side in ("source", "destination")})


def select_links(
    links: Sequence[dict[str, Any]], site: str | None, top: int | None
) -> list[dict[str, Any]]:
    """Pairs touching `site` (all without one), costliest first, at most `top`."""
    chosen = [
        link for link in links if site is None or site in (link["source"], link["destination"])
    ]
    chosen.sort(key=lambda link: -1.0 if link["cost"] is None else link["cost"], reverse=True)
    return chosen[:top] if top is not None else chosen


def format_table(links: Sequence[dict[str, Any]], now: float) -> str:
    """An aligned text table: text columns left-aligned, numbers right-aligned.

    >>> link = {"source": "CERN", "destination": "RAL", "links": 2, "cost": 0.25,
    ...         "delay_ms": {"mean": 12.3456}, "packet_loss": 0.001, "utilisation": None,
    ...         "congested": False, "last_measurement": 940}
    >>> print(format_table([link], now=1000), end="")
    SOURCE  DESTINATION  LINKS   COST  DELAY_MS  LOSS_%  UTIL  CONG  AGE
    CERN    RAL              2  0.250    12.346  0.1000     -  no    60s
    """
    rows = [COLUMNS, *(_row(link, now) for link in links)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    return "".join(_line(row, widths) for row in rows)


def _row(link: dict[str, Any], now: float) -> tuple[str, ...]:
    last = link["last_measurement"]
    return (
        link["source"],
        link["destination"],
        str(link["links"]),
        _number(link["cost"], 3),
        _number(link["delay_ms"]["mean"], 3),
        _number(None if link["packet_loss"] is None else link["packet_loss"] * 100, 4),
        _number(link["utilisation"], 2),
        "yes" if link["congested"] else "no",
        "-" if last is None else f"{max(0, round(now - last))}s",
    )


def _number(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _line(row: Sequence[str], widths: Sequence[int]) -> str:
    cells = [
        cell.ljust(width) if name in LEFT_ALIGNED else cell.rjust(width)
        for name, cell, width in zip(COLUMNS, row, widths, strict=True)
    ]
    return "  ".join(cells).rstrip() + "\n"
