"""Reading --topology from files and a real HTTP server, and refreshing it under live state.

The inventory server is a real `http.server` on loopback, so over plain http://: nettel accepts
http:// only for loopback hosts (config refuses it elsewhere); https:// goes through the same
httpx call.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import orjson
import pytest

from devtools.waiting import wait_for
from service.errors import ConfigError
from service.state.link_state import LinkState
from service.topology.layouts import Layout
from service.topology.loading import LoadedTopology, load_topology
from service.topology.refresh import TopologyRefresher
from tests.data import DATA
from tests.message_factory import BASE_TS, delay_message, link, loss_message

CRIC = (DATA / "cric-rcsite-sample.json").read_bytes()
#: Bus links between the CRIC sample's hosts and addresses, and one end CRIC does not know.
LINKS = [
    link("137.138.44.1", "192.41.236.31", "psl01-gva.cern.ch", "psmsu01.aglt2.org"),
    link("192.41.236.31", "137.138.44.1", "psmsu01.aglt2.org", "psl01-gva.cern.ch"),
    link("130.246.176.5", "2001:660:5009:9::5", "unnamed-1.example.org", "unnamed-2.example.org"),
    link("137.138.44.1", "203.0.113.9", "psl01-gva.cern.ch", "ps.elsewhere.example.com"),
]
NOW = BASE_TS + 30
#: How every error of --topology begins (a regular expression, as pytest matches it).
SETTING = "--topology / NETTEL_TOPOLOGY: "


class Inventory(BaseHTTPRequestHandler):
    """Serves `server.pages[path] = (status, body)`; anything else is a 404."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        status, body = self.server.pages.get(self.path, (404, b"not found"))  # type: ignore[attr-defined]
        self.send_response(status)
        if 300 <= status < 400:
            self.send_header("Location", "/moved")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def inventory() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Inventory)
    server.pages = {"/cric.json": (200, CRIC)}  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def url_of(server: ThreadingHTTPServer, path: str) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}{path}"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fed_state(topology_source: str) -> LinkState:
    state = LinkState(load_topology(topology_source).topology)
    for endpoints in LINKS:
        state.apply_batch(
            [delay_message({BASE_TS: 12.5}, endpoints), loss_message({BASE_TS: 0.01}, endpoints)],
            NOW,
        )
    return state


def sites(state: LinkState) -> list[tuple[str | None, str | None]]:
    index = state.index
    return list(zip(index.source_sites, index.destination_sites, strict=True))


# ---- reading ---------------------------------------------------------------------------------


def test_a_file_in_each_layout_loads(tmp_path: Path) -> None:
    yaml_file = tmp_path / "sites.yaml"
    yaml_file.write_text("SITE-A: [ps-latency.site-a.example.org]\n")
    assert load_topology(str(yaml_file)).layouts == (Layout.SITES,)
    cric = str(DATA / "cric-rcsite-sample.json")
    loaded = load_topology(cric)
    assert (loaded.layouts, loaded.where) == ((Layout.CRIC_RCSITE,), cric)
    assert load_topology(str(DATA / "psconfig-mesh.json")).layouts == (Layout.PSCONFIG,)


def write_mesh(path: Path, addresses: dict[str, tuple[str, str]]) -> str:
    """A pSConfig document: address -> (host, site)."""
    entries = {
        address: {"address": address, "host": host, "_meta": {"display-name": site}}
        for address, (host, site) in addresses.items()
    }
    path.write_bytes(orjson.dumps({"addresses": entries}))
    return str(path)


def test_several_inventories_are_merged(tmp_path: Path) -> None:
    """CRIC's prefixes with a pSConfig mesh's host addresses; what they disagree on is left out."""
    mesh = write_mesh(
        tmp_path / "mesh.json",
        {
            "188.184.2.9": ("psl02-gva.cern.ch", "CERN-PROD"),
            "130.246.0.5": ("psl01-gva.cern.ch", "RAL-LCG2"),  # CRIC: CERN-PROD
        },
    )
    cric = str(DATA / "cric-rcsite-sample.json")
    loaded = load_topology(f"{cric}, {mesh}")
    assert loaded.layouts == (Layout.CRIC_RCSITE, Layout.PSCONFIG)
    assert loaded.where == f"{cric}, {mesh}"
    topology = loaded.topology
    assert topology.address_of("psl02-gva.cern.ch", 4) == "188.184.2.9"
    assert topology.site_of("psl02-gva.cern.ch", "") == "CERN-PROD"
    assert topology.site_of("unlisted.cern.ch", "188.184.200.1") == "CERN-PROD"  # CRIC prefix
    assert topology.site_of("psl01-gva.cern.ch", "") is None
    assert "psl01-gva.cern.ch is given to CERN-PROD, RAL-LCG2; matched to none" in topology.skipped
    assert topology.site_of("psb01-gva.cern.ch", "") == "CERN-PROD"  # CRIC alone


def test_one_unreadable_inventory_of_several_refuses_them_all(tmp_path: Path) -> None:
    cric = str(DATA / "cric-rcsite-sample.json")
    with pytest.raises(ConfigError, match=f"{SETTING}{tmp_path}/missing.json: .*No such file"):
        load_topology(f"{cric},{tmp_path / 'missing.json'}")
    with pytest.raises(ConfigError, match="no file or URL given"):
        load_topology(" , ")


def test_a_url_loads_over_http(inventory: ThreadingHTTPServer) -> None:
    loaded = load_topology(url_of(inventory, "/cric.json"))
    assert loaded.layouts == (Layout.CRIC_RCSITE,)
    assert loaded.topology.networks_of("FZK-LCG2")[-1] == "2a00:139c::/45"


def test_url_errors_name_the_url_without_its_credentials(inventory: ThreadingHTTPServer) -> None:
    port = inventory.server_address[1]
    with pytest.raises(ConfigError) as error:
        load_topology(f"http://reader:s3cret@127.0.0.1:{port}/gone.json?token=abc")
    assert str(error.value) == f"{SETTING}http://127.0.0.1:{port}/gone.json: HTTP 404"
    inventory.pages["/redirect"] = (302, b"")  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="HTTP 302"):
        load_topology(url_of(inventory, "/redirect"))


def test_an_unreachable_url_or_broken_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"{SETTING}http://127.0.0.1:.*/cric.json: .*"):
        load_topology(f"http://127.0.0.1:{closed_port()}/cric.json")
    broken = tmp_path / "broken.json"
    broken.write_text('{"CERN": [unclosed')
    with pytest.raises(ConfigError, match=f"{SETTING}{broken}: invalid JSON at line 1, column 11"):
        load_topology(str(broken))
    unsuffixed = tmp_path / "sites"  # JSON by its first character
    unsuffixed.write_text(
        '[\n  {"name": "CERN-PROD", "netroutes": {}},\n  {"name": "RAL-LCG2",,}\n]\n'
    )
    with pytest.raises(ConfigError) as error:
        load_topology(str(unsuffixed))
    assert str(error.value) == (
        f"{SETTING}{unsuffixed}: invalid JSON at line 3, column 23: unexpected character, "
        "expected a string key"
    )
    yaml_broken = tmp_path / "sites.yaml"
    yaml_broken.write_text("CERN-PROD: [psl01.cern.ch\n")
    with pytest.raises(ConfigError, match=f"{SETTING}{yaml_broken}: invalid YAML at line 2, col"):
        load_topology(str(yaml_broken))
    with pytest.raises(ConfigError, match="No such file"):
        load_topology(str(tmp_path / "missing.json"))


# ---- refreshing ------------------------------------------------------------------------------


def test_refresh_remaps_every_row_and_keeps_link_state(tmp_path: Path) -> None:
    path = tmp_path / "topology.yaml"
    path.write_text("CERN: [psl01-gva.cern.ch]\n")
    state = fed_state(str(path))
    before = state.view(NOW)
    assert sites(state) == [("CERN", None), (None, "CERN"), (None, None), ("CERN", None)]
    assert state.index.unmapped == 4

    path.write_bytes(CRIC)
    refresher = TopologyRefresher(state, str(path), load_topology(str(path)), interval=0)
    assert refresher.refresh() is True
    after = state.view(NOW)
    assert sites(state) == [
        ("CERN-PROD", "AGLT2"),  # host names
        ("AGLT2", "CERN-PROD"),
        ("RAL-LCG2", "IN2P3-CC"),  # unknown host names, addresses inside netroutes
        ("CERN-PROD", None),  # 203.0.113.9 is in no netroute: the host stands for itself
    ]
    assert state.index.unmapped == 1
    assert after.names_version == before.names_version + 1
    assert (after.sources, after.destinations) == (before.sources, before.destinations)
    assert after.source_hosts == before.source_hosts
    for name, values in before.series.items():
        np.testing.assert_array_equal(after.series[name], values, err_msg=name)
    assert refresher.outcomes == {"ok": 1}
    assert refresher.current.layouts == (Layout.CRIC_RCSITE,)


def test_new_links_after_a_refresh_take_the_new_sites(tmp_path: Path) -> None:
    path = tmp_path / "topology.json"
    path.write_text('{"CERN": ["psl01-gva.cern.ch"]}')
    state = fed_state(str(path))
    path.write_bytes(CRIC)
    TopologyRefresher(state, str(path), load_topology(str(path)), interval=0).refresh()
    new = link("188.185.1.1", "192.41.230.7", "new.cern.ch", "new.aglt2.org")
    state.apply(loss_message({BASE_TS: 0.0}, new), NOW)
    assert sites(state)[-1] == ("CERN-PROD", "AGLT2")
    assert state.index.unmapped == 1


def test_a_broken_or_missing_file_keeps_the_old_mapping_and_is_counted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cric.json"
    path.write_bytes(CRIC)
    state = fed_state(str(path))
    mapped = sites(state)
    version = state.index.names_version
    refresher = TopologyRefresher(state, str(path), load_topology(str(path)), interval=0)
    path.write_bytes(CRIC[: len(CRIC) // 2])  # a half-written export
    assert refresher.refresh() is False
    path.unlink()
    assert refresher.refresh() is False
    assert refresher.outcomes == {"failed": 2}
    assert sites(state) == mapped and state.index.names_version == version
    assert refresher.current.layouts == (Layout.CRIC_RCSITE,)
    failures = [r for r in caplog.records if r.message.startswith("topology refresh failed")]
    assert len(failures) == 2 and "No such file" in failures[1].error  # type: ignore[attr-defined]


def test_an_unexpected_fault_of_the_loader_is_a_failed_refresh_too(tmp_path: Path) -> None:
    path = tmp_path / "cric.json"
    path.write_bytes(CRIC)
    state = fed_state(str(path))
    mapped = sites(state)

    def faulty(source: str, site_key: str) -> LoadedTopology:
        raise RuntimeError("a bug")

    refresher = TopologyRefresher(state, str(path), load_topology(str(path)), 0, load=faulty)
    assert refresher.refresh() is False
    assert refresher.outcomes == {"failed": 1} and sites(state) == mapped


def test_refresh_over_http_follows_the_inventory_and_survives_its_outage(
    inventory: ThreadingHTTPServer,
) -> None:
    url = url_of(inventory, "/cric.json")
    state = fed_state(url)
    assert sites(state)[2] == ("RAL-LCG2", "IN2P3-CC")
    refresher = TopologyRefresher(state, url, load_topology(url), interval=0)
    renamed = CRIC.replace(b'"name": "RAL-LCG2"', b'"name": "UKI-RAL"')
    inventory.pages["/cric.json"] = (200, renamed)  # type: ignore[attr-defined]
    assert refresher.refresh() is True
    assert sites(state)[2] == ("UKI-RAL", "IN2P3-CC")
    inventory.pages["/cric.json"] = (503, b"maintenance")  # type: ignore[attr-defined]
    assert refresher.refresh() is False
    inventory.shutdown()
    inventory.server_close()
    assert refresher.refresh() is False
    assert refresher.outcomes == {"ok": 1, "failed": 2}
    assert sites(state)[2] == ("UKI-RAL", "IN2P3-CC")


def test_the_refresh_thread_runs_on_request_and_every_interval(tmp_path: Path) -> None:
    path = tmp_path / "topology.yaml"
    path.write_text("CERN: [psl01-gva.cern.ch]\n")
    state = fed_state(str(path))
    on_request = TopologyRefresher(state, str(path), load_topology(str(path)), interval=0)
    on_request.start()
    path.write_bytes(CRIC)
    on_request.request()
    wait_for(lambda: on_request.outcomes["ok"] == 1, 10, 0.01, what="the requested refresh")
    assert sites(state)[0] == ("CERN-PROD", "AGLT2")
    time.sleep(0.3)
    assert on_request.outcomes == {"ok": 1}  # interval 0: no refresh unless asked
    on_request.stop()

    periodic = TopologyRefresher(state, str(path), load_topology(str(path)), interval=0.05)
    periodic.start()
    wait_for(lambda: periodic.outcomes["ok"] >= 3, 10, 0.01, what="three periodic refreshes")
    periodic.stop()
    assert not periodic._loop.alive
