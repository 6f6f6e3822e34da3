"""The running nettel: package version, histogram scanner, Python."""

from __future__ import annotations

import platform
from collections.abc import Iterator

from prometheus_client.core import InfoMetricFamily

from service.build_info import package_version
from service.parse.histogram_scan import SCANNER_IMPLEMENTATION
from service.publish.metrics.families import AlwaysCollected


class BuildCollector(AlwaysCollected):
    def __init__(self) -> None:
        self._labels = {
            "version": package_version(),
            "histogram_scanner": SCANNER_IMPLEMENTATION,
            "python": platform.python_version(),
        }

    def collect(self) -> Iterator[InfoMetricFamily]:
        build = InfoMetricFamily("nettel_build", "The running nettel: package, scanner, Python.")
        build.add_metric([], self._labels)
        yield build
