"""Each topology layout, parsed from a realistic file and told apart by its content."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from service.topology.layouts import Layout, detect_layout, parse_topology
from tests.data import DATA


def document(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def test_cric_rcsite_export_gives_perfsonar_hosts_and_netroute_networks() -> None:
    layout, topology = parse_topology(document("cric-rcsite-sample.json"))
    assert layout is Layout.CRIC_RCSITE
    assert topology.sites == ["AGLT2", "CERN-PROD", "FZK-LCG2", "IN2P3-CC", "RAL-LCG2"]
    # PerfSonar services only (the sites' CEs, squids and frontiers are not perfSONAR hosts),
    # of either flavour and whatever their status.
    assert topology.site_of("psl01-gva.cern.ch", "") == "CERN-PROD"
    assert topology.site_of("lcgps01.gridpp.rl.ac.uk", "") == "RAL-LCG2"
    assert topology.site_of("ce503.cern.ch", "") is None
    assert sorted(h for h, s in topology.site_by_host.items() if s == "AGLT2") == [
        "psmsu01.aglt2.org",
        "psmsu02.aglt2.org",
        "psum01.aglt2.org",
        "psum02.aglt2.org",
    ]
    assert topology.skipped == ()


def test_cric_rcsite_networks_of_a_site_are_all_its_netroutes() -> None:
    _, topology = parse_topology(document("cric-rcsite-sample.json"))
    # AGLT2's five netroutes, 192.41.238.0/28 given by two of them, IPv6 in separate routes.
    assert topology.networks_of("AGLT2") == (
        "192.41.230.0/23",
        "192.41.236.0/23",
        "192.41.238.0/28",
        "2001:48a8:68f7:1::/64",
        "2001:48a8:68f7:4000::/50",
        "2001:48a8:68f7:8001::/64",
        "2001:48a8:68f7:c000::/50",
    )
    assert topology.networks_of("RAL-LCG2")[0] == "130.246.152.240/28"
    assert len(topology.networks_of("CERN-PROD")) == 12


def test_cric_rcsite_addresses_match_by_longest_netroute() -> None:
    _, topology = parse_topology(document("cric-rcsite-sample.json"))
    unknown = "host.not-in-cric.example.org"
    assert topology.site_of(unknown, "137.138.44.1") == "CERN-PROD"
    assert topology.site_of(unknown, "2001:1458:d00:3::100:1") == "CERN-PROD"
    assert topology.site_of(unknown, "192.41.238.5") == "AGLT2"
    assert topology.site_of(unknown, "2001:48a8:68f7:4001::5") == "AGLT2"  # inside the /50
    assert topology.site_of(unknown, "2001:660:5009:9::1") == "IN2P3-CC"
    assert topology.site_of(unknown, "192.0.2.1") is None


def test_cric_service_query_gives_endpoints_by_rcsite() -> None:
    layout, topology = parse_topology(document("cric-perfsonar-services.json"))
    assert layout is Layout.CRIC_SERVICES
    assert topology.sites == ["AGLT2", "CERN-PROD", "IN2P3-CC"]
    assert topology.site_of("psum01.aglt2.org", "192.41.230.20") == "AGLT2"
    assert topology.site_of("CCPERFSONAR2.in2p3.fr.", "") == "IN2P3-CC"
    assert topology.networks_of("AGLT2") == ()  # the service query carries no netroutes


def test_psconfig_site_from_display_name() -> None:
    layout, topology = parse_topology(document("psconfig-mesh.json"))
    assert layout is Layout.PSCONFIG
    assert topology.sites == ["SITE-A", "SITE-B", "SITE-C"]
    assert topology.site_of("psl01.site-a.example.org", "192.0.2.10") == "SITE-A"
    # An address entry keyed by IP, and its `host`, both map to the site.
    assert topology.site_of("", "192.0.2.77") == "SITE-C"
    assert topology.site_of("", "2001:db8:42:0::7") == "SITE-C"
    assert topology.site_of("owamp.site-c.example.com", "203.0.113.1") == "SITE-C"
    assert topology.networks_of("SITE-C") == ()


def test_psconfig_site_from_another_meta_key() -> None:
    layout, topology = parse_topology(document("psconfig-wlcg-site-meta.json"), "wlcg-site")
    assert layout is Layout.PSCONFIG
    assert topology.sites == ["SITE-A", "SITE-B"]
    assert topology.site_of("", "2001:db8:a::10") == "SITE-A"
    assert topology.site_of("ps-latency.site-b.example.net", "") == "SITE-B"
    assert topology.site_of("ps.unlisted.example.com", "") is None
    _, by_display_name = parse_topology(document("psconfig-wlcg-site-meta.json"))
    assert "Site A latency (IPv6)" in by_display_name.sites


def test_psconfig_without_the_site_key_says_which_key_it_looked_for() -> None:
    with pytest.raises(ValueError, match=r"no address has _meta.site: see --psconfig-site-key"):
        parse_topology(document("psconfig-mesh.json"), "site")


def test_sites_layout_in_yaml_keeps_its_rules() -> None:
    text = "CERN: [ps.cern.ch, 2001:DB8::1]\nRAL: [' PS.ral.ac.uk ']\n"
    layout, topology = parse_topology(yaml.safe_load(text))
    assert layout is Layout.SITES
    assert topology.site_of("ps.ral.ac.uk", "") == "RAL"
    assert topology.site_of("", "2001:db8::1") == "CERN"
    with pytest.raises(ValueError, match="listed under 'CERN' and 'RAL'"):
        parse_topology({"CERN": ["a.cern.ch"], "RAL": ["A.CERN.CH"]})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ([["CERN", "ps.cern.ch"]], "expected an object, not a list"),
        ("CERN ps.cern.ch", "expected an object, not a string"),
        (None, "expected an object, not null"),
        ({}, "an empty object"),
        ({"CERN": "ps.cern.ch"}, "no known layout \\(e.g. 'CERN' is a string\\)"),
        ({"CERN": {"country": "Switzerland"}}, "no known layout \\(e.g. 'CERN' is an object\\)"),
        ({"CERN": ["ps.cern.ch"], "RAL": {"netroutes": {}}}, "no known layout"),
    ],
)
def test_a_document_in_no_layout_is_refused_naming_the_accepted_ones(
    value: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as error:
        detect_layout(value)
    assert "a CRIC rcsite export, a CRIC PerfSonar service query" in str(error.value)


def test_a_malformed_cric_export_names_the_field() -> None:
    bad_routes = {"CERN-PROD": {"name": "CERN-PROD", "netroutes": ["137.138.0.0/16"]}}
    with pytest.raises(ValueError, match="CERN-PROD.netroutes is a list, expected an object"):
        parse_topology(bad_routes)
    route = {"R": {"networks": {"ipv4": "137.138.0.0/16"}}}
    with pytest.raises(ValueError, match="CERN-PROD.netroutes.R.networks.ipv4 is a string"):
        parse_topology({"CERN-PROD": {"netroutes": route}})
    with pytest.raises(ValueError, match="CERN-PROD.netroutes.R.networks is a list"):
        parse_topology({"CERN-PROD": {"netroutes": {"R": {"networks": ["137.138.0.0/16"]}}}})


def test_a_cric_site_without_perfsonar_or_networks_names_no_site() -> None:
    with pytest.raises(ValueError, match="cric-rcsite layout names no site"):
        parse_topology({"X": {"services": [{"type": "CE", "endpoint": "ce.x.org"}]}})


def test_psconfig_pairs_host_names_with_addresses() -> None:
    """An address entry keyed by IP with a `host` name gives that name its address."""
    _, topology = parse_topology(document("psconfig-mesh.json"))
    assert topology.address_of("owamp.site-c.example.com", 4) == "192.0.2.77"
    assert topology.address_of("OWAMP.site-c.example.com.", 0) == "192.0.2.77"
    assert topology.address_of("owamp.site-c.example.com", 6) == "2001:db8:42::7"
    assert topology.address_of("psl01.site-a.example.org", 4) is None  # named, no address


def test_a_host_given_two_addresses_of_one_version_gets_none() -> None:
    entries = {
        "192.0.2.1": {"host": "ps.x.org", "_meta": {"display-name": "X"}},
        "192.0.2.2": {"host": "ps.x.org", "_meta": {"display-name": "X"}},
        "2001:db8::1": {"host": "ps.x.org", "_meta": {"display-name": "X"}},
    }
    _, topology = parse_topology({"addresses": entries})
    assert topology.address_of("ps.x.org", 4) is None
    assert topology.address_of("ps.x.org", 6) == "2001:db8::1"
    assert "ps.x.org (IPv4) is given to 192.0.2.1, 192.0.2.2; matched to none" in topology.skipped
