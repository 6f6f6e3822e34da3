"""YAML from files nettel is given, read without aliases and within a node count and a depth.

An alias (`*name`) lets a few hundred bytes stand for gigabytes once expanded (an "alias bomb":
ten aliases of ten aliases ... of a host name); nettel's YAML inputs (a topology, an RSE map,
rucio-sync's baselines) never need one. Documents are refused as they are composed, before any
node is built into an object.
"""

from __future__ import annotations

from typing import Any

import yaml

#: Most nodes (scalars, lists, mappings) of a YAML document: a hand-written list of 100,000
#: hosts has about 100,000; without aliases a node is at least a few bytes of the document.
MAX_YAML_NODES = 1_000_000
#: Deepest nesting of a YAML document (the topology layouts read at most 5 levels).
MAX_YAML_DEPTH = 64


def load_bounded_yaml(data: bytes | str, kind: str) -> Any:
    """The document in `data`; ValueError saying where it breaks (`kind` names the document in
    the message, e.g. "a topology").

    >>> load_bounded_yaml("A_DISK: CERN", "an RSE map")
    {'A_DISK': 'CERN'}
    >>> load_bounded_yaml("a: &a [x]\\nb: *a", "an RSE map")
    Traceback (most recent call last):
    ...
    ValueError: invalid YAML at line 2, column 4: an alias (*a) is not accepted in an RSE map
    """
    loader = _BoundedLoader(data, kind)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ValueError(f"invalid YAML{where}: {error.problem or error.context}") from None
    except yaml.YAMLError as error:  # e.g. bytes that are no text
        raise ValueError(f"invalid YAML: {error}") from None
    finally:
        loader.dispose()


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing aliases, and documents over `MAX_YAML_NODES` nodes or
    `MAX_YAML_DEPTH` levels."""

    def __init__(self, stream: bytes | str, kind: str) -> None:
        super().__init__(stream)
        self._kind = kind
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            self._refuse(f"an alias (*{event.anchor}) is not accepted in {self._kind}", event)
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            self._refuse(f"more than {MAX_YAML_NODES:,} nodes", event)
        if self._depth >= MAX_YAML_DEPTH:
            self._refuse(f"nested deeper than {MAX_YAML_DEPTH} levels", event)
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    @staticmethod
    def _refuse(problem: str, event: yaml.Event) -> None:
        raise yaml.composer.ComposerError(None, None, problem, event.start_mark)  # type: ignore[arg-type]
