"""Response schemas, for the OpenAPI documentation and for validating responses in tests."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from service.matrix.link_record import LinkOut


class ModelOut(BaseModel):
    name: str
    version: str
    sha256: str
    created: str


class CostMatrixOut(BaseModel):
    generated_at: float
    window_minutes: int
    model: ModelOut | None
    links: list[LinkOut]


class DenseMatrixOut(BaseModel):
    generated_at: float
    window_minutes: int
    model: ModelOut | None
    nodes: list[str]
    cost: list[list[float | None]]
    congested: list[list[bool | None]]
    utilisation: list[list[float | None]]


class LinkSeriesOut(BaseModel):
    minutes: list[int] = Field(description="epoch minute of each slot, oldest first")
    delay_mean: list[float | None]
    delay_median: list[float | None]
    delay_std: list[float | None]
    delay_min: list[float | None]
    loss: list[float | None]


class BandwidthOut(BaseModel):
    """AAAS's "bandwidth decreased/increased" scores of the link's throughput history."""

    bin_days: int = Field(description="days per bin (bins aligned to the epoch)")
    bins: int = Field(description="bins with results among the newest and the five before")
    newest_bin_mean_bps: int | None = Field(description="mean rate of the newest bin (bits/s)")
    z: float | None = Field(
        description="(newest bin mean - mean of the bin means) / their standard deviation; "
        "null with fewer than two bins, none in the newest, or no spread"
    )
    change: float | None = Field(description="(newest bin mean - mean of means) / mean of means")


class ThroughputOut(BaseModel):
    bps: int | None = Field(description="the latest test's rate (bits/s); null: no test")
    started_at: int | None = Field(description="its start (epoch s)")
    age_s: int | None = Field(description="seconds from its start to now")
    retransmits: int | None = Field(description="that test's TCP retransmits, when reported")
    bandwidth: BandwidthOut | None


class PathHopOut(BaseModel):
    ttl: int
    address: str | None = Field(description="who answered at this TTL; null: no answer")
    rtt_ms: float | None
    asn: int | None = Field(description="its autonomous system, when reported")


class PathOut(BaseModel):
    hops: list[PathHopOut] = Field(description="the latest trace, TTL 1 up; [] without one")
    reaches_destination: bool | None = Field(
        description="whether its last hop is the link's destination (null: not known, e.g. a "
        "link known by host name only, or no trace)"
    )
    since: int | None = Field(
        description="start (epoch s) of the first trace of the current path: its last change, "
        "or the link's first trace when it never changed"
    )
    traced_at: int | None = Field(description="start (epoch s) of the latest trace")
    changes_last_24h: int = Field(
        description="path changes in the hour holding now and the 23 before"
    )


class LinkDetailOut(BaseModel):
    link: LinkOut
    series: LinkSeriesOut
    features: dict[str, float | None]
    throughput: ThroughputOut
    path: PathOut


class HighAvailabilityOut(BaseModel):
    group: str = Field(description="the --ha-group")
    role: Literal["standby", "acquiring", "leader"] = Field(
        description="leader: this replica publishes telemetry; acquiring: it will after the "
        "lease timeout; standby: another replica (or none) does"
    )
    lease_shared: bool = Field(
        description="the group's lease queue hands tokens to more than one replica: it was "
        "declared without single active consumer, and every replica may publish"
    )


class SourceOut(BaseModel):
    """One input of the service (`service.ingest.source.SourceDescription`)."""

    kind: str = Field(description="bus, pscheduler-http or archive-backfill")
    reads: list[str] = Field(description="topics, the endpoint path or the archive URL")
    running: bool = Field(description="takes input now (a backfill: still reading)")
    detail: dict[str, Any]


class ReadinessOut(BaseModel):
    ready: bool
    problems: list[str]
    sources: list[SourceOut] = Field(description="every input, as it is doing now")
    ha: HighAvailabilityOut | None = Field(None, description="absent without --ha-group")
