"""One row per directed link whichever source names it first: pScheduler runs (host names) and
bus messages (IPs and host names) land in the same row, through snapshots too."""

from __future__ import annotations

import math

import numpy as np

from service.parse.pscheduler import parse_runs
from service.parse.records import LinkEndpoints, NamedEndpoints, ParsedMessage
from service.persistence.snapshot_codec import decode_state, encode_state
from service.state.link_index import LinkIndex, named
from service.state.link_state import LinkState
from service.topology.topology import Topology
from tests.message_factory import (
    BASE_MINUTE,
    BASE_TS,
    DESTINATION_HOST,
    DESTINATION_IP,
    SOURCE_HOST,
    SOURCE_IP,
    delay_message,
    link,
    loss_message,
)
from tests.run_factory import run_body

NOW = BASE_TS + 150.0
#: A run posted 65 s after BASE_TS: its minute-long interval began in minute BASE_MINUTE.
RUN_END = BASE_TS + 65
#: The sample run's link as its task names it; the same hosts as `link()` on the bus.
NAMED = NamedEndpoints(SOURCE_HOST, DESTINATION_HOST, ip_version=4)
SOURCE_V6, DESTINATION_V6 = "2001:db8::10", "2001:db8:1::20"
#: How a row keys the run's ends while no address is known: the run fixes IPv4.
SOURCE_V4_NAME, DESTINATION_V4_NAME = named(SOURCE_HOST, 4), named(DESTINATION_HOST, 4)


def run_messages(**spec: object) -> list[ParsedMessage]:
    """The sample run's delay and loss messages (the real histogram), posted at RUN_END."""
    (run,) = parse_runs([run_body(RUN_END, **spec)])
    assert not isinstance(run, Exception) and isinstance(run.measured, tuple)
    return list(run.measured)


def slot(state: LinkState, row: int, series: str) -> float:
    return float(state.buffers.series[series][row, BASE_MINUTE % 32])


def test_a_run_first_then_the_bus_share_one_row_which_takes_the_ips() -> None:
    state = LinkState(Topology.from_mapping({"SITE-A": [SOURCE_HOST]}))
    state.apply_batch(run_messages(), NOW)
    assert state.index.sources == [SOURCE_V4_NAME] == ["ipv4:ps-latency.site-a.example.org"]
    assert state.index.source_hosts == [SOURCE_HOST] and state.index.source_sites == ["SITE-A"]
    before = state.index.names_version
    state.apply(loss_message({BASE_TS + 60: 0.02}), NOW)  # the bus: IPs and the same host names
    assert len(state) == 1
    index = state.index
    assert (index.sources, index.destinations) == ([SOURCE_IP], [DESTINATION_IP])
    assert (index.source_hosts, index.destination_hosts) == ([SOURCE_HOST], [DESTINATION_HOST])
    assert index.rows == {(SOURCE_IP, DESTINATION_IP): 0}
    assert index.names_version > before and index.source_sites == ["SITE-A"]
    assert round(slot(state, 0, "delay_mean"), 4) == 2.9321  # the run's minute is kept
    assert state.buffers.series["loss"][0, (BASE_MINUTE + 1) % 32] == np.float32(0.02)


def test_the_bus_first_then_a_run_resolve_to_the_bus_row() -> None:
    state = LinkState()
    state.apply(delay_message({BASE_TS - 60: 5.0}), NOW)
    state.apply_batch(run_messages(), NOW)
    assert len(state) == 1 and state.index.sources == [SOURCE_IP]
    assert round(slot(state, 0, "delay_median"), 2) == 2.60
    assert slot(state, 0, "loss") == 0.0


def test_the_inventorys_addresses_key_a_run_before_the_bus_reports_anything() -> None:
    """A pSConfig topology pairs the hosts with their addresses: the run's row is keyed by the
    IPs from the start, and the bus's later messages land in it without a re-key."""
    pairs = [(SOURCE_HOST, SOURCE_IP), (DESTINATION_HOST.upper(), DESTINATION_IP)]
    state = LinkState(Topology.from_inventory([(SOURCE_HOST, "SITE-A")], [], pairs))
    state.apply_batch(run_messages(), NOW)
    assert state.index.rows == {(SOURCE_IP, DESTINATION_IP): 0}
    assert state.index.find_by_name(SOURCE_HOST, DESTINATION_HOST) == 0
    before = state.index.names_version
    state.apply(loss_message({BASE_TS + 60: 0.02}), NOW)
    assert len(state) == 1 and state.index.names_version == before
    assert round(slot(state, 0, "delay_mean"), 4) == 2.9321


def test_the_inventory_overrules_the_bus_for_a_host() -> None:
    """A host the inventory pairs with another address keeps it: the bus message's claim is
    refused (its datapoint is kept, in a row labelled by its address), and a run by the host's
    name goes to the inventory's address, not to the message's."""
    topology = Topology.from_inventory([], [], [(SOURCE_HOST, "192.0.2.250")])
    state = LinkState(topology)
    outcome = state.apply(delay_message({BASE_TS - 60: 5.0}), NOW)
    assert outcome.applied == 1 and len(outcome.conflicts) == 1
    assert "192.0.2.250" in outcome.conflicts[0]
    assert state.index.source_hosts == [SOURCE_IP]
    state.apply_batch(run_messages(), NOW)
    assert state.index.sources == [SOURCE_IP, "192.0.2.250"]


def test_a_message_cannot_rebind_a_host_the_bus_bound() -> None:
    """Host-name hijack: a message claiming a toolkit's name for another address neither takes
    the toolkit's next run nor its site; one renaming an existing row changes nothing."""
    state = LinkState(Topology.from_mapping({"SITE-A": [SOURCE_HOST]}))
    state.apply(delay_message({BASE_TS - 60: 5.0}), NOW)
    forged = LinkEndpoints("198.51.100.66", DESTINATION_IP, SOURCE_HOST, DESTINATION_HOST)
    outcome = state.apply(delay_message({BASE_TS - 60: 9.0}, forged), NOW)
    assert outcome.applied == 1 and len(outcome.conflicts) == 1
    assert state.index.source_hosts == [SOURCE_HOST, "198.51.100.66"]
    assert state.index.source_sites == ["SITE-A", None]
    renamed = LinkEndpoints(SOURCE_IP, DESTINATION_IP, "evil.example.org", DESTINATION_HOST)
    outcome = state.apply(delay_message({BASE_TS: 9.0}, renamed), NOW)
    assert len(outcome.conflicts) == 1 and state.index.source_sites[0] == "SITE-A"
    assert state.index.source_hosts[0] == SOURCE_HOST
    state.apply_batch(run_messages(), NOW)
    assert len(state) == 2 and round(slot(state, 0, "delay_median"), 2) == 2.60


def test_a_row_known_by_its_address_takes_a_name_later() -> None:
    state = LinkState()
    bare = LinkEndpoints(SOURCE_IP, DESTINATION_IP, SOURCE_IP, DESTINATION_IP)
    state.apply(delay_message({BASE_TS - 60: 5.0}, bare), NOW)
    outcome = state.apply(delay_message({BASE_TS: 5.0}), NOW)
    assert not outcome.conflicts and state.index.source_hosts == [SOURCE_HOST]


def test_a_host_the_bus_revealed_on_another_link_resolves_that_end() -> None:
    state = LinkState()
    state.apply(
        delay_message(
            {BASE_TS: 5.0}, link(destination="203.0.113.9", destination_host="c.example")
        ),
        NOW,
    )
    state.apply_batch(run_messages(), NOW)
    assert state.index.rows[(SOURCE_IP, DESTINATION_V4_NAME)] == 1  # the source end is known
    state.apply(loss_message({BASE_TS: 0.5}), NOW)
    assert len(state) == 2 and state.index.rows[(SOURCE_IP, DESTINATION_IP)] == 1


def test_a_run_resolves_a_row_it_created_by_name_once_the_bus_knows_a_host() -> None:
    index = LinkIndex()
    assert index.row_for(NAMED) == 0
    index.row_for(link(destination="203.0.113.9", destination_host="c.example"))  # reveals A
    assert index.row_for(NAMED) == 0
    assert index.sources[0] == SOURCE_IP and index.destinations[0] == DESTINATION_V4_NAME
    assert index.row_for(link()) == 0 and len(index) == 2


def test_names_compare_without_case_or_final_dot() -> None:
    index = LinkIndex()
    row = index.row_for(link(source_host="PS-Latency.Site-A.example.org."))
    assert index.row_for(NAMED) == row
    assert index.source_hosts[row] == "PS-Latency.Site-A.example.org."  # as the bus wrote it


def test_the_runs_ip_version_picks_the_bus_row_of_that_family() -> None:
    index = LinkIndex()
    v4 = index.row_for(link())
    v6 = index.row_for(link(source=SOURCE_V6, destination=DESTINATION_V6))
    assert index.row_for(NAMED._replace(ip_version=4)) == v4
    assert index.row_for(NAMED._replace(ip_version=6)) == v6
    assert index.row_for(NAMED._replace(ip_version=0)) == v4  # the address bound first
    assert len(index) == 2


def test_an_unresolved_version_keeps_its_own_row_until_the_bus_reports_it() -> None:
    index = LinkIndex()
    v4 = index.row_for(link())
    named_v6 = index.row_for(NAMED._replace(ip_version=6))
    assert named_v6 != v4 and index.sources[named_v6] == named(SOURCE_HOST, 6)
    assert index.row_for(link(source=SOURCE_V6, destination=DESTINATION_V6)) == named_v6
    assert index.sources[named_v6] == SOURCE_V6


def test_a_run_never_renames_a_bus_row() -> None:
    index = LinkIndex()
    row = index.row_for(link())
    version = index.names_version
    literal = NamedEndpoints(SOURCE_IP, DESTINATION_IP, SOURCE_IP, DESTINATION_IP)
    assert index.row_for(literal) == row
    assert index.source_hosts[row] == SOURCE_HOST and index.names_version == version


def test_a_run_with_addresses_given_keys_its_row_by_them() -> None:
    """An IP literal in the task, or an address DNS gave: the bus's row when it knows none."""
    index = LinkIndex()
    given = NamedEndpoints(SOURCE_HOST, DESTINATION_HOST, SOURCE_IP, DESTINATION_IP, 4)
    row = index.row_for(given)
    assert (index.sources[row], index.source_hosts[row]) == (SOURCE_IP, SOURCE_HOST)
    assert index.row_for(link()) == row and len(index) == 1


def test_a_bus_message_without_host_names_adopts_no_named_row() -> None:
    index = LinkIndex()
    by_name = index.row_for(NamedEndpoints("a.example", "b.example"))
    bare = index.row_for(LinkEndpoints("192.0.2.1", "192.0.2.2", "192.0.2.1", "192.0.2.2"))
    assert bare != by_name and index.sources[by_name] == "a.example"


def test_without_the_bus_the_two_ip_versions_of_a_mesh_keep_two_rows() -> None:
    index = LinkIndex()
    v4, v6 = index.row_for(NAMED), index.row_for(NAMED._replace(ip_version=6))
    either = index.row_for(NAMED._replace(ip_version=0))
    assert len({v4, v6, either}) == 3
    assert index.rows[(SOURCE_HOST, DESTINATION_HOST)] == either
    assert index.row_for(link(source=SOURCE_V6, destination=DESTINATION_V6)) == v6
    assert index.row_for(link()) == v4  # each family's bus link takes its own row
    assert len(index) == 3 and index.sources[either] == SOURCE_HOST


def test_a_row_of_either_version_is_taken_by_the_first_bus_link() -> None:
    index = LinkIndex()
    either = index.row_for(NAMED._replace(ip_version=0))
    assert index.row_for(link(source=SOURCE_V6, destination=DESTINATION_V6)) == either
    assert index.sources[either] == SOURCE_V6 and index.row_for(link()) != either


def test_find_by_name_follows_the_row_through_its_keys() -> None:
    index = LinkIndex()
    row = index.row_for(NAMED)
    assert index.find_by_name(SOURCE_HOST, DESTINATION_HOST.upper()) == row
    index.row_for(link())
    assert index.find_by_name(SOURCE_HOST, DESTINATION_HOST) == row
    assert index.find_by_name(SOURCE_IP, DESTINATION_IP) == row
    assert index.find_by_name(SOURCE_IP, "nowhere.example") is None


def test_a_row_keyed_by_name_survives_a_snapshot_and_is_resolved_after_it() -> None:
    state = LinkState()
    state.apply(
        delay_message(
            {BASE_TS: 7.0}, link(destination="203.0.113.9", destination_host="c.example")
        ),
        NOW,
    )
    state.apply_batch(run_messages(source="x.example", dest=DESTINATION_HOST), NOW)
    restored = decode_state(encode_state(state), Topology())
    assert restored.index.rows == state.index.rows
    assert restored.index.sources == [SOURCE_IP, "ipv4:x.example"]
    assert restored.index.ip_by_host == {SOURCE_HOST: SOURCE_IP, "c.example": "203.0.113.9"}
    restored.apply(
        loss_message({BASE_TS: 0.25}, link(source="192.0.2.99", source_host="x.example")), NOW
    )
    assert len(restored) == 2 and restored.index.sources[1] == "192.0.2.99"
    assert round(slot(restored, 1, "delay_mean"), 4) == 2.9321
    assert slot(restored, 1, "loss") == 0.25  # the bus's value replaced the run's in that minute
    restored.apply_batch(run_messages(source=SOURCE_HOST, dest="c.example"), NOW)
    assert len(restored) == 2  # the restored bus row taught its hosts again
    assert not math.isnan(slot(restored, 0, "loss"))
