"""Property-based fuzzing of the live HTTP API against its own OpenAPI document (schemathesis).

A real `nettel serve` (its front door included; a few real pScheduler runs ingested over HTTP,
no broker needed; a topology with sites; admin endpoints enabled) is fuzzed operation by
operation: schemathesis generates valid and invalid parameters from /openapi.json and checks
every response: no 5xx, the status code is one the document lists, the content type is the
documented one, the body matches the response schema.

Not fuzzed: GET /costmatrix/stream and POST /alto/updates (server-sent events never end, so no
response completes); the stream control of update streams is (any stream id it makes is 404).
Two rules of ALTO's that OpenAPI cannot state shape the generated cases of their operations
(`same_metric_as_path`, `over_list_bound_within_pair_limit`); every check runs on every case.
Examples are derandomised and capped so the whole run stays well under 90 s.
"""

from __future__ import annotations

import time
from urllib.parse import unquote

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from devtools.waiting import wait_for
from service.config import DEFAULT_BUNDLE
from service.publish.alto.openapi import MAX_LISTED_ENDPOINTS
from service.publish.alto.request_bodies import MAX_ENDPOINT_PAIRS
from tests.integration.wire import get_json
from tests.run_factory import DESTINATION_HOST, SOURCE_HOST, run_body

pytestmark = pytest.mark.slow

ADMIN_TOKEN = "fuzz-admin-token"
INGEST_TOKEN = "fuzz-ingest-token"
EXAMPLES_PER_OPERATION = 40
STREAMS = ["/costmatrix/stream", "/alto/updates"]
FILTERED_COST_MAP = "POST /alto/costmap/{metric}"
ENDPOINT_COST = "POST /alto/endpointcost"


def ingest_samples(url: str) -> None:
    """Three links (two with sites), loss and delay, in the last minutes (pScheduler runs)."""
    posted = time.time()
    runs = [{}, {"source": "10.1.2.3"}, {"dest": "198.51.100.20"}]
    for number, ends in enumerate(runs):
        run = run_body(posted - 60 * number, run_id=f"fuzz-{number}", **ends)
        headers = {"Authorization": f"Bearer {INGEST_TOKEN}"}
        response = httpx.put(f"{url}/ingest/pscheduler", content=run, headers=headers)
        assert response.status_code == 202, response.text


@pytest.fixture
def live_schema(nettel_service, tmp_path):
    """The OpenAPI document of a live, ready service holding three links."""
    topology = tmp_path / "topology.yaml"
    topology.write_text(f"SITE-A: [{SOURCE_HOST}]\nSITE-B: [{DESTINATION_HOST}, 198.51.100.20]\n")
    model = "default" if (DEFAULT_BUNDLE / "model_card.json").is_file() else "none"
    service = nettel_service(
        "none",
        "--interval",
        "1",
        "--topology",
        str(topology),
        "--model",
        model,
        "--publish-telemetry",
        "false",
        env={"NETTEL_ADMIN_TOKEN": ADMIN_TOKEN, "NETTEL_INGEST_TOKEN": INGEST_TOKEN},
    )
    wait_for(lambda: get_json(f"{service.url}/readyz"), what="ready")
    ingest_samples(service.url)

    def three_links():
        return len((get_json(f"{service.url}/costmatrix") or {}).get("links", [])) >= 3

    wait_for(three_links, interval=0.5, what="three links in the matrix")
    yield schemathesis.openapi.from_url(f"{service.url}/openapi.json").exclude(path=STREAMS)
    assert service.process.poll() is None, "the service died while being fuzzed"


def same_metric_as_path(case):
    """A filtered cost map's body names the cost map's own metric, the one in its path (RFC 7285
    section 11.3.2.3; another is refused, 400). OpenAPI cannot tie a body field to a path
    parameter, so schema-valid cases would pair them at random: a positive case gets its path's
    metric in its body."""
    cost_type = case.body.get("cost-type") if isinstance(case.body, dict) else None
    if isinstance(cost_type, dict):
        cost_type["cost-metric"] = unquote(case.path_parameters["metric"])
    return case


def over_list_bound_within_pair_limit(case) -> bool:
    """Whether an endpoint cost request has a list over the schema's bound, yet is within the
    server's limit. That limit is on (source, destination) pairs of distinct entries, which JSON
    schema cannot state; the schema bounds each list by the limit's square root, so that every
    schema-valid request is within it, but a longer list (schemathesis builds one by repeating an
    address) is still accepted while its distinct entries' pairs are within the limit. Such a
    negative case would fail "schema-violating request accepted", so it is not sent; a list over
    the bound whose pairs exceed the limit is (400)."""
    endpoints = case.body.get("endpoints") if isinstance(case.body, dict) else None
    if not isinstance(endpoints, dict):
        return False
    lists = [endpoints.get(side, ["the client's address"]) for side in ("srcs", "dsts")]
    if not all(isinstance(entries, list) for entries in lists):
        return False
    if all(len(entries) <= MAX_LISTED_ENDPOINTS for entries in lists):
        return False
    sources, destinations = (len(set(map(repr, entries))) for entries in lists)
    return sources * destinations <= MAX_ENDPOINT_PAIRS


def fuzz_operation(operation, mode: GenerationMode) -> None:
    """Run schemathesis' checks over generated cases; raises on the first failing example."""
    cases = operation.as_strategy(generation_mode=mode)
    if mode is GenerationMode.POSITIVE and operation.label == FILTERED_COST_MAP:
        cases = cases.map(same_metric_as_path)
    if mode is GenerationMode.NEGATIVE and operation.label == ENDPOINT_COST:
        cases = cases.filter(lambda case: not over_list_bound_within_pair_limit(case))

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases)
    def check(case):
        case.call_and_validate(timeout=10)

    check()


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_operation_conforms_to_its_openapi_document(live_schema, mode):
    """The pytest plugin's lazy loading (from_fixture) fails on pytest 9 (it reads a private
    node attribute), so operations are driven one by one; every failure is reported."""
    failures, operations = [], 0
    for result in live_schema.get_all_operations():
        operation = result.ok()
        operations += 1
        try:
            fuzz_operation(operation, mode)
        except Unsatisfiable:  # e.g. no parameters, so no invalid request to make
            assert mode is GenerationMode.NEGATIVE, operation.label
        except (Exception, BaseExceptionGroup) as error:  # noqa: BLE001 - reported below
            failures.append(f"--- {operation.label}\n{error}")
    assert operations >= 10
    assert not failures, "\n".join(failures)
