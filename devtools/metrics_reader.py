"""Reading Prometheus text exposition (`/metrics`) in tests, with prometheus_client's parser.

A metric or sample that is not there is an error (MissingMetric), so a check such as `== 0`
cannot pass for a renamed metric; `default=` says "absent counts as this" explicitly.
"""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from devtools.local_http import LOCAL_HTTP

#: What the exposition appends to a family's name to name its samples.
SAMPLE_SUFFIXES = ("_total", "_created", "_bucket", "_count", "_sum", "_info")


class MissingMetric(AssertionError):
    """The exposition has no such metric, or no sample of it with those labels."""


def samples_named(text: str, name: str) -> list[Sample]:
    """Every sample called `name` (a counter's `..._total`, a histogram's `..._bucket`); a
    metric declared without samples yet gives [], one not declared at all MissingMetric."""
    declared = False
    for family in text_string_to_metric_families(text):
        if name == family.name or name in {family.name + suffix for suffix in SAMPLE_SUFFIXES}:
            declared = True
            found = [sample for sample in family.samples if sample.name == name]
            if found:
                return found
    if not declared:
        raise MissingMetric(f"no metric {name} in the exposition")
    return []


def sample_value(text: str, name: str, default: float | None = None, **labels: str) -> float:
    """The value of the sample `name` whose labels are exactly `labels`; `default` when the
    metric has no such sample and a default is given, else MissingMetric."""
    for sample in samples_named(text, name):
        if sample.labels == labels:
            return float(sample.value)
    if default is not None:
        return default
    raise MissingMetric(f"no sample {name}{labels or ''} in the exposition")


def metric_value(base_url: str, name: str, default: float | None = None, **labels: str) -> float:
    """`sample_value` of `GET {base_url}/metrics`."""
    response = LOCAL_HTTP.get(f"{base_url}/metrics")
    response.raise_for_status()
    return sample_value(response.text, name, default, **labels)
