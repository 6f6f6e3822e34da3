"""Query views of a cost matrix: site aggregation, dense layout (filters: CostMatrix.select).

Site level groups every host pair by (source site, destination site), a host without a site
standing for itself. Per group: `cost`, `utilisation` (and its congestion probability and
interval ends), `empirical`, delay mean/median/std and
`packet_loss` are means over the host pairs with a value; `delay_ms.min` is the minimum and
`delay_ms.p95` the maximum; `congested`, `clock_suspect` are true if any pair is; `stale` only if
all are; `samples` is the sum and `last_measurement` the latest; `links` counts the host pairs.
`throughput_bps` and `throughput_age_s` are the newest throughput test's among the host pairs
(the youngest; of equal ages the fastest): a rate and an age that belong to one test, where a
mean or median would mix tests hours apart under no single age (and a site's bandwidth host is
usually the only one of its hosts that runs them).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from statistics import fmean
from typing import Any, Literal

from service.matrix.link_record import DELAY_KEYS, LinkRecord, site_key
from service.matrix.shared_keys import key_sharing_dicts

Level = Literal["host", "site"]


def aggregate_sites(links: Sequence[LinkRecord]) -> list[LinkRecord]:
    """One record per (source site, destination site) pair, sorted by the pair."""
    groups: dict[tuple[str, str], list[LinkRecord]] = defaultdict(list)
    for link in links:
        groups[(site_key(link, "source"), site_key(link, "destination"))].append(link)
    return [_site_record(pair, members) for pair, members in sorted(groups.items())]


def dense_matrix(links: Sequence[LinkRecord]) -> dict[str, Any]:
    """Rows x columns over the sorted `nodes` (source/destination values); null where no link."""
    nodes = sorted({link["source"] for link in links} | {link["destination"] for link in links})
    position = {node: i for i, node in enumerate(nodes)}
    grids: dict[str, list[list[Any]]] = {
        key: [[None] * len(nodes) for _ in nodes] for key in ("cost", "congested", "utilisation")
    }
    for link in links:
        i, j = position[link["source"]], position[link["destination"]]
        for key, grid in grids.items():
            grid[i][j] = link[key]
    return {"nodes": nodes, **grids}


def _site_record(pair: tuple[str, str], members: list[LinkRecord]) -> LinkRecord:
    if len(members) == 1:  # most pairs of a mesh without --topology: the same, without loops
        return _single_site_record(pair, members[0])

    def mean_of(values: Iterable[float | None]) -> float | None:
        present = [v for v in values if v is not None]
        return round(fmean(present), 6) if present else None

    delays = [m["delay_ms"] for m in members]
    mins = [d["min"] for d in delays if d["min"] is not None]
    p95s = [d["p95"] for d in delays if d["p95"] is not None]
    lasts = [m["last_measurement"] for m in members if m["last_measurement"] is not None]
    return _site_dict(
        {
            "source": pair[0],
            "destination": pair[1],
            "links": len(members),
            "cost": mean_of(m["cost"] for m in members),
            "empirical": mean_of(m["empirical"] for m in members),
            "congested": any(m["congested"] for m in members),
            "utilisation": mean_of(m["utilisation"] for m in members),
            "congestion_probability": mean_of(m["congestion_probability"] for m in members),
            "utilisation_low": mean_of(m["utilisation_low"] for m in members),
            "utilisation_high": mean_of(m["utilisation_high"] for m in members),
            "delay_ms": {
                "mean": mean_of(d["mean"] for d in delays),
                "median": mean_of(d["median"] for d in delays),
                "std": mean_of(d["std"] for d in delays),
                "min": min(mins) if mins else None,
                "p95": max(p95s) if p95s else None,
            },
            "packet_loss": mean_of(m["packet_loss"] for m in members),
            "samples": sum(m["samples"] for m in members),
            "last_measurement": max(lasts) if lasts else None,
            "stale": all(m["stale"] for m in members),
            "clock_suspect": any(m["clock_suspect"] for m in members),
            **_newest_throughput(members),
        }
    )


def _single_site_record(pair: tuple[str, str], link: LinkRecord) -> LinkRecord:
    """`_site_record` of a pair with one host link: its values as the means of one (the link's
    own value objects where rounding leaves them as they are: most pairs of a mesh without
    --topology are such, and their records hold no second copy of the values)."""
    return _site_dict(
        {
            "source": pair[0],
            "destination": pair[1],
            "links": 1,
            "cost": _rounded(link["cost"]),
            "empirical": _rounded(link["empirical"]),
            "congested": bool(link["congested"]),
            "utilisation": _rounded(link["utilisation"]),
            "congestion_probability": _rounded(link["congestion_probability"]),
            "utilisation_low": _rounded(link["utilisation_low"]),
            "utilisation_high": _rounded(link["utilisation_high"]),
            "delay_ms": _single_site_delay(link["delay_ms"]),
            "packet_loss": _rounded(link["packet_loss"]),
            "samples": link["samples"],
            "last_measurement": link["last_measurement"],
            "stale": bool(link["stale"]),
            "clock_suspect": bool(link["clock_suspect"]),
            "throughput_bps": link["throughput_bps"],
            "throughput_age_s": link["throughput_age_s"],
        }
    )


def _single_site_delay(delay: dict[str, Any]) -> dict[str, Any]:
    """A one-link site pair's `delay_ms`: the link's means rounded, its min and p95; the link's
    own dict when that changes nothing."""
    site = {key: _rounded(delay[key]) for key in ("mean", "median", "std")}
    site |= {"min": delay["min"], "p95": delay["p95"]}
    unchanged = tuple(delay) == DELAY_KEYS and all(site[k] is delay[k] for k in DELAY_KEYS)
    return delay if unchanged else site


def _newest_throughput(members: list[LinkRecord]) -> dict[str, int | None]:
    """The youngest throughput result of `members` (of equal ages the fastest), or nulls."""
    tested = [m for m in members if m["throughput_age_s"] is not None]
    if not tested:
        return {"throughput_bps": None, "throughput_age_s": None}
    newest = min(tested, key=lambda m: (m["throughput_age_s"], -m["throughput_bps"]))
    return {
        "throughput_bps": newest["throughput_bps"],
        "throughput_age_s": newest["throughput_age_s"],
    }


def _rounded(value: float | None) -> float | None:
    """`value` rounded to 6 decimals, as a float: the same object when it is such already."""
    if value is None:
        return None
    rounded = round(float(value), 6)
    return value if type(value) is float and rounded == value else rounded


#: Site records, sharing one key table (`shared_keys`).
_site_dict = key_sharing_dicts()
