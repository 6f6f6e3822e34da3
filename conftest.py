"""Doctest collection: of the packages' modules, only those with an example are imported.

`--doctest-modules` (pyproject.toml) imports every module it is given to look for examples. In
service/, models/ and training/ a module without one (no `>>>`) is left out instead, so that
collecting the doctests imports no Keras and TensorFlow (training/network.py, training/train.py)
and runs no module for nothing. Without the training extra, training/ is left out whole (its
modules import scikit-learn, pandas, pyarrow or Keras; the tests that need them skip). The test
files under tests/ are collected as usual.
"""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).parent
PACKAGES = frozenset({"service", "models", "training"})
#: The training extra's packages (pyproject.toml), as imported.
TRAINING_EXTRA = ("sklearn", "pandas", "pyarrow", "keras", "tensorflow")


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    """True for a package module without a doctest; no say (None) about any other path."""
    if collection_path.suffix != ".py" or not collection_path.is_relative_to(ROOT):
        return None
    package = collection_path.relative_to(ROOT).parts[0]
    if package not in PACKAGES:
        return None
    if package == "training" and not _training_extra_installed():
        return True
    return ">>>" not in collection_path.read_text(encoding="utf-8") or None


def _training_extra_installed() -> bool:
    return all(find_spec(name) is not None for name in TRAINING_EXTRA)
