"""The one error the router readers raise.

``RouterDataError`` is both a ``NettelError`` (so callers catching nettel's tree see it) and a
``ValueError`` (malformed input data); its message names the line, item or field at fault.
"""

from __future__ import annotations

from service.errors import NettelError


class RouterDataError(NettelError, ValueError):
    """Router utilisation data that cannot be read; the message says where and why."""
