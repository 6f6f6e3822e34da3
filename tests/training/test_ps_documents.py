"""ps_owd / ps_packetloss archive documents: conversion, reject reasons, and the archive replay."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pyarrow")  # the training extra (Parquet)

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from service.errors import RejectedInput, RejectReason  # noqa: E402
from service.parse.records import LinkEndpoints, MeasurementKind  # noqa: E402
from tests.training.test_dataset import write_capture  # noqa: E402
from training.dataset import WARMUP_MINUTES, build_real_dataset  # noqa: E402
from training.perfsonar_archive import read_perfsonar_archive  # noqa: E402
from training.readers.ps_documents import convert_document  # noqa: E402

OWD = {
    "src": "192.41.236.31",
    "dest": "2001:0DB8::0001",
    "src_host": "psl.cern.ch",
    "dest_host": "",
    "src_site": "CERN-PROD",
    "MA": "psl.cern.ch",
    "timestamp": 1_700_000_059_999,
    "delay_mean": 71.25,
    "delay_sd": 0.5,
    "delay_median": 71.0,
}
LOSS = {**{k: OWD[k] for k in ("src", "dest", "src_host", "timestamp")}, "packet_loss": 0.0125}


def test_a_ps_owd_document_gives_the_delay_statistics_it_holds() -> None:
    [message] = convert_document(OWD)
    assert message.kind is MeasurementKind.DELAY and not message.losses
    ends = ("192.41.236.31", "2001:db8::1", "psl.cern.ch", "2001:db8::1")  # no dest_host: its IP
    assert message.link == LinkEndpoints(*ends)
    [(ts, stats)] = message.delays
    assert ts == 1_700_000_059
    assert (stats.packets, stats.mean, stats.std, stats.median) == (0, 71.25, 0.5, 71.0)
    assert math.isnan(stats.minimum) and math.isnan(stats.p95)
    assert (stats.clock_suspect, stats.dropped_packets) == (False, 0)


def test_a_ps_packetloss_document_and_an_elasticsearch_hit() -> None:
    [message] = convert_document({"_index": "ps_packetloss", "_source": LOSS})
    assert message.kind is MeasurementKind.LOSS and message.losses == [(1_700_000_059, 0.0125)]
    both = convert_document({**OWD, "packet_loss": "0.5", "timestamp": "2023-11-14T22:14:00"})
    assert [m.kind for m in both] == [MeasurementKind.DELAY, MeasurementKind.LOSS]
    assert both[1].losses == [(1_700_000_040, 0.5)]
    [negative] = convert_document({**OWD, "delay_mean": -0.5, "delay_median": 0.1})
    assert negative.delays[0][1].clock_suspect


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ([OWD], RejectReason.NOT_AN_OBJECT),
        ({k: v for k, v in OWD.items() if k != "delay_mean"}, RejectReason.MISSING_FIELD),
        ({**OWD, "src": None}, RejectReason.MISSING_FIELD),
        ({**OWD, "dest": "ps.example.org"}, RejectReason.BAD_VALUE),
        ({**OWD, "src_host": 7}, RejectReason.BAD_VALUE),
        ({k: v for k, v in OWD.items() if k != "timestamp"}, RejectReason.MISSING_FIELD),
        ({**OWD, "timestamp": -1}, RejectReason.BAD_VALUE),
        ({**OWD, "timestamp": "yesterday"}, RejectReason.BAD_VALUE),
        ({**OWD, "delay_mean": "fast"}, RejectReason.BAD_VALUE),
        ({**OWD, "delay_mean": True}, RejectReason.BAD_VALUE),
        ({**OWD, "delay_mean": float("inf")}, RejectReason.BAD_VALUE),
        ({**OWD, "delay_mean": 60_000.0}, RejectReason.CLOCK_ERROR),
        ({**OWD, "delay_median": -2000.0}, RejectReason.CLOCK_ERROR),
        ({**OWD, "delay_sd": None}, RejectReason.MISSING_FIELD),
        ({**OWD, "delay_sd": -0.1}, RejectReason.BAD_VALUE),
        ({**LOSS, "packet_loss": 1.5}, RejectReason.LOSS_OUT_OF_RANGE),
    ],
)
def test_malformed_documents_are_refused_with_serving_reasons(
    document: object, reason: RejectReason
) -> None:
    with pytest.raises(RejectedInput) as refused:
        convert_document(document)
    assert refused.value.reason is reason


def capture_as_documents(capture: Path) -> list[dict[str, object]]:
    """The ps_owd / ps_packetloss documents the OSG collector would have written for a capture."""
    documents = []
    for message in read_perfsonar_archive(capture).messages:
        link = message.link
        identity = {"src": link.source, "dest": link.destination, "src_host": link.source_host}
        identity["dest_host"] = link.destination_host
        for ts, stats in message.delays:
            documents.append(
                {**identity, "timestamp": ts * 1000, "delay_mean": stats.mean}
                | {"delay_sd": stats.std, "delay_median": stats.median}
            )
        for ts, loss in message.losses:
            documents.append({**identity, "timestamp": ts * 1000 + 7, "packet_loss": loss})
    return documents


def test_an_archive_export_replays_to_the_features_of_the_bus_capture(tmp_path: Path) -> None:
    """Exports holding the statistics of a capture's histograms give the capture's rows; bad
    documents in them are counted by reason and skipped."""
    minutes = WARMUP_MINUTES + 6
    ips, utilisation = write_capture(tmp_path / "bus", minutes)
    documents = capture_as_documents(tmp_path / "bus")
    exports = tmp_path / "exports"
    exports.mkdir()
    owd = [d for d in documents if "delay_mean" in d]
    loss = [d for d in documents if "packet_loss" in d]
    pq.write_table(pa.Table.from_pylist(owd[: len(owd) // 2]), exports / "a-ps_owd.parquet")
    hits = {"hits": {"hits": [{"_source": d} for d in owd[len(owd) // 2 :]]}}
    (exports / "b-ps_owd.json").write_text(json.dumps(hits))
    bad = ["{not json"] + [
        json.dumps(document)
        for document in (
            {**loss[0], "packet_loss": 2.0},
            {**loss[0], "src": 1},
            {"src": ips[0], "dest": ips[1], "timestamp": 0},  # neither delay nor loss
        )
    ]
    lines = [json.dumps(d) for d in loss] + bad
    (exports / "c-ps_packetloss.jsonl").write_text("\n".join(lines) + "\n")
    router_map = write_router_map(tmp_path, ips, utilisation)

    from_bus = build_real_dataset(tmp_path / "bus", router_map, "ratio")
    from_exports = build_real_dataset(exports, router_map, "ratio")

    np.testing.assert_array_equal(from_exports.features, from_bus.features)
    np.testing.assert_array_equal(from_exports.label, from_bus.label)
    np.testing.assert_array_equal(from_exports.minute, from_bus.minute)
    assert len(from_bus) == 2 * (minutes - WARMUP_MINUTES)  # both links, after the warm-up
    assert from_exports.description["rejected"] == {
        "invalid_json": 1,
        "loss_out_of_range": 1,
        "bad_value": 1,
        "missing_field": 1,
    }
    assert from_exports.description["records"] == len(documents) + 4
    assert from_bus.description["rejected"] == {}


def write_router_map(
    directory: Path, ips: list[str], utilisation: np.ndarray, first: int | None = None
) -> Path:
    """A router map labelling both links of `write_capture` (from minute `first`, the capture's
    default unless given) through per-minute flow files."""
    from tests.training.test_dataset import FIRST

    first = FIRST if first is None else first
    links = []
    for link, (source, destination) in enumerate(((0, 1), (1, 0))):
        flows = [
            {"data": {"src_site": "A", "dst_site": "B", "timestamp": (first + k) * 60}}
            for k in range(utilisation.shape[1])
        ]
        for k, flow in enumerate(flows):
            flow["data"]["throughput"] = float(utilisation[link, k]) * 10e9
        name = f"flows-{link}.jsonl"
        (directory / name).write_text("\n".join(json.dumps(f) for f in flows))
        links.append(
            {"source": ips[source], "destination": ips[destination], "file": name}
            | {"format": "lhcopn_flows", "series": "A->B", "capacity_bps": 10e9}
        )
    path = directory / "map.json"
    path.write_text(json.dumps({"links": links}))
    return path
