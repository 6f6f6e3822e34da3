"""The sample messages the tests use, read from this folder wherever the repository is cloned."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent


def load_sample(name: str) -> dict[str, Any]:
    """One sample file of this folder (STOMP `headers` + JSON `body`), parsed."""
    return json.loads((DATA / name).read_text())
