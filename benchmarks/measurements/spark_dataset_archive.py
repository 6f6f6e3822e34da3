"""`spark_dataset` on the OSG archive's ps_owd / ps_packetloss exports at archive scale (9,900
links, 1.4 million rows at 1x): the in-memory build takes ~14 GB at 4x."""

from __future__ import annotations

from benchmarks.context import SuiteContext
from benchmarks.measurements.spark_dataset import measure
from benchmarks.report import MeasurementResult

NAME = "spark_dataset_archive"


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    shape = (sizes.spark_archive_sites, sizes.spark_archive_days, sizes.spark_scales)
    return measure(ctx, NAME, "documents", shape, None)
