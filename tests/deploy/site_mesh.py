"""A small perfSONAR mesh over three sites and one host without a site, as real messages.

32 minutes of delay histograms and loss per link, so that the shipped model predicts them all.
Loss differs per link, so the site pairs have different costs. SITE-A -> SITE-B has two host
pairs (its site-level cost is their mean, unlike either's) and the highest loss, so it is among
the costliest site pairs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from service.config import DELAY_TOPIC, LOSS_TOPIC
from tests.integration.wire import current_minute_ts, sample_body

SITES = {
    "SITE-A": ["192.0.2.10", "192.0.2.11"],
    "SITE-B": ["198.51.100.20", "198.51.100.21"],
    "SITE-C": ["203.0.113.5"],
}
UNSITED = "203.0.113.99"

#: (source IP, destination IP, loss ratio every minute)
LINKS = [
    ("192.0.2.10", "198.51.100.20", 0.03),
    ("192.0.2.11", "198.51.100.21", 0.08),
    ("192.0.2.10", "203.0.113.5", 0.01),
    ("198.51.100.20", "192.0.2.10", 0.0),
    ("203.0.113.5", "198.51.100.21", 0.004),
    (UNSITED, "192.0.2.11", 0.02),
]


def host_of(ip: str) -> str:
    """The measurement host name of an address (the topology lists addresses, not names)."""
    return f"ps-{ip.replace('.', '-')}.example.org"


def write_topology(directory: Path) -> Path:
    path = directory / "topology.yaml"
    path.write_text("".join(f"{site}: [{', '.join(ips)}]\n" for site, ips in SITES.items()))
    return path


def mesh_messages() -> list[tuple[str, dict[str, Any]]]:
    """(topic, body) for every link: a delay and a loss message, 32 minutes each."""
    minutes = [current_minute_ts(m) for m in range(32, 0, -1)]
    messages = []
    for source, destination, loss in LINKS:
        meta = {
            "source": source,
            "destination": destination,
            "input_source": host_of(source),
            "input_destination": host_of(destination),
            "measurement_agent": source,
        }
        messages.append((DELAY_TOPIC, sample_body("owdelay-histogram-real.json", minutes, **meta)))
        loss_body = sample_body("packet-loss-rate.json", minutes, **meta)
        loss_body["datapoints"] = {str(minute): loss for minute in minutes}
        messages.append((LOSS_TOPIC, loss_body))
    return messages
