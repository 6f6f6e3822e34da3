"""ALTO PID names (RFC 7285 section 10.1) for site keys.

A PID name keeps the site name when it is already valid (letters, digits, '-', ':', '@', '_'; at
most 64 characters); any other name has each invalid character replaced by '_', is cut to leave
room, and gets '_' plus 8 hex digits of a BLAKE2b hash of the original appended (16 or 32 digits
if that name is taken), so names stay unique and the same site always gets the same PID within
one set of sites.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

PID_MAX_LENGTH = 64
_PID_CHARS = r"A-Za-z0-9\-:@_"
_INVALID_PID_CHARS = re.compile(f"[^{_PID_CHARS}]")
#: The names `is_valid_pid` accepts, as a JSON-schema pattern (the OpenAPI document's).
PID_PATTERN = f"^[{_PID_CHARS}]{{1,{PID_MAX_LENGTH}}}$"


def build_pid_names(keys: Iterable[str]) -> dict[str, str]:
    """Site key -> unique valid PID name (valid names kept as they are).

    >>> build_pid_names(["CERN-PROD", "ps.ral.ac.uk"])["ps.ral.ac.uk"][:13]
    'ps_ral_ac_uk_'
    """
    ordered = sorted(set(keys))
    names = {key: key for key in ordered if is_valid_pid(key)}
    taken = set(names.values())
    for key in ordered:
        if key not in names:
            names[key] = _hashed_pid(key, taken)
            taken.add(names[key])
    return names


def is_valid_pid(name: str) -> bool:
    return 0 < len(name) <= PID_MAX_LENGTH and not _INVALID_PID_CHARS.search(name)


def _hashed_pid(key: str, taken: set[str]) -> str:
    stem = _INVALID_PID_CHARS.sub("_", key)
    digest = hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
    candidates = [f"{stem[: PID_MAX_LENGTH - 1 - size]}_{digest[:size]}" for size in (8, 16, 32)]
    return next((name for name in candidates if name not in taken), candidates[-1])
