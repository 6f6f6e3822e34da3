"""The simulated mesh's families and defaults, in a module of their own so that the `nettel`
command can offer them without importing the simulators (its start stays light)."""

from __future__ import annotations

from pathlib import Path

#: Simulator families: A = M/M/1/K queues (simulation.simulator), B = fluid FIFO queues with
#: self-similar traffic (simulation.simulator_fluid), C = packet-level TCP simulated by ns-3
#: (simulation.simulator_ns3; read from the committed capture FAMILY_C_CAPTURE).
SIMULATOR_FAMILIES = ("A", "B", "C")
#: `--family`: one family, or several side by side joined with "+" (links in this order);
#: "mixed" is "A+B", as bundles trained before family C existed name it.
FAMILIES = ("A", "B", "C", "A+B", "A+C", "B+C", "A+B+C", "mixed")
DEFAULT_FAMILY = "A"
DEFAULT_SITES = 20
DEFAULT_DAYS = 3.0
#: The repository (or installed tree) root: card paths are written relative to it.
PACKAGE_ROOT = Path(__file__).resolve().parent.parent
#: Family C's links: bus captures and router counters written once by `nettel simulate --family
#: C` (CPU-hours of ns-3), committed with their seed and command (its README).
FAMILY_C_CAPTURE = PACKAGE_ROOT / "training" / "data" / "family-c"


def family_members(family: str) -> tuple[str, ...]:
    """The simulator families a `--family` value names, in link order.

    >>> family_members("A+B+C"), family_members("mixed"), family_members("B")
    (('A', 'B', 'C'), ('A', 'B'), ('B',))
    """
    if family not in FAMILIES:
        raise ValueError(f"simulator family must be one of {FAMILIES}, not {family!r}")
    return ("A", "B") if family == "mixed" else tuple(family.split("+"))


def portable_path(path: Path) -> str:
    """`path` relative to PACKAGE_ROOT when inside it (as model cards record it), else as is."""
    try:
        return str(path.resolve().relative_to(PACKAGE_ROOT))
    except ValueError:
        return str(path)


def resolve_portable_path(text: str) -> Path:
    """A path a model card recorded with `portable_path`."""
    path = Path(text)
    return path if path.is_absolute() else PACKAGE_ROOT / path
