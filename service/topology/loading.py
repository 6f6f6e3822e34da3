"""Read `--topology` (files or https:// URLs) and parse each in whichever layout it is.

A document is untrusted: besides its size in bytes (`MAX_DOCUMENT_BYTES`), YAML is read without
aliases (`*name`), which would let a few hundred bytes stand for gigabytes once expanded (an
"alias bomb"), and within a node count and a depth (`service.bounded_yaml`). JSON has no
aliases; orjson bounds its nesting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson

from service.bounded_yaml import load_bounded_yaml
from service.config import comma_separated, setting_name
from service.errors import ConfigError
from service.topology.layouts import PSCONFIG_SITE_KEY, Layout, parse_topology
from service.topology.topology import Topology

#: Longest wait (s) for an inventory URL: connect, and each read.
FETCH_TIMEOUT = 30.0
#: Largest topology document read (bytes); a full CRIC export is a few MB.
MAX_DOCUMENT_BYTES = 256 << 20


@dataclass(frozen=True)
class LoadedTopology:
    """A topology as read: from where (without credentials), in which layouts (one a source)."""

    where: str
    layouts: tuple[Layout, ...]
    topology: Topology


def load_topology(sources: str, site_key: str = PSCONFIG_SITE_KEY) -> LoadedTopology:
    """Read and parse the comma-separated `sources`, merged into one topology; ConfigError
    saying what is wrong when one of them cannot be used (then none is)."""
    parts = [_load_one(source, site_key) for source in comma_separated(sources)]
    if not parts:
        raise ConfigError("topology: no file or URL given")
    return LoadedTopology(
        ", ".join(part.where for part in parts),
        tuple(layout for part in parts for layout in part.layouts),
        Topology.merged([part.topology for part in parts]),
    )


def _load_one(source: str, site_key: str) -> LoadedTopology:
    """One source as read and parsed; ConfigError naming the setting and the source (`--topology
    / NETTEL_TOPOLOGY: cric.json: ...`) when it cannot be used."""
    where = f"{setting_name('topology')}: {_display(source)}"
    try:
        data = _fetch(source) if urlsplit(source).scheme in ("http", "https") else _read(source)
        layout, topology = parse_topology(decode_document(data, source), site_key)
    except httpx.HTTPStatusError as error:  # its text names the URL, which may hold a secret
        raise ConfigError(f"{where}: HTTP {error.response.status_code}") from None
    except (OSError, httpx.HTTPError, ValueError, RecursionError) as error:
        raise ConfigError(f"{where}: {error}") from None
    return LoadedTopology(_display(source), (layout,), topology)


def _read(path: str) -> bytes:
    """The file's bytes, read in pieces (`read(MAX_DOCUMENT_BYTES + 1)` would allocate the
    whole limit for a file of a few bytes)."""
    data = bytearray()
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            data += chunk
            _check_size(len(data))
    return bytes(data)


def _fetch(url: str) -> bytes:
    """The body of a 2xx answer (a redirect is an error: it could leave https)."""
    with httpx.stream("GET", url, timeout=FETCH_TIMEOUT) as response:
        response.raise_for_status()
        data = bytearray()
        for chunk in response.iter_bytes():
            data += chunk
            _check_size(len(data))
    return bytes(data)


def _check_size(size: int) -> None:
    if size > MAX_DOCUMENT_BYTES:
        raise ValueError(f"larger than {MAX_DOCUMENT_BYTES >> 20} MiB")


def decode_document(data: bytes, source: str) -> Any:
    """A JSON document (a `.json` source, or one that opens with `{` or `[`: CRIC, pSConfig)
    or else YAML without aliases; ValueError saying at which line and column it breaks, in one
    line (a YAML parser's view of broken JSON would only confuse).

    >>> decode_document(b'{"CERN-PROD": ["psl01.cern.ch",]}', "sites.json")
    Traceback (most recent call last):
    ...
    ValueError: invalid JSON at line 1, column 31: trailing comma is not allowed
    >>> decode_document(b"CERN-PROD: [psl01.cern.ch]", "sites.yaml")
    {'CERN-PROD': ['psl01.cern.ch']}
    >>> decode_document(b"a: &a [ps.a.org]\\nCERN-PROD: [*a]", "sites.yaml")
    Traceback (most recent call last):
    ...
    ValueError: invalid YAML at line 2, column 13: an alias (*a) is not accepted in a topology
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if urlsplit(source).path.lower().endswith(".json") or data.lstrip()[:1] in (b"{", b"["):
            message = f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
            raise ValueError(message) from None
    return load_bounded_yaml(data, "a topology")


def _display(source: str) -> str:
    """`source` without credentials, query or fragment, for logs and errors."""
    url = urlsplit(source)
    if url.scheme not in ("http", "https"):
        return source
    return f"{url.scheme}://{url.hostname}{f':{url.port}' if url.port else ''}{url.path}"
