"""Rucio's `custom_table` replica sorter input: `site,rse,distance` lines, distance in [0, 1].

Rucio sorts the replicas a client at `site` may read (client site from SITE_NAME and friends) by
the distance of (rse, site), a missing pair counting as 1.0. Data flows from the RSE to the
client, so the distance of (site, rse) is the site-level cost of the link from the RSE's site to
`site`; an RSE at the client's own site has distance 0. Pairs without a measured link are left
out (Rucio then assumes 1.0). Rucio reads every line as data, so there is no header line; names
containing a comma cannot be written and are skipped.

A table without a single measured pair would make Rucio count every distance as 1.0, so it is
never served: the route answers 503 with Retry-After until a mapped site pair has data (or, with
`min_coverage`, until enough of the map has). How much of the map the table covers goes in the
`X-Nettel-RSE-Coverage` header (`covered/mapped` RSEs), never in the body.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Response

from service.bounded_yaml import load_bounded_yaml
from service.errors import ConfigError
from service.matrix.link_record import LinkRecord

CSV_MEDIA = "text/csv; charset=utf-8"
COVERAGE_HEADER = "X-Nettel-RSE-Coverage"
#: perfSONAR measures each link once a minute: a table without data is worth asking for again then.
RETRY_AFTER_SECONDS = 60
NO_RSE_MAP = (
    "no RSE map configured: start nettel serve with --rse-map FILE "
    "(YAML or JSON mapping RSE_NAME: SITE)"
)


def load_rse_map(path: Path) -> dict[str, str]:
    """RSE name -> site name from a YAML/JSON mapping; ConfigError if it is not one."""
    try:
        document = load_bounded_yaml(path.read_bytes(), "an RSE map")
    except (OSError, ValueError) as error:
        raise ConfigError(f"rse map {path}: cannot read: {error}") from None
    if not isinstance(document, dict) or not all(
        isinstance(value, str | int) and not isinstance(value, bool) for value in document.values()
    ):
        raise ConfigError(f"rse map {path}: expected a mapping of RSE name -> site name")
    return {str(rse): str(site) for rse, site in document.items()}


@dataclass(frozen=True)
class RucioTable:
    """The CSV body, and how many of the map's (writable) RSEs have a measured line in it."""

    text: str
    covered: int
    mapped: int

    @property
    def coverage(self) -> float:
        return self.covered / self.mapped if self.mapped else 0.0


def build_rucio_table(site_links: Sequence[LinkRecord], rse_map: dict[str, str]) -> RucioTable:
    """The custom_table CSV for every (site in the matrix, RSE in the map) with a distance.

    >>> link = {"source": "RAL", "destination": "CERN", "cost": 0.25}
    >>> table = build_rucio_table([link], {"CERN_DISK": "CERN", "RAL_TAPE": "RAL"})
    >>> print(table.text, end="")
    CERN,CERN_DISK,0.0000
    CERN,RAL_TAPE,0.2500
    RAL,RAL_TAPE,0.0000
    >>> table.covered, table.mapped
    (1, 2)
    """
    cost = {(link["source"], link["destination"]): link["cost"] for link in site_links}
    sites = sorted({site for pair in cost for site in pair if "," not in site})
    rses = sorted((rse, site) for rse, site in rse_map.items() if "," not in rse)
    lines = []
    covered = set()
    for site in sites:
        for rse, rse_site in rses:
            distance = 0.0 if rse_site == site else cost.get((rse_site, site))
            if distance is not None:
                lines.append(f"{site},{rse},{min(max(distance, 0.0), 1.0):.4f}\n")
                if rse_site != site:
                    covered.add(rse)
    return RucioTable("".join(lines), len(covered), len(rses))


def build_rucio_router(
    site_links: Callable[..., Sequence[LinkRecord]],
    rse_map: Callable[..., dict[str, str] | None],
) -> APIRouter:
    """`GET /costmatrix.csv?format=rucio` over two dependencies: the site-level links of the
    latest matrix (503 before the first one) and the configured RSE map (None: 404). 503 with
    Retry-After as well while no RSE has a measured line, or fewer than `min_coverage` do."""
    router = APIRouter(tags=["Rucio"])

    def configured_rses(rses: dict[str, str] | None = Depends(rse_map)) -> dict[str, str]:
        if rses is None:  # checked first: a missing map is a lasting 404, no matrix a passing 503
            raise HTTPException(404, NO_RSE_MAP)
        return rses

    @router.get(
        "/costmatrix.csv",
        response_class=Response,
        responses={
            200: {"content": {CSV_MEDIA: {}}, "description": f"the table; {COVERAGE_HEADER}"},
            404: {"description": "no RSE map configured"},
            503: {"description": "no matrix yet, or too few RSEs with data (Retry-After)"},
        },
    )
    def rucio_table(
        format: Literal["rucio"] = Query(description="table layout"),
        min_coverage: float = Query(
            0.0, ge=0.0, le=1.0, description="503 unless this share of the map's RSEs has data"
        ),
        rses: dict[str, str] = Depends(configured_rses),
        links: Sequence[LinkRecord] = Depends(site_links),
    ) -> Response:
        """Site -> RSE distances for Rucio's custom_table replica sorter (no header line)."""
        table = build_rucio_table(links, rses)
        coverage = f"{table.covered}/{table.mapped}"
        if table.covered == 0 or table.coverage < min_coverage:
            reason = (
                f"RSE map coverage {coverage} (RSEs with a measured site pair), "
                f"need {'some' if table.covered == 0 else f'at least {min_coverage:g}'}: "
                "no table rather than one that would rank those RSEs 1.0"
            )
            headers = {"Retry-After": str(RETRY_AFTER_SECONDS), COVERAGE_HEADER: coverage}
            raise HTTPException(503, reason, headers=headers)
        return Response(table.text, media_type=CSV_MEDIA, headers={COVERAGE_HEADER: coverage})

    return router
