"""The alarms in `--state-dir`: the book as JSON, the engine's per-link arrays beside it.

Two files, each replaced atomically (temporary file, fsync, rename, fsync of the directory):

- `alarms.json`: `{"version": 1, "checksum": ..., "book": {"open": [...], "closed": [...],
  "events": [...]}}`, each alarm with its id, kind, subject, sites, hosts, links, times and
  evidence; the checksum is the sha256 of the book as JSON with sorted keys;
- `alarm-engine.state`: `MAGIC | sha256 of payload | payload`, the payload an uncompressed
  numpy `.npz` (read without pickle) of the engine's arrays: the delay baselines, the latches,
  and the (source, destination) of every row so that rows find their links again.

Both are read back as strictly as a snapshot from elsewhere (`service.persistence.
snapshot_checks`): every field's type and range, every array's name, type and shape, and
their agreement; a file that fails is refused whole, moved aside (`.rejected-<time>`) with the
reason logged, and the engine or the book starts empty. So a restart neither loses the open
alarms nor raises them again (same ids: the book holds them; the latches still latched).
"""

from __future__ import annotations

import hashlib
import io
import logging
import math
import os
import re
import time
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from service.alarms.baseline import BINS, EMPTY
from service.alarms.book import AlarmBook, EventKey
from service.alarms.engine import AlarmEngine, EngineState
from service.alarms.grouping import LinkCondition
from service.alarms.latches import NO_ONSET, Latches
from service.alarms.records import Alarm, AlarmKind

BOOK_NAME = "alarms.json"
ENGINE_NAME = "alarm-engine.state"
FORMAT_VERSION = 1
MAGIC = b"NTALARM\x01"
#: Longest text kept in a saved alarm (subjects, names, evidence strings).
_MAX_TEXT = 1024
_ID = re.compile(r"^[0-9a-f]{16}$")


class AlarmStateError(ValueError):
    """A saved alarm state this version cannot trust."""


# -- the book ----------------------------------------------------------------------------------


def encode_book(book: AlarmBook) -> bytes:
    content = {
        "open": [alarm_document(alarm) for alarm in book.open_alarms()],
        "closed": [alarm_document(alarm) for alarm in book.closed_alarms()],
        "events": [
            [kind.value, action, count]
            for (kind, action), count in sorted(book.events_total.items())
        ],
    }
    return orjson.dumps(
        {"version": FORMAT_VERSION, "checksum": book_checksum(content), "book": content}
    )


def book_checksum(content: object) -> str:
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True)
class SavedBook:
    open: list[Alarm]
    closed: list[Alarm]
    events_total: dict[EventKey, int]


def decode_book(data: bytes) -> SavedBook:
    """The saved book; AlarmStateError names the first thing wrong."""
    try:
        document = orjson.loads(data)
    except orjson.JSONDecodeError as error:
        raise AlarmStateError(f"not JSON: {error}") from None
    _expect(isinstance(document, dict), "not a JSON object")
    _expect(document.get("version") == FORMAT_VERSION, f"not format version {FORMAT_VERSION}")
    book = document.get("book")
    _expect(isinstance(book, dict) and set(book) == {"open", "closed", "events"}, "no book")
    _expect(document.get("checksum") == book_checksum(book), "checksum mismatch (corrupt)")
    open_alarms = [alarm_from_document(item, closed=False) for item in _list(book["open"])]
    closed = [alarm_from_document(item, closed=True) for item in _list(book["closed"])]
    subjects = [(alarm.kind, alarm.subject) for alarm in open_alarms]
    _expect(len(set(subjects)) == len(subjects), "two open alarms of one kind and subject")
    events: dict[EventKey, int] = {}
    for item in _list(book["events"]):
        _expect(isinstance(item, list) and len(item) == 3, "an event count is not a triple")
        kind, action, count = item
        _expect(action in ("open", "close"), f"event action {action!r}")
        _expect(isinstance(count, int) and 0 <= count < 2**53, f"event count {count!r}")
        events[(_kind(kind), action)] = count
    return SavedBook(open_alarms, closed, events)


def alarm_document(alarm: Alarm) -> dict[str, Any]:
    return {
        "id": alarm.id,
        "kind": alarm.kind.value,
        "subject": alarm.subject,
        "sites": list(alarm.sites),
        "hosts": list(alarm.hosts),
        "links": [list(link) for link in alarm.links],
        "started_at": alarm.started_at,
        "opened_at": alarm.opened_at,
        "ended_at": alarm.ended_at,
        "evidence": dict(alarm.evidence),
    }


def alarm_from_document(item: object, closed: bool) -> Alarm:
    """An alarm from `alarm_document`'s form, checked field by field."""
    _expect(isinstance(item, dict), "an alarm is not an object")
    assert isinstance(item, dict)
    fields = {"id", "kind", "subject", "sites", "hosts", "links", "started_at", "opened_at"}
    _expect(set(item) == fields | {"ended_at", "evidence"}, "an alarm's fields differ")
    _expect(isinstance(item["id"], str) and bool(_ID.match(item["id"])), "an alarm id")
    links = []
    for link in _list(item["links"]):
        _expect(isinstance(link, list) and len(link) == 2, "a link is not a pair")
        links.append((_text(link[0]), _text(link[1])))
    started, opened = _time(item["started_at"]), _time(item["opened_at"])
    ended = None if item["ended_at"] is None else _time(item["ended_at"])
    _expect((ended is not None) == closed, "an open alarm with an end, or a closed without")
    _expect(started <= opened and (ended is None or opened <= ended), "alarm times out of order")
    evidence = item["evidence"]
    _expect(isinstance(evidence, dict) and len(evidence) <= 64, "evidence is not an object")
    for key, value in evidence.items():
        _text(key)
        _expect(
            isinstance(value, str | int | float) and not isinstance(value, bool),
            f"evidence {key!r} is not a number or text",
        )
        if isinstance(value, float):
            _expect(math.isfinite(value), f"evidence {key!r} is not finite")
        elif isinstance(value, str):
            _text(value)
    return Alarm(
        id=item["id"],
        kind=_kind(item["kind"]),
        subject=_text(item["subject"]),
        sites=tuple(_text(site) for site in _list(item["sites"])),
        hosts=tuple(_text(host) for host in _list(item["hosts"])),
        links=tuple(links),
        started_at=started,
        opened_at=opened,
        ended_at=ended,
        evidence=evidence,
    )


# -- the engine --------------------------------------------------------------------------------

#: Per-row arrays of the engine's state: name -> dtype and whether it has BINS rows first.
_ROW_ARRAYS: dict[str, tuple[type, bool]] = {
    "baseline/weights": (np.float32, True),
    "baseline/value_sum": (np.float32, False),
    "baseline/log_jitter_sum": (np.float32, False),
    "baseline/offset": (np.int16, False),
}
_LATCH_ARRAYS = {"held": np.int16, "clean": np.int16, "latched": np.bool_, "onset": np.int32}


def encode_engine(state: EngineState) -> bytes:
    arrays: dict[str, np.ndarray] = {
        "baseline/weights": state.weights,
        "baseline/value_sum": state.value_sum,
        "baseline/log_jitter_sum": state.log_jitter_sum,
        "baseline/offset": state.offset,
    }
    for condition, latches in state.latches.items():
        arrays |= latches.arrays(f"latches/{condition.value}")
    arrays |= state.clock.arrays("clock")
    arrays |= {f"rows/{name}": array for name, array in state.rows.items()}
    arrays |= {f"hosts/{name}": array for name, array in state.hosts.items()}
    index = {
        "version": FORMAT_VERSION,
        "last_minute": state.last_minute,
        "epoch_minute": state.epoch_minute,
        "sources": state.sources,
        "destinations": state.destinations,
        "clock_hosts": state.clock_hosts,
    }
    arrays["index"] = np.frombuffer(orjson.dumps(index), dtype=np.uint8)
    payload = io.BytesIO()
    np.savez(payload, allow_pickle=False, **arrays)
    body = payload.getvalue()
    return MAGIC + hashlib.sha256(body).digest() + body


def decode_engine(data: bytes) -> EngineState:
    """The saved engine state; AlarmStateError names the first thing wrong."""
    _expect(data[:8] == MAGIC, "not a nettel alarm engine state of format version 1")
    body = data[40:]
    _expect(hashlib.sha256(body).digest() == data[8:40], "checksum mismatch (corrupt)")
    try:
        with np.load(io.BytesIO(body), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as error:
        raise AlarmStateError(f"unreadable arrays: {error}") from None
    index = _engine_index(arrays.pop("index", None))
    n = len(index["sources"])
    hosts = len(index["clock_hosts"])
    # a condition's latches come whole or not at all (a state saved before its rule existed)
    saved = [c for c in LinkCondition if f"latches/{c.value}/held" in arrays]
    expected = set(_ROW_ARRAYS)
    expected |= {f"latches/{c.value}/{name}" for c in saved for name in _LATCH_ARRAYS}
    expected |= {f"clock/{name}" for name in _LATCH_ARRAYS}
    extra = {name for name in arrays if name.startswith(("rows/", "hosts/"))}
    _expect(set(arrays) - extra == expected, "the arrays differ from this version's")
    for name in extra:
        array = arrays[name]
        size = n if name.startswith("rows/") else hosts
        _expect(array.ndim in (1, 2) and len(array) == size, f"{name}: shape")
        _expect(array.dtype.kind in "fiu", f"{name}: type")
        _expect(bool(np.isfinite(array).all()), f"{name} not finite")
    for name, (dtype, binned) in _ROW_ARRAYS.items():
        _shape(arrays, name, dtype, (BINS, n) if binned else (n,))
    for prefix, size in [(f"latches/{c.value}", n) for c in saved] + [("clock", hosts)]:
        for name, dtype in _LATCH_ARRAYS.items():
            _shape(arrays, f"{prefix}/{name}", dtype, (size,))
    _check_engine_arrays(arrays, saved)
    return EngineState(
        last_minute=index["last_minute"],
        epoch_minute=index["epoch_minute"],
        sources=index["sources"],
        destinations=index["destinations"],
        clock_hosts=index["clock_hosts"],
        weights=arrays["baseline/weights"],
        value_sum=arrays["baseline/value_sum"],
        log_jitter_sum=arrays["baseline/log_jitter_sum"],
        offset=arrays["baseline/offset"],
        latches={
            c: _latches(arrays, f"latches/{c.value}") if c in saved else Latches.empty(n)
            for c in LinkCondition
        },
        clock=_latches(arrays, "clock"),
        rows={name[5:]: arrays[name] for name in extra if name.startswith("rows/")},
        hosts={name[6:]: arrays[name] for name in extra if name.startswith("hosts/")},
    )


def _engine_index(raw: np.ndarray | None) -> dict[str, Any]:
    _expect(raw is not None and raw.dtype == np.uint8 and raw.ndim == 1, "no index")
    assert raw is not None
    try:
        index = orjson.loads(raw.tobytes())
    except orjson.JSONDecodeError:
        raise AlarmStateError("index is not JSON") from None
    _expect(isinstance(index, dict), "index is not an object")
    keys = {"version", "last_minute", "epoch_minute", "sources", "destinations", "clock_hosts"}
    _expect(set(index) == keys and index["version"] == FORMAT_VERSION, "index fields differ")
    last = index["last_minute"]
    _expect(last is None or (isinstance(last, int) and 0 <= last < 2**31), "last_minute")
    _expect(isinstance(index["epoch_minute"], int) and index["epoch_minute"] >= 0, "epoch")
    for name in ("sources", "destinations", "clock_hosts"):
        index[name] = [_text(value) for value in _list(index[name])]
    _expect(len(index["sources"]) == len(index["destinations"]), "sources and destinations")
    checked: dict[str, Any] = index
    return checked


def _check_engine_arrays(arrays: Mapping[str, np.ndarray], saved: list[LinkCondition]) -> None:
    weights = arrays["baseline/weights"]
    _expect(bool(np.isfinite(weights).all() and (weights >= 0).all()), "baseline weights")
    for name in ("baseline/value_sum", "baseline/log_jitter_sum"):
        _expect(bool(np.isfinite(arrays[name]).all()), f"{name} not finite")
    offset = arrays["baseline/offset"].astype(np.int64)
    empty = offset == EMPTY
    _expect(bool((empty | ((offset > -1000) & (offset < 1000))).all()), "baseline offset")
    _expect(bool((weights[:, empty] == 0).all()), "weight in an empty baseline")
    prefixes = [f"latches/{c.value}" for c in saved] + ["clock"]
    for prefix in prefixes:
        held, clean = arrays[f"{prefix}/held"], arrays[f"{prefix}/clean"]
        onset = arrays[f"{prefix}/onset"]
        _expect(bool(((held >= 0) & (clean >= 0)).all()), f"{prefix} run counts")
        _expect(bool(((held == 0) | (clean == 0)).all()), f"{prefix} runs of both kinds")
        _expect(bool((onset >= NO_ONSET).all()), f"{prefix} onsets")


def _latches(arrays: Mapping[str, np.ndarray], prefix: str) -> Latches:
    return Latches(*(arrays[f"{prefix}/{name}"].copy() for name in _LATCH_ARRAYS))


def _shape(
    arrays: Mapping[str, np.ndarray], name: str, dtype: type, shape: tuple[int, ...]
) -> None:
    array = arrays[name]
    _expect(array.dtype == np.dtype(dtype) and array.shape == shape, f"{name}: type or shape")


# -- files -------------------------------------------------------------------------------------


class AlarmStore:
    """Reads and writes the alarm state files of one state directory."""

    def __init__(self, directory: Path, log: logging.Logger | None = None) -> None:
        self.directory = directory
        self._log = log or logging.getLogger("nettel.alarms")
        directory.mkdir(parents=True, exist_ok=True)

    def save(self, book: AlarmBook, engine: AlarmEngine) -> None:
        """Write both files (the engine's first: a crash between leaves the older book, whose
        open alarms the newer latches still hold)."""
        _write_atomically(self.directory / ENGINE_NAME, encode_engine(engine.export()))
        _write_atomically(self.directory / BOOK_NAME, encode_book(book))

    def load(self, book: AlarmBook, engine: AlarmEngine) -> None:
        """Restore what the files hold; a missing file restores nothing, an untrusted one is
        moved aside with the reason logged."""
        saved_book = self._read(BOOK_NAME, decode_book)
        if saved_book is not None:
            book.restore(saved_book.open, saved_book.closed, saved_book.events_total)
        saved_engine = self._read(ENGINE_NAME, decode_engine)
        if saved_engine is not None:
            engine.restore(saved_engine)
        if saved_book is not None or saved_engine is not None:
            self._log.info(
                "alarm state restored",
                extra={
                    "open_alarms": len(saved_book.open) if saved_book else 0,
                    "links": len(saved_engine.sources) if saved_engine else 0,
                },
            )

    def _read(self, name: str, decode: Any) -> Any:
        path = self.directory / name
        if not path.exists():
            return None
        try:
            return decode(path.read_bytes())
        except (OSError, AlarmStateError) as error:
            aside = path.with_name(f"{name}.rejected-{int(time.time())}")
            os.replace(path, aside)
            self._log.error(
                "alarm state unusable; moved aside, starting without it",
                extra={"error": str(error), "moved_to": str(aside)},
            )
            return None


def _write_atomically(path: Path, data: bytes) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


# -- checks ------------------------------------------------------------------------------------


def _expect(condition: bool, problem: str) -> None:
    if not condition:
        raise AlarmStateError(problem)


def _list(value: object) -> list[Any]:
    _expect(isinstance(value, list), "a list expected")
    assert isinstance(value, list)
    return value


def _text(value: object) -> str:
    _expect(isinstance(value, str) and 0 < len(value) <= _MAX_TEXT, f"text {value!r:.60}")
    assert isinstance(value, str)
    return value


def _time(value: object) -> float:
    _expect(
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value < 2**40,
        f"time {value!r:.60}",
    )
    assert isinstance(value, int | float)
    return float(value)


def _kind(value: object) -> AlarmKind:
    try:
        return AlarmKind(value if isinstance(value, str) else "")
    except ValueError:
        raise AlarmStateError(f"unknown alarm kind {value!r:.60}") from None
