"""Rucio's REST API through its own client library (`rucio-clients`, `pip install 'nettel[rucio]'`):
RSEs with their site attribute, and one distance row at a time.

The client is configured as every Rucio client is (`RUCIO_CONFIG` or rucio.cfg: host, account,
auth type and credentials). Each worker thread gets a client of its own. Transient failures
(connection errors, server errors) are retried with exponential backoff; every request sent,
retries included, is counted by operation.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from service.errors import ConfigError

T = TypeVar("T")
ATTEMPTS = 3
BACKOFF_SECONDS = 0.5


class RucioRequestError(RuntimeError):
    """A Rucio request failed after its retries (or at once, for a permanent error)."""


def _client_class() -> Any:
    try:
        from rucio.client import Client
    except ImportError:
        raise ConfigError(
            "nettel rucio-sync needs Rucio's client library: pip install 'nettel[rucio]'"
        ) from None
    return Client


def _permanent_errors() -> tuple[type[Exception], ...]:
    """Errors that another attempt would not mend (refused, unknown RSE, malformed value)."""
    from rucio.common import exception

    return (
        exception.AccessDenied,
        exception.RSENotFound,
        exception.InvalidObject,
        exception.InputValidationError,
        exception.Duplicate,
        exception.CannotAuthenticate,
    )


class RucioDistances:
    """RSE sites and distance rows of one Rucio server."""

    OPERATIONS = (
        "list_rses", "list_rse_attributes", "get_distance", "update_distance", "add_distance",
    )  # fmt: skip

    def __init__(self) -> None:
        self._client_class = _client_class()
        self._permanent = _permanent_errors()
        self._local = threading.local()
        self._lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.host = str(self._client().host)

    def rse_sites(
        self, attribute: str, expression: str | None, map_rses: Callable[..., Iterable[Any]]
    ) -> dict[str, str]:
        """RSE name -> the value of its `attribute` (RSEs without it are left out);
        `map_rses(function, names)` runs the per-RSE attribute reads (e.g. a thread pool)."""
        listed = self._call("list_rses", lambda c: list(c.list_rses(rse_expression=expression)))
        names = sorted(str(row["rse"]) for row in listed)

        def site_of(rse: str) -> tuple[str, object]:
            attributes = self._call("list_rse_attributes", lambda c: c.list_rse_attributes(rse))
            return rse, attributes.get(attribute)

        return {
            rse: str(site)
            for rse, site in map_rses(site_of, names)
            if site is not None and site != "" and not isinstance(site, bool)
        }

    def distance(self, source: str, destination: str) -> int | None:
        """The distance row's value; None when the pair has no row."""
        rows = self._call("get_distance", lambda c: c.get_distance(source, destination))
        return int(rows[0]["distance"]) if rows else None

    def update(self, source: str, destination: str, distance: int) -> None:
        self._call(
            "update_distance",
            lambda c: c.update_distance(source, destination, {"distance": int(distance)}),
        )

    def add(self, source: str, destination: str, distance: int) -> None:
        self._call(
            "add_distance",
            lambda c: c.add_distance(source, destination, {"distance": int(distance)}),
        )

    def _client(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._client_class()
            self._local.client = client
        return client

    def _call(self, operation: str, request: Callable[[Any], T]) -> T:
        attempt = 0
        while True:
            with self._lock:
                self.requests[operation] += 1
            try:
                return request(self._client())
            except self._permanent as error:
                raise RucioRequestError(f"{operation}: {error}") from error
            except Exception as error:  # the client raises many kinds for a passing fault
                attempt += 1
                if attempt == ATTEMPTS:
                    raise RucioRequestError(f"{operation}: {error}") from error
                time.sleep(BACKOFF_SECONDS * 2 ** (attempt - 1))
