"""The link record: one directed link's entry in the cost matrix, defined once.

Snapshots build records with exactly these keys, in this order (the body lists them so), and
the REST API documents and validates its responses with the same models.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

#: A record as publishers handle it: a JSON-ready dict with the `LinkOut` fields.
LinkRecord = dict[str, Any]
#: A link's identity in a matrix: (source, destination).
LinkKey = tuple[str, str]


class DelayStats(BaseModel):
    mean: float | None = Field(description="mean one-way delay of the latest minute (ms)")
    median: float | None
    std: float | None = Field(description="population standard deviation (ms)")
    min: float | None
    p95: float | None = Field(description="nearest-rank 95th percentile (ms)")


class LinkOut(BaseModel):
    source: str = Field(description="sender IP (site name at level=site)")
    destination: str
    source_host: str | None = None
    destination_host: str | None = None
    source_site: str | None = None
    destination_site: str | None = None
    links: int | None = Field(None, description="host pairs aggregated (level=site only)")
    cost: float = Field(
        ge=0,
        le=1,
        description="share of a file transfer's time the path is predicted to cost: 0 an idle, "
        "lossless path with no delay .. 1 unusable (README, Cost)",
    )
    empirical: float = Field(description="delay-and-loss filter score |loss x delay ms|")
    congested: bool
    utilisation: float | None = Field(description="predicted utilisation ratio; null without model")
    utilisation_reason: str | None = None
    congestion_probability: float | None = Field(
        None,
        description="calibrated P(utilisation > 0.7); null without an estimate or without a "
        "calibrated model",
    )
    utilisation_low: float | None = Field(
        None, description="lower end of the model's conformal interval for `utilisation`"
    )
    utilisation_high: float | None = Field(
        None, description="upper end of the interval (the model card gives its coverage)"
    )
    delay_ms: DelayStats
    packet_loss: float | None
    samples: int = Field(description="minutes with data in the 32-minute buffer")
    last_measurement: int | None = Field(
        description="start (epoch s) of the newest datapoint's minute"
    )
    stale: bool = Field(description="no datapoint for 5 minutes")
    clock_suspect: bool = Field(description="negative one-way delays seen in the window")
    throughput_bps: int | None = Field(
        None,
        description="the latest throughput test's rate (bits/s; perfSONAR runs one every few "
        "hours per pair); at level=site the newest test among the site pair's links; null when "
        "none",
    )
    throughput_age_s: int | None = Field(
        None,
        ge=0,
        description="how long before `generated_at` that test started (s), in whole steps of "
        "10 minutes (rounded down: 0 is a test of the last 10 minutes); null when none",
    )


#: Fields only site-level aggregates carry.
SITE_ONLY_KEYS = frozenset({"links"})
#: A host-level record's keys, in the order the body lists them.
HOST_RECORD_KEYS = tuple(name for name in LinkOut.model_fields if name not in SITE_ONLY_KEYS)
DELAY_KEYS = tuple(DelayStats.model_fields)


def link_key(link: LinkRecord) -> LinkKey:
    return link["source"], link["destination"]


def site_key(link: LinkRecord, side: str) -> str:
    """The link end's site key (`side` "source" or "destination"): its site, else its host."""
    key: str = link[f"{side}_site"] or link[f"{side}_host"]
    return key
