"""A real `nettel serve`, fed by `nettel simulate --fault ...` over ActiveMQ, raises each fault's
alarm, one grouped alarm for a site cut off, and none on calm links (read through GET /alarms).

Faults sit in the back-filled past, so the test takes seconds, not the minutes a live feed
would: the service's clock is real time, so the feed cannot run ahead of it, and the alarm
engine judges each minute once, when it has settled, so minutes back-filled after the engine
judged them (empty) are never judged. Hence two runs on one state dir: the first (`--alarms
false`) takes the feed's 28 back-filled minutes off the broker into its link state, saved at
stop; the second restores that state and, having judged no minute yet, judges every minute the
window holds on its first cycle, as a restarted service catches up (`service.alarms.engine`).
The delay step is not here: its baseline takes minutes 30 minutes after they are judged and
needs 10 of them, more history than the 32-minute window of one restart; the replay benchmark
measures it (`python -m benchmarks --only alarm_detection`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from benchmarks.support.alarm_scenarios import (
    CONGESTED_UTILISATION,
    EXPECTED_KIND,
    InjectedFault,
    Scenario,
    SimulatedTruth,
    expected_subjects,
    fault_layout,
)
from devtools.activemq import ActiveMQProcess
from devtools.local_http import LOCAL_HTTP
from devtools.metrics_reader import samples_named
from devtools.service_process import ServiceProcess
from devtools.waiting import wait_for
from service.alarms.records import AlarmKind
from simulation.faults import plan_faults
from simulation.mesh_inventory import write_cric_export
from simulation.simulator import Mesh, build_mesh, simulate_utilisation

pytestmark = [pytest.mark.broker, pytest.mark.slow]

SITES = 14  # the firewall's site hears from 13 - 1 (cut off) = 12 sources: more than AAAS's 10
SEED = 3
BACKFILL_MINUTES = 28  # within the 32-minute window when the second run starts
FAULT_MINUTE = 8  # the faults hold for the last 20 back-filled minutes
CALM_LOSS = 0.01
#: Kinds the demo mesh raises only under a fault (its own congestion raises loss, delay and
#: congestion alarms; its drifted clocks stay under AAAS's 100 ms).
FAULT_ONLY_KINDS = {
    AlarmKind.COMPLETE_PACKET_LOSS,
    AlarmKind.FIREWALL_ISSUE,
    AlarmKind.LINK_SILENT,
    AlarmKind.LARGE_CLOCK_CORRECTION,
    AlarmKind.HIGH_PACKET_LOSS_MULTIPLE,
}
#: The second run must judge the faulted minutes within this (its first cycle, about 1 s).
ALARM_TIMEOUT_S = 20.0


def nettel(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "service", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def log_records(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def messages_received(url: str) -> float:
    """Messages received on every topic (the feed sends throughput tests and traces too)."""
    text = httpx.get(f"{url}/metrics", timeout=5.0).text
    return sum(sample.value for sample in samples_named(text, "nettel_messages_received_total"))


def alarms_raised(url: str) -> list[dict[str, Any]]:
    """Open and closed alarms: a fault's alarm may have closed when the link's own congestion
    took over (high loss with a queue building counts as congestion, not a loss fault)."""
    response = httpx.get(f"{url}/alarms", timeout=5.0)
    response.raise_for_status()
    document = response.json()
    alarms: list[dict[str, Any]] = document["open"] + document["closed"]
    return alarms


def test_each_fault_raises_its_alarm_and_calm_links_none(
    activemq: ActiveMQProcess, nettel_service: Callable[..., ServiceProcess], tmp_path: Path
) -> None:
    mesh = build_mesh(SITES, SEED)
    # the feed back-fills the minutes before the one it starts in, a few seconds from now
    around = int(time.time() // 60) - BACKFILL_MINUTES - 1
    calm_now = calm(mesh, around, BACKFILL_MINUTES + 3)
    injected = [
        item
        for item in fault_layout(mesh, SEED, FAULT_MINUTE, calm=calm_now)
        if item.scenario is not Scenario.DELAY_STEP
    ]
    topology, state_dir = tmp_path / "topology.json", tmp_path / "state"
    write_cric_export(mesh, topology)  # what `nettel simulate --write-topology` writes
    common = ("--topology", str(topology), "--state-dir", str(state_dir), "--client-id", "alarms")
    first = nettel_service(activemq.brokers, *common, "--alarms", "false", "--interval", "1")
    wait_for_ready(first)

    flags = [arg for item in injected for arg in ("--fault", item.fault.flag())]
    fed = nettel("simulate", "--brokers", activemq.brokers, "--sites", str(SITES),
                 "--seed", str(SEED), "--backfill-minutes", str(BACKFILL_MINUTES),
                 "--no-realtime", *flags)  # fmt: skip
    records = log_records(fed.stderr)
    onsets = {r["fault"]: r["onset_minute"] for r in records if "onset_minute" in r}
    sent = next(
        int(r["message"].split("messages=")[1]) for r in records if "stopped" in r["message"]
    )
    wait_for(lambda: messages_received(first.url) >= sent, what=f"{sent} messages in the state")
    assert first.stop() == 0  # a clean stop saves the state

    second = nettel_service(activemq.brokers, *common, "--interval", "1")
    wait_for_ready(second)
    wanted = {(EXPECTED_KIND[item.scenario], item.fault.target) for item in injected}
    alarms = wait_for(
        lambda: raised_all(alarms_raised(second.url), injected, mesh),
        timeout=ALARM_TIMEOUT_S,
        what=f"an alarm for each of {sorted(wanted)}",
    )

    onset_minute = {item.scenario: onsets[item.fault.describe()] for item in injected}
    for item in injected:
        alarm = raised(alarms, item, mesh)
        assert alarm is not None
        onset_s = onset_minute[item.scenario] * 60
        assert onset_s <= alarm["started_at"] <= onset_s + 120, (item.scenario, alarm)

    cut = next(item for item in injected if item.scenario is Scenario.SITE_CUT)
    silent = [alarm for alarm in alarms if alarm["kind"] == AlarmKind.LINK_SILENT]
    assert [(alarm["subject"], len(alarm["links"])) for alarm in silent] == [
        (cut.fault.target, 2 * (SITES - 1))
    ]

    quiet = calm_links(mesh, injected, onsets, BACKFILL_MINUTES)
    on_calm = [a for a in alarms if {(x["source"], x["destination"]) for x in a["links"]} & quiet]
    assert not on_calm
    # kinds only a fault raises on this mesh: exactly the faults' alarms
    expected = {(a["kind"], a["subject"]) for item in injected if (a := raised(alarms, item, mesh))}
    only_faults = {(a["kind"], a["subject"]) for a in alarms if a["kind"] in FAULT_ONLY_KINDS}
    assert only_faults == {key for key in expected if key[0] in FAULT_ONLY_KINDS}


def wait_for_ready(service: ServiceProcess) -> None:
    wait_for(
        lambda: LOCAL_HTTP.get(f"{service.url}/readyz").status_code == 200,
        what="ready (subscribed, a matrix computed)",
    )


def raised(alarms: list[dict[str, Any]], item: InjectedFault, mesh: Mesh) -> dict[str, Any] | None:
    (planned,) = plan_faults(mesh, [item.fault]).faults
    subjects = expected_subjects(mesh, planned)
    kind = EXPECTED_KIND[item.scenario]
    return next((a for a in alarms if a["kind"] == kind and a["subject"] in subjects), None)


def raised_all(
    alarms: list[dict[str, Any]], injected: list[InjectedFault], mesh: Mesh
) -> list[dict[str, Any]]:
    """`alarms` when each fault has its alarm among them, else []."""
    return alarms if all(raised(alarms, item, mesh) is not None for item in injected) else []


def calm(mesh: Mesh, first_minute: int, minutes: int) -> np.ndarray:
    """Links whose simulated load stayed at most 70 % and loss below 1 % over the minutes."""
    utilisation = simulate_utilisation(mesh, first_minute, minutes, SEED)
    truth = SimulatedTruth.of(mesh, first_minute, utilisation)
    quiet = (truth.utilisation <= CONGESTED_UTILISATION) & (truth.loss < CALM_LOSS)
    return np.asarray(quiet.all(axis=1))


def calm_links(
    mesh: Mesh, injected: list[InjectedFault], onsets: dict[str, int], minutes: int
) -> set[tuple[str, str]]:
    """(source IP, destination IP) of the calm links no fault touched over the back-filled
    minutes."""
    first = min(onsets.values()) - FAULT_MINUTE
    untouched = calm(mesh, first, minutes)
    for planned in plan_faults(mesh, [item.fault for item in injected]).faults:
        untouched &= ~planned.links
    ips = mesh.host_ips
    return {
        (ips[int(mesh.source[row])], ips[int(mesh.destination[row])])
        for row in np.flatnonzero(untouched)
    }
