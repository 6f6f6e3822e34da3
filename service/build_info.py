"""What build of nettel is running (for the API's version and `nettel_build_info`)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    """The installed nettel's version ("unknown" when run from a tree that is not installed)."""
    try:
        return version("nettel")
    except PackageNotFoundError:
        return "unknown"
