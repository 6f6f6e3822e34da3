"""The archive reader parses a chunk of records as one batch, each record keeping its own
outcome, and refuses what serving refuses."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from service.errors import RejectedInput, RejectReason
from service.parse.perfsonar import parse_message
from service.parse.records import MeasurementKind
from tests.data import load_sample
from tests.message_factory import BASE_TS, DESTINATION_IP, SOURCE_IP, meta
from training.perfsonar_archive import (
    RecordOutcome,
    parse_json_file,
    parse_lines,
    read_perfsonar_archive,
)

LOSS_TOPIC = "/topic/perfsonar.raw.packet-loss-rate"


def capture_line(sample: str) -> str:
    """A bus capture line of a sample message (headers and body, the body as JSON)."""
    message = load_sample(sample)
    return json.dumps({"headers": message["headers"], "body": message["body"]})


def test_a_batch_of_lines_gives_each_record_its_own_outcome() -> None:
    document = {"src": SOURCE_IP, "dest": DESTINATION_IP, "timestamp": BASE_TS * 1000}
    lines = [
        capture_line("owdelay-histogram-real.json"),
        "{truncated",
        capture_line("packet-loss-rate.json"),
        json.dumps(document | {"packet_loss": 0.25}),
        json.dumps({"destination": "/topic/perfsonar.summary.histogram-owdelay", "body": {}}),
        json.dumps({"destination": LOSS_TOPIC, "body": {"meta": meta(), "datapoints": {}}}),
    ]
    delay, truncated, loss, archived, summary, empty = parse_lines(lines)

    ((_, stats),) = delay.messages[0].delays
    assert (stats.packets, stats.mean, stats.median) == (600, pytest.approx(2.9321, abs=5e-5), 2.6)
    assert truncated == RecordOutcome(rejected=[RejectReason.INVALID_JSON])
    assert [value for _, value in loss.messages[0].losses] == pytest.approx(
        [0.0467, 0.0667, 0.0], abs=1e-4
    )
    assert archived.messages[0].losses == [(BASE_TS, 0.25)]
    assert summary == RecordOutcome()
    assert empty == RecordOutcome(rejected=[RejectReason.EMPTY])


def test_a_body_only_pythons_json_reads_is_refused_as_serving_refuses_its_text() -> None:
    """A capture written with NaN (not JSON) carries the body text the bus carried."""
    body = {"meta": meta(), "datapoints": {str(BASE_TS): float("nan")}}
    line = json.dumps({"destination": LOSS_TOPIC, "body": body})
    with pytest.raises(RejectedInput) as serving:
        parse_message(MeasurementKind.LOSS, json.dumps(body))

    (from_line,) = parse_lines([line])
    (from_file,) = parse_json_file(f"[{line}]")
    assert from_line.rejected == from_file.rejected == [serving.value.reason]
    assert serving.value.reason is RejectReason.INVALID_JSON


def test_a_gzip_compressed_capture_reads_as_the_plain_one(tmp_path: Path) -> None:
    text = (
        capture_line("owdelay-histogram-real.json") + "\n" + capture_line("packet-loss-rate.json")
    )
    plain, compressed = tmp_path / "plain", tmp_path / "compressed"
    plain.mkdir()
    compressed.mkdir()
    (plain / "capture.jsonl").write_text(text)
    (compressed / "capture.jsonl.gz").write_bytes(gzip.compress(text.encode()))

    expected, read = read_perfsonar_archive(plain), read_perfsonar_archive(compressed)
    assert read.records == expected.records == 2
    assert read.messages == expected.messages
    assert not read.rejected
