"""Network alarms: open alarms by kind, open and close events by kind, and open alarms by kind
and site (what Alertmanager routes to a site's operators).

An alarm counts at the sites it is about (`alarm_view.home_sites`: a link's two ends, a grouped
alarm's site or host's site), not at every peer of a grouped alarm. Labels stay bounded: `kind`
has 15 values, `action` 2, and `site` the topology's sites (plus, while an alarm about it is
open, a site the topology no longer lists). Every (kind, site) of the topology is exported, 0
without an open alarm, so that a series exists before its first alarm: about 2,000 series for
WLCG's ~250 sites.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.alarms.records import AlarmKind
from service.publish.alarm_feed import AlarmFeed
from service.publish.alarm_view import home_sites
from service.publish.metrics.families import AlwaysCollected

ACTIONS = ("open", "close")


class AlarmCollector(AlwaysCollected):
    """The counts of the feed's alarm book; `sites`: the topology's sites now."""

    def __init__(self, feed: AlarmFeed, sites: Callable[[], Iterable[str]]) -> None:
        self._feed = feed
        self._sites = sites

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        book = self._feed.book
        by_kind = GaugeMetricFamily(
            "nettel_alarms_open", "Network alarms open now, by kind.", labels=["kind"]
        )
        for kind, count in book.open_by_kind().items():
            by_kind.add_metric([kind.value], count)
        yield by_kind
        events = CounterMetricFamily(
            "nettel_alarm_events",
            "Network alarms opened and closed since start, by kind and action (open, close).",
            labels=["kind", "action"],
        )
        totals = book.events_total
        for kind in AlarmKind:
            for action in ACTIONS:
                events.add_metric([kind.value, action], totals.get((kind, action), 0))
        yield events
        by_site = GaugeMetricFamily(
            "nettel_site_alarms_open",
            "Network alarms open now about a site (a link's ends, a grouped alarm's site or "
            "host's site), by kind and site; 0 for every kind at every site of the topology "
            "without one.",
            labels=["kind", "site"],
        )
        matrix = self._feed.latest()
        counts = Counter(
            (alarm.kind.value, site)
            for alarm in book.open_alarms()
            for site in dict.fromkeys(home_sites(alarm, matrix))
        )
        sites = list(self._sites())
        zeros = {(kind.value, site): 0 for kind in AlarmKind for site in sites}
        for (kind_name, site), count in sorted((zeros | counts).items()):
            by_site.add_metric([kind_name, site], count)
        yield by_site
