"""Memory of a serving process holding N full links; run in a fresh interpreter per size.

    python -m benchmarks.support.memory_probe --links 100000

Imports the serving stack, builds the runtime `nettel serve` builds (broker never contacted),
fills its link state (index under tracemalloc, so the index's own bytes are known), creates the
HTTP app, runs one matrix cycle and compresses the body once (what the first gzip client
triggers), then gives every link throughput results and a path (`fill_results`), and prints
one JSON object: sizes, RSS now and at peak (and with the results), and whether TensorFlow or
Keras were imported.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
import tracemalloc

import numpy as np

from benchmarks.support.link_fill import fill_buffers, fill_index
from benchmarks.support.proc import memory_of
from service.ingest.parser_processes import ParserProcesses
from service.parse.packet_trace import path_fingerprint
from service.parse.records import MeasurementKind, Trace, TraceHop
from service.state.link_state import LinkState
from service.state.throughput_state import BIN_SECONDS, BINS


def _parsers_rss(parsers: ParserProcesses) -> int:
    """RSS of the parser processes after they parsed a message (imports done)."""
    parsers.parse([(MeasurementKind.LOSS, b"{}")])
    return sum(memory_of(pid)["VmRSS"] for pid in parsers.pids)


def probe(n_links: int, model: str) -> dict[str, object]:
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
        state.ensure_row(row)
    fill_buffers(state.buffers, n_links, int(time.time() // 60) - 1, np.random.default_rng(11))
    started = time.perf_counter()
    matrix = runtime.cycle.recompute()
    cycle_seconds = time.perf_counter() - started
    gzip_bytes = len(matrix.gzip_body)
    gc.collect()
    rss = memory_of()
    parsers_rss = _parsers_rss(runtime.parsers) if runtime.parsers else 0
    buffers = state.buffers
    results = fill_results(state, n_links, time.time(), np.random.default_rng(12))
    gc.collect()
    return results | {
        "rss_with_results": memory_of()["VmRSS"],
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


#: Router interfaces the made-up paths cross (WLCG's meshes cross some tens of thousands), and
#: the hops of a path between its two ends.
HOP_POOL = 20_000
PATH_HOPS = (6, 12)


def fill_results(state: LinkState, n_links: int, now: float, rng: np.random.Generator) -> dict:
    """Every link given throughput results in all its bins, a retransmit count and a path
    (its ends' routers and 6-12 routers of a pool of HOP_POOL); returns the bytes they take:
    per row of the columns, and the hop table's (address strings, lookup, AS numbers)."""
    rows = np.arange(n_links)
    for age in np.arange(BINS)[::-1] * BIN_SECONDS + 3600:
        times = np.full(n_links, int(now) - int(age))
        state.throughput.add_rates(rows, times, rng.uniform(1e9, 9e9, n_links))
    state.throughput.add_retransmits(rows, np.full(n_links, int(now) - 3600), np.ones(n_links))
    pool = [f"100.{64 + (k >> 16)}.{k >> 8 & 255}.{k & 255}" for k in range(HOP_POOL)]
    traces = []
    for source, destination in zip(state.index.sources, state.index.destinations, strict=True):
        picks = rng.choice(HOP_POOL, size=int(rng.integers(*PATH_HOPS)), replace=False)
        addresses = [source, *(pool[k] for k in picks.tolist()), destination]
        hops = tuple(TraceHop(t, a, 1.0, 64496) for t, a in enumerate(addresses, start=1))
        traces.append(Trace(hops, path_fingerprint(addresses)))
    numbers = state.paths.number_hops(traces, n_links)
    state.paths.add_traces(
        rows,
        np.full(n_links, int(now) - 60),
        traces,
        [hops for hops in numbers if hops is not None],
        list(state.index.destinations),
    )
    table = state.paths.addresses
    table_bytes = sum(sys.getsizeof(address) for address in table.addresses)
    table_bytes += sys.getsizeof(table.numbers) + sys.getsizeof(table.addresses)
    table_bytes += sum(sys.getsizeof(number) for number in table.numbers.values())
    table_bytes += table.asn_array().nbytes
    return {
        "results_bytes_per_row": state.throughput.columns.nbytes_per_row()
        + state.paths.columns.nbytes_per_row(),
        "hop_addresses": len(table),
        "hop_table_bytes": table_bytes,
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
