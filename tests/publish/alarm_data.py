"""Alarms built by hand over tests/deploy/site_mesh.py's links, and the events that open and
close them as the alarm engine records them in the book (`AlarmBook.record`)."""

from __future__ import annotations

from service.alarms.records import Alarm, AlarmEvent, AlarmKind, alarm_id
from tests.deploy.site_mesh import host_of

OPENED = 1_700_000_400.0


def make_alarm(
    kind: AlarmKind,
    subject: str,
    sites: tuple[str, ...],
    links: tuple[tuple[str, str], ...],
    evidence: dict[str, float | int | str],
    opened_at: float = OPENED,
) -> Alarm:
    hosts = tuple(dict.fromkeys(host_of(ip) for link in links for ip in link))
    return Alarm(
        id=alarm_id(kind, subject, opened_at),
        kind=kind,
        subject=subject,
        sites=sites,
        hosts=hosts,
        links=links,
        started_at=opened_at - 180.0,
        opened_at=opened_at,
        ended_at=None,
        evidence=evidence,
    )


#: High loss on SITE-A -> SITE-B's second host pair (the mesh's 8 %).
HIGH_LOSS = make_alarm(
    AlarmKind.HIGH_PACKET_LOSS,
    f"{host_of('192.0.2.11')} -> {host_of('198.51.100.21')}",
    ("SITE-A", "SITE-B"),
    (("192.0.2.11", "198.51.100.21"),),
    {"loss": 0.08, "threshold": 0.02},
)
#: A firewall in front of SITE-B's 198.51.100.21, seen from SITE-A and SITE-C: a grouped alarm
#: names the sites of all its links, the peers too.
FIREWALL = make_alarm(
    AlarmKind.FIREWALL_ISSUE,
    "SITE-B",
    ("SITE-A", "SITE-B", "SITE-C"),
    (("192.0.2.11", "198.51.100.21"), ("203.0.113.5", "198.51.100.21")),
    {"source_hosts": 11, "loss": 1.0},
    opened_at=OPENED + 60.0,
)


def opened(alarm: Alarm) -> AlarmEvent:
    return AlarmEvent("open", alarm, alarm.opened_at)


def closed(alarm: Alarm, at: float) -> AlarmEvent:
    return AlarmEvent("close", alarm.closed(at), at)
