"""Memory of a serving process holding N full links; run in a fresh interpreter per size.

    python -m benchmarks.support.memory_probe --links 100000

Imports the serving stack, builds the runtime `nettel serve` builds (broker never contacted),
fills its link state (index under tracemalloc, so the index's own bytes are known), creates the
HTTP app, runs one matrix cycle and compresses the body once (what the first gzip client
triggers), then prints one JSON object: sizes, RSS now and at peak, and whether TensorFlow or
Keras were imported.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc

from benchmarks.support.link_fill import fill_buffers, fill_index
from benchmarks.support.proc import memory_of
from service.ingest.parser_processes import ParserProcesses
from service.parse.records import MeasurementKind


def _parsers_rss(parsers: ParserProcesses) -> int:
    """RSS of the parser processes after they parsed a message (imports done)."""
    parsers.parse([(MeasurementKind.LOSS, b"{}")])
    return sum(memory_of(pid)["VmRSS"] for pid in parsers.pids)


def probe(n_links: int, model: str) -> dict[str, object]:
    import numpy as np

    from service.config import load_settings
    from service.memory import relax_garbage_collection
    from service.publish.app import create_app
    from service.runtime import build_runtime

    settings = load_settings(brokers="127.0.0.1:9", model=model, listen="127.0.0.1:9")
    runtime = build_runtime(settings)
    create_app(runtime)
    relax_garbage_collection()  # as `nettel serve` does once set up
    baseline = memory_of()["VmRSS"]
    state = runtime.state
    tracemalloc.start()
    fill_index(state.index, n_links)
    index_bytes = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    for row in range(n_links):
        state.buffers.ensure_row(row)
    fill_buffers(state.buffers, n_links, int(time.time() // 60) - 1, np.random.default_rng(11))
    started = time.perf_counter()
    matrix = runtime.cycle.recompute()
    cycle_seconds = time.perf_counter() - started
    gzip_bytes = len(matrix.gzip_body)
    gc.collect()
    rss = memory_of()
    parsers_rss = _parsers_rss(runtime.parsers) if runtime.parsers else 0
    buffers = state.buffers
    return {
        "links": n_links,
        "capacity": buffers.capacity,
        "buffer_bytes_per_row": buffers.nbytes_per_link(),
        "buffer_bytes_per_link_allocated": buffers.nbytes_per_link() * buffers.capacity / n_links,
        "index_bytes_per_link": index_bytes / n_links,
        "rss_baseline": baseline,
        "rss_after_cycle": rss["VmRSS"],
        "rss_parsers": parsers_rss,
        "rss_peak": rss["VmHWM"],
        "matrix_body_bytes": matrix.encoded.size,
        "matrix_gzip_bytes": gzip_bytes,
        "cycle_seconds": cycle_seconds,
        "tensorflow_imported": "tensorflow" in sys.modules,
        "keras_imported": "keras" in sys.modules,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.support.memory_probe")
    parser.add_argument("--links", type=int, required=True)
    parser.add_argument("--model", default="none", help="as `nettel serve --model`")
    args = parser.parse_args(argv)
    print(json.dumps(probe(args.links, args.model)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
