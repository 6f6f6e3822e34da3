"""The baseline consumer: stomp.py alone, receiving and counting, nothing else.

    python -m benchmarks.support.bare_consumer --brokers HOST:PORT --client-id bench-bare \
        --topics T1,T2 --expect N [--flavour rabbitmq] --output result.json

Connects like `nettel serve` does (STOMP 1.2, 10 s heart-beats, raw byte bodies, vhost `/`,
its durable subscriptions for the broker's flavour, the same prefetch, ack auto; ActiveMQ
unless told otherwise), counts MESSAGE frames and records
the monotonic time of the first one and of the one that completed `--expect`; then keeps
listening for `--grace` seconds to count redeliveries (frames beyond the expected number and
repeated message-ids). Gives up after `--idle-timeout` seconds without a frame. Writes
{received, unique, first, last, seconds, rate} as JSON; rate = (expect - 1) / seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import stomp

from benchmarks.support.broker import connect, durable_subscriptions
from service.broker.flavour import Flavour


class CountingListener(stomp.ConnectionListener):
    def __init__(self, expect: int) -> None:
        self.expect = expect
        self.received = 0
        self.message_ids: set[str] = set()
        self.first: float | None = None
        self.completed: float | None = None
        self.done = threading.Event()

    def on_message(self, frame: stomp.utils.Frame) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = now
        self.received += 1
        self.message_ids.add(frame.headers.get("message-id", ""))
        if self.received == self.expect:
            self.completed = now
            self.done.set()


def consume(
    brokers: str,
    client_id: str,
    topics: list[str],
    expect: int,
    prefetch: int,
    idle_timeout: float,
    grace: float,
    flavour: Flavour = "activemq",
) -> dict[str, float | int | None]:
    listener = CountingListener(expect)
    connection = connect(brokers, client_id, listener, heartbeats=(10_000, 10_000))
    subscriptions = durable_subscriptions(client_id, topics, prefetch, flavour)
    for number, (destination, headers) in enumerate(subscriptions):
        connection.subscribe(destination, id=str(number), ack="auto", headers=headers)
    seen = -1
    while not listener.done.wait(idle_timeout) and listener.received != seen:
        seen = listener.received
    time.sleep(grace if listener.done.is_set() else 0)
    connection.disconnect()
    return _summary(listener)


def _summary(listener: CountingListener) -> dict[str, float | int | None]:
    first, completed = listener.first, listener.completed
    seconds = (completed - first) if first is not None and completed is not None else None
    rate = (listener.expect - 1) / seconds if seconds else None
    return {
        "received": listener.received,
        "unique": len(listener.message_ids),
        "first": first,
        "last": completed,
        "seconds": seconds,
        "rate": rate,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.support.bare_consumer")
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--client-id", required=True)
    parser.add_argument("--topics", required=True, help="comma-separated destinations")
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--prefetch", type=int, default=20_000)
    parser.add_argument("--idle-timeout", type=float, default=30.0)
    parser.add_argument("--grace", type=float, default=2.0, help="listen on after --expect")
    parser.add_argument("--flavour", choices=("activemq", "rabbitmq"), default="activemq")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args(argv)
    topics = args.topics.split(",")
    result = consume(
        args.brokers,
        args.client_id,
        topics,
        args.expect,
        args.prefetch,
        args.idle_timeout,
        args.grace,
        args.flavour,
    )
    text = json.dumps(result)
    if args.output:
        args.output.write_text(text)
    print(text)
    return 0 if result["received"] >= args.expect else 1


if __name__ == "__main__":
    sys.exit(main())
