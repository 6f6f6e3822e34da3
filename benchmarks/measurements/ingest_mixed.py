"""Ingest with a mixed feed: `ingest`'s run with throughput results and traceroutes mixed in at
WLCG's proportions, against the same bare stomp.py consumer."""

from __future__ import annotations

import time

from benchmarks.context import SuiteContext
from benchmarks.measurements.ingest import (
    PREFETCH,
    ROUNDS,
    TOPIC_KINDS,
    corpus_figures,
    ingest_round,
    pipeline_alone,
    rate_figures,
    register_subscriptions,
    round_numbers,
)
from benchmarks.report import MeasurementResult
from benchmarks.support.broker import broker_limits, private_broker
from benchmarks.support.mixed_feed import WLCG_MIX, MixedCorpus, build_mixed_corpus

NAME = "ingest_mixed"
#: Every topic the service reads, in its order (durable subscriptions are named by number).
TOPICS = tuple(TOPIC_KINDS)
METHOD = (
    "As `ingest` (a private ActiveMQ, N messages over L links published persistently after both "
    "durable subscriptions were registered, then each consumer drains its copy in turn, "
    f"{ROUNDS} rounds alternating which goes first, prefetch {PREFETCH}, rates and the ratio as "
    "there), with the feed mixed as WLCG's meshes produce it: per directed pair and hour, as "
    "perfSONAR schedules its tests (pSConfig's templates: latencybg continuously, trace "
    f"`PT10M`, throughput `PT4H`), {WLCG_MIX.delay:g} delay histograms, {WLCG_MIX.loss:g} loss "
    f"ratios, {WLCG_MIX.trace:g} traces and {WLCG_MIX.throughput:g} of a throughput result and "
    "of its retransmit count. The corpus keeps those datapoint proportions "
    "(`benchmarks/support/mixed_feed.py`): `ingest`'s delay and loss messages (1-3 datapoints "
    "each), then per 120 of their datapoints 6 traces (a link's traces of the covered minutes "
    "in one message, esmond's version-1 layout: hop lists with ttl, query, success, ip, "
    "hostname, as, rtt, as tests/data/packet-trace-raw.json; made-up paths of 6 to 10 hops, a "
    "tenth of second traces on another route) and 0.25 throughput and retransmit results (one "
    "each per message on /topic/perfsonar.raw.throughput and .packet-retransmits), all ordered "
    "by their newest minute. Both consumers subscribe to the five topics (the service by its "
    "defaults). The parse+apply pipeline alone runs in-process on the first 20,000 messages, as "
    "in `ingest`."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    result = MeasurementResult(NAME, "Ingest with a mixed feed: throughput and traces", METHOD)
    ctx.log(f"ingest_mixed: building ~{sizes.ingest_messages:,} messages")
    mixed = build_mixed_corpus(sizes.ingest_messages, sizes.ingest_links, time.time(), ctx.cache)
    corpus = mixed.corpus
    corpus_figures(result, corpus)
    _mix_figures(result, mixed)
    with private_broker(ctx.work, "ingest-mixed", ctx.logs) as broker:
        register_subscriptions(broker.brokers, "activemq", TOPICS)
        rounds = [
            ingest_round(ctx, broker, corpus, n, "activemq", TOPICS) for n in round_numbers(ctx)
        ]
        result.details["broker_limits"] = broker_limits(broker)
    rate_figures(result, corpus, rounds, "activemq")
    alone_rate, alone_profile = pipeline_alone(corpus)
    result.add("pipeline_alone_rate", "parse+apply in-process, no broker", alone_rate, "msg/s")
    result.details["cprofile_pipeline"] = alone_profile
    return result


def _mix_figures(result: MeasurementResult, mixed: MixedCorpus) -> None:
    total = len(mixed.corpus.messages)
    for kind, count in mixed.messages.items():
        key = "messages_" + kind.replace(" ", "_").replace("-", "_")
        result.add(key, f"messages: {kind} ({count / total:.1%})", count)
    delay_loss = mixed.datapoints["delay and loss"]
    for kind, count in mixed.datapoints.items():
        key = "datapoints_" + kind.replace(" ", "_").replace("-", "_")
        share = f"{count / delay_loss:.2%} of delay and loss" if kind != "delay and loss" else ""
        result.add(key, f"datapoints: {kind}" + (f" ({share})" if share else ""), count)
