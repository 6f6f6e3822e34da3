"""Checked reads of untrusted JSON, as both parsers (perfsonar, pscheduler) make them: the object
of a body, an object-valued field, and the length of a string before it is converted."""

from __future__ import annotations

from typing import Any

import orjson

from service.errors import RejectedInput, RejectReason
from service.parse.limits import InputLimits


def load_object(body: bytes | str) -> dict[str, Any]:
    """The JSON object of `body`; RejectedInput for invalid JSON or another top-level value."""
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        raise RejectedInput(RejectReason.INVALID_JSON, str(error)[:80]) from None
    if not isinstance(document, dict):
        raise RejectedInput(RejectReason.NOT_AN_OBJECT, type(document).__name__)
    return document


def require_object(value: Any, name: str) -> dict[str, Any]:
    """`value` as an object; missing_field when absent (None), bad_value when not an object."""
    if value is None:
        raise RejectedInput(RejectReason.MISSING_FIELD, name)
    if not isinstance(value, dict):
        raise RejectedInput(RejectReason.BAD_VALUE, f"{name} is not an object")
    return value


def check_length(text: str, what: str, limits: InputLimits) -> None:
    """Numbers arrive as strings too; one padded past the limit is refused before float()."""
    if len(text) > limits.max_string_length:
        raise RejectedInput(RejectReason.BAD_VALUE, f"{what} is longer than the limit")
