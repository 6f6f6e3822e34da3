"""Dataset build speed and memory: `nettel dataset --engine spark` (local mode) vs in memory, on
bus captures (this name) or on the OSG archive's exports at scale (`spark_dataset_archive`)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.context import SuiteContext, Unavailable
from benchmarks.report import MeasurementResult
from benchmarks.support.proc import tree_rss
from simulation.bus_format import build_delay_message, build_loss_message
from simulation.simulator import (
    Mesh,
    MinuteMeasurements,
    build_mesh,
    simulate_histograms,
    simulate_utilisation,
)
from training.dataset import DEFAULT_START_MINUTE, MINUTES_PER_DAY, WARMUP_MINUTES

NAME = "spark_dataset"
CORES = 2
#: Spark's time for 1x..4x the rows: within this share of a least-squares line (linear).
LINEARITY_LIMIT = 0.20
#: Spark's peak RSS at the largest input over the smallest, minus 1 (flat).
MEMORY_GROWTH_LIMIT = 0.10
METHOD = (
    "Input: a simulated mesh of S sites (`simulation.simulator`, seed 0), scale x D days long, "
    "written to the suite's cache (kept between runs, rewritten when the arguments change) as "
    "{layout}, and one flow file per link for the router map. Each engine runs as its own "
    "`python -m service dataset` process; its wall time and the peak of the summed RSS of its "
    "process tree (driver, JVM, Python workers), sampled every 0.2 s, are reported with rows per "
    f"second, for every scale. The Spark runs use `local[{CORES}]`, shuffle partitions = cores "
    "and the job's group size (`--points-per-group`: {group}). Linearity: the largest relative "
    "distance of a Spark run's time from the least-squares line through all of them; memory: "
    "Spark's peak at the largest input over the smallest."
)
LAYOUTS = {
    "capture": "a bus capture (one histogram-owdelay and one packet-loss-rate message per link "
    "and minute, `simulation.bus_format`)",
    "documents": "the OSG archive's ps_owd and ps_packetloss exports (Parquet, one document per "
    "link and minute each: delay statistics, no histogram)",
}


def run(ctx: SuiteContext) -> MeasurementResult:
    sizes = ctx.sizes
    return measure(
        ctx,
        NAME,
        "capture",
        (sizes.spark_sites, sizes.spark_days, sizes.spark_scales),
        sizes.spark_points_per_group,
    )


def measure(
    ctx: SuiteContext,
    name: str,
    layout: str,
    shape: tuple[int, float, Sequence[int]],
    points_per_group: int | None,
) -> MeasurementResult:
    """Both engines at every scale of `shape` (sites, days of 1x, scales), as measurement `name`."""
    _require_spark()
    sites, days, scales = shape
    group = f"{points_per_group:,} datapoints" if points_per_group else "the job's own, 400,000"
    method = METHOD.format(layout=LAYOUTS[layout], group=group)
    title = "Dataset build: Spark vs in memory" + (
        ", archive exports" if layout == "documents" else ", bus captures"
    )
    result = MeasurementResult(name, title, method)
    result.add("sites", "sites", sites)
    result.add("days", "days of the 1x input", days, "d")
    runs = []
    for scale in scales:
        directory = ctx.cache / name / f"x{scale}"
        ctx.log(f"{name}: x{scale} input")
        records = prepared_input(directory, sites, days * scale, layout)
        for engine in ("memory", "spark"):
            ctx.log(f"{name}: x{scale} {engine}")
            runs.append(
                {"scale": scale, "engine": engine, "records": records}
                | run_engine(engine, directory, CORES, points_per_group)
            )
    for r in runs:
        label, key = f"x{r['scale']} {r['engine']}", f"{r['engine']}_x{r['scale']}"
        result.add(f"rows_{key}", f"{label}: rows", r["rows"])
        result.add(f"seconds_{key}", f"{label}: wall time", r["seconds"], "s")
        result.add(f"rate_{key}", f"{label}: rows/s", r["rows_per_second"], "rows/s")
        result.add(f"peak_{key}", f"{label}: peak RSS of the process tree", r["peak_mb"], "MB")
    spark = [r for r in runs if r["engine"] == "spark"]
    growth = spark[-1]["peak_mb"] / spark[0]["peak_mb"] - 1
    nonlinearity = _nonlinearity(spark)
    result.add("linearity", "Spark: largest distance from the fitted line", nonlinearity)
    result.add("memory_growth", "Spark: peak RSS growth, smallest to largest input", growth)
    result.target(
        "linearity", "Spark time, distance from linear", nonlinearity, "<=", LINEARITY_LIMIT
    )
    result.target("memory_growth", "Spark peak RSS growth", growth, "<=", MEMORY_GROWTH_LIMIT)
    result.details["runs"] = runs
    return result


def _nonlinearity(runs: list[dict[str, Any]]) -> float:
    """Largest |time - fit| / time over `runs`, for the least-squares line of time on rows."""
    rows = np.array([r["rows"] for r in runs], dtype=float)
    seconds = np.array([r["seconds"] for r in runs])
    slope, intercept = np.polyfit(rows, seconds, 1)
    return float(np.max(np.abs(seconds - (slope * rows + intercept)) / seconds))


def _require_spark() -> None:
    if importlib.util.find_spec("pyspark") is None:
        raise Unavailable("pyspark is not installed: install nettel's `spark` extra")
    if shutil.which("java") is None:
        raise Unavailable("no `java` on PATH: Spark needs a JRE")


SEED = 0
SAMPLE_SECONDS = 0.2


def write_input(directory: Path, sites: int, days: float, layout: str = "capture") -> int:
    """The archive (`layout`: a bus capture, or ps_owd and ps_packetloss Parquet exports) and
    the router map of `days` of a `sites`-site mesh; returns the records written."""
    mesh = build_mesh(sites, SEED)
    first = DEFAULT_START_MINUTE - WARMUP_MINUTES
    minutes = WARMUP_MINUTES + round(days * MINUTES_PER_DAY)
    utilisation = simulate_utilisation(mesh, first - 1, minutes + 1, SEED)
    archive = directory / "perfsonar"
    if archive.exists():
        shutil.rmtree(archive)
    archive.mkdir(parents=True)
    measured = simulate_histograms(mesh, utilisation[:, 1:], first, SEED)
    write = {"capture": write_capture, "documents": write_documents}[layout]
    records = write(archive, mesh, measured)
    write_router_map(directory, mesh, utilisation, first)
    return records


def prepared_input(directory: Path, sites: int, days: float, layout: str) -> int:
    """`write_input`, unless `directory` holds the input of the same arguments already (its
    input.json says so): a 20-million-row archive takes longer to write than to build."""
    arguments = {"sites": sites, "days": days, "layout": layout}
    described = directory / "input.json"
    if described.exists():
        earlier = json.loads(described.read_text())
        if earlier["arguments"] == arguments:
            return int(earlier["records"])
    described.unlink(missing_ok=True)
    records = write_input(directory, sites, days, layout)
    described.write_text(json.dumps({"arguments": arguments, "records": records}))
    return records


def write_capture(archive: Path, mesh: Mesh, measurements: Iterable[MinuteMeasurements]) -> int:
    """One histogram-owdelay and one packet-loss-rate message per link and minute."""
    messages = 0
    with (archive / "capture.jsonl").open("w") as out:
        for measured in measurements:
            ts = measured.timestamp
            for link in range(mesh.n_links):
                delay = build_delay_message(mesh, link, {ts: measured.histogram(link)})
                loss = build_loss_message(mesh, link, {ts: float(measured.loss[link])})
                for headers, body in (delay, loss):
                    out.write(json.dumps({"headers": headers, "body": body}) + "\n")
                    messages += 1
    return messages


def write_documents(archive: Path, mesh: Mesh, measurements: Iterable[MinuteMeasurements]) -> int:
    """ps_owd and ps_packetloss exports, one Parquet file each (a row group per hour): per
    link and minute the delay statistics of its packets (none when all were lost) and the
    loss, as the OSG collector writes them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    ends = {
        "src": np.array(mesh.host_ips)[mesh.source],
        "dest": np.array(mesh.host_ips)[mesh.destination],
        "src_host": np.array(mesh.host_names)[mesh.source],
        "dest_host": np.array(mesh.host_names)[mesh.destination],
    }
    records = 0
    owd = loss = None
    minutes = iter(measurements)
    try:
        while hour := list(islice(minutes, 60)):
            stamps = np.repeat([m.timestamp * 1000 for m in hour], mesh.n_links)
            identity = {name: np.tile(values, len(hour)) for name, values in ends.items()}
            identity["timestamp"] = stamps
            statistics = np.stack([np.stack(m.delay_statistics()) for m in hour], axis=1)
            mean, sd, median = statistics.reshape(3, -1)  # minute-major, as the identity
            delays = {"delay_mean": mean, "delay_sd": sd, "delay_median": median}
            kept = np.isfinite(mean)
            owd_table = pa.table({k: v[kept] for k, v in (identity | delays).items()})
            loss_table = pa.table(
                identity | {"packet_loss": np.concatenate([m.loss for m in hour])}
            )
            owd = owd or pq.ParquetWriter(archive / "ps_owd.parquet", owd_table.schema)
            loss = loss or pq.ParquetWriter(archive / "ps_packetloss.parquet", loss_table.schema)
            owd.write_table(owd_table)
            loss.write_table(loss_table)
            records += owd_table.num_rows + loss_table.num_rows
    finally:
        for writer in (owd, loss):
            if writer is not None:
                writer.close()
    return records


def write_router_map(directory: Path, mesh: Mesh, utilisation: np.ndarray, first: int) -> None:
    """One LHCOPN flow file per link, holding its simulated utilisation of each minute."""
    links = []
    flows = directory / "flows"
    flows.mkdir(exist_ok=True)
    ips = mesh.host_ips
    pairs = zip(mesh.source.tolist(), mesh.destination.tolist(), strict=True)
    for link, (source, destination) in enumerate(pairs):
        lines = [
            json.dumps(
                {
                    "data": {
                        "src_site": "A",
                        "dst_site": "B",
                        "timestamp": (first - 1 + k) * 60,
                        "throughput": float(value) * 10e9,
                    }
                }
            )
            for k, value in enumerate(utilisation[link])
        ]
        (flows / f"{link}.jsonl").write_text("\n".join(lines) + "\n")
        links.append(
            {"source": ips[source], "destination": ips[destination], "file": f"flows/{link}.jsonl"}
            | {"format": "lhcopn_flows", "series": "A->B", "capacity_bps": 10e9}
        )
    (directory / "map.json").write_text(json.dumps({"links": links}))


def run_engine(
    engine: str, directory: Path, cores: int, points_per_group: int | None = None
) -> dict[str, float]:
    """Time one `nettel dataset` process; peak RSS of its whole process tree."""
    command = [
        sys.executable,
        "-m",
        "service",
        "dataset",
        "--engine",
        engine,
        "--perfsonar-dir",
        str(directory / "perfsonar"),
        "--router-map",
        str(directory / "map.json"),
        "--output",
        str(directory / f"rows-{engine}"),
    ]
    if engine == "spark":
        command += ["--spark-master", f"local[{cores}]", "--spark-conf", "spark.ui.enabled=false"]
        command += ["--spark-conf", f"spark.sql.shuffle.partitions={cores}"]
        if points_per_group is not None:
            command += ["--points-per-group", str(points_per_group)]
    started = time.perf_counter()
    peak = 0
    with (directory / f"{engine}.log").open("w") as log:  # its stderr, for a failed run
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
        while process.poll() is None:
            peak = max(peak, tree_rss(process.pid))
            time.sleep(SAMPLE_SECONDS)
    seconds = time.perf_counter() - started
    output = process.stdout.read() if process.stdout else ""
    if process.returncode != 0:
        raise RuntimeError(f"{engine} failed ({process.returncode}): {output}, see {log.name}")
    rows = int(output.split()[0])
    return {
        "rows": rows,
        "seconds": seconds,
        "rows_per_second": rows / seconds,
        "peak_mb": peak / 2**20,
    }
