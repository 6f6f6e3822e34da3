"""What every STOMP connection of nettel shares: TLS setup and reconnect backoff."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import stomp

from service.config import Address


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for TLS to the brokers; `ca_file=None` trusts the system's CAs."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None


def enable_tls(connection: stomp.Connection12, brokers: Sequence[Address], tls: TlsFiles) -> None:
    """Make `connection` wrap every broker in `brokers` in TLS, checking certificate and name."""
    connection.set_ssl(
        for_hosts=list(brokers),
        key_file=tls.key_file,
        cert_file=tls.cert_file,
        ca_certs=tls.ca_file,
    )


def backoff_seconds(failures: int, cap: float) -> float:
    """Capped exponential backoff with jitter: about 0.5 s, 1 s, 2 s, ... up to `cap`."""
    return random.uniform(0.5, 1.0) * min(cap, 0.5 * 2 ** min(failures, 10))
