"""A family-B (fluid) mesh's minutes replayed into a link state, as ingest would apply them."""

from __future__ import annotations

from service.parse.records import LinkEndpoints
from service.state.link_state import LinkState
from simulation.simulator_fluid import build_fluid_mesh, simulate_fluid_minutes, simulate_traffic
from training.dataset import WARMUP_MINUTES, mesh_endpoints, simulated_batches


def replay_fluid_mesh(
    state: LinkState, sites: int, seed: int, start: int, rows: int
) -> list[LinkEndpoints]:
    """Apply the warm-up and `rows` minutes from `start` of a family-B mesh to `state`, as
    ingest would (the minutes `build_fluid_dataset` builds rows of); the endpoints of its links."""
    mesh = build_fluid_mesh(sites, seed)
    first = start - WARMUP_MINUTES
    traffic = simulate_traffic(mesh, first - 1, WARMUP_MINUTES + rows + 1, seed)
    endpoints = mesh_endpoints(mesh.hosts)
    measured = simulate_fluid_minutes(mesh, traffic, seed, first_minute=first)
    for batch in simulated_batches(measured, endpoints, seed):
        state.apply_batch(batch.messages, (batch.minute + 1) * 60.0)
    return endpoints
