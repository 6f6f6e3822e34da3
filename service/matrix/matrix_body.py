"""The /costmatrix JSON body, kept in blocks of links so that a new snapshot copies and hashes
only the blocks whose links changed.

A body is `head`, then the blocks, then `]}`: `head` is the document up to its list of links,
block b holds the records of links b * BLOCK_LINKS onwards (a comma before every record but the
very first). Publishers send the pieces as they are; the joined body is built only when asked
for. The ETag hashes the head and each block's digest, so an unchanged block is not hashed again.
"""

from __future__ import annotations

import hashlib
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import orjson

#: Links per block (about 0.5 MB of JSON): small enough that a few changed links copy little,
#: large enough that a full body is a few dozen pieces at 15,000 links.
BLOCK_LINKS = 1024
#: Above this share of changed links in a block, encoding the block anew beats splicing.
SPLICE_MAX_CHANGED = 0.1
GZIP_LEVEL = 5
_TAIL = b"]}"
#: Where one record ends and the next begins in a JSON list of records: every record starts
#: with its "source" key, and inside a JSON string a quote is always escaped.
_BETWEEN_RECORDS = re.compile(rb'\},(?=\{"source":)')


@dataclass(frozen=True)
class MatrixBody:
    """One serialised document; `spans[i]` is where link i's record lies in its block."""

    head: bytes
    blocks: tuple[bytes, ...]
    digests: tuple[bytes, ...]
    spans: np.ndarray

    @property
    def chunks(self) -> tuple[bytes, ...]:
        """The body's pieces in order: send them one after another."""
        return (self.head, *self.blocks, _TAIL)

    @cached_property
    def size(self) -> int:
        """Bytes in the whole body."""
        return sum(map(len, self.chunks))

    @cached_property
    def joined(self) -> bytes:
        return b"".join(self.chunks)

    @cached_property
    def etag(self) -> str:
        """Strong ETag: 96 bits of SHA-256 over the head and the blocks' SHA-256 digests."""
        return '"' + hashlib.sha256(b"".join((self.head, *self.digests))).hexdigest()[:24] + '"'

    @cached_property
    def gzipped(self) -> bytes:
        """The body gzip-compressed, computed once on first request."""
        compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)  # 31: gzip framing
        return b"".join([*map(compressor.compress, self.chunks), compressor.flush()])


def encode_body(
    document: dict[str, Any],
    links: Sequence[dict[str, Any]],
    changed: Sequence[int] = (),
    previous: MatrixBody | None = None,
) -> MatrixBody:
    """`document` (whose last key is "links") with `links` as its list of links. `changed`
    (ascending) are the rows whose record differs from `previous`'s; the JSON of the others is
    copied from `previous`."""
    head = orjson.dumps(document | {"links": []})[: -len(_TAIL)]
    old_count = 0 if previous is None else len(previous.spans)
    changed_rows = np.asarray(changed, np.int64)
    spans = np.empty((len(links), 2), np.int64)
    blocks: list[bytes] = []
    digests: list[bytes] = []
    for lo in range(0, len(links), BLOCK_LINKS):
        hi = min(lo + BLOCK_LINKS, len(links))
        first, last = np.searchsorted(changed_rows, (lo, hi))
        old = previous if previous is not None and lo < old_count else None
        if old is not None and first == last and min(old_count, lo + BLOCK_LINKS) == hi:
            blocks.append(old.blocks[lo // BLOCK_LINKS])  # the block is unchanged
            digests.append(old.digests[lo // BLOCK_LINKS])
            spans[lo:hi] = old.spans[lo:hi]
            continue
        if old is not None and last - first <= SPLICE_MAX_CHANGED * (hi - lo):
            rows = changed_rows[first:last].tolist()
            block = _spliced_block(old, links, lo, hi, rows, spans)
        else:
            block = _encoded_block(links, lo, hi, spans)
        blocks.append(block)
        digests.append(hashlib.sha256(block).digest())
    return MatrixBody(head, tuple(blocks), tuple(digests), spans)


def _encoded_block(links: Sequence[dict[str, Any]], lo: int, hi: int, spans: np.ndarray) -> bytes:
    """Links lo..hi-1 encoded at once; fills in their spans."""
    encoded = orjson.dumps(links[lo:hi])  # b"[{...},{...}]"
    between = [match.start() for match in _BETWEEN_RECORDS.finditer(encoded)]
    shift = -1 if lo == 0 else 0  # the block keeps the "[" as its leading comma, or drops it
    spans[lo:hi, 0] = np.array([-1, *between], np.int64) + 2 + shift
    spans[lo:hi, 1] = np.array([*between, len(encoded) - 2], np.int64) + 1 + shift
    return b"," + encoded[1:-1] if lo else encoded[1:-1]


def _spliced_block(
    previous: MatrixBody,
    links: Sequence[dict[str, Any]],
    lo: int,
    hi: int,
    changed: list[int],
    spans: np.ndarray,
) -> bytes:
    """Links lo..hi-1 with unchanged runs copied from `previous`'s block and `changed` links
    encoded; fills in their spans."""
    old, old_spans = memoryview(previous.blocks[lo // BLOCK_LINKS]), previous.spans
    pieces: list[bytes | memoryview] = [b","] if lo else []
    position = len(pieces)
    run_start = lo
    for row in [*changed, hi]:
        if row > run_start:  # links run_start .. row - 1 are unchanged
            start, end = old_spans[run_start, 0], old_spans[row - 1, 1]
            pieces += (old[start:end], b",")
            spans[run_start:row] = old_spans[run_start:row] - start + position
            position += end - start + 1
        if row < hi:
            record = orjson.dumps(links[row])
            pieces += (record, b",")
            spans[row] = (position, position + len(record))
            position += len(record) + 1
        run_start = row + 1
    pieces.pop()  # the comma after the block's last record
    return b"".join(pieces)
