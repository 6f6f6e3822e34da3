"""`nettel costmatrix`: table layout, selection, and a running service."""

from __future__ import annotations

import argparse
import io

from devtools.waiting import wait_for
from service.commands.costmatrix import (
    add_costmatrix_command,
    format_table,
    run_costmatrix,
    select_links,
)
from tests.integration.wire import current_minute_ts, get_json
from tests.publish.wire_data import DELAY, LOSS, delay_body, loss_body


def site_link(source: str, destination: str, cost: float | None) -> dict:
    return {
        "source": source,
        "destination": destination,
        "links": 1,
        "cost": cost,
        "delay_ms": {"mean": 10.0},
        "packet_loss": 0.0,
        "utilisation": 0.5,
        "congested": False,
        "last_measurement": 100,
    }


LINKS = [
    site_link("CERN", "RAL", 0.2),
    site_link("RAL", "PIC", 0.9),
    site_link("PIC", "CERN", None),
]


def test_select_keeps_pairs_touching_the_site_costliest_first():
    assert [(x["source"], x["destination"]) for x in select_links(LINKS, "CERN", None)] == [
        ("CERN", "RAL"),
        ("PIC", "CERN"),
    ]
    assert [x["cost"] for x in select_links(LINKS, None, 2)] == [0.9, 0.2]


def test_table_columns_are_aligned():
    lines = format_table(select_links(LINKS, None, None), now=130).splitlines()
    assert lines == [
        "SOURCE  DESTINATION  LINKS   COST  DELAY_MS  LOSS_%  UTIL  CONG  AGE",
        "RAL     PIC              1  0.900    10.000  0.0000  0.50  no    30s",
        "CERN    RAL              1  0.200    10.000  0.0000  0.50  no    30s",
        "PIC     CERN             1      -    10.000  0.0000  0.50  no    30s",
    ]


def test_command_is_registered_with_its_options():
    parser = argparse.ArgumentParser()
    add_costmatrix_command(parser.add_subparsers())
    args = parser.parse_args(["costmatrix", "--site", "CERN", "--top", "3"])
    assert (args.url, args.site, args.top) == ("http://127.0.0.1:8080", "CERN", 3)
    assert callable(args.run)


def test_unreachable_service_is_exit_code_1(capsys):
    assert run_costmatrix("http://127.0.0.1:9") == 1
    assert "cannot get the cost matrix" in capsys.readouterr().err


def test_prints_the_matrix_of_a_running_service(serve, publisher):
    service = serve()
    now = current_minute_ts()
    publisher.send(DELAY, delay_body([now - 60]))
    publisher.send(LOSS, loss_body({now - 60: 0.0}))
    wait_for(lambda: (get_json(f"{service.url}/costmatrix") or {}).get("links"), what="a link")
    out = io.StringIO()
    assert run_costmatrix(service.url, site="SITE-B", top=5, out=out) == 0
    header, row = out.getvalue().splitlines()
    assert header.split() == ["SOURCE", "DESTINATION", "LINKS", "COST", "DELAY_MS", "LOSS_%",
                              "UTIL", "CONG", "AGE"]  # fmt: skip
    assert row.split()[:3] == ["SITE-A", "SITE-B", "1"]


def test_an_unknown_site_is_said_and_exits_1(serve, publisher, capsys):
    service = serve()
    now = current_minute_ts()
    publisher.send(LOSS, loss_body({now - 60: 0.0}))
    wait_for(lambda: (get_json(f"{service.url}/costmatrix") or {}).get("links"), what="a link")
    out = io.StringIO()
    assert run_costmatrix(service.url, site="NOPE", out=out) == 1
    assert out.getvalue() == ""
    assert capsys.readouterr().err == (
        "nettel: no site or host 'NOPE' in the matrix (SITE-A, SITE-B)\n"
    )
