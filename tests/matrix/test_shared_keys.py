"""Key-sharing record dicts: ordinary dicts in all but their size."""

from __future__ import annotations

import sys

import orjson

from service.matrix.link_record import HOST_RECORD_KEYS
from service.matrix.shared_keys import key_sharing_dicts

VALUES = [f"value {k}" for k in range(len(HOST_RECORD_KEYS))]


def test_a_shared_key_dict_is_the_dict_of_its_items_in_order() -> None:
    build = key_sharing_dicts()
    records = [build(zip(HOST_RECORD_KEYS, VALUES, strict=True)) for _ in range(3)]
    plain = dict(zip(HOST_RECORD_KEYS, VALUES, strict=True))
    for record in records:
        assert type(record) is dict
        assert record == plain and list(record) == list(HOST_RECORD_KEYS)
        assert orjson.dumps(record) == orjson.dumps(plain)


def test_a_link_records_keys_are_shared_not_copied() -> None:
    build = key_sharing_dicts()
    build(zip(HOST_RECORD_KEYS, VALUES, strict=True))
    shared = build(zip(HOST_RECORD_KEYS, VALUES, strict=True))
    plain = dict(zip(HOST_RECORD_KEYS, VALUES, strict=True))
    assert sys.getsizeof(shared) < sys.getsizeof(plain) / 2
    from_dict = build(plain)  # not a copy of the dict's own key table
    assert from_dict == plain and sys.getsizeof(from_dict) == sys.getsizeof(shared)


def test_kinds_keep_their_own_keys_and_a_new_key_is_taken() -> None:
    links, delays = key_sharing_dicts(), key_sharing_dicts()
    link = links({"source": "a", "cost": 0.5})
    delay = delays({"mean": 1.0, "p95": 2.0})
    link["extra"] = 1
    assert link == {"source": "a", "cost": 0.5, "extra": 1}
    assert delay == {"mean": 1.0, "p95": 2.0} and list(delays({"p95": 3.0, "mean": 4.0})) == [
        "p95",
        "mean",
    ]
