"""Tests that train with Keras skip where it is not installed, found without importing it: its
import costs ~4 CPU-s, which collecting the tests (in every test worker) then does not pay."""

from __future__ import annotations

from importlib.util import find_spec

import pytest

KERAS_MISSING = find_spec("keras") is None


def skip_without_keras() -> None:
    """Skip the calling test, or at module level the module, where Keras is not installed."""
    if KERAS_MISSING:
        pytest.skip(
            "Keras is not installed (the training extra): pip install 'nettel[training]'",
            allow_module_level=True,
        )
