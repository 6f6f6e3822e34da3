"""Alarm state in --state-dir: round trip, a restart that neither loses nor re-fires, and
damaged files refused whole."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from service.alarms.store import (
    BOOK_NAME,
    ENGINE_NAME,
    AlarmStateError,
    AlarmStore,
    book_checksum,
    decode_book,
    decode_engine,
    encode_book,
    encode_engine,
)
from tests.alarms.mesh import START, Judge, Mesh


def faulty_mesh() -> tuple[Mesh, Judge, np.ndarray]:
    """A mesh whose first link lost every packet for three minutes: one alarm open."""
    mesh = Mesh()
    judge = Judge(mesh)
    judge.calm(range(START, START + 40))
    loss = np.zeros(len(mesh))
    loss[0] = 1.0
    for minute in range(START + 40, START + 43):
        judge.minute(minute, loss=loss)
    assert len(judge.opened()) == 1
    return mesh, judge, loss


def test_the_book_and_the_engine_round_trip(tmp_path: Path) -> None:
    _, judge, _ = faulty_mesh()
    store = AlarmStore(tmp_path)
    store.save(judge.book, judge.engine)
    book = decode_book((tmp_path / BOOK_NAME).read_bytes())
    assert book.open == judge.book.open_alarms()
    assert book.events_total == dict(judge.book.events_total)
    saved, now = decode_engine((tmp_path / ENGINE_NAME).read_bytes()), judge.engine.export()
    assert saved.last_minute == now.last_minute == START + 42
    assert (saved.sources, saved.destinations) == (now.sources, now.destinations)
    assert np.array_equal(saved.weights, now.weights)
    assert np.array_equal(saved.offset, now.offset)
    for condition, latches in now.latches.items():
        assert np.array_equal(saved.latches[condition].latched, latches.latched)
        assert np.array_equal(saved.latches[condition].onset, latches.onset)


def test_a_restart_neither_loses_nor_re_fires_an_open_alarm(tmp_path: Path) -> None:
    mesh, judge, loss = faulty_mesh()
    (opened,) = judge.opened()
    AlarmStore(tmp_path).save(judge.book, judge.engine)
    restarted = Judge(mesh)
    AlarmStore(tmp_path).load(restarted.book, restarted.engine)
    assert restarted.book.open_alarms() == [opened.alarm]
    for minute in range(START + 43, START + 46):  # the loss goes on: nothing new
        restarted.minute(minute, loss=loss)
    assert restarted.events == []
    restarted.calm(range(START + 46, START + 51))  # then it ends: the same alarm closes
    (closed,) = restarted.closed()
    assert closed.alarm.id == opened.alarm.id and restarted.opened() == []


def test_a_restart_after_missed_minutes_catches_up_on_what_the_window_holds(
    tmp_path: Path,
) -> None:
    mesh, judge, loss = faulty_mesh()
    AlarmStore(tmp_path).save(judge.book, judge.engine)
    for minute in range(START + 43, START + 53):  # the loss ends while the service is down
        mesh.feed(minute)
    restarted = Judge(mesh)
    AlarmStore(tmp_path).load(restarted.book, restarted.engine)
    restarted.minute(START + 53)
    (closed,) = restarted.closed()
    assert closed.alarm.id == judge.opened()[0].alarm.id


@pytest.mark.parametrize("name", [BOOK_NAME, ENGINE_NAME])
def test_a_damaged_file_is_refused_whole_and_moved_aside(
    tmp_path: Path, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    _, judge, _ = faulty_mesh()
    AlarmStore(tmp_path).save(judge.book, judge.engine)
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x40
    path.write_bytes(bytes(data))
    fresh = Judge(Mesh())
    with caplog.at_level(logging.ERROR, "nettel.alarms"):
        AlarmStore(tmp_path).load(fresh.book, fresh.engine)
    assert "alarm state unusable" in caplog.text
    assert not path.exists() and len(list(tmp_path.glob(f"{name}.rejected-*"))) == 1
    if name == BOOK_NAME:
        assert fresh.book.open_alarms() == []
        assert fresh.engine.last_minute == START + 42  # the engine's file was fine
    else:
        assert len(fresh.book.open_alarms()) == 1 and fresh.engine.last_minute is None


def book_document(judge: Judge) -> dict[str, Any]:
    document: dict[str, Any] = orjson.loads(encode_book(judge.book))
    return document


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.update(version=2), "not format version 1"),
        (lambda d: d["book"]["open"][0].update(kind="meltdown"), "unknown alarm kind"),
        (lambda d: d["book"]["open"][0].update(id="XYZ"), "an alarm id"),
        (lambda d: d["book"]["open"][0].update(ended_at=1.0), "an open alarm with an end"),
        (lambda d: d["book"]["open"][0].update(started_at=2e12), "time"),
        (lambda d: d["book"]["open"][0]["evidence"].update(loss=[1]), "not a number or text"),
        (lambda d: d["book"]["open"].append(d["book"]["open"][0]), "two open alarms"),
        (lambda d: d["book"]["events"].append(["high packet loss", "open", -1]), "event count"),
    ],
)
def test_the_book_is_checked_field_by_field(change: object, problem: str) -> None:
    _, judge, _ = faulty_mesh()
    document = book_document(judge)
    change(document)  # type: ignore[operator]
    document["checksum"] = book_checksum(document["book"])  # damage the checksum does not catch
    with pytest.raises(AlarmStateError, match=problem):
        decode_book(orjson.dumps(document))


def test_engine_arrays_that_disagree_are_refused() -> None:
    _, judge, _ = faulty_mesh()
    state = judge.engine.export()
    state.weights[0, 0] = -1.0  # a negative weight: no baseline gives one
    with pytest.raises(AlarmStateError, match="baseline weights"):
        decode_engine(encode_engine(state))
    state = judge.engine.export()
    state.sources.append("10.9.9.9")  # a row more in the index than in the arrays
    state.destinations.append("10.9.9.8")
    with pytest.raises(AlarmStateError, match="shape"):  # the first array checked
        decode_engine(encode_engine(state))
