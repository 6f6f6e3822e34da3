"""perfSONAR messages for the publishers' wire tests, built from the samples of tests/data."""

from __future__ import annotations

from typing import Any

from tests.integration.wire import sample_body

DELAY = "/topic/perfsonar.raw.histogram-owdelay"
LOSS = "/topic/perfsonar.raw.packet-loss-rate"
#: The samples' link: SITE-A's ps-latency.site-a.example.org -> SITE-B's 198.51.100.20.
SOURCE, DESTINATION = "192.0.2.10", "198.51.100.20"


def delay_body(timestamps: list[int], **meta: str) -> dict[str, Any]:
    return sample_body("owdelay-histogram-real.json", timestamps, **meta)


def loss_body(points: dict[int, float], **meta: str) -> dict[str, Any]:
    body = sample_body("packet-loss-rate.json", list(points), **meta)
    body["datapoints"] = {str(ts): value for ts, value in points.items()}
    return body
