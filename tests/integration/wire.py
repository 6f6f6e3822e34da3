"""Helpers for tests that cross the wire: perfSONAR samples, a steady feed, the HTTP API."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import httpx

from devtools.local_http import LOCAL_HTTP
from devtools.stomp_client import StompClient
from devtools.waiting import wait_for
from service.broker.connection import BrokerError
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


def get_json(url: str, **params: str) -> Any:
    """The JSON of a 200 response; None for any other status or when nothing listens yet."""
    try:
        response = LOCAL_HTTP.get(url, params=params)
    except httpx.HTTPError:
        return None
    return response.json() if response.status_code == 200 else None


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
        self._brokers = brokers
        self._interval = 1.0 / rate_per_second
        self.published: list[int] = []
        self._stop = threading.Event()
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
                self._stop.wait(self._interval)
            except (BrokerError, OSError, TimeoutError):
                connection = None
                self._stop.wait(0.5)

    def _connect(self) -> StompClient:
        return StompClient(self._brokers, attempts=1)

    def _send(self, connection: StompClient, sequence: int, minute: int) -> None:
        body = sample_body(
            "packet-loss-rate.json",
            [minute],
            source=self.source_of(sequence),
            # each link its own measuring host, as in a mesh: a producer adds at most
            # --new-links-per-minute links a minute, which is not what this feed tests
            input_source=f"seq-{sequence}.example.org",
            destination=self.DESTINATION,
        )
        connection.send_confirmed(
            "/topic/perfsonar.raw.packet-loss-rate",
            body,
            receipt=f"seq-{sequence}",
            headers={"persistent": "true"},
        )


def links_to(base_url: str, destination: str) -> dict[str, dict] | None:
    """Links of /costmatrix?destination=... keyed by source IP (None when unreachable)."""
    matrix = get_json(f"{base_url}/costmatrix", destination=destination)
    return None if matrix is None else {link["source"]: link for link in matrix["links"]}


def wait_until_subscribed(base_url: str, brokers: str, timeout: float = 30.0) -> None:
    """Publish probe loss datapoints (to 192.0.2.254) until the service at `base_url` shows one.

    The broker may take a SUBSCRIBE after the client counts as connected, and a topic drops what
    it gets before; a durable subscription keeps everything from the first probe received on.
    """
    publisher = StompClient(brokers)
    destination = "192.0.2.254"
    body = sample_body("packet-loss-rate.json", [current_minute_ts(1)], destination=destination)

    def probe_landed() -> dict[str, dict] | None:
        publisher.send("/topic/perfsonar.raw.packet-loss-rate", body)
        return links_to(base_url, destination)

    try:
        wait_for(probe_landed, timeout, interval=0.5, what="a probe through the subscription")
    finally:
        publisher.close()
