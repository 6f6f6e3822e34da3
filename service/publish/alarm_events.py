"""Alarm events on the broker: one JSON document per alarm opened or closed, on `--alarm-topic`.

The document is the alarm as `GET /alarms` shows it (`service.publish.alarm_view`), which
carries what a pS-Dash-style consumer of OSG's Alarms and Alerts reads (`category`, `event` =
`kind`, `body`, `tags` = sites, `source` = the evidence), plus AAAS's `subcategory` for the kind,
`action` ("open" or "close") and `at` (epoch s of the event). STOMP headers `alarm_id`,
`alarm_kind` and `alarm_action` let a consumer select events without reading the body (no
`timestamp` header: ActiveMQ takes it for JMSTimestamp, an integer of milliseconds, and drops
the connection of a frame whose value is not one).

The messages go over the telemetry publisher's connection and queue
(`TelemetryPublisher.send_messages`): only while this instance publishes telemetry (the
--ha-group's elected publisher), and not at all without telemetry (--publish-telemetry false or
--brokers none).
"""

from __future__ import annotations

from collections.abc import Callable

import orjson

from service.alarms.records import AlarmEvent, AlarmKind
from service.matrix.snapshot import CostMatrix
from service.publish.alarm_view import alarm_record
from service.publish.telemetry import Outgoing, TelemetryPublisher

EVENT_TYPE = "nettel.alarm"
#: AAAS's subcategory of each kind (nettel's own kinds filed where their cause lies).
SUBCATEGORY = {
    AlarmKind.HIGH_PACKET_LOSS: "Sites",
    AlarmKind.HIGH_PACKET_LOSS_MULTIPLE: "Sites",
    AlarmKind.COMPLETE_PACKET_LOSS: "Perfsonar",
    AlarmKind.FIREWALL_ISSUE: "Perfsonar",
    AlarmKind.HIGH_DELAY: "Network",
    AlarmKind.LARGE_CLOCK_CORRECTION: "Perfsonar",
    AlarmKind.LINK_SILENT: "Perfsonar",
    AlarmKind.SUSTAINED_CONGESTION: "Network",
    AlarmKind.BANDWIDTH_DECREASED: "Perfsonar",
    AlarmKind.BANDWIDTH_DECREASED_MULTIPLE: "Perfsonar",
    AlarmKind.BANDWIDTH_INCREASED: "Perfsonar",
    AlarmKind.BANDWIDTH_INCREASED_MULTIPLE: "Perfsonar",
    AlarmKind.PATH_CHANGED: "RENs",
    AlarmKind.DESTINATION_UNREACHABLE_ANY: "Perfsonar",
    AlarmKind.DESTINATION_UNREACHABLE_MULTIPLE: "Perfsonar",
}


def alarm_message(event: AlarmEvent, topic: str, matrix: CostMatrix | None) -> Outgoing:
    """Destination, STOMP headers and JSON body of one alarm event."""
    alarm = event.alarm
    document = alarm_record(alarm, matrix) | {
        "subcategory": SUBCATEGORY[alarm.kind],
        "action": event.action,
        "at": event.at,
    }
    headers = {
        "destination": topic,
        "event-type": EVENT_TYPE,
        "persistent": "true",
        "alarm_id": alarm.id,
        "alarm_kind": alarm.kind.value,
        "alarm_action": event.action,
    }
    return topic, headers, orjson.dumps(document)


class AlarmEventPublisher:
    """Alarm book listener that queues each event's message on the telemetry connection."""

    def __init__(
        self,
        telemetry: TelemetryPublisher,
        topic: str,
        latest: Callable[[], CostMatrix | None],
    ) -> None:
        self._telemetry = telemetry
        self._topic = topic
        self._latest = latest

    def on_event(self, event: AlarmEvent) -> None:
        self._telemetry.send_messages((alarm_message(event, self._topic, self._latest()),))
