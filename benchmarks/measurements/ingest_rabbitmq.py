"""Ingest from RabbitMQ: `nettel serve` draining a backlog vs bare stomp.py, on one RabbitMQ."""

from __future__ import annotations

import time

from benchmarks.context import SuiteContext
from benchmarks.measurements.ingest import (
    PREFETCH,
    corpus_figures,
    ingest_round,
    rate_figures,
    register_subscriptions,
    round_numbers,
)
from benchmarks.report import MeasurementResult
from benchmarks.support.broker import private_rabbitmq
from benchmarks.support.corpus import build_ingest_corpus

NAME = "ingest_rabbitmq"
METHOD = (
    "As `ingest`, on a private RabbitMQ node (Debian's rabbitmq-server 3.10 with its STOMP "
    "plugin, `devtools/rabbitmq.py`) instead of ActiveMQ: the same N real-format messages are "
    "published persistently to both topics after both consumers' durable subscriptions were "
    "registered, which on RabbitMQ are durable queues bound to the topics (SUBSCRIBE with "
    "`durable:true`, `auto-delete:false`, `x-queue-name: <client-id>.<topic>`, "
    f"`prefetch-count: {PREFETCH}`, vhost `/`; connect, subscribe, disconnect). Then each "
    "consumer drains its queues in turn, in the same two rounds and orders: the bare stomp.py "
    "consumer (`benchmarks/support/bare_consumer.py --flavour rabbitmq`, ack auto, only counts "
    "frames) "
    "and `python -m service serve --broker-flavour rabbitmq --subscription durable --client-id "
    f"bench-svc --prefetch {PREFETCH}` (ack auto, as without --state-dir; with it nettel acks "
    "every message, `client-individual`). Rates as in `ingest`; broker CPU is the "
    "`rabbitmq-server` shell's and its Erlang VM's. The in-process pipeline and receive-path "
    "figures do not depend on the broker and are in `ingest`."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    result = MeasurementResult(NAME, "Ingest from RabbitMQ: broker to link state", METHOD)
    ctx.log(f"ingest_rabbitmq: building {sizes.ingest_messages:,} messages")
    corpus = build_ingest_corpus(sizes.ingest_messages, sizes.ingest_links, time.time(), ctx.cache)
    corpus_figures(result, corpus)
    with private_rabbitmq(ctx.work, "ingest", ctx.logs) as broker:
        register_subscriptions(broker.brokers, "rabbitmq")
        rounds = [ingest_round(ctx, broker, corpus, n, "rabbitmq") for n in round_numbers(ctx)]
        result.details["broker_startup_seconds"] = broker.startup_seconds
    rate_figures(result, corpus, rounds, "rabbitmq")
    return result
