"""The demo mesh's CRIC export: read back by nettel, it maps every host to its own site."""

from __future__ import annotations

from pathlib import Path

from service.state.topology_file import load_topology
from service.state.topology_layouts import Layout
from training.mesh_inventory import write_cric_export
from training.simulator import build_mesh


def test_the_export_maps_every_host_by_name_and_by_address(tmp_path: Path) -> None:
    mesh = build_mesh(20, seed=1)
    path = tmp_path / "topology.json"
    write_cric_export(mesh, path)
    loaded = load_topology(str(path))
    assert loaded.layout is Layout.CRIC_RCSITE
    topology = loaded.topology
    assert topology.sites == sorted(mesh.site_names)
    for site, host, ip in zip(mesh.site_names, mesh.host_names, mesh.host_ips, strict=True):
        assert topology.site_of(host, ip) == site
        assert topology.site_of("", ip) == site  # by the netroute alone
        assert topology.networks_of(site)[0] == ip.rsplit(".", 1)[0] + ".0/24"
    assert [p.name for p in tmp_path.iterdir()] == ["topology.json"]  # no temporary left
