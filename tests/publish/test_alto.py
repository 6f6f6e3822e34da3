"""ALTO's pure parts: PID names, the network map's prefixes and lookup, the vtag, and where an
endpoint cost comes from (documents and errors over HTTP are in test_alto_http.py)."""

from __future__ import annotations

import ipaddress
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.matrix.views import aggregate_sites
from service.publish.alto.network import build_network_map
from service.publish.alto.pids import build_pid_names, is_valid_pid
from service.publish.alto.request_bodies import parse_typed_address
from service.publish.alto.view import METRICS, AltoView
from tests.publish.support import host_link

PID_PATTERN = re.compile(r"^[A-Za-z0-9\-:@_]{1,64}$")

CERN, RAL = "CERN", "RAL-LCG2"
LINKS = [
    host_link("192.0.2.1", "2001:db8::1", source_site=CERN, destination_site=RAL,
              cost=0.2, delay=10.0, loss=0.0),
    host_link("192.0.2.2", "2001:db8::1", source_site=CERN, destination_site=RAL,
              cost=0.4, delay=12.0, loss=0.01),
    host_link("2001:db8::1", "192.0.2.1", source_site=RAL, destination_site=CERN, cost=0.1),
    host_link("203.0.113.9", "192.0.2.1", source_host="ps.lone.org", destination_site=CERN,
              cost=0.9, delay=None, loss=None),
]  # fmt: skip


def view(links=LINKS, networks=None) -> AltoView:
    networks_of = (lambda site: networks.get(site, ())) if networks else None
    return AltoView(links, aggregate_sites(links), version="v1", networks_of=networks_of)


def lone_pid() -> str:
    return build_pid_names([CERN, RAL, "ps.lone.org"])["ps.lone.org"]


def endpoints(*texts: str):
    return [parse_typed_address(text, "endpoints/srcs") for text in texts]


def test_cost_maps_aggregate_host_pairs_by_site_in_each_metrics_unit():
    documents = {name: view().cost_map_document(metric) for name, metric in METRICS.items()}
    assert documents["priv:nettel-cost"]["cost-map"] == {
        CERN: {RAL: 0.3}, RAL: {CERN: 0.1}, lone_pid(): {CERN: 0.9}
    }  # fmt: skip
    assert documents["delay-ow"]["cost-map"] == {CERN: {RAL: 11000.0}, RAL: {CERN: 10000.0}}
    assert documents["lossrate"]["cost-map"] == {CERN: {RAL: 0.5}, RAL: {CERN: 0.0}}


def test_vtag_changes_with_the_pids_and_their_prefixes_only():
    tag = view().vtag
    assert view([link | {"cost": 0.7} for link in LINKS]).vtag == tag
    assert view([*LINKS, host_link("198.51.100.7", "192.0.2.1", source_site="PIC")]).vtag != tag
    new_address = [*LINKS, host_link("192.0.2.3", "2001:db8::1", source_site=CERN,
                                     destination_site=RAL)]  # fmt: skip
    assert view(new_address).vtag != tag
    assert view(networks={CERN: ("192.0.2.0/24",)}).vtag != tag


def test_endpoint_cost_is_the_host_link_else_the_pids_else_left_out():
    costs = view(networks={CERN: ("192.0.2.0/24",)}).endpoint_costs(
        METRICS["priv:nettel-cost"],
        endpoints("ipv4:192.0.2.1", "ipv4:192.0.2.77", "ipv4:198.51.100.1"),
        endpoints("ipv6:2001:db8::1", "ipv6:2001:db8::2"),
    )
    assert costs == {
        "ipv4:192.0.2.1": {"ipv6:2001:db8::1": 0.2},  # measured; ::2 is in no PID
        "ipv4:192.0.2.77": {"ipv6:2001:db8::1": 0.3},  # CERN (by its network) -> RAL
    }


def test_a_network_claimed_by_two_sites_goes_to_the_first_and_hosts_follow_their_site():
    networks = {"A": ("10.0.0.0/8",), "B": ("10.0.0.0/8", "10.1.0.0/16")}
    hosts = {"A": ["10.1.2.3", "10.9.9.9"], "B": ["10.1.0.1"]}
    network_map = build_network_map(hosts, lambda site: networks[site])
    assert network_map.prefixes == {
        "A": {"ipv4": ["10.0.0.0/8", "10.1.2.3/32"]},
        "B": {"ipv4": ["10.1.0.0/16"]},
    }


ADDRESSES = st.one_of(
    st.ip_addresses(v=4, network="10.0.0.0/14"), st.ip_addresses(v=6, network="2001:db8::/126")
)


@given(
    st.dictionaries(st.sampled_from(["A", "B", "C.d"]), st.sets(ADDRESSES, max_size=6)),
    st.dictionaries(
        st.sampled_from(["A", "B", "C.d"]),
        st.lists(st.sampled_from(["10.0.0.0/14", "10.1.0.0/16", "10.1.2.0/24", "2001:db8::/127"])),
    ),
)
def test_every_host_address_leads_back_to_its_pid_unless_another_site_has_it(hosts, networks):
    network_map = build_network_map(
        {site: [str(a) for a in addresses] for site, addresses in hosts.items()},
        lambda site: sorted(set(networks.get(site, []))),
    )
    owners = {}
    for site in sorted(hosts):
        for address in hosts[site]:
            owners.setdefault(address, network_map.pids[site])
    for address, pid in owners.items():
        assert network_map.pid_of(address) == pid
        prefixes = [
            (ipaddress.ip_network(prefix), name)
            for name, families in network_map.prefixes.items()
            for prefix in families.get(f"ipv{address.version}", [])
        ]
        holding = [(net.prefixlen, name) for net, name in prefixes if address in net]
        assert max(holding)[1] == pid  # a client's longest-prefix match over the document


def test_valid_names_are_kept_and_others_sanitised_with_a_hash():
    names = build_pid_names(["CERN-PROD", "a:b@c_d", "ps.lone.org", "UK/RAL LCG2"])
    assert names["CERN-PROD"] == "CERN-PROD" and names["a:b@c_d"] == "a:b@c_d"
    assert re.fullmatch(r"ps_lone_org_[0-9a-f]{8}", names["ps.lone.org"])
    assert re.fullmatch(r"UK_RAL_LCG2_[0-9a-f]{8}", names["UK/RAL LCG2"])


def test_names_that_sanitise_alike_stay_distinct():
    names = build_pid_names(["a.b", "a/b", "a_b"])
    assert names["a_b"] == "a_b"
    assert len(set(names.values())) == 3
    assert all(names[key].startswith("a_b_") for key in ("a.b", "a/b"))


def test_long_names_are_truncated_to_64_and_stay_distinct():
    keys = ["x" * 64, "x" * 65, "x" * 100, "x" * 99 + "y"]
    names = build_pid_names(keys)
    assert names["x" * 64] == "x" * 64
    assert all(len(name) <= 64 for name in names.values())
    assert len(set(names.values())) == len(keys)


def test_a_valid_name_equal_to_a_hashed_name_keeps_it_and_the_other_gets_a_longer_hash():
    hashed = build_pid_names(["a.b"])["a.b"]
    names = build_pid_names(["a.b", hashed])
    assert names[hashed] == hashed
    assert names["a.b"] != hashed and names["a.b"].startswith(hashed)
    assert is_valid_pid(names["a.b"])


@given(st.sets(st.text(max_size=80), max_size=12))
def test_pid_names_are_valid_unique_and_independent_of_order(keys):
    names = build_pid_names(keys)
    assert set(names) == keys
    assert all(PID_PATTERN.match(name) for name in names.values())
    assert len(set(names.values())) == len(keys)
    assert build_pid_names(sorted(keys, reverse=True)) == names


@pytest.mark.parametrize("name", ["", "a.b", "x" * 65, "é", "a b"])
def test_invalid_pid_names(name):
    assert not is_valid_pid(name)
