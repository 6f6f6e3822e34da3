"""Topology matching: host name, then address, then the longest network; each site's networks."""

from __future__ import annotations

from service.state.link_state import LinkState
from service.topology.topology import Topology
from tests.message_factory import BASE_TS, link, loss_message

INVENTORY = Topology.from_inventory(
    hosts=[("PS.Wide.example.org.", "WIDE"), ("192.0.2.99", "EXACT")],
    networks=[
        ("192.0.2.0/24", "WIDE"),
        ("192.0.2.128/25", "NARROW"),
        ("192.0.2.192/26", "NARROWER"),
        ("2001:db8::/32", "WIDE"),
        ("2001:DB8:0:1::/64", "NARROW"),
        ("10.0.0.0/8", "WIDE"),
        ("10.0.0.0/8", "WIDE"),  # listed twice (two netroutes of one site): one network
    ],
)


def test_exact_host_name_wins_over_the_address() -> None:
    assert INVENTORY.site_of("ps.wide.EXAMPLE.org", "192.0.2.200") == "WIDE"


def test_exact_address_wins_over_any_network() -> None:
    assert INVENTORY.site_of("unknown.example.org", "192.0.2.99") == "EXACT"


def test_longest_network_wins_among_overlapping_ones() -> None:
    sites = [INVENTORY.site_of("", ip) for ip in ("192.0.2.1", "192.0.2.130", "192.0.2.200")]
    assert sites == ["WIDE", "NARROW", "NARROWER"]
    assert INVENTORY.site_of("", "198.51.100.1") is None


def test_ipv6_addresses_match_in_any_spelling() -> None:
    assert INVENTORY.site_of("", "2001:0DB8:0000:0001:0000:0000:0000:0001") == "NARROW"
    assert INVENTORY.site_of("", "2001:db8:ffff::1") == "WIDE"
    assert INVENTORY.site_of("", "::ffff:192.0.2.1") == "WIDE"  # IPv4-mapped
    assert INVENTORY.site_of("", "2001:db9::1") is None


def test_an_end_known_by_name_only_matches_its_host() -> None:
    assert INVENTORY.site_of("", "ipv4:ps.wide.example.org") is None
    assert INVENTORY.site_of("ps.wide.example.org", "ipv4:ps.wide.example.org") == "WIDE"


def test_networks_of_is_canonical_sorted_and_deduplicated() -> None:
    assert INVENTORY.networks_of("WIDE") == ("10.0.0.0/8", "192.0.2.0/24", "2001:db8::/32")
    assert INVENTORY.networks_of("NARROW") == ("192.0.2.128/25", "2001:db8:0:1::/64")
    assert INVENTORY.networks_of("EXACT") == ()
    assert INVENTORY.networks_of("NOWHERE") == ()
    assert INVENTORY.sites == ["EXACT", "NARROW", "NARROWER", "WIDE"]


def test_a_host_list_gives_no_networks() -> None:
    topology = Topology.from_mapping({"CERN": ["ps.cern.ch", "2001:DB8::1"]})
    assert topology.networks_of("CERN") == ()
    assert topology.site_of("", "2001:db8:0::1") == "CERN"


def test_an_inventory_entry_of_two_sites_or_unparsable_is_skipped_not_fatal() -> None:
    topology = Topology.from_inventory(
        hosts=[("ps.shared.example.org", "A"), ("PS.shared.example.org", "B")],
        networks=[("198.51.100.0/24", "A"), ("198.51.100.0/24", "B"), ("not-a-net", "A")],
    )
    assert topology.site_of("ps.shared.example.org", "198.51.100.7") is None
    assert topology.networks_of("A") == topology.networks_of("B") == ()
    assert topology.skipped == (
        "ps.shared.example.org is given to A, B; matched to none",
        "network 'not-a-net' of 'A' is not an IP network",
        "198.51.100.0/24 is given to A, B; matched to none",
    )


def test_host_bits_in_a_network_are_cleared() -> None:
    topology = Topology.from_inventory([], [("130.246.152.240/28", "RAL")])
    assert topology.networks_of("RAL") == ("130.246.152.240/28",)
    assert Topology.from_inventory([], [("192.0.2.7/24", "X")]).networks_of("X") == (
        "192.0.2.0/24",
    )


def test_the_index_counts_unmapped_links_and_remaps_every_row() -> None:
    state = LinkState(Topology.from_mapping({"A": ["ps.a.example.org"]}))
    ends = [
        link("192.0.2.1", "198.51.100.1", "ps.a.example.org", "ps.b.example.org"),
        link("198.51.100.1", "192.0.2.1", "ps.b.example.org", "ps.a.example.org"),
        link("192.0.2.1", "203.0.113.1", "ps.a.example.org", "ps.c.example.org"),
    ]
    state.apply_batch([loss_message({BASE_TS: 0.0}, e) for e in ends], BASE_TS + 30)
    index = state.index
    assert (index.unmapped, index.source_sites) == (3, ["A", None, "A"])
    version = index.names_version
    index.set_topology(
        Topology.from_inventory([("ps.a.example.org", "A")], [("198.51.100.0/24", "B")])
    )
    assert list(zip(index.source_sites, index.destination_sites, strict=True)) == [
        ("A", "B"),
        ("B", "A"),
        ("A", None),
    ]
    assert (index.unmapped, index.names_version) == (1, version + 1)
    new = link("198.51.100.9", "192.0.2.1", "ps.new.example.org", "ps.a.example.org")
    state.apply(loss_message({BASE_TS: 0.0}, new), BASE_TS + 30)
    assert index.unmapped == 1 and index.source_sites[-1] == "B"  # a new row, mapped at once
