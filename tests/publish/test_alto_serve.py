"""ALTO through the service fed over the (in-memory) broker: a CRIC rcsite topology's netroutes
become the network map's prefixes, and the endpoint cost service answers from the measured link,
or from its sites for addresses no link measures."""

from __future__ import annotations

import json
import time

import httpx

from devtools.waiting import wait_for
from tests.integration.wire import get_json
from tests.publish.alto_client import AltoClient
from tests.publish.wire_data import DELAY, DESTINATION, LOSS, SOURCE, delay_body, loss_body

#: The samples' sites (tests/publish/conftest.py) as CRIC gives them: netroutes, no hosts.
CRIC = {
    site: {"name": site, "services": [], "netroutes": {f"{site}-LHCONE": {"networks": networks}}}
    for site, networks in (
        ("SITE-A", {"ipv4": ["192.0.2.0/24"], "ipv6": ["2001:db8:a::/48"]}),
        ("SITE-B", {"ipv4": ["198.51.100.0/24"], "ipv6": []}),
    )
}


def test_a_cric_topology_gives_the_pids_their_netroutes_and_costs_reach_any_address_in_them(
    serve, publisher, tmp_path
):
    topology = tmp_path / "cric-rcsite.json"
    topology.write_text(json.dumps(CRIC))
    service = serve("--topology", str(topology))
    now = int(time.time()) // 60 * 60
    publisher.send(DELAY, delay_body([now - 120, now - 60]))
    publisher.send(LOSS, loss_body({now - 120: 0.0, now - 60: 0.0}))
    matrix = wait_for(lambda: get_json(f"{service.url}/costmatrix")["links"], what="the link")
    (link,) = matrix
    assert (link["source_site"], link["destination_site"]) == ("SITE-A", "SITE-B")

    with httpx.Client() as http:
        client = AltoClient(http, f"{service.url}/alto")
        network_map, lookup = client.network_map()
        assert network_map["network-map"] == {
            "SITE-A": {"ipv4": ["192.0.2.0/24"], "ipv6": ["2001:db8:a::/48"]},
            "SITE-B": {"ipv4": ["198.51.100.0/24"]},
        }
        assert lookup.pid_of("2001:db8:a::7") == "SITE-A"
        other_a, other_b = "192.0.2.99", "198.51.100.5"
        costs = client.endpoint_costs("priv:nettel-cost", [SOURCE, other_a], [DESTINATION, other_b])
    assert costs == {
        SOURCE: {DESTINATION: link["cost"], other_b: link["cost"]},  # the link, then its sites
        other_a: {DESTINATION: link["cost"], other_b: link["cost"]},
    }
