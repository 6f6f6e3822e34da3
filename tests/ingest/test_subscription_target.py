"""What SUBSCRIBE carries on each broker flavour, and which broker a CONNECTED frame names."""

from __future__ import annotations

import pytest

from service.broker.flavour import flavour_of_server, resolve_flavour
from service.config import load_settings
from service.errors import ConfigError
from service.ingest.stomp_source import (
    Subscription,
    SubscriptionRefused,
    SubscriptionSpec,
    subscription_target,
)

LOSS = "/topic/perfsonar.raw.packet-loss-rate"
DURABLE = SubscriptionSpec(mode="durable", client_id="nettel-a", ack="client", prefetch=1000)


@pytest.mark.parametrize(
    ("server", "flavour"),
    [
        ("ActiveMQ/5.17.2", "activemq"),
        ("RabbitMQ/3.10.8", "rabbitmq"),
        ("ActiveMQ-Artemis/2.31.2 ActiveMQ Artemis Messaging Engine", "artemis"),
        (" rabbitmq/4.0.5", "rabbitmq"),
        ("Apache/ActiveMQ/Apollo", None),
        ("", None),
        (None, None),
    ],
)
def test_the_server_header_names_the_flavour(server: str | None, flavour: str | None) -> None:
    assert flavour_of_server(server) == flavour


def test_a_configured_flavour_wins_and_auto_falls_back_to_activemq_saying_so() -> None:
    assert resolve_flavour("artemis", "RabbitMQ/3.10.8") == ("artemis", False)
    assert resolve_flavour("auto", "ActiveMQ-Artemis/2.31.2") == ("artemis", False)
    assert resolve_flavour("auto", "Apollo/1.7") == ("activemq", True)


def test_activemq_durable_subscription_is_named_by_client_id_and_number() -> None:
    assert subscription_target(DURABLE, LOSS, 1, "activemq") == Subscription(
        LOSS,
        "client",
        {"activemq.prefetchSize": "1000", "activemq.subscriptionName": "nettel-a-1"},
    )


def test_rabbitmq_durable_subscription_is_a_named_durable_queue_with_string_booleans() -> None:
    target = subscription_target(DURABLE, LOSS, 1, "rabbitmq")
    assert target == Subscription(
        LOSS,
        "client-individual",
        {
            "prefetch-count": "1000",
            "durable": "true",
            "auto-delete": "false",
            "x-queue-name": "nettel-a.perfsonar.raw.packet-loss-rate",
        },
    )
    assert all(isinstance(value, str) for value in target.headers.values())


def test_artemis_durable_subscription_counts_its_window_in_bytes() -> None:
    assert subscription_target(DURABLE, LOSS, 0, "artemis") == Subscription(
        LOSS,
        "client-individual",
        {
            "consumer-window-size": str(1000 * 2048),
            "durable-subscription-name": "nettel-a-0",
            "subscription-type": "MULTICAST",
        },
    )


@pytest.mark.parametrize("flavour", ["activemq", "rabbitmq", "artemis"])
def test_plain_subscriptions_only_set_prefetch_and_auto_acks(flavour: str) -> None:
    spec = SubscriptionSpec(mode="plain", client_id="nettel-a", prefetch=10)
    target = subscription_target(spec, LOSS, 0, flavour)  # type: ignore[arg-type]
    assert target.destination == LOSS and target.ack == "auto"
    assert len(target.headers) == 1


def test_virtual_topics_are_activemq_only() -> None:
    spec = SubscriptionSpec(mode="virtual", client_id="nettel-a")
    topic = "/topic/VirtualTopic.perfsonar.raw.packet-loss-rate"
    destination = "/queue/Consumer.nettel-a.VirtualTopic.perfsonar.raw.packet-loss-rate"
    assert subscription_target(spec, topic, 1, "activemq").destination == destination
    for flavour in ("rabbitmq", "artemis"):
        with pytest.raises(SubscriptionRefused, match=f"virtual topics; the broker is {flavour}"):
            subscription_target(spec, topic, 1, flavour)  # type: ignore[arg-type]


def test_settings_refuse_virtual_topics_on_a_broker_said_to_be_another() -> None:
    with pytest.raises(ConfigError, match="virtual .* needs ActiveMQ"):
        load_settings(subscription="virtual", broker_flavour="rabbitmq")
    assert load_settings(subscription="virtual", broker_flavour="auto").broker_vhost == "/"
