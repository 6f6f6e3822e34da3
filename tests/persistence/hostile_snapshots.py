"""Hand-written snapshots as a hostile peer would send them: valid magic and SHA-256 (the sender
computes both) over whatever arrays and index it likes, optionally zip-compressed."""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable

import numpy as np
import orjson

from service.parse.records import LinkEndpoints
from service.persistence.snapshot_codec import FORMAT_VERSION, MAGIC
from service.state.link_buffers import ARCHIVE, SERIES, WINDOW_MINUTES
from service.state.link_state import LinkState
from service.state.path_state import COLUMNS as PATH_COLUMNS
from service.state.throughput_state import COLUMNS as THROUGHPUT_COLUMNS
from tests.message_factory import delay_message, loss_message

Arrays = dict[str, np.ndarray]
Links = list[list[str]]


def honest_state(links: int = 4, now: float | None = None) -> LinkState:
    """A state as live ingest builds it: `links` links from 10.1.0.N (ps-N.example.org) to
    10.2.0.1 (ps-dst.example.org), each with the last 32 minutes before `now` full."""
    now = time.time() if now is None else now
    state = LinkState()
    ends = [
        LinkEndpoints(f"10.1.0.{n + 1}", "10.2.0.1", f"ps-{n}.example.org", "ps-dst.example.org")
        for n in range(links)
    ]
    newest = int(now // 60) * 60 - 60
    for minute in range(40):  # 8 minutes leave the window: the archive holds them
        ts = newest - (39 - minute) * 60
        batch = []
        for number, endpoints in enumerate(ends):
            batch.append(delay_message({ts: 5.0 + number + (minute % 7) * 0.5}, endpoints))
            batch.append(loss_message({ts: (minute % 3) * 0.001}, endpoints))
        state.apply_batch(batch, ts + 30)
    return state


def arrays_of(state: LinkState) -> tuple[Arrays, Links]:
    """Copies of the state's arrays (snapshot names) and its four link lists."""
    n, b, i = len(state), state.buffers, state.index
    arrays: Arrays = {"slot_minute": b.slot_minute[:n].copy()}
    arrays |= {f"series/{k}": b.series[k][:n].copy() for k in SERIES}
    arrays |= {f"archive/{k}": b.archive[k][:n].copy() for k in ARCHIVE}
    for name in ("latest_delay_minute", "latest_p95", "latest_minute", "clock_suspect_minute"):
        arrays[name] = getattr(b, name)[:n].copy()
    arrays |= {f"throughput/{k}": v[:n].copy() for k, v in state.throughput.columns.items()}
    arrays |= {f"paths/{k}": v[:n].copy() for k, v in state.paths.columns.items()}
    arrays["paths/hop_asn"] = state.paths.addresses.asn_array().copy()
    links = [list(i.sources), list(i.destinations), list(i.source_hosts)]
    return arrays, links + [list(i.destination_hosts)]


def snapshot_bytes(
    arrays: Arrays, links: Links, compressed: bool = False, hop_addresses: list[str] | None = None
) -> bytes:
    """Snapshot bytes of exactly these arrays, links and hop addresses, with a correct checksum."""
    index = {
        "version": FORMAT_VERSION,
        "window_minutes": WINDOW_MINUTES,
        "links": links,
        "hop_addresses": hop_addresses or [],
    }
    payload = io.BytesIO()
    save = np.savez_compressed if compressed else np.savez
    save(payload, index=np.frombuffer(orjson.dumps(index), dtype=np.uint8), **arrays)
    body = payload.getvalue()
    return MAGIC + hashlib.sha256(body).digest() + body


def tampered(change: Callable[[Arrays, Links], None], links: int = 4) -> bytes:
    """An honest state's snapshot after `change` edited its arrays and links in place."""
    arrays, names = arrays_of(honest_state(links))
    change(arrays, names)
    return snapshot_bytes(arrays, names)


def future_link(arrays: Arrays, links: Links, row: int = 0, years: float = 19) -> None:
    """Every slot of `row` stamped about `years` ahead (the issue's link frozen in 2045)."""
    ahead = int(years * 365.25 * 24 * 60)
    arrays["slot_minute"][row] += ahead - ahead % WINDOW_MINUTES
    for name in ("latest_minute", "latest_delay_minute"):
        arrays[name][row] += ahead - ahead % WINDOW_MINUTES


def many_links(count: int) -> tuple[Arrays, Links]:
    """`count` made-up links of zeros (compresses to almost nothing)."""
    minute = int(time.time() // 60) - 1
    arrays: Arrays = {"slot_minute": np.full((count, WINDOW_MINUTES), -1, np.int32)}
    arrays["slot_minute"][:, minute % WINDOW_MINUTES] = minute
    for name in SERIES:
        values = np.full((count, WINDOW_MINUTES), np.nan, np.float32)
        values[:, minute % WINDOW_MINUTES] = 0.0
        arrays[f"series/{name}"] = values
    arrays |= {
        f"archive/{k}": np.zeros(count, np.float32 if k.endswith("_n") else np.float64)
        for k in ARCHIVE
    }
    arrays["archive/delay_min"][:] = np.inf
    for name in ("latest_delay_minute", "latest_minute"):
        arrays[name] = np.full(count, minute, np.int32)
    arrays["latest_p95"] = np.zeros(count, np.float32)
    arrays["clock_suspect_minute"] = np.full(count, -1, np.int32)
    for prefix, columns in (("throughput/", THROUGHPUT_COLUMNS), ("paths/", PATH_COLUMNS)):
        for name, spec in columns.items():
            arrays[prefix + name] = np.full((count, *spec.width), spec.fill, spec.dtype)
    arrays["paths/hop_asn"] = np.zeros(0, np.uint32)
    sources = [f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}" for n in range(count)]
    return arrays, [sources, ["10.255.255.254"] * count, sources, ["10.255.255.254"] * count]
