"""High availability on RabbitMQ: `ha_failover` with the replicas and the lease on RabbitMQ."""

from __future__ import annotations

from benchmarks.context import SuiteContext
from benchmarks.measurements.ha_failover import measure
from benchmarks.report import MeasurementResult

NAME = "ha_failover_rabbitmq"


def run(ctx: SuiteContext) -> MeasurementResult:
    return measure(ctx, NAME, "rabbitmq")
