"""Dicts of one kind of record built to share their key table (PEP 412 key-sharing dicts).

A snapshot holds a record per link and per site pair, each a dict of some 20 keys. An ordinary
dict of a link record's 22 keys takes 832 bytes on CPython 3.11, most of them its own key table
(room for 42 entries); the `__dict__` of an object shares its class's key table and holds only
the values: 256 bytes (room for 30 keys). At 100,000 links that is over 50 MB of the process's
memory. A dict of a few keys is smaller as it is (5 keys: 184 bytes).

The dicts built here are ordinary dicts in every other way (type, equality, key order, JSON):
one given a key its kind does not have takes a key table of its own, as any dict would.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

Record = dict[str, Any]
Items = dict[str, Any] | Iterable[tuple[str, Any]]


def key_sharing_dicts() -> Callable[[Items], Record]:
    """A constructor like `dict(items)` whose dicts share one key table: give it the records of
    one kind (a class of their own: records of other kinds never add keys to their table)."""
    holder = type("SharedKeys", (), {"__module__": __name__})

    def build(items: Items) -> Record:
        record: Record = holder().__dict__
        # key by key: merging a dict into an empty one copies the dict's own key table
        record.update(items.items() if isinstance(items, dict) else items)
        return record

    return build
