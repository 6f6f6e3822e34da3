"""What operators are shown of an alarm: the book's record plus the site pairs its links join,
and the sites it is about (where its alert goes).

The site pairs (`site_pairs`) are the cells of the site-level matrix (`/costmatrix?level=site`,
the web view) that the alarm concerns, read from the matrix served when the record is made:
each link's source and destination site (a host without a site stands for itself, as in the
site-level matrix). A link the matrix no longer holds adds no pair.

The sites an alarm is about (`home_sites`) are fewer than its `sites` for a grouped alarm: a
firewall issue at SITE-B concerns the 11 or more sites whose tests to it lose every packet, but
it is SITE-B's operators who act, as AAAS tags it with SITE-B alone.
"""

from __future__ import annotations

from typing import Any

from service.alarms.records import Alarm
from service.matrix.link_record import LinkRecord, site_key
from service.matrix.snapshot import CostMatrix


def site_pairs(alarm: Alarm, matrix: CostMatrix | None) -> list[dict[str, str]]:
    """The (source site, destination site) pairs of the alarm's links, sorted, each once."""
    if matrix is None:
        return []
    pairs = {
        (site_key(link, "source"), site_key(link, "destination"))
        for source, destination in alarm.links
        for link in matrix.select(source, destination)
    }
    return [{"source": source, "destination": destination} for source, destination in sorted(pairs)]


#: How an alarm about one link names it (`Alarm.subject`: "source host -> destination host").
LINK_SUBJECT = " -> "


def home_sites(alarm: Alarm, matrix: CostMatrix | None) -> list[str]:
    """The sites an alarm is about: a link's two ends; a site's grouped alarm, that site; a
    host's (its links to many sites, its clock), the host's site (as the matrix served has it;
    [] for a host without a site)."""
    if LINK_SUBJECT in alarm.subject:
        return list(alarm.sites)
    if alarm.subject in alarm.sites:
        return [alarm.subject]
    if matrix is not None:
        host = alarm.subject
        for side, links in (
            ("source", matrix.select(host, None)),
            ("destination", matrix.select(None, host)),
        ):
            if links:
                site = _site(links[0], side)
                return [] if site is None else [site]
    return list(alarm.sites) if len(alarm.sites) == 1 else []


def _site(link: LinkRecord, side: str) -> str | None:
    site: str | None = link[f"{side}_site"]
    return site


def alarm_record(alarm: Alarm, matrix: CostMatrix | None) -> dict[str, Any]:
    """The alarm as /alarms, /alarms/stream and the broker's alarm topic show it."""
    return alarm.to_json() | {"site_pairs": site_pairs(alarm, matrix)}
