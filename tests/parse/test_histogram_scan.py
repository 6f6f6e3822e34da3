"""The C histogram scanner: exact numbers, placeholders, and parse results equal to orjson's path.

The reference for every comparison is the general path (orjson decodes the whole body), which
`parse_messages` takes when the scan is replaced by one that finds nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from service.errors import RejectedInput, RejectReason
from service.parse import perfsonar
from service.parse.histogram import repeats_a_delay
from service.parse.histogram_scan import ScannedBatch, scan_histograms
from service.parse.limits import InputLimits
from service.parse.perfsonar import ParseResult, parse_message, parse_messages
from service.parse.records import MeasurementKind
from tests.message_factory import BASE_TS, meta, sample_body

#: The C scanner itself (an optional build: without it, the Python path's tests still run).
_histogram_scan = pytest.importorskip("service.parse._histogram_scan")

DELAY = MeasurementKind.DELAY
LOSS = MeasurementKind.LOSS
EXAMPLES = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)


def scanned(body: bytes) -> tuple[bytes, list[float], list[int], list[int]]:
    documents, placed, delays, counts, lengths = _histogram_scan.scan([body])
    assert np.frombuffer(placed, np.int64).tolist() == [len(np.frombuffer(lengths, np.int64))]
    return (
        documents[0],
        np.frombuffer(delays, np.float64).tolist(),
        np.frombuffer(counts, np.int64).tolist(),
        np.frombuffer(lengths, np.int64).tolist(),
    )


def test_plain_histograms_become_placeholders_and_arrays() -> None:
    histograms = b'{"60": {"2.72": 4, "2.80" : 2,"-0.5":0}, "120": {"7":1}}'
    body = b'{"meta": {"a": "b"}, "datapoints": ' + histograms + b"}"
    document, delays, counts, lengths = scanned(body)
    assert document == b'{"meta": {"a": "b"}, "datapoints": {"60": "\\u00000", "120": "\\u00001"}}'
    assert orjson.loads(document)["datapoints"] == {"60": "\x000", "120": "\x001"}
    assert delays == [2.72, 2.80, -0.5, 7.0]
    assert counts == [4, 2, 0, 1]
    assert lengths == [3, 1]


def test_placeholder_indexes_count_across_the_batch() -> None:
    one = b'{"datapoints": {"60": {"1.5": 3}}}'
    documents, placed, _, _, lengths = _histogram_scan.scan([one, b"{}", one, b""])
    assert np.frombuffer(placed, np.int64).tolist() == [1, 0, 1, 0]
    assert documents[2] == b'{"datapoints": {"60": "\\u00001"}}'
    assert documents[1] == b"{}" and documents[3] == b""
    assert np.frombuffer(lengths, np.int64).tolist() == [1, 1]


@pytest.mark.parametrize(
    "text",
    [
        "{}",  # empty: the general path refuses it
        '{"2.5": 3.0}',  # a float count
        '{"2.5": -1}',
        '{"2.5": 01}',  # not JSON
        '{"2.5": 1000000000}',  # ten digits
        '{"2.5": true}',
        '{"1e3": 1}',
        '{"2.": 1}',
        '{".5": 1}',
        '{" 2.5": 1}',
        '{"2.5 ": 1}',
        '{"+2.5": 1}',
        '{"nan": 1}',
        '{"1234567890.123456": 1}',  # sixteen digits
        '{"2.5": 1,}',
        '{"2.5": 1 "2.6": 1}',
        '{"2.5" 1}',
        '{"2.5": 1]',
    ],
)
def test_anything_but_the_plain_form_is_left_in_place(text: str) -> None:
    body = b'{"datapoints": {"60": ' + text.encode() + b"}}"
    documents, placed, delays, _, _ = _histogram_scan.scan([body])
    assert documents[0] is body
    assert np.frombuffer(placed, np.int64).tolist() == [0]
    assert delays == b""


def test_bodies_with_a_backslash_are_left_whole() -> None:
    body = b'{"meta": {"input_source": "a\\"b"}, "datapoints": {"60": {"2.5": 1}}}'
    assert _histogram_scan.scan([body])[0][0] is body


@pytest.mark.parametrize(
    ("key", "count"),
    [
        ("999999999999999", 999_999_999),
        ("0.00000000000001", 0),
        ("123456789.012345", 7),
        ("-0.0", 1),
        ("0007.50", 3),
        ("2.675", 1),  # rounds below its decimal value in binary
    ],
)
def test_numbers_are_exactly_those_of_float_and_json(key: str, count: int) -> None:
    _, delays, counts, _ = scanned(b'{"datapoints": {"60": {"%s": %d}}}' % (key.encode(), count))
    assert delays[0].hex() == float(key).hex()  # bit for bit, sign of zero included
    assert math.copysign(1, delays[0]) == math.copysign(1, float(key))
    assert counts == [count]


@given(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), st.integers(0, 15))
@EXAMPLES
def test_any_short_decimal_key_converts_like_float(value: float, decimals: int) -> None:
    key = f"{value:.{decimals}f}"
    if sum(ch.isdigit() for ch in key) > 15:
        return
    _, delays, _, _ = scanned(b'{"d": {"%s": 1}}' % key.encode())
    assert delays[0].hex() == float(key).hex()


def test_scan_refuses_what_is_not_bytes() -> None:
    with pytest.raises(TypeError, match="body 1 is not bytes"):
        _histogram_scan.scan([b"{}", "{}"])


def test_repeated_delays_are_found_per_histogram() -> None:
    delays = np.array([1.0, 2.0, 1.0, 5.0, 6.0, 7.0, 3.0, 3.0, 60000.0, 70000.0])
    lengths = np.array([3, 3, 2, 2])
    # the last: two delays beyond the clock-error bound, reported (conservatively) as repeats
    assert repeats_a_delay(delays, lengths).tolist() == [True, False, True, True]
    assert repeats_a_delay(np.array([]), np.array([], dtype=np.int64)).tolist() == []


def test_limits_mark_scanned_histograms_unusable() -> None:
    body = b'{"datapoints": {"60": {"1": 1, "2": 1, "3": 1}, "120": {"1": 1}}}'
    assert scan_histograms([body, None, "text"], max_buckets=2).unusable.tolist() == [True, False]


def test_real_sample_through_the_scanner() -> None:
    body = sample_body("owdelay-histogram-real.json")
    assert _histogram_scan.scan([body])[0][0] != body
    (_, stats) = parse_message(DELAY, body).delays[0]
    assert (stats.packets, stats.median, stats.minimum) == (600, 2.60, 2.51)
    assert stats.mean == pytest.approx(2.9321, abs=1e-4)


# --- equal to the general path -------------------------------------------------------------


def general_path(
    frames: list[tuple[MeasurementKind, bytes]], limits: InputLimits, monkeypatch: Any
) -> list[ParseResult]:
    def scan_nothing(bodies: Any, max_buckets: int) -> ScannedBatch:
        return scan_histograms([None] * len(bodies), max_buckets)

    with monkeypatch.context() as patch:
        patch.setattr(perfsonar, "scan_histograms", scan_nothing)
        return parse_messages(frames, limits)


def comparable(result: ParseResult) -> Any:
    if isinstance(result, RejectedInput):
        return ("rejected", result.reason, result.detail)
    return result


keys = st.one_of(
    st.sampled_from(["2.5", "2.50", "02.5", "-0.0", "0", "-3.25", "49999.99", "50000", "-1000"]),
    st.decimals(min_value=-2000, max_value=60000, places=3, allow_nan=False).map(str),
    st.sampled_from(["1e3", "nan", "inf", " 2.5", "2.", ".5", "1_0", "abc", "", "9" * 17]),
)
counts = st.one_of(
    st.integers(0, 700).map(str),
    st.sampled_from(["0", "1000000000", "999999999", "-1", "3.0", "true", "null", '"5"', "1e2"]),
)
spaces = st.sampled_from(["", " ", "\n  ", "\t"])


@st.composite
def histogram_texts(draw: st.DrawFn) -> str:
    pairs = draw(st.lists(st.tuples(keys, counts, spaces, spaces), min_size=0, max_size=12))
    if pairs and draw(st.booleans()):  # a key given twice
        pairs.append(draw(st.sampled_from(pairs)))
    items = [f'"{key}"{before}:{after}{count}' for key, count, before, after in pairs]
    return "{" + draw(spaces) + ("," + draw(spaces)).join(items) + draw(spaces) + "}"


@st.composite
def delay_bodies(draw: st.DrawFn) -> bytes:
    minutes = draw(st.lists(st.integers(0, 3), min_size=1, max_size=3))
    datapoints = [f'"{BASE_TS + 60 * m}": {draw(histogram_texts())}' for m in minutes]
    if draw(st.integers(0, 9)) == 0:
        datapoints.append(f'"{BASE_TS}": "\\u00000"')  # looks like a placeholder
    if draw(st.integers(0, 9)) == 0:
        datapoints.append('{"1.5": 2}: {"2.5": 1}')  # a histogram as a key: not JSON
    meta_text = orjson.dumps(meta()).decode()
    if draw(st.integers(0, 9)) == 0:  # a plain histogram where no datapoint is
        meta_text = meta_text[:-1] + ', "extra": {"1.5": 2}}'
    text = '{"meta": ' + meta_text + ', "datapoints": {' + ", ".join(datapoints) + "}}"
    if draw(st.integers(0, 19)) == 0:
        text = text[: draw(st.integers(0, len(text)))]  # cut short: not JSON
    return text.encode()


@given(
    bodies=st.lists(delay_bodies(), min_size=1, max_size=4),
    max_buckets=st.sampled_from([10_000, 3]),
)
@EXAMPLES
def test_parse_results_equal_the_general_path(
    bodies: list[bytes], max_buckets: int, monkeypatch_module: Any
) -> None:
    frames = [(DELAY, body) for body in bodies] + [(LOSS, b'{"datapoints": {"60": 0.1}}')]
    limits = InputLimits(max_buckets=max_buckets)
    expected = [comparable(r) for r in general_path(frames, limits, monkeypatch_module)]
    assert [comparable(r) for r in parse_messages(frames, limits)] == expected


@pytest.fixture(scope="module")
def monkeypatch_module() -> Any:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_a_string_limit_below_the_scanners_keys_parses_everything_generally(
    monkeypatch_module: Any,
) -> None:
    short_meta = orjson.dumps(meta(source_host=None, destination_host=None))  # IPs only
    body = b'{"meta": %s, "datapoints": {"%d": {"2.615": 3, "2.6": 1}}}' % (short_meta, BASE_TS)
    limits = InputLimits(max_string_length=15)  # too short for a 17-character key, not for IPs
    expected = general_path([(DELAY, body)], limits, monkeypatch_module)
    (result,) = parse_messages([(DELAY, body)], limits)
    assert comparable(result) == comparable(expected[0])
    long_key = b"1234567890.12345"
    body = body.replace(b"2.615", long_key)
    (result,) = parse_messages([(DELAY, body)], limits)
    assert result.rejected == [(RejectReason.BAD_VALUE, "bucket delay is longer than the limit")]
