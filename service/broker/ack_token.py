"""Handle for acknowledging a received frame later, once what it carried is persisted."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AckToken:
    """One received frame: its connection generation, subscription and STOMP ack id."""

    generation: int
    subscription: str
    ack_id: str
