"""`nettel serve --warm-from` against a hand-written hostile peer (issue 40): every poisoned state
(a link frozen 19 years ahead, loss 3.5, std -7, min -1e30, a duplicate pair, a stolen host
name, 30,000 links (30 times --max-links) in a small compressed payload, an endless or
oversized body, a gzip bomb) is refused whole, counted with its reason, and the replica starts
cold, serving none of it; a peer trickling one byte every 20 s never keeps the listener from
serving, and the replica is ready after --warm-deadline. Real `nettel serve` processes (no
broker: `--brokers none`, the one datapoint a test feeds goes in over pScheduler's HTTP intake),
a real HTTP peer."""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from devtools.metrics_reader import metric_value
from devtools.service_process import ServiceProcess, wait_for_status
from devtools.waiting import wait_for
from service.persistence.snapshot_codec import MEDIA_TYPE
from tests.integration.test_warm_start import newest_minute
from tests.integration.wire import get_json
from tests.persistence.hostile_snapshots import (
    Arrays,
    Links,
    future_link,
    many_links,
    snapshot_bytes,
    tampered,
)
from tests.run_factory import run_body

MAX_LINKS = 1000
#: Links of the compressed case: 39 MB of arrays in 0.2 MB, 6 times the replica's size cap.
BOMB_LINKS = 30 * MAX_LINKS
TRICKLE_SECONDS = 20.0
#: --warm-deadline of the replica that the peer trickles to: well before its second byte.
WARM_DEADLINE = 5
INGEST_TOKEN = "hostile-peer-ingest-token"


def _set(array: str, value: float) -> Callable[[Arrays, Links], None]:
    def poison(arrays: Arrays, links: Links) -> None:
        arrays[array][1, arrays["latest_minute"][1] % 32] = value

    return poison


def _duplicate(arrays: Arrays, links: Links) -> None:
    links[0][1], links[2][1] = links[0][0], links[2][0]


def _steal(arrays: Arrays, links: Links) -> None:
    links[2][1] = links[2][0]  # 10.1.0.2 named ps-0, the name row 0 binds to 10.1.0.1


#: path -> (snapshot bytes, extra headers, the outcome and content check the replica must count)
CASES: dict[str, tuple[bytes, dict[str, str], str, str | None]] = {}


def _cases() -> dict[str, tuple[bytes, dict[str, str], str, str | None]]:
    if not CASES:
        CASES.update(
            {
                "future": (tampered(future_link), {}, "rejected", "future"),
                "loss": (tampered(_set("series/loss", 3.5)), {}, "rejected", "range"),
                "std": (tampered(_set("series/delay_std", -7.0)), {}, "rejected", "range"),
                "min": (tampered(_set("series/delay_min", -1e30)), {}, "rejected", "range"),
                "duplicate": (tampered(_duplicate), {}, "rejected", "duplicate_link"),
                "stolen": (tampered(_steal), {}, "rejected", "identity"),
                "compressed": (
                    snapshot_bytes(*many_links(BOMB_LINKS), compressed=True),
                    {},
                    "corrupt",
                    None,
                ),
                "over_cap": (b"", {"Content-Length": str(1 << 30)}, "too_large", None),
                "gzip": (
                    gzip.compress(bytes(64 << 20)),
                    {"Content-Encoding": "gzip"},
                    "refused",
                    None,
                ),
            }
        )
    return CASES


class HostilePeer(BaseHTTPRequestHandler):
    """GET /<case>/admin/state: the case's bytes; /endless/...: zeros until the client goes;
    /trickle/...: one byte every TRICKLE_SECONDS of a promised 2 MiB."""

    protocol_version = "HTTP/1.1"
    #: One entry per byte trickled (a test checks how many were sent).
    trickled: list[int] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        case = self.path.strip("/").split("/")[0]
        self.send_response(200)
        self.send_header("Content-Type", MEDIA_TYPE)
        try:
            if case in ("endless", "trickle"):
                self._stream(case)
                return
            body, headers, _, _ = _cases()[case]
            for name, value in ({"Content-Length": str(len(body))} | headers).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the replica hung up: what it should do

    def _stream(self, case: str) -> None:
        if case == "endless":
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"%x\r\n%s\r\n" % (1 << 16, bytes(1 << 16))
            while True:
                self.wfile.write(chunk)
        self.send_header("Content-Length", str(2 << 20))  # under the cap
        self.end_headers()
        while True:
            self.wfile.write(b"N")
            self.wfile.flush()
            HostilePeer.trickled.append(1)
            time.sleep(TRICKLE_SECONDS)

    def log_message(self, format: str, *args: object) -> None:
        return None


@pytest.fixture
def hostile_peer() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), HostilePeer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def replica(nettel_service: Callable[..., ServiceProcess], url: str, *args: str) -> ServiceProcess:
    return nettel_service(
        "none",
        *("--model", "none", "--interval", "1", "--max-links", str(MAX_LINKS)),
        *("--warm-from", url, *args),
        env={"NETTEL_WARM_TOKEN": "peer-token", "NETTEL_INGEST_TOKEN": INGEST_TOKEN},
    )


def served_links(service: ServiceProcess) -> int:
    body = get_json(f"{service.url}/costmatrix")
    assert body is not None
    return len(body["links"])


def test_every_hostile_state_is_refused_whole_and_the_replica_starts_cold(
    nettel_service: Callable[..., ServiceProcess], hostile_peer: str
) -> None:
    cases = {**_cases(), "endless": (b"", {}, "too_large", None)}
    replicas = {case: replica(nettel_service, f"{hostile_peer}/{case}") for case in cases}
    for case, service in replicas.items():
        _, _, outcome, check = cases[case]
        wait_for_status(service, "/readyz", timeout=60, interval=0.2)
        assert metric_value(service.url, "nettel_warm_start_total", outcome=outcome) == 1, case
        if check is not None:
            rejected = metric_value(service.url, "nettel_warm_start_rejected_total", check=check)
            assert rejected == 1, case
        assert metric_value(service.url, "nettel_links_tracked") == 0, case
        assert served_links(service) == 0, case  # poisoned links served: none
        log = service.log_text()
        assert "warm start failed; starting from this replica's own state" in log, case
        assert f'"outcome":"{outcome}"' in log, case

    # the link the peer froze in 2045 takes its real datapoints once the replica started cold
    frozen = ("10.1.0.1", "10.2.0.1")
    service = replicas["future"]
    posted = time.time()
    run = run_body(posted, run_id="frozen-link", source=frozen[0], dest=frozen[1])
    put = httpx.put(
        f"{service.url}/ingest/pscheduler",
        content=run,
        headers={"Authorization": f"Bearer {INGEST_TOKEN}"},
    )
    assert put.status_code == 202
    minute = int(posted - 60) // 60 * 60  # the run's interval began a minute before it ended
    wait_for(lambda: newest_minute(service, frozen) == minute, what="the real minute")
    assert metric_value(service.url, "nettel_rejected_total", reason="too_old") == 0


def test_a_trickling_peer_never_blocks_the_listener_and_ends_at_the_deadline(
    nettel_service: Callable[..., ServiceProcess], hostile_peer: str
) -> None:
    service = replica(
        nettel_service, f"{hostile_peer}/trickle", "--warm-deadline", str(WARM_DEADLINE)
    )  # returns once /healthz answers
    wait_for(lambda: HostilePeer.trickled, what="the replica asking the peer")
    assert len(HostilePeer.trickled) == 1  # the listener serves while the peer trickles
    readiness = httpx.get(f"{service.url}/readyz", timeout=5)
    assert readiness.status_code == 503
    assert any("warm start in progress" in p for p in readiness.json()["problems"])
    wait_for_status(service, "/readyz", timeout=30, interval=0.2)
    assert len(HostilePeer.trickled) == 1  # ready before the peer's second byte
    assert metric_value(service.url, "nettel_warm_start_total", outcome="deadline") == 1
    assert f"not done within --warm-deadline {WARM_DEADLINE} s" in service.log_text()


def test_a_replica_stopped_during_its_warm_start_exits_cleanly(
    nettel_service: Callable[..., ServiceProcess], hostile_peer: str
) -> None:
    before = len(HostilePeer.trickled)
    url = f"{hostile_peer}/trickle"
    stuck = replica(nettel_service, url, "--warm-deadline", "600")
    wait_for(lambda: len(HostilePeer.trickled) > before, what="the replica asking the peer")
    assert httpx.get(f"{stuck.url}/readyz", timeout=5).status_code == 503
    assert stuck.stop() == 0  # SIGTERM abandons the transfer; nothing waits for the peer
    assert "warm start failed" in stuck.log_text() and '"reason":"stopped"' in stuck.log_text()
