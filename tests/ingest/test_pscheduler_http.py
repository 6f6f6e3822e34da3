"""PUT/POST /ingest/pscheduler over a real uvicorn server: the token (bearer or Basic), limits
with their reasons (400 for a body that is not a run record, 413 for the body's size or the
delay histogram's buckets, 429 and 503 with Retry-After), the archiver's doubled Content-Type,
and a re-posted run applied once. The runtime is built as `nettel serve` builds it; its STOMP
source never starts, and its frame batcher only where a test wants runs applied."""

from __future__ import annotations

import base64
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import httpx
import orjson
import pytest

from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.cli import build_parser
from service.config import Settings
from service.publish.app import create_app
from service.runtime import Runtime, build_runtime
from tests.publish.served_app import serve_app
from tests.run_factory import SOURCE_HOST, run_body, run_record

TOKEN = "ingest-secret-7f3a"
PATH = "/ingest/pscheduler"
BEARER = {"Authorization": f"Bearer {TOKEN}"}


Served = tuple[str, Runtime]


@pytest.fixture
def serve() -> Iterator[Callable[..., Served]]:
    """`serve(**settings)`: the app of `build_runtime(Settings(...))` on a free port."""
    with ExitStack() as running:

        def start(apply: bool = False, **settings: object) -> Served:
            base = {"model": "none", "publish_telemetry": False}
            runtime = build_runtime(Settings(**(base | settings)))  # type: ignore[arg-type]
            assert runtime.intake is not None
            runtime.intake.start()  # takes runs (the rest of the service is not started)
            if apply:
                runtime.batcher.start()
                running.callback(runtime.batcher.stop)  # after the server (last in, first out)
            return running.enter_context(serve_app(create_app(runtime))), runtime

        yield start


def rejected(url: str, reason: str) -> float:
    return metric_value(url, "nettel_rejected_total", reason=reason)


def test_without_a_token_configured_ingest_is_not_there(serve) -> None:
    url, _ = serve()
    for method in ("PUT", "POST"):
        response = httpx.request(method, url + PATH, content=run_body(), headers=BEARER)
        assert response.status_code == 404
    assert rejected(url, "unauthorized") == 0


def test_the_token_is_required_as_bearer_or_basic_password(serve) -> None:
    url, runtime = serve(ingest_token=TOKEN)
    missing = httpx.put(url + PATH, content=run_body())
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == 'Bearer, Basic realm="nettel"'
    wrong = httpx.put(url + PATH, content=run_body(), headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    basic_wrong = httpx.post(url + PATH, content=run_body(), auth=("toolkit", "nope"))
    assert basic_wrong.status_code == 401
    assert rejected(url, "unauthorized") == 3
    assert runtime.batcher.queued() == 0

    bearer = httpx.put(url + PATH, content=run_body(), headers=BEARER)
    assert (bearer.status_code, bearer.json()) == (202, {"status": "queued"})
    assert httpx.post(url + PATH, content=run_body(), auth=("toolkit", TOKEN)).status_code == 202
    host_port = url.removeprefix("http://")
    in_url = httpx.put(f"http://ps:{TOKEN}@{host_port}{PATH}", content=run_body())  # as curl does
    assert in_url.status_code == 202
    assert runtime.batcher.queued() == 3
    assert httpx.get(url + PATH, headers=BEARER).status_code == 405


def test_the_archivers_doubled_content_type_is_taken_as_sent(serve) -> None:
    """A spec with a lowercase `content-type` header makes pScheduler send two of them."""
    url, runtime = serve(ingest_token=TOKEN)
    body = run_body()
    request = (
        f"PUT {PATH} HTTP/1.1\r\nHost: nettel\r\nAuthorization: Bearer {TOKEN}\r\n"
        "content-type: application/json\r\nContent-Type: application/json\r\n"
        f"x-ps-observer: 192.0.2.10\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as connection:
        connection.sendall(request)
        answer = connection.recv(4096)
    assert answer.startswith(b"HTTP/1.1 202 ")
    assert runtime.batcher.queued() == 1


def test_a_body_over_the_limit_is_refused_whole_with_413(serve) -> None:
    url, runtime = serve(ingest_token=TOKEN)
    limit = runtime.intake.max_body_bytes  # type: ignore[union-attr]
    large = b"x" * (limit + 1)
    declared = httpx.put(url + PATH, content=large, headers=BEARER)
    assert declared.status_code == 413
    assert declared.json()["detail"] == f"too_large: body over {limit} bytes"
    chunked = httpx.put(url + PATH, content=iter([large[:1000], large[1000:]]), headers=BEARER)
    assert chunked.status_code == 413
    unpadded = len(orjson.dumps(run_record() | {"reference": ""}))
    exact = orjson.dumps(run_record() | {"reference": "x" * (limit - unpadded)})
    assert len(exact) == limit
    assert httpx.put(url + PATH, content=exact, headers=BEARER).status_code == 202
    assert rejected(url, "too_large") == 2 and runtime.batcher.queued() == 1


def test_a_delay_histogram_over_the_bucket_limit_is_refused_with_413(serve) -> None:
    url, runtime = serve(ingest_token=TOKEN)
    limit = runtime.intake.max_buckets  # type: ignore[union-attr]
    histogram = {f"{n / 100:.2f}": 1 for n in range(limit + 1)}
    body = run_body(result=run_record()["result"] | {"histogram-latency": histogram})
    response = httpx.put(url + PATH, content=body, headers=BEARER)
    assert response.status_code == 413
    detail = f"too_large: histogram-latency has {limit + 1} buckets, over {limit}"
    assert response.json()["detail"] == detail
    assert rejected(url, "too_large") == 1 and runtime.batcher.queued() == 0


@pytest.mark.parametrize(
    ("body", "reason", "detail"),
    [
        (b"<html>not a run</html>", "invalid_json", "invalid_json: unexpected character"),
        (b'"a string"', "not_an_object", "not_an_object: str"),
        (b'{"runs": []}', "missing_field", "missing_field: test"),
        (b'{"test": {"type": "latencybg"}, "run": []}', "bad_value", "bad_value: run is not"),
    ],
)
def test_a_body_that_is_not_a_run_record_is_refused_with_400_and_why(
    serve, body: bytes, reason: str, detail: str
) -> None:
    """The archiver learns it is misconfigured; the refusal is counted as a bus message's is."""
    url, runtime = serve(ingest_token=TOKEN)
    for method in (httpx.put, httpx.post):
        response = method(url + PATH, content=body, headers=BEARER)
        assert response.status_code == 400
        assert response.json()["detail"].startswith(detail)
        assert "retry-after" not in response.headers
    assert rejected(url, reason) == 2 and runtime.batcher.queued() == 0
    assert httpx.put(url + PATH, content=run_body(), headers=BEARER).status_code == 202


def test_a_client_over_its_rate_gets_429_with_retry_after(serve) -> None:
    url, runtime = serve(ingest_token=TOKEN, ingest_client_rate=0.2, ingest_client_burst=2)
    with httpx.Client(headers=BEARER) as client:
        statuses = [client.put(url + PATH, content=run_body()).status_code for _ in range(2)]
        refused = client.put(url + PATH, content=run_body())
    assert statuses == [202, 202]
    assert refused.status_code == 429
    assert 4 <= int(refused.headers["retry-after"]) <= 5  # one token per 5 s
    assert refused.json()["detail"] == "rate_limited: client 127.0.0.1"
    assert rejected(url, "rate_limited") == 1 and runtime.batcher.queued() == 2


def test_runs_wait_in_the_queue_until_it_is_full_then_503_with_retry_after(serve) -> None:
    """The frame batcher is not started: nothing drains the queue, as when ingest is behind."""
    url, runtime = serve(ingest_token=TOKEN, ingest_queue_bytes=2 << 20)
    big = orjson.dumps(run_record() | {"reference": "x" * 1_000_000})
    with httpx.Client(headers=BEARER) as client:
        statuses = [client.put(url + PATH, content=big).status_code for _ in range(3)]
        assert statuses == [202, 202, 503]  # the third would pass 2 MiB
        full = client.put(url + PATH, content=run_body())
        assert full.status_code == 202  # a small one still fits
        refused = client.put(url + PATH, content=big)
    assert refused.status_code == 503 and refused.headers["retry-after"] == "10"
    assert refused.json()["detail"] == "queue_full: ingest is behind; its queue is full"
    assert runtime.batcher.queued() == 3
    assert rejected(url, "queue_full") == 2


def test_runs_are_taken_only_between_the_intakes_start_and_stop(serve) -> None:
    """The intake is a source: stopped (as before the service starts and while it stops), it
    answers 503 with Retry-After and queues nothing, without counting a refusal."""
    url, runtime = serve(ingest_token=TOKEN)
    runtime.intake.stop()
    stopped = httpx.put(url + PATH, content=run_body(), headers=BEARER)
    assert stopped.status_code == 503 and stopped.headers["retry-after"] == "10"
    assert "starting or stopping" in stopped.json()["detail"]
    assert runtime.batcher.queued() == 0 and rejected(url, "queue_full") == 0
    assert runtime.intake.describe().running is False
    runtime.intake.start()
    assert httpx.put(url + PATH, content=run_body(), headers=BEARER).status_code == 202
    assert runtime.batcher.queued() == 1 and runtime.intake.describe().running is True


def test_a_run_posted_twice_is_applied_once_and_counted(serve) -> None:
    url, runtime = serve(apply=True, ingest_token=TOKEN)
    body = run_body(time.time(), run_id="retried")
    with httpx.Client(headers=BEARER) as client:
        assert [client.put(url + PATH, content=body).status_code for _ in range(2)] == [202, 202]
        failed = run_body(time.time(), run_id="failed", result={"succeeded": False})
        assert client.post(url + PATH, content=failed).status_code == 202
        other = run_body(time.time(), run_id="rtt", test_type="rtt")
        assert client.post(url + PATH, content=other).status_code == 202

    def counted() -> dict[str, float]:
        outcomes = ("applied", "duplicate", "failed", "ignored", "rejected")
        values = {o: metric_value(url, "nettel_pscheduler_runs_total", outcome=o) for o in outcomes}
        return values if sum(values.values()) == 4 else {}

    assert wait_for(counted, timeout=10, interval=0.1, what="four runs counted") == {
        "applied": 1.0,
        "duplicate": 1.0,
        "failed": 1.0,
        "ignored": 1.0,
        "rejected": 0.0,
    }
    assert metric_value(url, "nettel_datapoints_applied_total") == 2
    assert metric_value(url, "nettel_messages_received_total", topic=PATH) == 4
    assert runtime.state.view(time.time()).source_hosts == [SOURCE_HOST]


def test_basic_credentials_that_are_not_base64_are_refused(serve) -> None:
    url, _ = serve(ingest_token=TOKEN)
    for credentials in ("!!!", base64.b64encode(b"no-colon").decode()):
        headers = {"Authorization": f"Basic {credentials}"}
        assert httpx.put(url + PATH, content=b"{}", headers=headers).status_code == 401


def test_admin_endpoints_share_the_check_bearer_only(serve) -> None:
    url, _ = serve(admin_token="admin-secret")
    reload = url + "/admin/reload-model"
    assert httpx.post(reload, auth=("admin", "admin-secret")).status_code == 401
    assert httpx.post(reload, headers={"Authorization": "Bearer wrong"}).status_code == 401
    answer = httpx.post(reload, headers={"Authorization": "Bearer admin-secret"})
    assert answer.status_code == 409  # authorised; --model none has nothing to reload
    assert httpx.put(url + PATH, content=run_body(), headers=BEARER).status_code == 404


def test_the_token_comes_from_the_environment_or_a_file(tmp_path, monkeypatch) -> None:
    token_file = tmp_path / "ingest-token"
    token_file.write_text(f"{TOKEN}\n")
    monkeypatch.setenv("NETTEL_INGEST_TOKEN", "from-env")
    assert Settings().ingest_bearer_token() == "from-env"
    assert Settings(ingest_token_file=token_file).ingest_bearer_token() == TOKEN  # the file wins
    with pytest.raises(ValueError, match="does not exist"):
        Settings(ingest_token_file=tmp_path / "missing")
    assert build_parser().parse_args(["serve", "--ingest-token-file", "f"]).ingest_token_file
    with pytest.raises(SystemExit):  # the token itself is never on the command line
        build_parser().parse_args(["serve", "--ingest-token", TOKEN])


def test_token_files_are_read_at_start_and_on_reload_not_per_request(serve, tmp_path) -> None:
    admin_file, ingest_file = tmp_path / "admin-token", tmp_path / "ingest-token"
    admin_file.write_text("admin-one\n")
    ingest_file.write_text(f"{TOKEN}\n")
    url, runtime = serve(admin_token_file=admin_file, ingest_token_file=ingest_file)
    reload = f"{url}/admin/reload-model"

    def admin_status(token: str) -> int:
        return httpx.post(reload, headers={"Authorization": f"Bearer {token}"}).status_code

    admin_file.write_text("admin-two\n")  # not read until the reload
    assert admin_status("admin-one") == 409 and admin_status("admin-two") == 401
    runtime.reload_tokens()  # what SIGHUP runs
    assert admin_status("admin-two") == 409 and admin_status("admin-one") == 401

    ingest_file.write_text("ingest-two\n")
    runtime.reload_tokens()
    ingest = {"Authorization": "Bearer ingest-two"}
    assert httpx.put(url + PATH, content=run_body(), headers=ingest).status_code == 202

    admin_file.unlink()  # a deleted file: the token in use stays, no 500
    ingest_file.write_text("\n")  # an emptied one too
    assert admin_status("admin-two") == 409
    runtime.reload_tokens()
    assert admin_status("admin-two") == 409
    assert httpx.put(url + PATH, content=run_body(), headers=ingest).status_code == 202


def test_readyz_lists_every_source_with_what_it_reads(serve) -> None:
    url, _ = serve(ingest_token=TOKEN, brokers="127.0.0.1:1")
    readiness = httpx.get(url + "/readyz").json()
    by_kind = {source["kind"]: source for source in readiness["sources"]}
    assert list(by_kind) == ["bus", "pscheduler-http"]  # in SOURCE_FACTORIES order
    assert by_kind["bus"]["running"] is False and by_kind["bus"]["detail"]["connected"] is False
    assert "/topic/perfsonar.raw.packet-loss-rate" in by_kind["bus"]["reads"]
    assert by_kind["pscheduler-http"] == {
        "kind": "pscheduler-http",
        "reads": [PATH],
        "running": True,
        "detail": {"enabled": True, "queued_bytes": 0},
    }
