"""The docstring examples of the publishers run as tests."""

from __future__ import annotations

import doctest

import pytest

from service import client_cli
from service.publish import alto, rucio


@pytest.mark.parametrize("module", [alto, rucio, client_cli], ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0
