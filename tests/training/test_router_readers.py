"""Router readers on hand-written fixtures in each format; expected values computed by hand.

All fixtures sit around the end of summer time in Europe/Zurich, 2017-10-29, when 03:00 CEST
became 02:00 CET at 01:00 UTC. Epoch 1509235200 is 2017-10-29 00:00 UTC; ``T0`` is 01:00 UTC.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from training.readers import (
    RouterDataError,
    UtilisationSeries,
    build_series,
    parse_lhcopn_flows,
    parse_router_csv,
    parse_site_snmp_json,
    parse_snmp_counters,
    read_lhcopn_flows_file,
    read_router_csv_file,
    read_site_snmp_json_file,
    read_snmp_counters_file,
    to_minutes,
)

DATA = Path(__file__).parent / "data"
TEN_GIG = 10e9
MIDNIGHT_UTC = 1509235200
T0 = MIDNIGHT_UTC + 3600
NAN = math.nan


def assert_series(
    series: UtilisationSeries, timestamps: list[int], utilisation: list[float]
) -> None:
    assert series.timestamps.dtype == np.int64
    assert series.utilisation.dtype == np.float64
    assert series.timestamps.tolist() == timestamps
    np.testing.assert_array_equal(series.utilisation, np.array(utilisation))


# --- router CSV export ---------------------------------------------------------------------

CSV_ROW_TIMES_UTC = [
    MIDNIGHT_UTC - 300,  # 01:55 CEST
    MIDNIGHT_UTC,  # 02:00 CEST, first time through the repeated hour
    MIDNIGHT_UTC + 3300,  # 02:55 CEST
    MIDNIGHT_UTC + 3600,  # 02:00 CET, second time through
    MIDNIGHT_UTC + 3900,  # 02:05 CET
    MIDNIGHT_UTC + 7200,  # 03:00 CET
]


def test_router_csv_reads_both_sections_across_the_autumn_dst_change() -> None:
    incoming, outgoing = read_router_csv_file(DATA / "rt1-cern-ral-dst.csv", capacity_bps=TEN_GIG)
    starts = [t - 300 for t in CSV_ROW_TIMES_UTC]  # rows mark the end of their 5 minutes
    assert incoming.link == outgoing.link == "rt1.cern.ch - TenGigE0/1/0/3 (LHCOPN RAL)"
    assert (incoming.direction, outgoing.direction) == ("in", "out")
    assert incoming.period_s == outgoing.period_s == 300
    assert_series(incoming, starts, [0.5, 0.25, 1.0, 0.75, 0.1, 1.05])
    assert_series(outgoing, starts, [0.1, NAN, 0.2, 0.3, 0.4, 0.0])


def test_router_csv_row_time_start_keeps_row_times() -> None:
    text = (DATA / "rt1-cern-ral-dst.csv").read_text()
    incoming, _ = parse_router_csv(text, TEN_GIG, row_time="start")
    assert incoming.timestamps.tolist() == CSV_ROW_TIMES_UTC


def test_router_csv_spring_forward_skips_the_missing_hour() -> None:
    text = csv_export(["03/26/17 01:55,5000000000", "03/26/17 03:00,2500000000"])
    incoming, _ = parse_router_csv(text, TEN_GIG, row_time="start")
    spring_midnight_utc = 1490486400  # 2017-03-26 00:00 UTC; 01:55 CET = 00:55 UTC
    assert incoming.timestamps.tolist() == [spring_midnight_utc + 3300, spring_midnight_utc + 3600]


def test_router_csv_refuses_a_time_inside_the_spring_gap() -> None:
    with pytest.raises(RouterDataError, match=r"line 3: 03/26/17 02:30 does not exist"):
        parse_router_csv(csv_export(["03/26/17 02:30,1"]), TEN_GIG)


def test_router_csv_other_time_zone() -> None:
    incoming, _ = parse_router_csv(csv_export(["10/29/17 01:00,1"]), TEN_GIG, timezone="UTC")
    assert incoming.timestamps.tolist() == [MIDNIGHT_UTC + 3600 - 300]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (["10/29/17 01:00"], r"line 3: expected 'MM/DD/YY HH:MM,<bits/s>'"),
        (["2017-10-29 01:00,5"], r"line 3: time '2017-10-29 01:00' is not MM/DD/YY HH:MM"),
        (["10/29/17 01:00,fast"], r"line 3: bits/s: not a number"),
        (["10/29/17 01:00,-5"], r"line 3: bits/s: negative rate"),
        (["10/29/17 01:05,1", "10/29/17 01:00,1"], r"line 4: 10/29/17 01:00 is not after"),
    ],
)
def test_router_csv_refuses_bad_rows_naming_the_line(rows: list[str], message: str) -> None:
    with pytest.raises(RouterDataError, match=message):
        parse_router_csv(csv_export(rows), TEN_GIG)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Bits In - Average Rate (Bits Per Second)\n10/29/17 01:00,1\n", r"no 'Router: <name>'"),
        ("Router: r\nBits In - Average Rate (Bits Per Second)\n10/29/17 01:00,1\n", r"Bits Out"),
        ("Router: r\nRouter: s\n", r"line 2: second Router: line"),
    ],
)
def test_router_csv_refuses_bad_layout(text: str, message: str) -> None:
    with pytest.raises(RouterDataError, match=message):
        parse_router_csv(text, TEN_GIG)


def test_router_csv_refuses_bad_capacity_and_zone() -> None:
    with pytest.raises(RouterDataError, match="capacity must be a positive"):
        parse_router_csv(csv_export(["10/29/17 01:00,1"]), 0)
    with pytest.raises(RouterDataError, match="unknown time zone 'Mars/Olympus'"):
        parse_router_csv(csv_export(["10/29/17 01:00,1"]), TEN_GIG, timezone="Mars/Olympus")


def test_file_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.csv"
    path.write_text(csv_export(["10/29/17 01:00,x"]))
    with pytest.raises(RouterDataError, match=r"broken\.csv: line 3"):
        read_router_csv_file(path, TEN_GIG)


def csv_export(in_rows: list[str]) -> str:
    """A minimal export: router line, the given In rows, one Out row."""
    return "\n".join(
        ["Router: rt1", "Bits In - Average Rate (Bits Per Second)", *in_rows]
        + ["Bits Out - Average Rate (Bits Per Second)", "10/29/17 04:00,0"]
    )


# --- WLCG site SNMP JSON -------------------------------------------------------------------


def test_site_json_lines_give_in_and_out_series() -> None:
    incoming, outgoing = read_site_snmp_json_file(DATA / "cern-site-snmp.jsonl", TEN_GIG)
    # UpdatedLast minus the 60 s interval; the repeated 01:02:00 snapshot counts once
    starts = [T0, T0 + 60, T0 + 180]
    assert incoming.link == outgoing.link == "CERN-PROD LHCOPN"
    assert incoming.period_s == 60
    assert_series(incoming, starts, [0.5, 1.0, 0.05])  # 625e6 B/s x 8 = 5 Gb/s -> 0.5
    assert_series(outgoing, starts, [0.25, NAN, 1.0])


def test_site_json_array_with_millisecond_and_minute_fields() -> None:
    text = (
        '[{"Description": "RAL", "UpdatedLast": 1509238800000, "InBytesPerSec": "125000000",'
        ' "OutBytesPerSec": 0, "UpdateInterval": "5 minutes", "MonitoredInterfaces": []}]'
    )
    incoming, outgoing = parse_site_snmp_json(text, TEN_GIG)
    assert_series(incoming, [T0 - 300], [0.1])
    assert_series(outgoing, [T0 - 300], [0.0])
    assert incoming.period_s == 300


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"InBytesPerSec": -1}, r"line 1: InBytesPerSec: negative rate"),
        ({"InBytesPerSec": True}, r"line 1: InBytesPerSec: expected a number"),
        ({"UpdatedLast": "yesterday"}, r"line 1: UpdatedLast: not an epoch or ISO 8601"),
        ({"UpdateInterval": "often"}, r"line 1: UpdateInterval 'often'"),
        ({"Description": ""}, r"line 1: Description must be a non-empty string"),
    ],
)
def test_site_json_refuses_bad_fields(change: dict[str, object], message: str) -> None:
    document = {
        "Description": "CERN",
        "UpdatedLast": T0,
        "InBytesPerSec": 1,
        "OutBytesPerSec": 1,
        "UpdateInterval": "60 seconds",
    }
    with pytest.raises(RouterDataError, match=message):
        parse_site_snmp_json(json.dumps(document | change), TEN_GIG)


def test_site_json_refuses_missing_field_mixed_sites_and_bad_json() -> None:
    base = '"UpdatedLast": 1, "InBytesPerSec": 1, "OutBytesPerSec": 1, "UpdateInterval": 60'
    with pytest.raises(RouterDataError, match=r"line 1: missing field 'Description'"):
        parse_site_snmp_json("{" + base + "}", TEN_GIG)
    mixed = '{"Description": "A", ' + base + '}\n{"Description": "B", ' + base + "}"
    with pytest.raises(RouterDataError, match=r"line 2: Description 'B' is not 'A'"):
        parse_site_snmp_json(mixed, TEN_GIG)
    with pytest.raises(RouterDataError, match=r"line 2: invalid JSON"):
        parse_site_snmp_json('{"Description": "A", ' + base + "}\n{oops", TEN_GIG)
    with pytest.raises(RouterDataError, match=r"item 1: expected a JSON object"):
        parse_site_snmp_json("[1]", TEN_GIG)


# --- LHCOPN flow messages ------------------------------------------------------------------


def test_lhcopn_flows_one_series_per_directed_pair() -> None:
    capacities = {("CERN-PROD", "RAL-LCG2"): TEN_GIG, ("RAL-LCG2", "CERN-PROD"): TEN_GIG}
    series = read_lhcopn_flows_file(
        DATA / "lhcopn-netflow.jsonl", capacities, default_capacity_bps=100e9
    )
    by_link = {s.link: s for s in series}
    assert list(by_link) == ["CERN-PROD->RAL-LCG2", "RAL-LCG2->CERN-PROD", "CERN-PROD->FZK-LCG2"]
    assert all(s.direction is None and s.period_s == 60 for s in series)
    # ISO 01:01Z, the re-delivered message at 01:01 (kept once) and 02:03+01:00 = 01:03 UTC
    assert_series(by_link["CERN-PROD->RAL-LCG2"], [T0, T0 + 60, T0 + 180], [0.5, 0.9, 1.04])
    assert_series(by_link["RAL-LCG2->CERN-PROD"], [T0], [0.2])
    # millisecond timestamp, default capacity: 25 Gb/s on 100 Gb/s
    assert_series(by_link["CERN-PROD->FZK-LCG2"], [T0], [0.25])


def test_lhcopn_flows_need_a_capacity_for_every_pair() -> None:
    text = (DATA / "lhcopn-netflow.jsonl").read_text()
    with pytest.raises(RouterDataError, match="no capacity for RAL-LCG2->CERN-PROD"):
        parse_lhcopn_flows(text, {("CERN-PROD", "RAL-LCG2"): TEN_GIG})


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"src_site": "A"}', r"line 1: 'data' must be a JSON object"),
        ('{"data": {"dst_site": "B", "timestamp": 1, "throughput": 1}}', r"data\.src_site"),
        (
            '{"data": {"src_site": "A", "dst_site": 7, "timestamp": 1, "throughput": 1}}',
            r"data\.dst_site must be a non-empty string",
        ),
        (
            '{"data": {"src_site": "A", "dst_site": "B", "timestamp": -5, "throughput": 1}}',
            r"data\.timestamp: negative timestamp",
        ),
        (
            '{"data": {"src_site": "A", "dst_site": "B", "timestamp": 1, "throughput": "x"}}',
            r"data\.throughput: not a number",
        ),
    ],
)
def test_lhcopn_flows_refuse_bad_messages(line: str, message: str) -> None:
    with pytest.raises(RouterDataError, match=message):
        parse_lhcopn_flows(line, default_capacity_bps=TEN_GIG)


# --- raw SNMP counters ---------------------------------------------------------------------

HEADER = "timestamp,interface,ifHCInOctets,ifHCOutOctets,ifSpeed\n"


def test_snmp_counters_wrap_reset_and_skipped_polls() -> None:
    series = read_snmp_counters_file(
        DATA / "snmp-counters.csv", if_speeds={"TenGigE0/1/0/3": TEN_GIG}
    )
    by_key = {(s.link, s.direction): s for s in series}
    # Bundle-Ether1 was polled once: no interval, no series
    assert {link for link, _ in by_key} == {"TenGigE0/1/0/3", "GigabitEthernet0/0/1"}
    ten_gig_starts = [T0, T0 + 300, T0 + 600, T0 + 900]
    # 187.5e9 octets in 300 s = 5 Gb/s; a wrap of 375e9 octets = 10 Gb/s; then a reset
    assert_series(by_key["TenGigE0/1/0/3", "in"], ten_gig_starts, [0.5, 1.0, NAN, 0.1])
    assert_series(by_key["TenGigE0/1/0/3", "out"], ten_gig_starts, [0.2, 0.2, NAN, 0.05])
    assert by_key["TenGigE0/1/0/3", "in"].period_s == 300
    # ifSpeed column 1 Gb/s; the T0+600 poll is missing so the second interval is 600 s
    assert_series(by_key["GigabitEthernet0/0/1", "in"], [T0, T0 + 300], [0.5, 0.2])
    assert_series(by_key["GigabitEthernet0/0/1", "out"], [T0, T0 + 300], [0.1, 0.1])
    assert by_key["GigabitEthernet0/0/1", "in"].period_s == 450


def test_snmp_counters_if_high_speed_column_in_megabits() -> None:
    # any column order; 62.5e6 octets in 10 s = 50 Mb/s on 100 Mb/s
    text = "interface,timestamp,ifHCOutOctets,ifHCInOctets,ifHighSpeed\nx,0,0,0,100\n"
    incoming, outgoing = parse_snmp_counters(text + "x,10,0,62500000,100\n")
    assert_series(incoming, [0], [0.5])
    assert_series(outgoing, [0], [0.0])


def test_snmp_counters_refuse_the_32_bit_if_speed_ceiling() -> None:
    with pytest.raises(RouterDataError, match=r"line 2: ifSpeed is the 32-bit ceiling"):
        parse_snmp_counters((DATA / "snmp-counters.csv").read_text())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("time,interface,ifHCInOctets\n", r"line 1: header lacks column\(s\) timestamp"),
        (HEADER, "no counter rows"),
        (HEADER + "1,x,1,2\n", r"line 2: 4 fields, the header has 5"),
        (HEADER + "1,x,-1,2,10\n", r"line 2: ifHCInOctets: '-1' is not a 64-bit counter"),
        (HEADER + f"1,x,1,{2**64},10\n", r"line 2: ifHCOutOctets: '18446744073709551616'"),
        (HEADER + "1,x,1,2,\n", r"line 2: no speed for 'x'"),
        (HEADER + "1,x,1,2,0\n", r"line 2: ifSpeed must be a positive"),
        (HEADER + "\n1,,1,2,10\n", r"line 3: empty interface"),
        (HEADER + "soon,x,1,2,10\n", r"line 2: timestamp: not an epoch or ISO 8601"),
    ],
)
def test_snmp_counters_refuse_malformed_rows(text: str, message: str) -> None:
    with pytest.raises(RouterDataError, match=message):
        parse_snmp_counters(text)


# --- to_minutes ------------------------------------------------------------------------------


def test_to_minutes_fills_each_five_minute_interval_with_its_average() -> None:
    incoming, _ = read_router_csv_file(DATA / "rt1-cern-ral-dst.csv", capacity_bps=TEN_GIG)
    first_minute = (MIDNIGHT_UTC - 600) // 60
    # samples start at -600 and -300 s; the next one is 55 min later (> 600 s): not bridged
    expected = [0.5] * 5 + [0.25] * 5 + [NAN] * 2
    np.testing.assert_array_equal(to_minutes(incoming, first_minute, 12), expected)
    # after the repeated hour: 1.0, 0.75 and 0.1 each for 5 minutes, then a gap
    expected = [1.0] * 5 + [0.75] * 5 + [0.1] * 5 + [NAN]
    np.testing.assert_array_equal(to_minutes(incoming, (T0 - 600) // 60, 16), expected)


def test_to_minutes_holds_across_short_gaps_only() -> None:
    incoming, _ = read_site_snmp_json_file(DATA / "cern-site-snmp.jsonl", TEN_GIG)
    # samples start at T0, T0 + 60 and T0 + 180: the 120 s gap is within the default 2 x 60 s
    np.testing.assert_array_equal(
        to_minutes(incoming, T0 // 60 - 1, 6), [NAN, 0.5, 1.0, 1.0, 0.05, NAN]
    )
    np.testing.assert_array_equal(
        to_minutes(incoming, T0 // 60 - 1, 6, max_gap_s=60), [NAN, 0.5, 1.0, NAN, 0.05, NAN]
    )


def test_to_minutes_takes_the_interval_covering_the_minute_midpoint() -> None:
    series = build_series("l", "in", [(20, 0.3), (80, 0.6)], period_s=60)
    # minute 0 = [0, 60) overlaps [20, 80) for 40 s: midpoint 30 is in it; minute 1 -> [80, 140)
    np.testing.assert_array_equal(to_minutes(series, 0, 3), [0.3, 0.6, NAN])


def test_to_minutes_intervals_include_their_start_and_exclude_their_end() -> None:
    series = build_series("l", "in", [(30, 0.3)], period_s=60)
    # midpoint 30 is the start of [30, 90); midpoint 90 is its end
    np.testing.assert_array_equal(to_minutes(series, 0, 2), [0.3, NAN])


def test_to_minutes_on_an_empty_series() -> None:
    empty = build_series("l", "in", [], period_s=60)
    np.testing.assert_array_equal(to_minutes(empty, 0, 2), [NAN, NAN])


# --- the common series ------------------------------------------------------------------------


def test_series_is_immutable_and_validated() -> None:
    series = build_series("l", "out", [(60, 0.5), (0, 0.25)], period_s=60)
    assert series.timestamps.tolist() == [0, 60]
    with pytest.raises(ValueError, match="read-only"):
        series.utilisation[0] = 1.0
    with pytest.raises(ValueError, match="strictly ascending"):
        UtilisationSeries("l", np.array([5, 5]), np.array([0.1, 0.2]), "in", 60)
    sideways: Any = "sideways"
    with pytest.raises(ValueError, match="direction"):
        UtilisationSeries("l", np.array([5]), np.array([0.1]), sideways, 60)


def test_bytes_input_with_byte_order_mark() -> None:
    data = b"\xef\xbb\xbf" + csv_export(["10/29/17 01:00,5000000000"]).encode()
    incoming, _ = parse_router_csv(data, TEN_GIG)
    assert incoming.link == "rt1"
    with pytest.raises(RouterDataError, match="not UTF-8"):
        parse_router_csv(b"\xff\xfe", TEN_GIG)
