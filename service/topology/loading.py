"""Read `--topology` (files or https:// URLs) and parse each in whichever layout it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import yaml

from service.config import comma_separated
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
    where = _display(source)
    try:
        data = _fetch(source) if urlsplit(source).scheme in ("http", "https") else _read(source)
        layout, topology = parse_topology(decode_document(data, source), site_key)
    except httpx.HTTPStatusError as error:  # its text names the URL, which may hold a secret
        raise ConfigError(f"topology {where}: HTTP {error.response.status_code}") from None
    except (OSError, httpx.HTTPError, yaml.YAMLError, ValueError) as error:
        raise ConfigError(f"topology {where}: {error}") from None
    return LoadedTopology(where, (layout,), topology)


def _read(path: str) -> bytes:
    with open(path, "rb") as file:
        data = file.read(MAX_DOCUMENT_BYTES + 1)
    _check_size(len(data))
    return data


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
    or else YAML; ValueError saying at which line and column it breaks, in one line (a YAML
    parser's view of broken JSON would only confuse).

    >>> decode_document(b'{"CERN-PROD": ["psl01.cern.ch",]}', "sites.json")
    Traceback (most recent call last):
    ...
    ValueError: invalid JSON at line 1, column 31: trailing comma is not allowed
    >>> decode_document(b"CERN-PROD: [psl01.cern.ch]", "sites.yaml")
    {'CERN-PROD': ['psl01.cern.ch']}
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as error:
        if urlsplit(source).path.lower().endswith(".json") or data.lstrip()[:1] in (b"{", b"["):
            message = f"invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}"
            raise ValueError(message) from None
    try:
        return yaml.safe_load(data)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ValueError(f"invalid YAML{where}: {error.problem or error.context}") from None


def _display(source: str) -> str:
    """`source` without credentials, query or fragment, for logs and errors."""
    url = urlsplit(source)
    if url.scheme not in ("http", "https"):
        return source
    return f"{url.scheme}://{url.hostname}{f':{url.port}' if url.port else ''}{url.path}"
