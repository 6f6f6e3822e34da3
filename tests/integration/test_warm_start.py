"""A replica with `--warm-from` against a peer service (both in this process, over one in-memory
broker, as ActiveMQ and as RabbitMQ; the peer's state over real HTTP): the replica is ready with
the peer's exact state (2,500 full links: a 3.3 MB snapshot, read in at least 4 chunks of at most
CHUNK_BYTES, 1 MiB; the warm_start benchmark measures 15,000), misses nothing published while it
takes the snapshot, then counts every datapoint from the broker once, also those its warm state
already holds; a refused or corrupt warm start starts from its own state with its reason; a
replica with no snapshot of its own takes a peer's from a shared directory. (A real `nettel serve`
against a hostile peer: test_warm_start_hostile.py.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np

from benchmarks.support.link_fill import link_endpoints, write_snapshot
from devtools.metrics_reader import metric_value
from devtools.stomp_client import BrokerClient
from devtools.waiting import wait_for
from service.broker.memory_broker import MemoryBroker
from service.config import DELAY_TOPIC, LOSS_TOPIC
from service.persistence.snapshot_codec import MEDIA_TYPE, decode_state
from service.state.link_state import LinkState
from service.topology.topology import Topology
from tests.in_memory_service import InMemoryService
from tests.integration.wire import current_minute_ts, get_json, sample_body
from tests.persistence.test_snapshot_codec import assert_same_state

LINKS = 2_500
TOKEN = "warm-start-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def serve(
    memory_service: Callable[..., InMemoryService],
    broker: MemoryBroker,
    name: str,
    *args: str,
    **env: str,
) -> InMemoryService:
    service = memory_service(
        broker,
        *("--model", "none", "--interval", "1", "--client-id", name),
        *args,
        env={"NETTEL_ADMIN_TOKEN": TOKEN} | env,
    )
    service.ready_at(timeout=60)  # subscribed, too
    return service


def state_of(service: InMemoryService) -> LinkState:
    response = httpx.get(f"{service.url}/admin/state", headers=AUTH, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == MEDIA_TYPE
    assert int(response.headers["content-length"]) == len(response.content)
    return decode_state(response.content, Topology())


def publish_minute(publisher: BrokerClient, link: tuple[str, str], ts: int) -> None:
    source, destination = link
    for name, topic in (("owdelay-histogram-real.json", DELAY_TOPIC), (None, LOSS_TOPIC)):
        body = sample_body(name or "packet-loss-rate.json", [ts], source=source)
        body["meta"]["destination"] = destination
        publisher.send(topic, body)


@contextmanager
def relay(
    peer: InMemoryService,
    meanwhile: Callable[[], object] = lambda: None,
    damage: Callable[[bytes], bytes] = lambda body: body,
) -> Iterator[str]:
    """An HTTP server in front of `peer`'s /admin/state that fetches the snapshot, runs
    `meanwhile` (e.g. publishes what the snapshot then lacks), and only then answers with the
    snapshot's bytes as `damage` leaves them; yields its base URL."""

    class Relay(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            headers = {"Authorization": self.headers.get("Authorization", "")}
            response = httpx.get(f"{peer.url}{self.path}", headers=headers, timeout=30)
            body = damage(response.content)
            meanwhile()
            self.send_response(response.status_code)
            self.send_header("Content-Type", response.headers["content-type"])
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Relay)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def newest_minute(service: InMemoryService, link: tuple[str, str]) -> int | None:
    detail = get_json(f"{service.url}/links/{link[0]}/{link[1]}")
    return None if detail is None else detail["link"]["last_measurement"]


def test_a_replica_warm_from_a_peer_has_its_window_and_counts_no_datapoint_twice(
    flavoured_memory_broker: MemoryBroker,
    memory_service: Callable[..., InMemoryService],
    tmp_path: Path,
) -> None:
    broker = flavoured_memory_broker
    write_snapshot(tmp_path / "peer", LINKS, time.time())
    peer = serve(memory_service, broker, "peer", "--state-dir", str(tmp_path / "peer"))
    links = link_endpoints(LINKS)
    early, gap, late, window = links[10], links[15], links[20], links[30]
    publisher = BrokerClient(broker.access())
    now_minute = current_minute_ts()
    publish_minute(publisher, early, now_minute)  # the peer alone has it: in the warm state
    wait_for(lambda: newest_minute(peer, early) == now_minute, what="the peer applying it")
    before = state_of(peer)

    def publish_after_the_snapshot() -> None:
        publish_minute(publisher, gap, now_minute)
        wait_for(lambda: newest_minute(peer, gap) == now_minute, what="the peer applying it")

    with relay(peer, publish_after_the_snapshot) as url:
        replica = serve(
            memory_service,
            broker,
            "replica",
            "--warm-from",
            url,
            NETTEL_WARM_TOKEN=TOKEN,
        )
    assert metric_value(replica.url, "nettel_warm_start_total", outcome="loaded") == 1
    wait_for(
        lambda: newest_minute(replica, gap) == now_minute, what="the minute after the snapshot"
    )
    warm = state_of(replica)
    assert len(warm) == LINKS
    assert_same_state(state_of(peer), warm)  # the snapshot's window, and the gap's minute
    assert metric_value(replica.url, "nettel_datapoints_applied_total") == 2  # the gap's only

    publish_minute(publisher, early, now_minute)  # again, as a redelivery would bring it
    publish_minute(publisher, window, now_minute - 5 * 60)  # a minute inside both windows
    publish_minute(publisher, late, now_minute)  # a new minute for both
    publisher.close()
    for service in (peer, replica):
        wait_for(lambda s=service: newest_minute(s, late) == now_minute, what="the late minute")
    after_peer, after_replica = state_of(peer), state_of(replica)
    assert_same_state(after_peer, after_replica)

    fed = (early, gap, late, window)
    rows = [after_replica.index.find_by_name(*link) for link in fed]
    delay_n = after_replica.buffers.archive["delay_n"][rows]
    previous = before.buffers.archive["delay_n"][rows]
    # early: its new minute archived one minute, once; gap and late: one minute left the window
    # (the gap's before `before` was taken, so +1); window: nothing left the window
    np.testing.assert_array_equal(delay_n - previous, [0, 1, 1, 0])
    held = (after_replica.buffers.slot_minute[rows] >= 0).sum(axis=1)
    np.testing.assert_array_equal(held, [32, 32, 32, 32])


def test_refused_corrupt_and_shared_directory_warm_starts(
    memory_broker: MemoryBroker, memory_service: Callable[..., InMemoryService], tmp_path: Path
) -> None:
    shared = tmp_path / "shared"  # replica state dirs side by side
    write_snapshot(shared / "peer", 50, time.time())
    write_snapshot(tmp_path / "own", 7, time.time())
    peer = serve(memory_service, memory_broker, "peer", "--state-dir", str(shared / "peer"))
    assert httpx.get(f"{peer.url}/admin/state").status_code == 401
    schema = httpx.get(f"{peer.url}/openapi.json").json()["paths"]["/admin/state"]["get"]
    assert list(schema["responses"]["200"]["content"]) == [MEDIA_TYPE]

    refused = serve(
        memory_service, memory_broker, "refused", "--warm-from", peer.url, NETTEL_ADMIN_TOKEN=""
    )
    assert httpx.get(f"{refused.url}/admin/state", headers=AUTH).status_code == 404
    assert metric_value(refused.url, "nettel_warm_start_total", outcome="refused") == 1
    assert metric_value(refused.url, "nettel_links_tracked") == 0
    assert "peer answered HTTP 401 (wrong or missing warm token)" in refused.log_text()

    def flip_a_payload_byte(body: bytes) -> bytes:
        return body[:1000] + bytes([body[1000] ^ 1]) + body[1001:]

    with relay(peer, damage=flip_a_payload_byte) as url:
        own = ("--warm-from", url, "--state-dir", str(tmp_path / "own"))
        corrupt = serve(memory_service, memory_broker, "corrupt", *own, NETTEL_WARM_TOKEN=TOKEN)
    assert metric_value(corrupt.url, "nettel_warm_start_total", outcome="corrupt") == 1
    assert metric_value(corrupt.url, "nettel_links_tracked") == 7  # its own snapshot's
    assert "checksum mismatch" in corrupt.log_text()

    from_directory = ("--warm-from", str(shared), "--state-dir", str(shared / "replica"))
    replica = serve(memory_service, memory_broker, "replica", *from_directory)
    assert metric_value(replica.url, "nettel_warm_start_total", outcome="loaded") == 1
    assert metric_value(replica.url, "nettel_links_tracked") == 50  # the peer's snapshot
