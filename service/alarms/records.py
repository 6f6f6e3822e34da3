"""What an alarm is: its kind (AAAS's names), what it is about, when, and the evidence.

An alarm is immutable; closing one gives a copy with `ended_at` set. Its id is stable: a hash
of its kind, subject and the minute it was opened, so the same alarm keeps its id across
restarts and replicas that raised it at the same minute give it the same id.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, Literal

#: pS-Dash's category of network alarms (AAAS files every kind here under "Networking").
CATEGORY = "Networking"


class AlarmKind(StrEnum):
    """The kinds of network alarm, named as OSG's Alarms and Alerts service names them."""

    HIGH_PACKET_LOSS = "high packet loss"
    COMPLETE_PACKET_LOSS = "complete packet loss"
    HIGH_PACKET_LOSS_MULTIPLE = "high packet loss on multiple links"
    FIREWALL_ISSUE = "firewall issue"
    HIGH_DELAY = "high one-way delay"
    LARGE_CLOCK_CORRECTION = "large clock correction"
    LINK_SILENT = "link silent"
    SUSTAINED_CONGESTION = "sustained congestion"
    BANDWIDTH_DECREASED = "bandwidth decreased"
    BANDWIDTH_DECREASED_MULTIPLE = "bandwidth decreased from/to multiple sites"
    BANDWIDTH_INCREASED = "bandwidth increased"
    BANDWIDTH_INCREASED_MULTIPLE = "bandwidth increased from/to multiple sites"
    PATH_CHANGED = "path changed"
    DESTINATION_UNREACHABLE_ANY = "destination cannot be reached from any"
    DESTINATION_UNREACHABLE_MULTIPLE = "destination cannot be reached from multiple"


Evidence = Mapping[str, float | int | str]


def alarm_id(kind: AlarmKind, subject: str, opened_at: float) -> str:
    """16 hex characters of sha256(kind | subject | opening minute).

    >>> alarm_id(AlarmKind.HIGH_PACKET_LOSS, "a -> b", 120.0) == alarm_id(
    ...     AlarmKind.HIGH_PACKET_LOSS, "a -> b", 179.9)
    True
    """
    text = f"{kind.value}|{subject}|{int(opened_at // 60)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Alarm:
    """One alarm: open while `ended_at` is None."""

    id: str
    kind: AlarmKind
    #: What it is about: "source host -> destination host", a host name or a site name.
    subject: str
    sites: tuple[str, ...]
    hosts: tuple[str, ...]
    #: (source IP, destination IP) of the links concerned.
    links: tuple[tuple[str, str], ...]
    #: When the condition began (epoch s), before the alarm was confirmed.
    started_at: float
    #: When the alarm was raised, once the condition had held long enough.
    opened_at: float
    ended_at: float | None
    #: The values seen and the threshold crossed.
    evidence: Evidence

    @property
    def is_open(self) -> bool:
        return self.ended_at is None

    def closed(self, at: float) -> Alarm:
        """This alarm ended at `at`."""
        return replace(self, ended_at=at)

    def body(self) -> str:
        """One line for a human: what, where, and the value against its threshold."""
        return describe(self.kind, self.subject, self.evidence)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready, with the fields a pS-Dash-style consumer reads (`event` = `kind`,
        `tags` = sites, `body`, `source` = the evidence)."""
        return {
            "id": self.id,
            "kind": self.kind.value,
            "category": CATEGORY,
            "event": self.kind.value,
            "subject": self.subject,
            "body": self.body(),
            "tags": list(self.sites),
            "sites": list(self.sites),
            "hosts": list(self.hosts),
            "links": [{"source": s, "destination": d} for s, d in self.links],
            "started_at": self.started_at,
            "opened_at": self.opened_at,
            "ended_at": self.ended_at,
            "status": "open" if self.ended_at is None else "closed",
            "source": dict(self.evidence),
        }


@dataclass(frozen=True)
class AlarmEvent:
    """An alarm opened or closed at `at` (epoch s)."""

    action: Literal["open", "close"]
    alarm: Alarm
    at: float

    def to_json(self) -> dict[str, Any]:
        return {"action": self.action, "at": self.at, "alarm": self.alarm.to_json()}


def describe(kind: AlarmKind, subject: str, evidence: Evidence) -> str:
    """The one-line text of an alarm from its kind, subject and evidence (what it lacks is left
    out).

    >>> describe(AlarmKind.HIGH_PACKET_LOSS, "a -> b", {"loss": 0.05, "threshold": 0.02})
    'high packet loss: a -> b: loss 5.0 % (threshold 2.0 %)'
    >>> describe(AlarmKind.FIREWALL_ISSUE, "SITE-1", {"links": 11, "source_hosts": 11})
    'firewall issue: SITE-1: 11 links, from 11 source hosts'
    >>> describe(AlarmKind.BANDWIDTH_DECREASED, "a -> b", {"change": -0.7667, "z": -2.04,
    ...     "recent_mean_bps": 1.2e9, "recent_tests": 5, "threshold_change": 0.5}).split(": ")[2:]
    ["change -76.7 % (z -2.04; threshold 50.0 %), the last day's 5 tests at 1.2 Gb/s"]
    >>> describe(AlarmKind.PATH_CHANGED, "a -> b", {"hops": 9, "path_minutes": 20})
    'path changed: a -> b: a new path of 9 hops, for 20 minutes'
    """
    shown: dict[str, Callable[[Evidence], str]] = {
        "loss": lambda e: f"loss {_percent(e['loss'])}{_threshold(e, 'threshold', _percent)}",
        "delay_ms": lambda e: f"delay {e['delay_ms']} ms{_threshold(e, 'threshold_ms', _ms)}",
        "correction_ms": lambda e: (
            f"clock correction {e['correction_ms']} ms{_threshold(e, 'threshold_ms', _ms)}"
        ),
        "congestion_probability": lambda e: (
            f"congestion probability {e['congestion_probability']}{_threshold(e, 'threshold', str)}"
        ),
        "silent_minutes": lambda e: (
            f"no measurement for {e['silent_minutes']} minutes while its peers report"
        ),
        "change": lambda e: (
            f"change {_percent(e['change'])} (z {e.get('z')}"
            + (
                f"; threshold {_percent(e['threshold_change'])})"
                if "threshold_change" in e
                else ")"
            )
        ),
        "recent_mean_bps": lambda e: (
            f"the last day's {e.get('recent_tests')} tests at {_rate(e['recent_mean_bps'])}"
        ),
        "hops": lambda e: f"a new path of {e['hops']} hops",
        "last_hop": lambda e: f"traces stop at {e['last_hop']}",
        "path_minutes": lambda e: f"for {e['path_minutes']} minutes",
        "minutes": lambda e: f"for {e['minutes']} minutes",
        "links": lambda e: f"{e['links']} links",
        "peer_sites": lambda e: f"{e['peer_sites']} other sites",
        "source_hosts": lambda e: f"from {e['source_hosts']} source hosts",
        "unreached_from": lambda e: (
            f"not reached from {e['unreached_from']} of {e['traced_from']} source hosts"
        ),
    }
    parts = [show(evidence) for key, show in shown.items() if key in evidence]
    return f"{kind.value}: {subject}" + "".join(
        (": " if number == 0 else ", ") + part for number, part in enumerate(parts)
    )


def _threshold(evidence: Evidence, key: str, shown: Callable[[Any], str]) -> str:
    return f" (threshold {shown(evidence[key])})" if key in evidence else ""


def _percent(value: float | int | str) -> str:
    return f"{float(value) * 100:.1f} %"


def _ms(value: float | int | str) -> str:
    return f"{value} ms"


def _rate(value: float | int | str) -> str:
    """
    >>> _rate(412_903_544), _rate(9.1e9)
    ('413 Mb/s', '9.1 Gb/s')
    """
    bps = float(value)
    return f"{bps / 1e9:.2g} Gb/s" if bps >= 1e9 else f"{bps / 1e6:.0f} Mb/s"
