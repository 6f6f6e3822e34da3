"""From latched links and hosts to alarms: AAAS's groupings, and one alarm per host or site.

Runs once per evaluated minute over the few links in alarm (Python loops over those only):

1. An open host or site alarm keeps every latched link of its kind that touches its host or
   site, as long as one is left: a group does not fall apart link by link as it heals.
2. Firewall (complete loss): a destination host with complete loss from more than 10 source
   hosts; one alarm for its site.
3. A host whose latched links of a kind reach at least 5 other sites, or every other site it
   has links with (at least 2), gives one alarm for the host (for high loss: "high packet loss
   on multiple links"); when every host of a site with links is in such an alarm, one alarm
   for the site replaces them (a site cut off: one alarm, not 2 x (N - 1)).
4. Every latched link left gives its own alarm; every latched host its clock alarm (for the
   site when all its hosts are).

Links whose traces do not reach their destination give no alarm of their own: per destination
host, when every source host that traces it (at least 2) does not reach it, "destination cannot
be reached from any" (for its site when all the site's hosts are); when at least
`UNREACHED_SOURCES` do, "destination cannot be reached from multiple" (AAAS's names; AAAS asks
for more than 20 sources over a day, nettel judges the current traces).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

from service.alarms.identities import LinkEnds
from service.alarms.records import AlarmKind, Evidence
from service.state.link_state import StateView

#: Other sites a host's links in alarm must reach for one alarm for the host (AAAS: 5).
GROUP_SITES = 5
#: A destination host with complete loss from more than this many source hosts has a
#: firewall issue (AAAS).
FIREWALL_SOURCES = 10
#: Source hosts whose traces stop before a destination host for "destination cannot be reached
#: from multiple" (when not all of its sources).
UNREACHED_SOURCES = 5
LINK_SEPARATOR = " -> "


class LinkCondition(StrEnum):
    """What a link can be latched for."""

    SILENT = "silent"
    COMPLETE_LOSS = "complete_loss"
    HIGH_LOSS = "high_loss"
    HIGH_DELAY = "high_delay"
    CONGESTION = "congestion"
    BANDWIDTH_DECREASED = "bandwidth_decreased"
    BANDWIDTH_INCREASED = "bandwidth_increased"
    PATH_CHANGED = "path_changed"
    UNREACHED = "unreached"


#: The conditions judged on each minute's delay and loss (the others on the links' throughput
#: tests and traceroutes, `result_conditions`).
MINUTE_CONDITIONS = (
    LinkCondition.SILENT,
    LinkCondition.COMPLETE_LOSS,
    LinkCondition.HIGH_LOSS,
    LinkCondition.HIGH_DELAY,
    LinkCondition.CONGESTION,
)


#: Per link condition: the kind of a link's alarm and of a host's or site's.
KINDS: dict[LinkCondition, tuple[AlarmKind, AlarmKind]] = {
    LinkCondition.SILENT: (AlarmKind.LINK_SILENT, AlarmKind.LINK_SILENT),
    LinkCondition.COMPLETE_LOSS: (
        AlarmKind.COMPLETE_PACKET_LOSS,
        AlarmKind.COMPLETE_PACKET_LOSS,
    ),
    LinkCondition.HIGH_LOSS: (AlarmKind.HIGH_PACKET_LOSS, AlarmKind.HIGH_PACKET_LOSS_MULTIPLE),
    LinkCondition.HIGH_DELAY: (AlarmKind.HIGH_DELAY, AlarmKind.HIGH_DELAY),
    LinkCondition.CONGESTION: (
        AlarmKind.SUSTAINED_CONGESTION,
        AlarmKind.SUSTAINED_CONGESTION,
    ),
    LinkCondition.BANDWIDTH_DECREASED: (
        AlarmKind.BANDWIDTH_DECREASED,
        AlarmKind.BANDWIDTH_DECREASED_MULTIPLE,
    ),
    LinkCondition.BANDWIDTH_INCREASED: (
        AlarmKind.BANDWIDTH_INCREASED,
        AlarmKind.BANDWIDTH_INCREASED_MULTIPLE,
    ),
    LinkCondition.PATH_CHANGED: (AlarmKind.PATH_CHANGED, AlarmKind.PATH_CHANGED),
    LinkCondition.UNREACHED: (
        AlarmKind.DESTINATION_UNREACHABLE_MULTIPLE,
        AlarmKind.DESTINATION_UNREACHABLE_ANY,
    ),
}


@dataclass(frozen=True)
class AlarmSpec:
    """An alarm that should be open now: what it is about and since which minute."""

    kind: AlarmKind
    subject: str
    rows: tuple[int, ...]
    hosts: tuple[str, ...]
    sites: tuple[str, ...]
    onset_minute: int
    evidence: Evidence


@dataclass(frozen=True)
class LatchedLinks:
    """One link condition's latched rows, their onsets and what each showed this minute."""

    rows: np.ndarray
    onsets: np.ndarray
    #: Evidence per row (same order as `rows`), e.g. {"loss": 0.05, "threshold": 0.02}.
    evidence: list[dict[str, float | int | str]]
    #: Rows whose condition holds but has not lasted long enough yet (a path seen for less
    #: than its persistence): they count when links are grouped, none is in an alarm.
    pending: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass(frozen=True)
class LatchedHosts:
    """Hosts whose clock is off: codes, onsets and evidence."""

    codes: np.ndarray
    onsets: np.ndarray
    evidence: list[dict[str, float | int | str]]


@dataclass
class Grouping:
    """The names of the view's links, for turning rows and host codes into alarms."""

    view: StateView
    ends: LinkEnds
    site_hosts: dict[str, set[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.site_hosts = self.ends.site_hosts()

    def specs(
        self,
        links: Mapping[LinkCondition, LatchedLinks],
        clocks: LatchedHosts,
        open_subjects: Iterable[tuple[AlarmKind, str]],
        traced: np.ndarray | None = None,
    ) -> dict[tuple[AlarmKind, str], AlarmSpec]:
        """Every alarm that should be open, by (kind, subject); `traced`: the links with a
        recent trace (whose sources count for the destination alarms)."""
        open_groups: dict[AlarmKind, set[str]] = {}
        for kind, subject in open_subjects:
            if LINK_SEPARATOR not in subject:
                open_groups.setdefault(kind, set()).add(subject)
        specs: list[AlarmSpec] = []
        for condition, latched in links.items():
            link_kind, group_kind = KINDS[condition]
            rows = dict(zip(latched.rows.tolist(), range(len(latched.rows)), strict=True))
            unclaimed = set(rows)
            if condition is LinkCondition.UNREACHED:
                traced_rows = np.zeros(len(self.view), bool) if traced is None else traced
                specs += self._unreached(latched, rows, traced_rows, open_groups)
                continue
            if condition is LinkCondition.COMPLETE_LOSS:
                for site in sorted(open_groups.get(AlarmKind.FIREWALL_ISSUE, ())):
                    members = self._touching(unclaimed, site, inbound_only=True)
                    if members:
                        spec = self.group_spec(
                            AlarmKind.FIREWALL_ISSUE, site, members, latched, rows
                        )
                        specs.append(self.with_sources(spec))
                        unclaimed -= set(members)
            for subject in sorted(open_groups.get(group_kind, ())):
                members = self._touching(unclaimed, subject)
                if members:
                    specs.append(self.group_spec(group_kind, subject, members, latched, rows))
                    unclaimed -= set(members)
            if condition is LinkCondition.COMPLETE_LOSS:
                specs += self._firewalls(unclaimed, latched, rows)
            specs += self._host_groups(group_kind, unclaimed, latched, rows)
            specs += [
                self.link_spec(link_kind, row, latched, rows[row]) for row in sorted(unclaimed)
            ]
        specs += self._clocks(clocks)
        return {(spec.kind, spec.subject): spec for spec in specs}

    # -- groups --------------------------------------------------------------------------------

    def _firewalls(
        self, unclaimed: set[int], latched: LatchedLinks, position: dict[int, int]
    ) -> list[AlarmSpec]:
        sources: dict[int, set[int]] = {}
        for row in unclaimed:
            sources.setdefault(int(self.ends.destination_host[row]), set()).add(
                int(self.ends.source_host[row])
            )
        by_site: dict[str, list[int]] = {}
        for host, senders in sources.items():
            if len(senders) > FIREWALL_SOURCES:
                site = self.ends.host_site[host] or self.ends.hosts[host]
                by_site.setdefault(site, []).append(host)
        specs = []
        for site, hosts in sorted(by_site.items()):
            members = [r for r in unclaimed if int(self.ends.destination_host[r]) in hosts]
            unclaimed -= set(members)
            spec = self.group_spec(AlarmKind.FIREWALL_ISSUE, site, members, latched, position)
            specs.append(self.with_sources(spec))
        return specs

    def _unreached(
        self,
        latched: LatchedLinks,
        position: dict[int, int],
        traced: np.ndarray,
        open_groups: dict[AlarmKind, set[str]],
    ) -> list[AlarmSpec]:
        """The destination alarms. A destination host is "from any" when every source host
        that traces it (at least 2) does not reach it, counting the traces that stop but have
        not persisted yet (at least one has); else "from multiple" when at least
        `UNREACHED_SOURCES` do. An open alarm keeps its destination's latched links while its
        kind still holds; "from any" is for the site when all the site's hosts are."""
        any_kind = AlarmKind.DESTINATION_UNREACHABLE_ANY
        multiple_kind = AlarmKind.DESTINATION_UNREACHABLE_MULTIPLE

        def sources_by_destination(rows: list[int]) -> dict[int, set[int]]:
            found: dict[int, set[int]] = {}
            for row in rows:
                found.setdefault(int(self.ends.destination_host[row]), set()).add(
                    int(self.ends.source_host[row])
                )
            return found

        tracing = sources_by_destination(np.flatnonzero(traced).tolist())
        stopped = sources_by_destination([*position, *latched.pending.tolist()])
        from_any = {
            host
            for host in sources_by_destination(list(position))
            if len(stopped[host]) >= 2 and stopped[host] >= tracing.get(host, set())
        }
        many = {
            host
            for host in sources_by_destination(list(position))
            if host not in from_any and len(stopped[host]) >= UNREACHED_SOURCES
        }

        def spec(kind: AlarmKind, subject: str, rows: list[int]) -> AlarmSpec:
            found = self.group_spec(kind, subject, rows, latched, position)
            destinations = {int(self.ends.destination_host[row]) for row in found.rows}
            tracers = set().union(*(tracing.get(host, set()) for host in destinations))
            sources = {int(self.ends.source_host[row]) for row in found.rows}
            return _with(found, unreached_from=len(sources), traced_from=len(tracers | sources))

        unclaimed = set(position)
        specs = []
        for kind, hosts in ((any_kind, from_any), (multiple_kind, many)):
            eligible = {row for row in unclaimed if int(self.ends.destination_host[row]) in hosts}
            for subject in sorted(open_groups.get(kind, ())):
                members = self._touching(eligible, subject, inbound_only=True)
                if members:
                    specs.append(spec(kind, subject, members))
                    eligible -= set(members)
                    unclaimed -= set(members)
            left = {int(self.ends.destination_host[row]) for row in eligible}
            grouped: dict[str, set[int]] = {}
            if kind is any_kind:
                for site, site_hosts in sorted(self.site_hosts.items()):
                    if site_hosts and site_hosts <= left:
                        grouped[site] = site_hosts
            for host in sorted(left - {h for hosts_ in grouped.values() for h in hosts_}):
                grouped[self.ends.hosts[host]] = {host}
            for subject, subject_hosts in grouped.items():
                members = [
                    r for r in eligible if int(self.ends.destination_host[r]) in subject_hosts
                ]
                specs.append(spec(kind, subject, members))
                unclaimed -= set(members)
        return specs

    def with_sources(self, spec: AlarmSpec) -> AlarmSpec:
        """A firewall alarm's evidence names how many source hosts lose every packet."""
        source_hosts = {int(self.ends.source_host[row]) for row in spec.rows}
        return _with(spec, source_hosts=len(source_hosts))

    def _host_groups(
        self,
        kind: AlarmKind,
        unclaimed: set[int],
        latched: LatchedLinks,
        position: dict[int, int],
    ) -> list[AlarmSpec]:
        touching: dict[int, list[int]] = {}
        for row in unclaimed:
            for host in (int(self.ends.source_host[row]), int(self.ends.destination_host[row])):
                touching.setdefault(host, []).append(row)
        coming: dict[int, list[int]] = {}
        for row in latched.pending.tolist():
            for host in (int(self.ends.source_host[row]), int(self.ends.destination_host[row])):
                coming.setdefault(host, []).append(row)
        grouped: dict[int, list[int]] = {}
        for host, rows in sorted(touching.items(), key=lambda item: -len(item[1])):
            rows = [row for row in rows if row in unclaimed]
            reached = self.other_sites(host, rows + coming.get(host, []))
            if rows and len(reached) >= min(GROUP_SITES, max(2, len(self._peer_sites(host)))):
                grouped[host] = rows
                unclaimed -= set(rows)
        specs = []
        for site, hosts in sorted(self.site_hosts.items()):
            if hosts and hosts <= grouped.keys():
                members = [row for host in sorted(hosts) for row in grouped.pop(host)]
                specs.append(self.group_spec(kind, site, members, latched, position))
        for host, rows in sorted(grouped.items()):
            specs.append(self.group_spec(kind, self.ends.hosts[host], rows, latched, position))
        return specs

    def group_spec(
        self,
        kind: AlarmKind,
        subject: str,
        rows: list[int],
        latched: LatchedLinks,
        position: dict[int, int],
    ) -> AlarmSpec:
        rows = sorted(set(rows))
        hosts = sorted(
            {self.ends.hosts[int(self.ends.source_host[row])] for row in rows}
            | {self.ends.hosts[int(self.ends.destination_host[row])] for row in rows}
        )
        sites = self._sites_of(rows)
        evidence = _summary([latched.evidence[position[row]] for row in rows])
        evidence["links"] = len(rows)
        evidence["peer_sites"] = max(0, len(sites) - 1)
        onset = min(int(latched.onsets[position[row]]) for row in rows)
        return AlarmSpec(kind, subject, tuple(rows), tuple(hosts), tuple(sites), onset, evidence)

    def link_spec(self, kind: AlarmKind, row: int, latched: LatchedLinks, at: int) -> AlarmSpec:
        view = self.view
        source = view.source_hosts[row] or view.sources[row]
        destination = view.destination_hosts[row] or view.destinations[row]
        return AlarmSpec(
            kind,
            f"{source}{LINK_SEPARATOR}{destination}",
            (row,),
            tuple(dict.fromkeys((source, destination))),
            tuple(self._sites_of([row])),
            int(latched.onsets[at]),
            dict(latched.evidence[at]),
        )

    def _clocks(self, clocks: LatchedHosts) -> list[AlarmSpec]:
        latched = {int(code): at for at, code in enumerate(clocks.codes.tolist())}
        specs = []
        for site, hosts in sorted(self.site_hosts.items()):
            if hosts and hosts <= latched.keys():
                positions = [latched.pop(host) for host in sorted(hosts)]
                specs.append(self.host_spec(site, sorted(hosts), positions, clocks))
        for host, position in sorted(latched.items()):
            specs.append(self.host_spec(self.ends.hosts[host], [host], [position], clocks))
        return specs

    def host_spec(
        self, subject: str, hosts: list[int], at: list[int], clocks: LatchedHosts
    ) -> AlarmSpec:
        evidence = _summary([clocks.evidence[i] for i in at])
        sites = sorted({site for h in hosts if (site := self.ends.host_site[h]) is not None})
        return AlarmSpec(
            AlarmKind.LARGE_CLOCK_CORRECTION,
            subject,
            (),
            tuple(self.ends.hosts[h] for h in hosts),
            tuple(sites),
            min(int(clocks.onsets[i]) for i in at),
            evidence,
        )

    # -- names ---------------------------------------------------------------------------------

    def _touching(self, rows: set[int], subject: str, inbound_only: bool = False) -> list[int]:
        """The rows with an end (the destination, when `inbound_only`) at `subject`, a host
        name or a site name."""
        hosts = self.site_hosts.get(subject) or {
            code for code, name in enumerate(self.ends.hosts) if name == subject
        }
        return [
            row
            for row in rows
            if int(self.ends.destination_host[row]) in hosts
            or (not inbound_only and int(self.ends.source_host[row]) in hosts)
        ]

    def other_sites(self, host: int, rows: list[int]) -> set[str]:
        """The sites (hosts without one: the host) at the other end of `rows` from `host`."""
        own = self.ends.host_site[host]
        reached = set()
        for row in rows:
            source = int(self.ends.source_host[row])
            other = int(self.ends.destination_host[row]) if source == host else source
            place = self.ends.host_site[other] or self.ends.hosts[other]
            if place != own:
                reached.add(place)
        return reached

    def _peer_sites(self, host: int) -> set[str]:
        """Every other site `host` has a link with (a pass over all links: few hosts ask)."""
        rows = np.flatnonzero(
            (self.ends.source_host == host) | (self.ends.destination_host == host)
        )
        return self.other_sites(host, rows.tolist())

    def _sites_of(self, rows: list[int]) -> list[str]:
        sites: dict[str, None] = {}
        for row in rows:
            for site in (self.view.source_sites[row], self.view.destination_sites[row]):
                if site is not None:
                    sites[site] = None
        return sorted(sites)


def _summary(items: list[dict[str, float | int | str]]) -> dict[str, float | int | str]:
    """Evidence of a group from its members': the largest of each number, thresholds as they
    are (the same for every member)."""
    summary: dict[str, float | int | str] = {}
    for item in items:
        for key, value in item.items():
            held = summary.get(key)
            if isinstance(value, int | float) and isinstance(held, int | float):
                summary[key] = max(held, value)
            elif held is None:
                summary[key] = value
    return summary


def _with(spec: AlarmSpec, **evidence: float | int | str) -> AlarmSpec:
    return AlarmSpec(
        spec.kind,
        spec.subject,
        spec.rows,
        spec.hosts,
        spec.sites,
        spec.onset_minute,
        {**spec.evidence, **evidence},
    )
