"""Memory: link-state bytes per link and the RSS of a serving process at 15k and 100k links."""

from __future__ import annotations

import json
import subprocess
import sys

from benchmarks.context import SuiteContext
from benchmarks.report import MeasurementResult
from benchmarks.support.environment import REPO_ROOT
from benchmarks.support.model import shipped_model

NAME = "memory"
MIB = 2**20
METHOD = (
    "Per size, a fresh interpreter runs `benchmarks/support/memory_probe.py`: it builds the "
    "runtime "
    "`nettel serve` builds (settings, state, pipeline, STOMP source never started, the model "
    "when shipped) and the HTTP app, fills the link state (index through `LinkIndex.row_for` "
    "under tracemalloc; buffers grown row by row, so capacity doubles as in ingest, then filled "
    "with numpy), runs one matrix cycle, gzips the body once, collects garbage and reads VmRSS "
    "and VmHWM from /proc/self/status, and VmRSS of the parser processes the runtime spawned "
    "(after they parsed one message; the RSS target counts both). Link state per link = "
    "`LinkBuffers.nbytes_per_link()` (bytes per allocated row) + the index's traced bytes per "
    "link; the capacity headroom of doubling is reported separately. TensorFlow/Keras: "
    "whether either is in `sys.modules`. Then every link is given throughput results (one in "
    "each 4-day bin), a retransmit count and a path (its two ends and 6-12 routers drawn from "
    "a pool of 20,000 interfaces, `memory_probe.fill_results`), and VmRSS is read again. "
    "Throughput and path state per link = the bytes per row of their columns "
    "(`RowColumns.nbytes_per_row()`) + the hop table's bytes (address strings, lookup, AS "
    "numbers, by `sys.getsizeof`) over the links."
)


def run(ctx: SuiteContext) -> MeasurementResult:
    result = MeasurementResult(NAME, "Memory: link state and process RSS", METHOD)
    model = "default" if shipped_model() is not None else "none"
    probes = []
    for n in ctx.sizes.memory_links:
        ctx.log(f"memory: {n:,} links in a fresh process")
        probes.append(_probe(n, model))
    for probe in probes:
        _figures(result, probe)
    _targets(result, probes)
    result.details["probes"] = probes
    return result


def _probe(n: int, model: str) -> dict:
    command = [
        sys.executable,
        "-m",
        "benchmarks.support.memory_probe",
        "--links",
        str(n),
        "--model",
        model,
    ]
    completed = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=600
    )
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _figures(result: MeasurementResult, p: dict) -> None:
    n = p["links"]
    key = f"{n // 1000}k" if n >= 1000 else str(n)
    per_link = p["buffer_bytes_per_row"] + p["index_bytes_per_link"]
    result.add(
        f"state_per_link_{key}",
        f"{n:,} links: link state per link (buffers + index)",
        round(per_link),
        "B",
    )
    result.add(
        f"buffers_per_link_{key}",
        f"{n:,} links: buffers per row (nbytes_per_link)",
        p["buffer_bytes_per_row"],
        "B",
    )
    result.add(
        f"index_per_link_{key}",
        f"{n:,} links: index per link (tracemalloc)",
        round(p["index_bytes_per_link"]),
        "B",
    )
    result.add(
        f"allocated_per_link_{key}",
        f"{n:,} links: buffers allocated per link (capacity {p['capacity']:,})",
        round(p["buffer_bytes_per_link_allocated"]),
        "B",
    )
    result.add(
        f"rss_baseline_{key}",
        f"{n:,} links: RSS before the state (imports, app)",
        p["rss_baseline"] / MIB,
        "MiB",
    )
    result.add(f"rss_{key}", f"{n:,} links: RSS after one cycle", p["rss_after_cycle"] / MIB, "MiB")
    results_per_link = p["results_bytes_per_row"] + p["hop_table_bytes"] / n
    result.add(
        f"results_per_link_{key}",
        f"{n:,} links: throughput and path state per link (columns + hop table)",
        round(results_per_link),
        "B",
    )
    result.add(
        f"hop_table_{key}",
        f"{n:,} links: hop table ({p['hop_addresses']:,} addresses)",
        p["hop_table_bytes"] / MIB,
        "MiB",
    )
    result.add(
        f"rss_results_{key}",
        f"{n:,} links: RSS with every link's throughput results and path",
        p["rss_with_results"] / MIB,
        "MiB",
    )
    result.add(f"rss_peak_{key}", f"{n:,} links: peak RSS", p["rss_peak"] / MIB, "MiB")
    result.add(
        f"rss_parsers_{key}",
        f"{n:,} links: RSS of the parser processes",
        p["rss_parsers"] / MIB,
        "MiB",
    )
    result.add(
        f"body_{key}",
        f"{n:,} links: matrix body / gzip",
        f"{p['matrix_body_bytes'] / MIB:.1f} / {p['matrix_gzip_bytes'] / MIB:.1f} MiB",
    )
    result.add(
        f"tensorflow_{key}",
        f"{n:,} links: TensorFlow or Keras imported",
        p["tensorflow_imported"] or p["keras_imported"],
    )


def _targets(result: MeasurementResult, probes: list[dict]) -> None:
    largest = max(probes, key=lambda p: p["links"])
    per_link = max(p["buffer_bytes_per_row"] + p["index_bytes_per_link"] for p in probes)
    result.target(
        "state_per_link", "link state per link (largest of the sizes)", per_link, "<=", 1024, "B"
    )
    rss = (largest["rss_after_cycle"] + largest["rss_parsers"]) / MIB
    label = f"RSS at {largest['links']:,} links after one cycle (with parser processes)"
    result.target("rss_largest", label, rss, "<=", 500, "MiB")
    results = largest["results_bytes_per_row"] + largest["hop_table_bytes"] / largest["links"]
    label = f"throughput and path state per link at {largest['links']:,} links"
    result.target("results_per_link", label, results, "<=", 512, "B")
    tf = any(p["tensorflow_imported"] or p["keras_imported"] for p in probes)
    result.target(
        "tensorflow_imported", "TensorFlow/Keras imported (1 = yes)", float(tf), "<=", 0, ""
    )
