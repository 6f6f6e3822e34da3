"""encode_body: the blocked body equals one orjson.dumps of the document, spliced or not."""

from __future__ import annotations

import gzip
import random
from typing import Any

import orjson
import pytest

from service.matrix import matrix_body
from service.matrix.matrix_body import MatrixBody, encode_body

DOCUMENT = {"generated_at": 1.5, "window_minutes": 32, "model": None, "links": []}
BLOCK = 4  # links per block in these tests, so that a few links span several blocks


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(matrix_body, "BLOCK_LINKS", BLOCK)


def record(number: int, version: int = 0) -> dict[str, Any]:
    tricky = 'odd"},{"source":"x\\\\},{'  # record-boundary text inside a string
    return {"source": f"10.0.0.{number}", "host": f"{tricky}{number}", "cost": version / 7}


def expected(links: list[dict[str, Any]]) -> bytes:
    return orjson.dumps(DOCUMENT | {"links": links})


def assert_consistent(body: MatrixBody, links: list[dict[str, Any]]) -> None:
    """Byte-equal to one dumps, same ETag as a body encoded from scratch, spans on records."""
    assert body.joined == expected(links) and body.size == len(body.joined)
    assert body.etag == encode_body(DOCUMENT, links).etag
    assert len(body.blocks) == len(body.digests) == -(-len(links) // BLOCK)
    for row, (start, end) in enumerate(body.spans.tolist()):
        assert body.blocks[row // BLOCK][start:end] == orjson.dumps(links[row])


@pytest.mark.parametrize("count", [0, 1, BLOCK - 1, BLOCK, BLOCK + 1, 3 * BLOCK + 2])
def test_a_body_from_scratch_is_the_document_byte_for_byte(count: int) -> None:
    links = [record(n) for n in range(count)]
    body = encode_body(DOCUMENT, links)
    assert_consistent(body, links)
    assert gzip.decompress(body.gzipped) == body.joined
    assert body.chunks[0].endswith(b'"links":[') and body.chunks[-1] == b"]}"


def test_unchanged_blocks_are_reused_and_changed_ones_spliced() -> None:
    links = [record(n) for n in range(3 * BLOCK + 2)]
    first = encode_body(DOCUMENT, links)
    links[BLOCK + 1] = record(BLOCK + 1, version=1)
    second = encode_body(DOCUMENT, links, [BLOCK + 1], first)
    assert_consistent(second, links)
    assert second.blocks[0] is first.blocks[0] and second.blocks[2] is first.blocks[2]
    assert second.blocks[1] != first.blocks[1] and second.etag != first.etag


def test_random_changes_growth_and_shrinking_match_a_fresh_encoding() -> None:
    rng = random.Random(7)
    links = [record(n) for n in range(10)]
    body = encode_body(DOCUMENT, links)
    for step in range(1, 60):
        old_count = len(links)
        count = max(0, old_count + rng.choice([0, 0, 0, 1, 3, BLOCK + 1, -1, -BLOCK]))
        links = [*links[:count], *(record(n, step) for n in range(old_count, count))]
        changed = set(range(min(old_count, count), count))
        for row in rng.sample(range(count), min(count, rng.choice([0, 1, 2, count]))):
            links[row] = record(row, step)
            changed.add(row)
        body = encode_body(DOCUMENT, links, sorted(changed), body)
        assert_consistent(body, links)


def test_the_etag_follows_the_head_and_every_block() -> None:
    links = [record(n) for n in range(2 * BLOCK)]
    body = encode_body(DOCUMENT, links)
    assert body.etag.startswith('"') and body.etag.endswith('"') and len(body.etag) == 26
    assert encode_body(DOCUMENT | {"generated_at": 2.5}, links).etag != body.etag
    changed = [*links[:-1], record(2 * BLOCK - 1, version=1)]
    assert encode_body(DOCUMENT, changed, [2 * BLOCK - 1], body).etag != body.etag
