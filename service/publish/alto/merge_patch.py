"""The JSON merge patch (RFC 7396) that turns one JSON document into another.

Applied with RFC 7396's algorithm to `old`, the patch gives `new`: a member gone from an object
becomes `null`, a member added or changed carries its new value, objects present in both are
patched member by member, anything else (arrays included) is replaced whole. A merge patch
cannot set a member to `null`, so `new` must hold no `null` inside objects (ALTO maps leave a
pair without a value out instead).
"""

from __future__ import annotations

from typing import Any


def merge_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The merge patch from `old` to `new`; `{}` when they are equal.

    >>> merge_patch({"a": {"x": 1, "y": 2}, "b": [1]}, {"a": {"x": 1, "z": 3}, "b": [1, 2]})
    {'a': {'y': None, 'z': 3}, 'b': [1, 2]}
    >>> merge_patch({"a": 1}, {"a": 1})
    {}
    """
    patch: dict[str, Any] = {name: None for name in old if name not in new}
    for name, value in new.items():
        if name not in old:
            patch[name] = value
            continue
        before = old[name]
        if before == value:  # compared in C: unchanged rows of a large map cost little
            continue
        if isinstance(before, dict) and isinstance(value, dict):
            patch[name] = merge_patch(before, value)
        else:
            patch[name] = value
    return patch
