"""Handle for acknowledging a received frame later, once what it carried is persisted.

A token carries the way back to its broker (`channel`, the source that received the frame), so
whoever holds a batch's tokens acknowledges them without knowing where they came from.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol


class Acknowledger(Protocol):
    def acknowledge(self, tokens: Iterable[AckToken]) -> int:
        """Acknowledge `tokens` (all received through this acknowledger); returns how many
        acknowledgements went out."""
        ...


@dataclass(frozen=True)
class AckToken:
    """One received frame: its connection generation, subscription, STOMP ack id, and the
    acknowledger it goes back through."""

    generation: int
    subscription: str
    ack_id: str
    channel: Acknowledger


def acknowledge_all(tokens: Iterable[AckToken]) -> int:
    """Acknowledge tokens through their own channels (in order within each); returns how many
    acknowledgements went out."""
    by_channel: dict[int, tuple[Acknowledger, list[AckToken]]] = {}
    for token in tokens:
        by_channel.setdefault(id(token.channel), (token.channel, []))[1].append(token)
    return sum(channel.acknowledge(group) for channel, group in by_channel.values())
