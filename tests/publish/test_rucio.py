"""The Rucio custom_table CSV: layout as Rucio parses it, direction, and the RSE map file."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.errors import ConfigError
from service.publish.rucio import build_rucio_router, build_rucio_table, load_rse_map

RSE_MAP = {"CERN-PROD_DATADISK": "CERN", "RAL-LCG2_DATADISK": "RAL", "PIC_TAPE": "PIC"}
SITE_LINKS = [
    {"source": "RAL", "destination": "CERN", "cost": 0.25},
    {"source": "CERN", "destination": "RAL", "cost": 0.75},
    {"source": "CERN", "destination": "PIC", "cost": None},
    {"source": "CERN", "destination": "NDGF", "cost": 1.2},
]


def parse_like_rucio(text: str) -> dict[tuple[str, str], float]:
    """What Rucio's custom_table sorter does with each line: site, rse, float in [0, 1]."""
    table = {}
    for line in text.splitlines():
        if line.strip() == "":
            continue
        site, rse, distance = (bit.strip() for bit in line.split(",")[:3])
        value = float(distance)
        assert 0.0 <= value <= 1.0
        table[(site, rse)] = value
    return table


def test_table_has_site_rse_distance_lines_without_header():
    text = build_rucio_table(SITE_LINKS, RSE_MAP).text
    assert text.endswith("\n")
    assert all(len(line.split(",")) == 3 for line in text.splitlines())
    assert parse_like_rucio(text) == {
        ("CERN", "CERN-PROD_DATADISK"): 0.0,  # the client's own site
        ("CERN", "RAL-LCG2_DATADISK"): 0.25,  # data flows RAL -> CERN
        ("NDGF", "CERN-PROD_DATADISK"): 1.0,  # cost 1.2 clamped to [0, 1]
        ("PIC", "PIC_TAPE"): 0.0,
        ("RAL", "CERN-PROD_DATADISK"): 0.75,  # data flows CERN -> RAL
        ("RAL", "RAL-LCG2_DATADISK"): 0.0,
    }


def test_pairs_without_a_cost_are_left_out():
    table = parse_like_rucio(build_rucio_table(SITE_LINKS, RSE_MAP).text)
    assert ("CERN", "PIC_TAPE") not in table  # no link PIC -> CERN
    assert ("PIC", "CERN-PROD_DATADISK") not in table  # link CERN -> PIC without a cost
    assert ("NDGF", "RAL-LCG2_DATADISK") not in table


def test_names_with_commas_are_skipped():
    links = [{"source": "A,B", "destination": "CERN", "cost": 0.5}]
    table = build_rucio_table(links, {"X,Y": "CERN", "CERN_DISK": "CERN"})
    assert table.text == "CERN,CERN_DISK,0.0000\n"
    assert (table.covered, table.mapped) == (0, 1)


def test_coverage_counts_the_rses_with_a_measured_line():
    table = build_rucio_table(SITE_LINKS, RSE_MAP)
    # CERN's RSE (CERN -> RAL, CERN -> NDGF) and RAL's (RAL -> CERN); PIC's has only its own site
    assert (table.covered, table.mapped) == (2, 3)


def rucio_client(rse_map, links=SITE_LINKS) -> TestClient:
    app = FastAPI()
    app.include_router(build_rucio_router(lambda: links, lambda: rse_map))
    return TestClient(app)


def test_endpoint_serves_csv_with_its_coverage_in_a_header():
    response = rucio_client(RSE_MAP).get("/costmatrix.csv", params={"format": "rucio"})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    assert response.headers["x-nettel-rse-coverage"] == "2/3"
    assert response.text == build_rucio_table(SITE_LINKS, RSE_MAP).text


@pytest.mark.parametrize(
    "links",
    [
        [],  # a matrix without links: no data yet
        [{"source": "NDGF", "destination": "SARA", "cost": 0.1}],  # data, none for a mapped site
        [{"source": "CERN", "destination": "PIC", "cost": None}],  # a mapped pair without a cost
    ],
)
def test_a_table_without_any_measured_pair_is_503_with_retry_after(links):
    response = rucio_client(RSE_MAP, links).get("/costmatrix.csv", params={"format": "rucio"})
    assert response.status_code == 503
    assert response.headers["retry-after"] == "60"
    assert response.headers["x-nettel-rse-coverage"] == "0/3"
    assert "coverage 0/3" in response.json()["detail"]


def test_min_coverage_refuses_a_partial_table():
    client = rucio_client(RSE_MAP)
    partial = client.get("/costmatrix.csv", params={"format": "rucio", "min_coverage": 0.8})
    assert partial.status_code == 503 and partial.headers["retry-after"] == "60"
    assert "coverage 2/3" in partial.json()["detail"]
    enough = client.get("/costmatrix.csv", params={"format": "rucio", "min_coverage": 0.6})
    assert enough.status_code == 200
    assert client.get("/costmatrix.csv?format=rucio&min_coverage=2").status_code == 422


def test_endpoint_without_rse_map_is_404_with_how_to_fix_it():
    response = rucio_client(None).get("/costmatrix.csv", params={"format": "rucio"})
    assert response.status_code == 404
    assert "--rse-map" in response.json()["detail"]


def test_endpoint_needs_format_rucio():
    client = rucio_client(RSE_MAP)
    assert client.get("/costmatrix.csv").status_code == 422
    assert client.get("/costmatrix.csv", params={"format": "fts"}).status_code == 422


def test_rse_map_from_yaml_and_json(tmp_path):
    yaml_file = tmp_path / "rses.yaml"
    yaml_file.write_text("CERN-PROD_DATADISK: CERN\nT1_US_FNAL_Disk: 42\n")
    assert load_rse_map(yaml_file) == {"CERN-PROD_DATADISK": "CERN", "T1_US_FNAL_Disk": "42"}
    json_file = tmp_path / "rses.json"
    json_file.write_text(json.dumps(RSE_MAP))
    assert load_rse_map(json_file) == RSE_MAP


@pytest.mark.parametrize("content", ["- CERN\n- RAL\n", "A: [CERN]\n", "A: true\n", "{: x"])
def test_bad_rse_maps_are_config_errors(tmp_path, content):
    path = tmp_path / "rses.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match="rse map"):
        load_rse_map(path)


def test_an_rse_map_with_aliases_is_refused_before_it_expands(tmp_path):
    """Ten aliases of ten aliases ... would expand a few hundred bytes to gigabytes."""
    bomb = "a0: &a0 CERN\n" + "".join(
        f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]\n" for n in range(1, 9)
    )
    path = tmp_path / "rses.yaml"
    path.write_text(bomb)
    with pytest.raises(ConfigError, match=r"an alias \(\*a0\) is not accepted in an RSE map"):
        load_rse_map(path)
