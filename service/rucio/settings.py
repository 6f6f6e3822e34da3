"""What `nettel rucio-sync` is told: each setting a flag and a `NETTEL_RUCIO_SYNC_*` environment
variable (flags win), validated like `nettel serve`'s (`service.config.load_settings_of`).

A prefix of its own: rucio-sync's state dir, interval and log level are not `nettel serve`'s,
and the two often share a host or an environment file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from service.config import Address, parse_address, setting_name
from service.rucio.distances import PenaltyPolicy
from service.rucio.sync import SyncOptions

DEFAULT_POLICY = PenaltyPolicy()
#: Seconds between syncs: a cost change is written within this (plus the sync's time) and seen by
#: Rucio's conveyor within another 300 s (its distance cache).
DEFAULT_INTERVAL_SECONDS = 60.0


class RucioSyncSettings(BaseSettings):
    """Everything `nettel rucio-sync` can be told, with defaults; env `NETTEL_RUCIO_SYNC_<NAME>`."""

    model_config = SettingsConfigDict(env_prefix="NETTEL_RUCIO_SYNC_", extra="forbid")

    nettel_url: str = Field(
        "http://127.0.0.1:8080", description="nettel's base URL (or HAProxy's in front of it)"
    )
    state_dir: Path = Field(description="where the baselines are kept (required)")
    site_attribute: str = Field(
        "site", min_length=1, description="the RSE attribute naming nettel's site"
    )
    rses: str | None = Field(
        None, min_length=1, description="only these RSEs (a Rucio RSE expression; unset: all)"
    )
    baselines: Path | None = Field(
        None,
        description="YAML/JSON file SOURCE_RSE: {DESTINATION_RSE: distance}: baselines that win "
        "over the values recorded from Rucio",
    )
    max_penalty: int = Field(
        DEFAULT_POLICY.max_penalty, ge=1, le=1_000_000, description="penalty of a cost of 1"
    )
    calm_cost: float = Field(
        DEFAULT_POLICY.calm_cost, ge=0, lt=1, description="costs up to this give no penalty"
    )
    fine_cost: float = Field(
        DEFAULT_POLICY.fine_cost,
        ge=0,
        lt=1,
        description="from calm_cost up to this cost the penalty climbs one step per doubling of "
        "the cost, then linearly to max_penalty at 1 (0: linear from calm_cost)",
    )
    min_change: int = Field(
        DEFAULT_POLICY.min_change,
        ge=1,
        description="changes of fewer steps are not written, except a return to the baseline",
    )
    hysteresis: float = Field(
        DEFAULT_POLICY.hysteresis,
        ge=0,
        lt=1,
        description="a new step is written once the cost is this share of a step past its "
        "boundary (no flapping at a boundary)",
    )
    add_missing: bool = Field(
        False, description="add a distance row to pairs that have none (makes new sources eligible)"
    )
    added_baseline: int = Field(
        SyncOptions.added_baseline,
        ge=0,
        description="baseline of an added row that baselines does not give",
    )
    interval: float = Field(
        DEFAULT_INTERVAL_SECONDS,
        gt=0,
        le=86_400,
        description="seconds between syncs (after a failed one: sooner)",
    )
    concurrency: int = Field(
        SyncOptions.concurrency, ge=1, le=64, description="Rucio requests in flight"
    )
    metrics_listen: Annotated[Address | None, NoDecode] = Field(
        None, description="host:port to serve Prometheus /metrics on (unset: none)"
    )
    metrics_file: Path | None = Field(
        None, description="file the metrics are written to after each sync (node_exporter textfile)"
    )
    log_level: str = Field(
        "INFO", pattern="^(DEBUG|INFO|WARNING|ERROR)$", description="log level of the JSON logs"
    )

    @field_validator("nettel_url")
    @classmethod
    def _check_nettel_url(cls, value: str) -> str:
        url = urlsplit(value)  # the value is not echoed: it might carry credentials
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError("not an http(s)://host[:port] URL")
        return value

    @field_validator("metrics_listen", mode="before")
    @classmethod
    def _parse_metrics_listen(cls, value: object) -> object:
        return parse_address(value) if isinstance(value, str) else value

    @field_validator("baselines")
    @classmethod
    def _check_baselines(cls, value: Path | None) -> Path | None:
        if value is not None and not value.is_file():
            raise ValueError(f"file {value} does not exist")
        return value

    @model_validator(mode="after")
    def _check_penalty_policy(self) -> RucioSyncSettings:
        if self.fine_cost > self.calm_cost and self.calm_cost == 0:
            raise ValueError(
                f"{setting_name('fine_cost', RucioSyncSettings)} {self.fine_cost} needs "
                f"{setting_name('calm_cost', RucioSyncSettings)} above 0 (its steps double the "
                "cost from there); a fine cost of 0 gives the linear mapping"
            )
        steps = math.log2(self.fine_cost / self.calm_cost) if self.fine_cost > self.calm_cost else 0
        if self.max_penalty < steps:
            raise ValueError(
                f"{setting_name('max_penalty', RucioSyncSettings)} {self.max_penalty} is below "
                f"the {steps:.2f} steps from calm_cost {self.calm_cost} to fine_cost "
                f"{self.fine_cost} (one per doubling)"
            )
        return self

    def penalty_policy(self) -> PenaltyPolicy:
        return PenaltyPolicy(
            self.max_penalty, self.calm_cost, self.min_change, self.fine_cost, self.hysteresis
        )
