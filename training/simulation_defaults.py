"""The simulated mesh's families and defaults, in a module of their own so that the `nettel`
command can offer them without importing the simulators (its start stays light)."""

from __future__ import annotations

#: Simulator families: A = M/M/1/K (training.simulator), B = fluid FIFO with self-similar
#: traffic (training.simulator_fluid), mixed = both meshes side by side.
FAMILIES = ("A", "B", "mixed")
DEFAULT_FAMILY = "A"
DEFAULT_SITES = 20
DEFAULT_DAYS = 3.0
