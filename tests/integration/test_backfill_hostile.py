"""A real `nettel serve --backfill-from` against an archive whose records answers never end
(devtools.archive_server's `endless` links, over real HTTP): the reads are cut (at 16 MiB each,
and those in flight at the bound), the service is ready after the bound, nothing reads on, and
its memory grows by at most 200 MB and is flat after the bound (issue 40).

Run with `-s` to see the figures: RSS when the listener is up (the backfill already reading),
the peak, and the range once the bound has passed; growth is the peak over the settled RSS.
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from devtools.archive_server import ArchiveServer
from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from tests.ingest.test_archive_backfill import archived

BOUND = 4.0
#: Seconds after the bound over which RSS must have settled and stay flat.
SETTLED_FROM, SETTLED_TO = 2.0, 7.0
MB = 1e6


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def test_an_endless_archive_is_read_within_the_bound_and_memory_comes_back(
    nettel_service, tmp_path: Path
) -> None:
    links = [archived(1), *(archived(n, "endless") for n in range(2, 402))]
    with ArchiveServer(links) as archive:
        service = nettel_service(
            "none",
            *("--backfill-from", archive.url, "--backfill-bound", str(BOUND)),
            *("--model", "none", "--interval", "1"),
            env={"NETTEL_INGEST_TOKEN": "hostile-archive-token"},
        )
        # times from the listener's answer: the backfill and its bound start once it listens
        # (from the launch, a start slowed by a busy machine would leave too little time)
        listening, at_listener = time.monotonic(), rss_bytes(service.pid)
        samples: list[tuple[float, int]] = []
        while time.monotonic() < listening + BOUND + SETTLED_TO:
            samples.append((time.monotonic() - listening, rss_bytes(service.pid)))
            time.sleep(0.2)
        # cut at the bound. On a busy machine the archive server (in this process) saw the last
        # disconnect later: one answer still open 7 s after the bound, and once 17 s after it
        # beside two busy processes, though the service's log had every read cut at 4.07 s
        wait_for(lambda: archive.endless_open == 0, timeout=30, what="every endless answer cut")
        sent = archive.endless_bytes
        time.sleep(1)
        assert archive.endless_bytes == sent  # no thread reads on
        assert httpx.get(f"{service.url}/readyz", timeout=5).status_code == 200
        cut = {
            reason: metric_value(service.url, "nettel_backfill_cut_total", reason=reason)
            for reason in ("response_bytes", "bound", "pages", "backfill_bytes")
        }
        read = metric_value(service.url, "nettel_backfill_read_bytes_total")
    peak = max(rss for _, rss in samples)
    after = [rss for at, rss in samples if at > BOUND + SETTLED_FROM]
    print(
        f"\nRSS at the listener {at_listener / MB:.0f} MB, peak {peak / MB:.0f} MB, "
        f"{BOUND + SETTLED_FROM:.0f}-{BOUND + SETTLED_TO:.0f} s after the listener "
        f"{min(after) / MB:.0f}-{max(after) / MB:.0f} MB "
        f"(growth +{(peak - min(after)) / MB:.0f} MB); archive read {read / MB:.0f} MB; cut {cut}"
    )
    assert peak - min(after) < 200 * MB
    assert max(after) < at_listener + 20 * MB  # memory back to where it was
    assert max(after) - min(after) < 20 * MB  # flat after the bound
    assert cut["response_bytes"] > 0 and cut["bound"] > 0
    assert cut["pages"] == cut["backfill_bytes"] == 0
    log = service.log_text()
    assert '"message":"archive read cut"' in log and '"message":"backfill finished"' in log
