"""Dataset build speed and memory: `nettel dataset --engine spark` (local mode) vs in memory.

    python -m benchmarks.spark_dataset [--sites 12] [--days 0.25] [--scales 1,2,4]
                                       [--cores 2] [--points-per-group N]
                                       [--engines memory,spark] [--layout capture|documents]
                                       [--output out/spark_dataset]

Input: a simulated mesh (`simulation.simulator`), `scale` x `days` long, written under `--output`
(git-ignored `out/`) as a bus capture (one histogram-owdelay and one packet-loss-rate message
per link and minute, `simulation.bus_format`) or as the OSG archive's ps_owd and ps_packetloss
exports (Parquet, one document per link and minute each: delay statistics, no histogram), and
one flow file per link for the router map.
Each engine runs as its own `python -m service dataset` process; its wall time and the peak of
the summed RSS of its process tree (driver, JVM, Python workers), sampled every 0.2 s, are
reported with rows per second, for every scale. The Spark runs use `local[<cores>]`, shuffle
partitions = cores and the job's group size (`--points-per-group`, default the job's own).
Prints a table and writes report.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable
from itertools import islice
from pathlib import Path

import numpy as np

from benchmarks.proc import children_of, memory_of
from simulation.bus_format import build_delay_message, build_loss_message
from simulation.simulator import (
    Mesh,
    MinuteMeasurements,
    build_mesh,
    simulate_histograms,
    simulate_utilisation,
)
from training.dataset import DEFAULT_START_MINUTE, MINUTES_PER_DAY, WARMUP_MINUTES

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


def tree_rss(pid: int) -> int:
    """Summed RSS of `pid` and all its descendants (0 for those that ended meanwhile)."""
    total, pending = 0, [pid]
    while pending:
        current = pending.pop()
        try:
            total += memory_of(current).get("VmRSS", 0)
        except OSError:
            continue
        pending += children_of(current)
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sites", type=int, default=12)
    parser.add_argument("--days", type=float, default=0.25, help="days of the 1x input")
    parser.add_argument("--scales", default="1,2,4")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--engines", default="memory,spark")
    parser.add_argument(
        "--layout",
        choices=("capture", "documents"),
        default="capture",
        help="archive written: bus capture JSONL, or ps_owd / ps_packetloss Parquet exports",
    )
    parser.add_argument(
        "--points-per-group",
        type=int,
        default=None,
        help="Spark's link-group bound in datapoints (default: the job's own, 400,000)",
    )
    parser.add_argument("--output", type=Path, default=Path("out/spark_dataset"))
    args = parser.parse_args(argv)
    results = []
    for scale in (int(s) for s in args.scales.split(",")):
        directory = args.output / f"x{scale}"
        records = prepared_input(directory, args.sites, args.days * scale, args.layout)
        for engine in args.engines.split(","):
            result = {"scale": scale, "engine": engine, "records": records}
            result |= run_engine(engine, directory, args.cores, args.points_per_group)
            results.append(result)
            print(
                f"x{scale} {engine:6s} {result['rows']:>9,} rows {result['seconds']:7.1f} s"
                f" {result['rows_per_second']:>9,.0f} rows/s  peak {result['peak_mb']:6,.0f} MB",
                flush=True,
            )
    report = {
        "sites": args.sites,
        "layout": args.layout,
        "days_1x": args.days,
        "cores": args.cores,
        "points_per_group": args.points_per_group,
        "results": results,
    }
    (args.output / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
