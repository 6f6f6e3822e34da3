"""Helpers for tests that cross the wire: publish perfSONAR samples, poll the HTTP API."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import stomp

SAMPLES = Path("/work/shared/samples")
if not SAMPLES.is_dir():
    SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def load_sample(name: str) -> dict[str, Any]:
    return json.loads((SAMPLES / name).read_text())


def sample_body(name: str, timestamps: list[int], **meta: str) -> dict[str, Any]:
    """The sample's body, datapoints moved to `timestamps` (values cycled), meta overridden."""
    body = copy.deepcopy(load_sample(name)["body"])
    values = list(body["datapoints"].values())
    body["datapoints"] = {str(ts): values[i % len(values)] for i, ts in enumerate(timestamps)}
    body["meta"].update(meta)
    return body


def current_minute_ts(minutes_ago: int = 0) -> int:
    return (int(time.time()) // 60 - minutes_ago) * 60


class Publisher:
    """A plain stomp.py producer on the test broker."""

    def __init__(self, brokers: str) -> None:
        host, port = brokers.rsplit(":", 1)
        self.connection = stomp.Connection12([(host, int(port))])
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
