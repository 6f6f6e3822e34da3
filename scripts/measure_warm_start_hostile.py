"""Issue 40's figures for a hostile warm-start peer: `python scripts/measure_warm_start_hostile.py`.

Runs the hand-written hostile peer of tests/integration/test_warm_start_hostile.py (11 cases:
poisoned contents, a compressed 300,000-link payload, an endless, an oversized, a gzip-bomb and a
trickling body) and, for each case twice, spawns `nettel serve --brokers none --model none
--max-links 1000 --warm-deadline 10 --warm-from <peer>/<case>`: the time from the spawn to the
first `/healthz` 200 (polled every 20 ms), then, once `/readyz` answers 200, the links its
`/costmatrix` serves (every one of them would be a poisoned one: the replica has no other input).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from devtools.service_process import launch_service  # noqa: E402
from tests.integration.test_warm_start_hostile import HostilePeer, _cases  # noqa: E402

RUNS = 2


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HostilePeer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    logs = Path(tempfile.mkdtemp(prefix="hostile-warm-"))
    up: list[float] = []
    poisoned = 0
    for run in range(RUNS):
        for case in [*_cases(), "endless", "trickle"]:
            args = ("--model", "none", "--interval", "1", "--max-links", "1000")
            args += ("--warm-deadline", "10", "--warm-from", f"{base}/{case}")
            env = {"NETTEL_WARM_TOKEN": "x", "NETTEL_INGEST_TOKEN": "y"}
            started = time.monotonic()
            service = launch_service("none", args, logs / f"{case}-{run}.log", env)
            while True:
                service.check_alive()
                try:
                    if httpx.get(f"{service.url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(0.02)
            up.append(time.monotonic() - started)
            while httpx.get(f"{service.url}/readyz", timeout=5).status_code != 200:
                time.sleep(0.1)
            poisoned += len(httpx.get(f"{service.url}/costmatrix", timeout=10).json()["links"])
            print(f"{case}: listener up {up[-1]:.2f} s", flush=True)
            service.stop()
    print(f"listener up: median {statistics.median(up):.2f} s, max {max(up):.2f} s, n {len(up)}")
    print(f"poisoned links served: {poisoned}")


if __name__ == "__main__":
    main()
