"""A hostile --topology: a YAML alias bomb (a few hundred bytes standing for gigabytes), deep
nesting and too many nodes are refused while the document is composed, at start with a message
naming the setting, on a re-read (a file, or the periodic re-read of a URL served over real
HTTP) with the old mapping kept, logged and counted; and a real `nettel serve` re-reading one on
SIGHUP stays up, healthy and small."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import tracemalloc
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service import bounded_yaml
from service.errors import ConfigError
from service.state.link_state import LinkState
from service.topology.loading import load_topology
from service.topology.refresh import TopologyRefresher
from tests.message_factory import BASE_TS, link, loss_message

SETTING = "--topology / NETTEL_TOPOLOGY: "
HOST = "ps-latency.site-a.example.org"
GOOD = f"SITE-A: [{HOST}]\n".encode()
NOW = BASE_TS + 30


def alias_bomb(levels: int = 8) -> bytes:
    """Ten aliases of ten aliases ... of a host name: 10^`levels` hosts once expanded (8
    levels: 10^8 names, about 3 GB as `str()` of the nested lists), in under 500 bytes."""
    lines = [f"a0: &a0 [{', '.join([HOST] * 3)}]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 10)}]")
    lines.append(f"SITE-A: [*a{levels - 1}]")
    return "\n".join(lines).encode() + b"\n"


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    bomb = tmp_path / "topology.yaml"
    bomb.write_bytes(alias_bomb())
    assert len(bomb.read_bytes()) < 500
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError) as error:
            load_topology(str(bomb))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(error.value) == (
        f"{SETTING}{bomb}: invalid YAML at line 2, column 10: "
        "an alias (*a0) is not accepted in a topology"
    )
    assert peak < 10 << 20  # bytes allocated while refusing it (the bound: 100 MB)


def test_merge_keys_are_aliases_too_and_anchors_alone_are_fine(tmp_path: Path) -> None:
    merged = tmp_path / "merged.yaml"
    merged.write_text("base: &base {x: [a.example.org]}\nSITE-A:\n  <<: *base\n")
    with pytest.raises(ConfigError, match=r"an alias \(\*base\) is not accepted"):
        load_topology(str(merged))
    anchored = tmp_path / "anchored.yaml"
    anchored.write_text(f"SITE-A: &a [{HOST}]\nSITE-B: &b [ps.site-b.example.org]\n")
    assert load_topology(str(anchored)).topology.sites == ["SITE-A", "SITE-B"]


def test_deep_nesting_and_too_many_nodes_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / "deep.yaml"
    deep.write_text("SITE-A: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match=f"{SETTING}{deep}: .*nested deeper than 64 levels"):
        load_topology(str(deep))
    monkeypatch.setattr(bounded_yaml, "MAX_YAML_NODES", 100)
    many = tmp_path / "many.yaml"
    many.write_text("SITE-A: [" + ", ".join(f"h{n}.example.org" for n in range(97)) + "]\n")
    assert len(load_topology(str(many)).topology.site_by_host) == 97  # 100 nodes with the key
    many.write_text("SITE-A: [" + ", ".join(f"h{n}.example.org" for n in range(98)) + "]\n")
    with pytest.raises(ConfigError, match="more than 100 nodes"):
        load_topology(str(many))


class _Inventory(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body: bytes = self.server.body  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def inventory() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Inventory)
    server.body = GOOD  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_url_turning_into_a_bomb_keeps_the_old_mapping_logged_and_counted(
    inventory: ThreadingHTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"http://127.0.0.1:{inventory.server_address[1]}/topology.yaml"
    loaded = load_topology(url)
    state = LinkState(loaded.topology)
    state.apply(loss_message({BASE_TS: 0.0}, link("192.0.2.1", "192.0.2.2", HOST, "b.org")), NOW)
    refresher = TopologyRefresher(state, url, loaded, interval=0)
    inventory.body = alias_bomb()  # type: ignore[attr-defined]
    assert refresher.refresh() is False
    assert refresher.outcomes == {"failed": 1}
    assert refresher.current is loaded
    assert state.index.topology.site_of(HOST, "192.0.2.1") == "SITE-A"
    assert state.view(NOW).source_sites == ["SITE-A"]
    failure = next(r for r in caplog.records if r.message.startswith("topology refresh failed"))
    assert failure.levelname == "ERROR"
    assert failure.error == (  # type: ignore[attr-defined]
        f"{SETTING}{url}: invalid YAML at line 2, column 10: "
        "an alias (*a0) is not accepted in a topology"
    )
    inventory.body = GOOD  # type: ignore[attr-defined]
    assert refresher.refresh() is True and refresher.outcomes == {"failed": 1, "ok": 1}


def test_a_bomb_stops_the_start_naming_the_setting(tmp_path: Path) -> None:
    bomb = tmp_path / "topology.yaml"
    bomb.write_bytes(alias_bomb())
    result = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--topology", str(bomb)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == (
        f"nettel: {SETTING}{bomb}: invalid YAML at line 2, column 10: "
        "an alias (*a0) is not accepted in a topology"
    )
    assert "Traceback" not in result.stderr


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def test_sighup_with_a_bomb_keeps_the_service_up_small_and_on_its_old_topology(
    nettel_service, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_bytes(GOOD)
    service = nettel_service(
        "none",
        *("--topology", str(topology), "--topology-refresh", "0", "--model", "none"),
        env={"NETTEL_INGEST_TOKEN": "hostile-topology-token"},
    )
    before = rss_bytes(service.pid)
    topology.write_bytes(alias_bomb())
    service.process.send_signal(signal.SIGHUP)
    wait_for(
        lambda: metric_value(service.url, "nettel_topology_refreshes_total", outcome="failed") == 1,
        timeout=30,
    )
    assert rss_bytes(service.pid) - before < 100 << 20
    assert httpx.get(f"{service.url}/healthz", timeout=5).status_code == 200
    assert metric_value(service.url, "nettel_topology_refreshes_total", outcome="ok") == 0
    assert "an alias (*a0) is not accepted in a topology" in service.log_text()
    assert service.process.poll() is None
