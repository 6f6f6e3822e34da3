"""The served utilisation model: which one, and its batched calls as the cycle makes them."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Gauge, Histogram
from prometheus_client.core import InfoMetricFamily

from service.model.slot import ModelSlot
from service.publish.metrics.families import AlwaysCollected
from service.publish.metrics.matrix import CYCLE_BUCKETS


class ModelCollector(AlwaysCollected):
    def __init__(self, model: ModelSlot) -> None:
        self._model = model

    def collect(self) -> Iterator[InfoMetricFamily]:
        info = self._model.current.info
        model = InfoMetricFamily("nettel_model", "The served utilisation model.")
        model.add_metric([], {"name": info.name, "version": info.version, "sha256": info.sha256})
        yield model


def register_model_metrics(registry: CollectorRegistry, model: ModelSlot) -> None:
    """Which model is served, each call's time and how many links it estimated."""
    registry.register(ModelCollector(model))
    inference_seconds = Histogram(
        "nettel_inference_duration_seconds",
        "Time of one batched model call over all links.",
        buckets=CYCLE_BUCKETS,
        registry=registry,
    )
    links_predicted = Gauge(
        "nettel_links_predicted",
        "Links given a utilisation estimate in the last cycle.",
        registry=registry,
    )

    def observe(seconds: float, rows: int) -> None:
        inference_seconds.observe(seconds)
        links_predicted.set(rows)

    model.inference_observers.append(observe)
