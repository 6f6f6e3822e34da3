"""The alarm book: what it holds, what it answers, who hears; and the alarm record."""

from __future__ import annotations

import logging

import pytest

from service.alarms.book import AlarmBook
from service.alarms.records import Alarm, AlarmEvent, AlarmKind, alarm_id


def alarm(
    kind: AlarmKind = AlarmKind.HIGH_PACKET_LOSS,
    subject: str = "a.example.org -> b.example.org",
    sites: tuple[str, ...] = ("SITE-A", "SITE-B"),
    opened_at: float = 1000.0,
) -> Alarm:
    return Alarm(
        id=alarm_id(kind, subject, opened_at),
        kind=kind,
        subject=subject,
        sites=sites,
        hosts=("a.example.org", "b.example.org"),
        links=(("10.0.0.1", "10.0.1.1"),),
        started_at=opened_at - 180,
        opened_at=opened_at,
        ended_at=None,
        evidence={"loss": 0.05, "threshold": 0.02, "minutes": 3},
    )


def test_an_alarm_id_is_stable_per_kind_subject_and_opening_minute() -> None:
    first = alarm_id(AlarmKind.FIREWALL_ISSUE, "SITE-A", 6000.0)
    assert len(first) == 16 and int(first, 16) >= 0
    assert alarm_id(AlarmKind.FIREWALL_ISSUE, "SITE-A", 6059.0) == first
    assert alarm_id(AlarmKind.FIREWALL_ISSUE, "SITE-A", 6060.0) != first
    assert alarm_id(AlarmKind.FIREWALL_ISSUE, "SITE-B", 6000.0) != first


def test_an_alarm_s_json_has_the_fields_a_ps_dash_consumer_reads() -> None:
    document = alarm().to_json()
    assert document["kind"] == document["event"] == "high packet loss"
    assert document["tags"] == ["SITE-A", "SITE-B"]
    assert document["source"] == {"loss": 0.05, "threshold": 0.02, "minutes": 3}
    assert document["body"] == (
        "high packet loss: a.example.org -> b.example.org: loss 5.0 % (threshold 2.0 %), "
        "for 3 minutes"
    )
    assert document["status"] == "open" and document["ended_at"] is None
    assert document["links"] == [{"source": "10.0.0.1", "destination": "10.0.1.1"}]


def test_open_and_close_and_counts() -> None:
    book = AlarmBook()
    first, second = alarm(), alarm(AlarmKind.FIREWALL_ISSUE, "SITE-B", ("SITE-B",))
    book.record([AlarmEvent("open", first, 1000.0), AlarmEvent("open", second, 1000.0)])
    assert book.open_alarms() == [first, second] or book.open_alarms() == [second, first]
    assert book.find_open(AlarmKind.FIREWALL_ISSUE, "SITE-B") == second
    book.record([AlarmEvent("close", first.closed(1300.0), 1300.0)])
    assert book.open_alarms() == [second]
    assert book.closed_alarms() == [first.closed(1300.0)]
    assert book.open_by_kind()[AlarmKind.FIREWALL_ISSUE] == 1
    assert book.open_by_kind()[AlarmKind.HIGH_PACKET_LOSS] == 0
    assert book.events_total == {
        (AlarmKind.HIGH_PACKET_LOSS, "open"): 1,
        (AlarmKind.FIREWALL_ISSUE, "open"): 1,
        (AlarmKind.HIGH_PACKET_LOSS, "close"): 1,
    }


def test_an_alarm_open_twice_or_closed_unopened_is_refused() -> None:
    book = AlarmBook()
    book.record([AlarmEvent("open", alarm(), 1000.0)])
    with pytest.raises(ValueError, match="open already"):
        book.record([AlarmEvent("open", alarm(opened_at=1100.0), 1100.0)])
    with pytest.raises(ValueError, match="not open"):
        book.record([AlarmEvent("close", alarm(AlarmKind.HIGH_DELAY).closed(1200.0), 1200.0)])


def test_query_by_site_kind_and_since() -> None:
    book = AlarmBook()
    old, new = alarm(opened_at=1000.0), alarm(AlarmKind.HIGH_DELAY, sites=("SITE-C",))
    book.record([AlarmEvent("open", old, 1000.0), AlarmEvent("open", new, 1000.0)])
    book.record([AlarmEvent("close", old.closed(2000.0), 2000.0)])
    assert book.query(site="SITE-C") == [new]
    assert book.query(kind=AlarmKind.HIGH_PACKET_LOSS) == [old.closed(2000.0)]
    assert book.query(since=1999.0) == [new, old.closed(2000.0)]
    assert book.query(since=2001.0) == [new]  # open: in effect since then


def test_closed_alarms_are_kept_a_week_at_most_and_bounded_in_number() -> None:
    book = AlarmBook(closed_kept_max=2)
    for number in range(3):
        item = alarm(subject=f"s{number}", opened_at=1000.0 + number)
        book.record(
            [AlarmEvent("open", item, 1000.0), AlarmEvent("close", item.closed(1100.0), 1100.0)]
        )
    assert [a.subject for a in book.closed_alarms()] == ["s1", "s2"]
    late = alarm(subject="late", opened_at=1101.0 + 7 * 86400)  # a week and a second later
    book.record([AlarmEvent("open", late, late.opened_at)])
    assert book.closed_alarms() == []


def test_listeners_hear_each_event_and_a_failing_one_breaks_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = AlarmBook()
    heard: list[AlarmEvent] = []

    def broken(event: AlarmEvent) -> None:
        raise RuntimeError("listener bug")

    book.add_listener(broken)
    stop = book.add_listener(heard.append)
    opened = AlarmEvent("open", alarm(), 1000.0)
    with caplog.at_level(logging.ERROR, "nettel.alarms"):
        book.record([opened])
    assert heard == [opened] and book.open_alarms() == [opened.alarm]
    assert "alarm listener failed" in caplog.text
    stop()
    book.record([AlarmEvent("close", opened.alarm.closed(1100.0), 1100.0)])
    assert heard == [opened]
