"""Turn reader input (text, bytes or a file) into text or JSON documents; the only file access."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from training.readers.errors import RouterDataError
from training.readers.series import UtilisationSeries

Parser = Callable[..., list[UtilisationSeries]]


def as_text(data: str | bytes) -> str:
    """Decode bytes as UTF-8 (a leading byte-order mark, common in CSV exports, is dropped)."""
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise RouterDataError(f"not UTF-8 text (byte {error.start})") from None


def parse_file(path: str | Path, parse: Parser, **options: Any) -> list[UtilisationSeries]:
    """Run ``parse`` on the file's bytes; errors are prefixed with the path."""
    data = Path(path).read_bytes()
    try:
        return parse(data, **options)
    except RouterDataError as error:
        raise RouterDataError(f"{path}: {error}") from None


def load_json_documents(text: str) -> list[tuple[str, dict[str, Any]]]:
    """Return ``(location, object)`` pairs from a JSON array, a single object or JSON lines.

    The location (``"item 2"`` or ``"line 7"``) is for error messages.
    """
    if text.lstrip().startswith("["):
        items = _loads(text, "JSON array")
        return [_as_object(item, f"item {n}") for n, item in enumerate(items, start=1)]
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise RouterDataError("no JSON documents")
    return [_as_object(_loads(line, f"line {n}"), f"line {n}") for n, line in lines]


def _loads(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        detail = f"{error.msg}, column {error.colno}"
        raise RouterDataError(f"{where}: invalid JSON ({detail})") from None


def _as_object(value: Any, where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(value, dict):
        raise RouterDataError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return where, value
