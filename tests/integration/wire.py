"""Helpers for tests that cross the wire: publish perfSONAR samples, poll the HTTP API."""

from __future__ import annotations

import copy
import json
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import stomp

from tests.data import load_sample


def sample_body(name: str, timestamps: list[int], **meta: str) -> dict[str, Any]:
    """The sample's body, datapoints moved to `timestamps` (values cycled), meta overridden."""
    body = copy.deepcopy(load_sample(name)["body"])
    values = list(body["datapoints"].values())
    body["datapoints"] = {str(ts): values[i % len(values)] for i, ts in enumerate(timestamps)}
    body["meta"].update(meta)
    return body


def current_minute_ts(minutes_ago: int = 0) -> int:
    return (int(time.time()) // 60 - minutes_ago) * 60


#: The STOMP `host` header of every test connection: RabbitMQ's default vhost (stomp.py would
#: send the broker's host name, which RabbitMQ takes for a vhost); ActiveMQ ignores it.
VHOST = "/"


class Publisher:
    """A plain stomp.py producer on the test broker."""

    def __init__(self, brokers: str, vhost: str = VHOST) -> None:
        host, port = brokers.rsplit(":", 1)
        self.connection = stomp.Connection12([(host, int(port))], vhost=vhost)
        self.connection.connect(wait=True)

    def send(self, topic: str, body: dict[str, Any] | str | bytes) -> None:
        payload = body if isinstance(body, str | bytes) else json.dumps(body)
        self.connection.send(topic, payload)

    def close(self) -> None:
        self.connection.disconnect()


def wait_for(
    probe: Callable[[], Any], timeout: float = 30.0, interval: float = 0.3, what: str = "condition"
) -> Any:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}; last: {last!r}")


def get_json(url: str, **params: str) -> Any:
    """The JSON of a 200 response; None for any other status or when nothing listens yet."""
    try:
        response = httpx.get(url, params=params, timeout=5.0)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


def metric_value(base_url: str, name: str, **labels: str) -> float:
    """Value of one sample in /metrics (0 when absent)."""
    text = httpx.get(f"{base_url}/metrics", timeout=5.0).text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    prefix = f"{name}{{{wanted}}} " if labels else f"{name} "
    for line in text.splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return 0.0


class SequenceFeed:
    """A steady feed of loss datapoints, one new link per sequence number, with receipts.

    Sequence n is the link 10.x.y.z -> 192.0.2.1 (x.y.z = n in base 256) at the minute before
    its first send; a datapoint counts as published once the broker's RECEIPT for it arrived, so
    a test can demand that every published one reaches the service's state. A send whose receipt
    was lost (the broker killed) is repeated exactly, minute included: the broker may have kept
    the first copy, and both must be the same datapoint.
    """

    DESTINATION = "192.0.2.1"

    def __init__(self, brokers: str, rate_per_second: float = 50.0) -> None:
        host, port = brokers.rsplit(":", 1)
        self._address = [(host, int(port))]
        self._interval = 1.0 / rate_per_second
        self.published: list[int] = []
        self._stop = threading.Event()
        self._receipts: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def source_of(sequence: int) -> str:
        return f"10.{(sequence >> 16) & 255}.{(sequence >> 8) & 255}.{sequence & 255}"

    def start(self) -> SequenceFeed:
        self._thread.start()
        return self

    def stop(self) -> list[int]:
        self._stop.set()
        self._thread.join(30)
        return self.published

    def _run(self) -> None:
        sequence, connection, minute = 1, None, None
        while not self._stop.is_set():
            try:
                connection = connection or self._connect()
                minute = minute or current_minute_ts(1)
                self._send(connection, sequence, minute)
                self.published.append(sequence)
                sequence, minute = sequence + 1, None
                time.sleep(self._interval)
            except (stomp.exception.StompException, OSError, queue.Empty):
                connection = None
                time.sleep(0.5)

    def _connect(self) -> stomp.Connection12:
        connection = stomp.Connection12(self._address, reconnect_attempts_max=1, vhost=VHOST)
        connection.set_listener("receipts", _ReceiptListener(self._receipts))
        connection.connect(wait=True)
        return connection

    def _send(self, connection: stomp.Connection12, sequence: int, minute: int) -> None:
        body = sample_body(
            "packet-loss-rate.json",
            [minute],
            source=self.source_of(sequence),
            # each link its own measuring host, as in a mesh: a producer adds at most
            # --new-links-per-minute links a minute, which is not what this feed tests
            input_source=f"seq-{sequence}.example.org",
            destination=self.DESTINATION,
        )
        receipt = f"seq-{sequence}"
        connection.send(
            "/topic/perfsonar.raw.packet-loss-rate",
            json.dumps(body),
            headers={"persistent": "true", "receipt": receipt},
        )
        while self._receipts.get(timeout=5.0) != receipt:
            pass


class _ReceiptListener(stomp.ConnectionListener):
    def __init__(self, receipts: queue.Queue[str]) -> None:
        self._receipts = receipts

    def on_receipt(self, frame: stomp.utils.Frame) -> None:
        self._receipts.put(frame.headers.get("receipt-id", ""))


def links_to(base_url: str, destination: str) -> dict[str, dict] | None:
    """Links of /costmatrix?destination=... keyed by source IP (None when unreachable)."""
    matrix = get_json(f"{base_url}/costmatrix", destination=destination)
    return None if matrix is None else {link["source"]: link for link in matrix["links"]}


def wait_until_subscribed(base_url: str, brokers: str, timeout: float = 30.0) -> None:
    """Publish probe loss datapoints (to 192.0.2.254) until the service at `base_url` shows one.

    The broker may take a SUBSCRIBE after the client counts as connected, and a topic drops what
    it gets before; a durable subscription keeps everything from the first probe received on.
    """
    publisher = Publisher(brokers)
    destination = "192.0.2.254"
    body = sample_body("packet-loss-rate.json", [current_minute_ts(1)], destination=destination)

    def probe_landed() -> dict[str, dict] | None:
        publisher.send("/topic/perfsonar.raw.packet-loss-rate", body)
        return links_to(base_url, destination)

    try:
        wait_for(probe_landed, timeout, interval=0.5, what="a probe through the subscription")
    finally:
        publisher.close()
