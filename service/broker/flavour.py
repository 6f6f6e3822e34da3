"""Which STOMP broker is on the other end: told by --broker-flavour, or read from CONNECTED.

STOMP leaves durable subscriptions, prefetch and virtual hosts to each broker, so what nettel
puts on SUBSCRIBE depends on it (`service.ingest.stomp_source.subscription_target`). With
`auto` the flavour comes from the `server` header of the broker's CONNECTED frame
(`ActiveMQ/5.17.2`, `RabbitMQ/3.10.8`, `ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging
Engine`); a broker that names none of these is taken for ActiveMQ, whose headers were
nettel's only ones before.
"""

from __future__ import annotations

from typing import Literal

from service.config import BrokerFlavour

Flavour = Literal["activemq", "rabbitmq", "artemis"]
FALLBACK: Flavour = "activemq"

#: `server` header prefixes, the more specific first (Artemis's also starts with "ActiveMQ").
_SERVER_PREFIXES: tuple[tuple[str, Flavour], ...] = (
    ("activemq-artemis/", "artemis"),
    ("rabbitmq/", "rabbitmq"),
    ("activemq/", "activemq"),
)


def flavour_of_server(server: str | None) -> Flavour | None:
    """The flavour a CONNECTED frame's `server` header names; None when it names none.

    >>> flavour_of_server("RabbitMQ/3.10.8"), flavour_of_server("ActiveMQ/5.17.2")
    ('rabbitmq', 'activemq')
    >>> flavour_of_server("ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine")
    'artemis'
    >>> flavour_of_server(None), flavour_of_server("Apache/ActiveMQ/Apollo")
    (None, None)
    """
    text = (server or "").strip().lower()
    return next((flavour for prefix, flavour in _SERVER_PREFIXES if text.startswith(prefix)), None)


def resolve_flavour(setting: BrokerFlavour, server: str | None) -> tuple[Flavour, bool]:
    """The flavour to speak, and whether it was guessed (`auto` and an unknown `server`).

    >>> resolve_flavour("auto", "RabbitMQ/3.10.8"), resolve_flavour("rabbitmq", None)
    (('rabbitmq', False), ('rabbitmq', False))
    >>> resolve_flavour("auto", None)
    ('activemq', True)
    """
    if setting != "auto":
        return setting, False
    detected = flavour_of_server(server)
    return (FALLBACK, True) if detected is None else (detected, False)
