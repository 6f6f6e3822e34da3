"""What operators are shown of an alarm: the book's record plus the site pairs its links join.

The site pairs (`site_pairs`) are the cells of the site-level matrix (`/costmatrix?level=site`,
the web view) that the alarm concerns, read from the matrix served when the record is made:
each link's source and destination site (a host without a site stands for itself, as in the
site-level matrix). A link the matrix no longer holds adds no pair.
"""

from __future__ import annotations

from typing import Any

from service.alarms.records import Alarm
from service.matrix.link_record import site_key
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


def alarm_record(alarm: Alarm, matrix: CostMatrix | None) -> dict[str, Any]:
    """The alarm as /alarms, /alarms/stream and the broker's alarm topic show it."""
    return alarm.to_json() | {"site_pairs": site_pairs(alarm, matrix)}
