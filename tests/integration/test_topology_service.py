"""--topology in a running service fed over the (in-memory) broker: sites in /costmatrix,
re-reads (`runtime.reload`, what SIGHUP runs), /metrics counts.

The topology starts as a host list that knows one end of the sample link, becomes a CRIC rcsite
export whose netroute holds the other end's address, then a broken file that must not take the
sites away. A topology refused at start stops a real `nettel serve`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.config import DELAY_TOPIC as DELAY
from service.config import LOSS_TOPIC as LOSS
from tests.integration.wire import current_minute_ts, get_json, sample_body

SOURCE, DESTINATION = "192.0.2.10", "198.51.100.20"  # the samples' link
CRIC_EXPORT = {
    "SITE-A": {
        "name": "SITE-A",
        "services": [
            {"type": "PerfSonar", "flavour": "Latency", "endpoint": "ps-latency.site-a.example.org"}
        ],
    },
    "SITE-B": {
        "name": "SITE-B",
        "netroutes": {"SITE-B-LHCONE": {"networks": {"ipv4": ["198.51.100.0/24"], "ipv6": []}}},
    },
}


def sample_link(url: str) -> dict | None:
    matrix = get_json(f"{url}/costmatrix", source=SOURCE, destination=DESTINATION) or {}
    links = matrix.get("links", [])
    return links[0] if links else None


def refreshes(url: str, outcome: str) -> float:
    return metric_value(url, "nettel_topology_refreshes_total", outcome=outcome)


def test_a_reload_rereads_the_topology_and_metrics_show_what_it_misses(
    memory_broker, memory_service, tmp_path: Path
) -> None:
    topology = tmp_path / "topology.yaml"
    topology.write_text("SITE-A: [ps-latency.site-a.example.org]\n")
    service = memory_service(
        memory_broker,
        *("--interval", "1", "--subscription", "plain"),
        *("--topology", str(topology), "--topology-refresh", "0", "--model", "none"),
    )
    wait_for(lambda: get_json(f"{service.url}/readyz"), what="ready (subscribed)")
    publisher = service.publisher()
    minutes = [current_minute_ts(m) for m in (3, 2, 1)]
    publisher.send(DELAY, sample_body("owdelay-histogram-real.json", minutes))
    publisher.send(LOSS, sample_body("packet-loss-rate.json", minutes))
    publisher.close()

    before = wait_for(lambda: sample_link(service.url), what="the sample link")
    assert (before["source_site"], before["destination_site"]) == ("SITE-A", None)
    assert metric_value(service.url, "nettel_links_unmapped") == 1
    assert refreshes(service.url, "ok") == refreshes(service.url, "failed") == 0

    topology.write_text(json.dumps(CRIC_EXPORT))  # same path, now an inventory export
    service.runtime.reload()  # what SIGHUP runs
    after = wait_for(
        lambda: (
            (link := sample_link(service.url)) and link["destination_site"] == "SITE-B" and link
        ),
        what="the destination mapped by the netroute after SIGHUP",
    )
    assert after["source_site"] == "SITE-A"
    assert after["samples"] == before["samples"] == 3  # link state kept
    assert metric_value(service.url, "nettel_links_unmapped") == 0
    assert refreshes(service.url, "ok") == 1
    sites = get_json(f"{service.url}/costmatrix", level="site")["links"]
    assert ("SITE-A", "SITE-B") in [(s["source"], s["destination"]) for s in sites]

    topology.write_text("SITE-A: [unclosed\n")
    service.runtime.reload()
    wait_for(lambda: refreshes(service.url, "failed") == 1, what="the failed refresh counted")
    assert "topology refresh failed; keeping the old one" in service.log_text()
    link = sample_link(service.url)
    assert link is not None and (link["source_site"], link["destination_site"]) == (
        "SITE-A",
        "SITE-B",
    )
    assert metric_value(service.url, "nettel_topology_age_seconds") > 0


def test_a_topology_in_no_layout_stops_the_start_naming_the_file(tmp_path: Path) -> None:
    topology = tmp_path / "hosts.json"
    topology.write_text('["ps.cern.ch"]')
    result = subprocess.run(
        [sys.executable, "-m", "service", "serve", "--topology", str(topology)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    expected = f"nettel: --topology / NETTEL_TOPOLOGY: {topology}: expected an object, not a list"
    assert expected in result.stderr
