"""Read the operator's topology file (YAML or JSON: site name -> list of host names or IPs)."""

from __future__ import annotations

from pathlib import Path

import yaml

from service.errors import ConfigError
from service.state.topology import Topology


def load_topology(path: Path) -> Topology:
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise ConfigError(f"topology {path}: cannot read: {error}") from None
    if not isinstance(document, dict) or not all(
        isinstance(hosts, list) for hosts in document.values()
    ):
        raise ConfigError(f"topology {path}: expected a mapping of site name -> list of hosts")
    try:
        return Topology.from_mapping({str(site): hosts for site, hosts in document.items()})
    except ValueError as error:
        raise ConfigError(f"topology {path}: {error}") from None
