"""The simulated mesh as WLCG's inventory would list it: a CRIC `rcsite` export, and the
Rucio RSE map of its storage.

Each site gets what CRIC gives a real one: coordinates, a tier, its latency host as a
`PerfSonar` service and a netroute with its networks (the host's /24, and an IPv6 /48 from the
documentation range), so `nettel serve --topology` maps the demo's links to sites by host name
and by address alike. Each site also has one disk RSE, `<site>_DATADISK`, so that the demo's
`nettel serve --rse-map` answers `/costmatrix.csv?format=rucio`.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

import orjson

from simulation.simulator import Mesh


def build_cric_export(mesh: Mesh) -> dict[str, Any]:
    """`{site: {name, latitude, longitude, rc_tier_level, services, netroutes}}` of `mesh`.

    >>> from simulation.simulator import build_mesh
    >>> site = build_cric_export(build_mesh(2, seed=1))["SITE-02"]
    >>> site["services"][0]["endpoint"], site["netroutes"]["SITE-02-LHCONE"]["networks"]
    ('ps-latency.site02.example.org', {'ipv4': ['10.0.2.0/24'], 'ipv6': ['2001:db8:2::/48']})
    """
    return {
        name: {
            "name": name,
            "country": "Simulated",
            "latitude": round(float(mesh.latitude_deg[i]), 2),
            "longitude": round(float(mesh.longitude_deg[i]), 2),
            "rc_tier_level": 2,
            "services": [_perfsonar_service(mesh.host_names[i])],
            "netroutes": {f"{name}-LHCONE": _netroute(name, mesh.host_ips[i], i)},
        }
        for i, name in enumerate(mesh.site_names)
    }


def write_cric_export(mesh: Mesh, path: Path) -> None:
    """Write `build_cric_export(mesh)` as JSON, atomically (a reader never sees half a file)."""
    _write_json(build_cric_export(mesh), path)


def build_rse_map(mesh: Mesh) -> dict[str, str]:
    """RSE name -> site of the mesh's storage: one `<site>_DATADISK` per site.

    >>> from simulation.simulator import build_mesh
    >>> build_rse_map(build_mesh(2, seed=1))
    {'SITE-01_DATADISK': 'SITE-01', 'SITE-02_DATADISK': 'SITE-02'}
    """
    return {f"{site}_DATADISK": site for site in mesh.site_names}


def write_rse_map(mesh: Mesh, path: Path) -> None:
    """Write `build_rse_map(mesh)` as JSON (what `--rse-map` reads), atomically."""
    _write_json(build_rse_map(mesh), path)


def _write_json(document: dict[str, Any], path: Path) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(orjson.dumps(document, option=orjson.OPT_INDENT_2))
    os.replace(temporary, path)


def _perfsonar_service(host: str) -> dict[str, str]:
    return {
        "type": "PerfSonar",
        "flavour": "Latency",
        "endpoint": host,
        "status": "production",
        "state": "ACTIVE",
    }


def _netroute(site: str, host_ip: str, index: int) -> dict[str, Any]:
    ipv4 = ipaddress.ip_network(f"{host_ip}/24", strict=False)
    ipv6 = ipaddress.ip_network(f"2001:db8:{index + 1:x}::/48")
    return {"netsite": site, "networks": {"ipv4": [str(ipv4)], "ipv6": [str(ipv6)]}}
