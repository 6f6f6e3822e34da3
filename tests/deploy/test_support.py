"""The doctests of the deployment-test helpers (pytest runs no doctests by default)."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

from tests.deploy import support, test_compose


@pytest.mark.parametrize("module", [support, test_compose])
def test_doctests(module: ModuleType) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0
