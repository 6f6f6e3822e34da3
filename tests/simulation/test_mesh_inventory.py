"""The demo mesh's CRIC export: read back by nettel, it maps every host to its own site; and its
RSE map, one disk per site, for the Rucio table. run.sh writes both with `nettel simulate
--no-feed` before serve starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.cli import main
from service.publish.rucio import build_rucio_table, load_rse_map
from service.topology.layouts import Layout
from service.topology.loading import load_topology
from simulation.mesh_inventory import write_cric_export
from simulation.simulator import build_mesh


def test_the_export_maps_every_host_by_name_and_by_address(tmp_path: Path) -> None:
    mesh = build_mesh(20, seed=1)
    path = tmp_path / "topology.json"
    write_cric_export(mesh, path)
    loaded = load_topology(str(path))
    assert loaded.layouts == (Layout.CRIC_RCSITE,)
    topology = loaded.topology
    assert topology.sites == sorted(mesh.site_names)
    for site, host, ip in zip(mesh.site_names, mesh.host_names, mesh.host_ips, strict=True):
        assert topology.site_of(host, ip) == site
        assert topology.site_of("", ip) == site  # by the netroute alone
        assert topology.networks_of(site)[0] == ip.rsplit(".", 1)[0] + ".0/24"
    assert [p.name for p in tmp_path.iterdir()] == ["topology.json"]  # no temporary left


def test_simulate_no_feed_writes_the_topology_and_publishes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the port is closed: with --no-feed, simulate must not try the broker at all
    path = tmp_path / "topology.json"
    argv = ["simulate", "--brokers", "127.0.0.1:9", "--seed", "1", "--write-topology", str(path)]
    assert main([*argv, "--no-feed"]) == 0
    assert load_topology(str(path)).topology.sites == sorted(build_mesh(20, seed=1).site_names)

    assert main(["simulate", "--no-feed"]) == 2
    assert "--no-feed needs --write-topology or --write-rse-map" in capsys.readouterr().err


def test_the_demo_rse_map_gives_the_rucio_table_a_disk_at_every_site(tmp_path: Path) -> None:
    rse_map = tmp_path / "rse-map.json"
    assert main(["simulate", "--sites", "3", "--write-rse-map", str(rse_map), "--no-feed"]) == 0
    assert load_rse_map(rse_map) == {
        "SITE-01_DATADISK": "SITE-01",
        "SITE-02_DATADISK": "SITE-02",
        "SITE-03_DATADISK": "SITE-03",
    }
    links = [{"source": "SITE-02", "destination": "SITE-01", "cost": 0.25}]
    assert build_rucio_table(links, load_rse_map(rse_map)).text.splitlines() == [
        "SITE-01,SITE-01_DATADISK,0.0000",
        "SITE-01,SITE-02_DATADISK,0.2500",
        "SITE-02,SITE-02_DATADISK,0.0000",
    ]
