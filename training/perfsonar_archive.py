"""The perfSONAR archive of `--perfsonar-dir`: bus captures and ps_owd/ps_packetloss exports.

Files read, in name order: ``*.jsonl`` (one record a line; ``*.jsonl.gz`` the same, gzip
compressed), ``*.json`` (an array of records, an Elasticsearch search answer
``{"hits": {"hits": [...]}}`` or one record) and ``*.parquet`` (one document a row). The
layout is told apart record by record from the content: a record with a ``body`` is a captured
bus message (``{"destination": "/topic/perfsonar.raw.<event-type>", "body": ...}`` or
``{"headers": {...}, "body": ...}``), parsed with
``service.parse.perfsonar.parse_messages`` in batches; any other is an archive document
(``training.readers.ps_documents``). Records and datapoints the service would refuse are
skipped and counted by serving's reject reason; captured messages of other event types are
skipped without counting. The per-record functions here are what the Spark job runs too.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any, TextIO

import orjson

from service.errors import RejectedInput, RejectReason
from service.parse.perfsonar import parse_messages
from service.parse.records import MeasurementKind, ParsedMessage
from training.readers.ps_documents import DOCUMENT_FIELDS, convert_document

ARCHIVE_PATTERNS = ("*.jsonl", "*.jsonl.gz", "*.json", "*.parquet")
PARQUET_BATCH_ROWS = 65_536
#: Lines parsed together (one batch of histogram statistics, as serving batches frames).
RECORDS_PER_BATCH = 4_096
#: Text that is not JSON (refused as invalid_json).
_UNREADABLE = object()
_KINDS = {kind.value: kind for kind in MeasurementKind}


@dataclass
class RecordOutcome:
    """What one archive record gave: accepted messages and the reasons of refused parts."""

    messages: list[ParsedMessage] = field(default_factory=list)
    rejected: list[RejectReason] = field(default_factory=list)


@dataclass
class ArchiveRead:
    """Every accepted message of an archive directory, in file and record order, and the
    number of refused records or datapoints per reject reason."""

    messages: list[ParsedMessage]
    rejected: Counter[str]
    records: int


def archive_files(directory: Path) -> list[Path]:
    """The archive files of `directory`, in name order."""
    found = {path for pattern in ARCHIVE_PATTERNS for path in Path(directory).glob(pattern)}
    return sorted(path for path in found if path.is_file())


def read_perfsonar_archive(directory: Path) -> ArchiveRead:
    """Read every archive file of `directory` (see the module docstring)."""
    files = archive_files(directory)
    if not files:
        raise ValueError(f"{directory}: no *.jsonl(.gz), *.json or *.parquet archive files")
    messages: list[ParsedMessage] = []
    rejected: Counter[str] = Counter()
    records = 0
    for path in files:
        for outcome in read_archive_file(path):
            records += 1
            messages += outcome.messages
            rejected.update(reason.value for reason in outcome.rejected)
    return ArchiveRead(messages, rejected, records)


def read_archive_file(path: Path) -> Iterator[RecordOutcome]:
    """The outcome of each record of one archive file."""
    if path.suffix == ".parquet":
        for documents in parquet_document_batches(path):
            yield from convert_records(documents)
    elif path.suffix == ".json":
        yield from parse_json_file(path.read_text())
    else:
        with _open_lines(path) as lines:
            records = (line for line in lines if line.strip())
            while chunk := list(islice(records, RECORDS_PER_BATCH)):
                yield from parse_lines(chunk)


def _open_lines(path: Path) -> TextIO:
    """A JSON lines file as text (``*.jsonl.gz`` decompressed)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def parse_lines(lines: Sequence[str]) -> list[RecordOutcome]:
    """JSON lines, each a captured bus message or an archive document."""
    return convert_records([_load_json(line) for line in lines])


def _load_json(text: str) -> Any:
    """The parsed text; `_JsonOnly` of it when only Python's json reads it; `_UNREADABLE`."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return _JsonOnly(json.loads(text))
    except json.JSONDecodeError:
        return _UNREADABLE


@dataclass(frozen=True)
class _JsonOnly:
    """A record only Python's json reads (NaN, Infinity, integers past 64 bits): its bus body
    is written back by json too, so the parser sees those values as the bus carried them."""

    record: Any


def parse_json_file(text: str) -> list[RecordOutcome]:
    """Every record of a ``*.json`` file (array, search answer or single record)."""
    document = _load_json(text)
    if document is _UNREADABLE:
        return [RecordOutcome(rejected=[RejectReason.INVALID_JSON])]
    if isinstance(document, _JsonOnly):
        return convert_records([_JsonOnly(record) for record in json_records(document.record)])
    return convert_records(json_records(document))


def json_records(document: Any) -> list[Any]:
    """The records of a parsed ``*.json`` file.

    >>> json_records({"hits": {"hits": [{"_source": {}}]}})
    [{'_source': {}}]
    """
    if isinstance(document, list):
        return document
    hits = document.get("hits") if isinstance(document, dict) else None
    if isinstance(hits, dict) and isinstance(hits.get("hits"), list):
        return list(hits["hits"])
    return [document]


def convert_records(records: Sequence[Any]) -> list[RecordOutcome]:
    """The outcome of each parsed record of either layout; refusals become reasons, never
    exceptions. The bus messages among them are parsed as one batch, as serving parses a
    batch of frames (its histogram statistics are computed for the whole batch at once)."""
    outcomes: list[RecordOutcome] = []
    frames: list[tuple[MeasurementKind, bytes | str]] = []
    parsed_later: list[RecordOutcome] = []
    for record in records:
        outcome = RecordOutcome()
        outcomes.append(outcome)
        try:
            encode: Callable[[Any], bytes | str] = orjson.dumps
            if isinstance(record, _JsonOnly):
                record, encode = record.record, json.dumps
            if record is _UNREADABLE:
                outcome.rejected.append(RejectReason.INVALID_JSON)
            elif isinstance(record, dict) and "body" in record:
                frame = _bus_frame(record, encode)
                if frame is not None:
                    frames.append(frame)
                    parsed_later.append(outcome)
            else:
                outcome.messages += convert_document(record)
        except RejectedInput as refused:
            outcome.rejected.append(refused.reason)
    for outcome, result in zip(parsed_later, parse_messages(frames), strict=True):
        if isinstance(result, RejectedInput):
            outcome.rejected.append(result.reason)
        else:
            outcome.messages.append(result)
            outcome.rejected += [reason for reason, _ in result.rejected]
    return outcomes


def _bus_frame(
    record: dict[str, Any], encode: Callable[[Any], bytes | str]
) -> tuple[MeasurementKind, bytes | str] | None:
    """A captured bus message as the service receives it (None: not a raw latency event); a
    body held as JSON rather than as its text is written back with `encode`."""
    headers = record.get("headers", {})
    if not isinstance(headers, dict):
        raise RejectedInput(RejectReason.BAD_VALUE, "headers is not an object")
    headers = {**headers, **{k: record[k] for k in ("destination",) if k in record}}
    kind = capture_kind(headers)
    if kind is None:
        return None
    body = record["body"]
    return kind, body if isinstance(body, str) else encode(body)


def capture_kind(headers: dict[str, Any]) -> MeasurementKind | None:
    """The raw latency event type a captured message's headers name (None for others)."""
    event = str(headers.get("event-type") or str(headers.get("destination", "")).rsplit(".", 1)[-1])
    is_raw = "summary" not in str(headers.get("destination", ""))
    return _KINDS.get(event) if is_raw else None


def parquet_document_batches(path: Path) -> Iterator[list[dict[str, Any]]]:
    """The rows of a Parquet export as documents (only the columns documents use), a batch
    at a time."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    columns = [name for name in parquet.schema_arrow.names if name in DOCUMENT_FIELDS]
    for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
        yield batch.to_pylist()
