"""The tuple form that parser processes send back decodes to the very records parsed in-thread."""

from __future__ import annotations

import pickle

from service.errors import RejectedInput
from service.parse.parse_codec import (
    decode_request,
    decode_results,
    encode_request,
    encode_results,
)
from service.parse.perfsonar import parse_messages
from service.parse.records import MeasurementKind
from tests.message_factory import BASE_TS, body, sample_body

DELAY, LOSS = MeasurementKind.DELAY, MeasurementKind.LOSS


def test_round_trip_through_pickle_keeps_every_field() -> None:
    frames = [
        (DELAY, sample_body("owdelay-histogram-real.json")),
        (LOSS, sample_body("packet-loss-rate.json")),
        (LOSS, b"{not json"),
        (LOSS, body({BASE_TS: 0.5, BASE_TS + 60: 2.0, "soon": 0.1})),  # two refused datapoints
        (DELAY, body({BASE_TS: {"-5000.0": 3, "-0.5": 2, "1.25": 5}})),  # clock error + suspect
    ]
    parsed = parse_messages(frames)
    wire = pickle.loads(pickle.dumps(encode_results(parsed)))
    decoded = decode_results(wire)

    assert decoded[1:] != [] and len(decoded) == len(parsed)
    for before, after in zip(parsed, decoded, strict=True):
        if isinstance(before, RejectedInput):
            assert (after.reason, after.detail) == (before.reason, before.detail)
        else:
            assert after == before
    real = decoded[0]
    assert real.delays[0][1].packets == 600 and round(real.delays[0][1].mean, 4) == 2.9321
    assert [reason for reason, _ in decoded[3].rejected] and decoded[3].losses == [(BASE_TS, 0.5)]
    assert decoded[4].delays[0][1].clock_suspect and decoded[4].delays[0][1].dropped_packets == 3


def test_request_round_trip() -> None:
    frames = [(DELAY, b"{}"), (LOSS, "text body"), (DELAY, b"")]
    assert decode_request(pickle.loads(pickle.dumps(encode_request(frames)))) == frames


def test_wire_form_holds_only_builtins() -> None:
    """No record classes cross the pipe, so the receiving side pays no per-object reduce."""
    wire = encode_results(parse_messages([(DELAY, sample_body("owdelay-histogram-real.json"))]))
    assert b"service" not in pickle.dumps(wire)
