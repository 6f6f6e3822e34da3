"""The perfSONAR archive of `--perfsonar-dir`: bus captures and ps_owd/ps_packetloss exports.

Files read, in name order: ``*.jsonl`` (one record a line), ``*.json`` (an array of records, an
Elasticsearch search answer ``{"hits": {"hits": [...]}}`` or one record) and ``*.parquet``
(one document a row). The layout is told apart record by record from the content: a record with
a ``body`` is a captured bus message (``{"destination": "/topic/perfsonar.raw.<event-type>",
"body": ...}`` or ``{"headers": {...}, "body": ...}``), parsed with
``service.parse.perfsonar.parse_message``; any other is an archive document
(``training.readers.ps_documents``). Records and datapoints the service would refuse are
skipped and counted by serving's reject reason; captured messages of other event types are
skipped without counting. The per-record functions here are what the Spark job runs too.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from service.errors import RejectedInput, RejectReason
from service.parse.perfsonar import parse_message
from service.parse.records import MeasurementKind, ParsedMessage
from training.readers.ps_documents import DOCUMENT_FIELDS, convert_document

ARCHIVE_PATTERNS = ("*.jsonl", "*.json", "*.parquet")
PARQUET_BATCH_ROWS = 65_536


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
        raise ValueError(f"{directory}: no *.jsonl, *.json or *.parquet archive files")
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
        yield from map(convert_record, parquet_documents(path))
    elif path.suffix == ".json":
        yield from parse_json_file(path.read_text())
    else:
        with path.open(encoding="utf-8") as lines:
            yield from (parse_line(line) for line in lines if line.strip())


def parse_line(line: str) -> RecordOutcome:
    """One JSON line: a captured bus message or an archive document."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return RecordOutcome(rejected=[RejectReason.INVALID_JSON])
    return convert_record(record)


def parse_json_file(text: str) -> list[RecordOutcome]:
    """Every record of a ``*.json`` file (array, search answer or single record)."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return [RecordOutcome(rejected=[RejectReason.INVALID_JSON])]
    return [convert_record(record) for record in json_records(document)]


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


def convert_record(record: Any) -> RecordOutcome:
    """A parsed record of either layout; refusals become reasons, never exceptions."""
    try:
        if isinstance(record, dict) and "body" in record:
            return _bus_record(record)
        return RecordOutcome(convert_document(record))
    except RejectedInput as refused:
        return RecordOutcome(rejected=[refused.reason])


def _bus_record(record: dict[str, Any]) -> RecordOutcome:
    headers = record.get("headers", {})
    if not isinstance(headers, dict):
        raise RejectedInput(RejectReason.BAD_VALUE, "headers is not an object")
    headers = {**headers, **{k: record[k] for k in ("destination",) if k in record}}
    kind = capture_kind(headers)
    if kind is None:
        return RecordOutcome()
    body = record["body"]
    message = parse_message(kind, body if isinstance(body, str) else json.dumps(body))
    return RecordOutcome([message], [reason for reason, _ in message.rejected])


def capture_kind(headers: dict[str, Any]) -> MeasurementKind | None:
    """The raw latency event type a captured message's headers name (None for others)."""
    event = str(headers.get("event-type") or str(headers.get("destination", "")).rsplit(".", 1)[-1])
    is_raw = "summary" not in str(headers.get("destination", ""))
    kinds = {kind.value: kind for kind in MeasurementKind}
    return kinds.get(event) if is_raw else None


def parquet_documents(path: Path) -> Iterable[dict[str, Any]]:
    """The rows of a Parquet export as documents (only the columns documents use)."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(path)
    columns = [name for name in parquet.schema_arrow.names if name in DOCUMENT_FIELDS]
    for batch in parquet.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
        yield from batch.to_pylist()
