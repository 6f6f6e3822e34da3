"""Background ingest at a steady rate: realistic one-datapoint messages for every link, paced.

    python -m benchmarks.support.paced_producer --brokers HOST:PORT --links 15000 --rate 5000 \
        --cache out/bench/cache --ready-file F --output stats.json

Simulates one minute of the mesh (cached between runs), connects, touches `--ready-file`, then
sends delay and loss messages round-robin over the links, each dated at the previous minute (as
a collector re-polling the latest results would), persistent, `--rate` per second in 10 ms
batches, until SIGTERM. Writes {sent, seconds, rate, max_behind} as JSON.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from pathlib import Path

from benchmarks.support.broker import connect
from benchmarks.support.corpus import build_live_message, simulated_pool
from benchmarks.support.publishing import send

BATCH_SECONDS = 0.01


def produce(
    brokers: str, n_links: int, rate: float, cache: Path, ready_file: Path, stop: threading.Event
) -> dict:
    minute = simulated_pool(n_links, 1, cache, workers=1)[0]
    connection = connect(brokers, heartbeats=(10_000, 10_000))
    ready_file.write_text("ready")
    sent, max_behind, started = 0, 0.0, time.monotonic()
    while not stop.is_set():
        elapsed = time.monotonic() - started
        due = int(rate * elapsed)
        max_behind = max(max_behind, (due - sent) / rate)
        ts = (int(time.time() // 60) - 1) * 60
        while sent < due:
            link, delay = (sent // 2) % n_links, sent % 2 == 0
            send(connection, build_live_message(n_links, link, minute, ts, delay))
            sent += 1
        stop.wait(BATCH_SECONDS)
    seconds = time.monotonic() - started
    connection.disconnect()
    return {"sent": sent, "seconds": seconds, "rate": sent / seconds, "max_behind": max_behind}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.support.paced_producer")
    parser.add_argument("--brokers", required=True)
    parser.add_argument("--links", type=int, required=True)
    parser.add_argument("--rate", type=float, required=True, help="messages per second")
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--ready-file", type=Path, required=True)
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stats = produce(args.brokers, args.links, args.rate, args.cache, args.ready_file, stop)
    args.output.write_text(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
