"""Response schemas, for the OpenAPI documentation and for validating responses in tests."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DelayStats(BaseModel):
    mean: float | None = Field(description="mean one-way delay of the latest minute (ms)")
    median: float | None
    std: float | None = Field(description="population standard deviation (ms)")
    min: float | None
    p95: float | None = Field(description="nearest-rank 95th percentile (ms)")


class ModelOut(BaseModel):
    name: str
    version: str
    sha256: str
    created: str


class LinkOut(BaseModel):
    source: str = Field(description="sender IP (site name at level=site)")
    destination: str
    source_host: str | None = None
    destination_host: str | None = None
    source_site: str | None = None
    destination_site: str | None = None
    links: int | None = Field(None, description="host pairs aggregated (level=site only)")
    cost: float = Field(ge=0, le=1, description="0 idle healthy link .. 1 unusable")
    empirical: float = Field(description="delay-and-loss filter score |loss x delay ms|")
    congested: bool
    utilisation: float | None = Field(description="predicted utilisation ratio; null without model")
    utilisation_reason: str | None = None
    delay_ms: DelayStats
    packet_loss: float | None
    samples: int = Field(description="minutes with data in the 32-minute buffer")
    last_measurement: int | None = Field(
        description="start (epoch s) of the newest datapoint's minute"
    )
    stale: bool = Field(description="no datapoint for 5 minutes")
    clock_suspect: bool = Field(description="negative one-way delays seen in the window")


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


class LinkDetailOut(BaseModel):
    link: LinkOut
    series: LinkSeriesOut
    features: dict[str, float | None]


class ReadinessOut(BaseModel):
    ready: bool
    problems: list[str]
