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


class LinkDetailOut(BaseModel):
    link: LinkOut
    series: LinkSeriesOut
    features: dict[str, float | None]


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
