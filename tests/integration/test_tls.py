"""Broker TLS (ActiveMQ stomp+ssl) and keeping credentials secret.

A private broker with a stomp+ssl connector and the session's throw-away CA (`test_pki`, from
`generate_test_pki`) serves the module: `nettel serve --broker-tls true --broker-ca-file CA`
connects and ingests; with a CA that did not sign the broker's certificate it stays unready and
says why in its log; with a broker that requires client certificates (the same CA),
`--broker-cert-file/--broker-key-file` get it in.
The STOMP passcode shows up nowhere: not in the log (even at DEBUG), /metrics, /openapi.json,
the other endpoints, nor in the error for an invalid setting.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import certifi
import httpx
import pytest
import stomp

from devtools.activemq import (
    ActiveMQProcess,
    BrokerTls,
    free_port,
    issue_client_certificate,
    start_activemq,
)
from devtools.local_http import LOCAL_HTTP
from devtools.metrics_reader import metric_value
from devtools.waiting import wait_for
from service.broker.link import TlsFiles
from service.cli import main
from service.config import load_settings
from service.errors import ConfigError
from service.runtime import broker_tls_files
from tests.integration.conftest import server_only
from tests.integration.wire import current_minute_ts, get_json, sample_body

LOSS = "/topic/perfsonar.raw.packet-loss-rate"
SECRET = "secret-xyz"
SAMPLE_SOURCE = "192.0.2.10"
#: stomp.py's own warning for a refused certificate (logger "stomp.py", level WARNING).
VERIFY_FAILED = "CERTIFICATE_VERIFY_FAILED"
SERVE = (
    "--interval",
    "1",
    "--publish-telemetry",
    "false",
    "--heartbeat-ms",
    "2000",
    "--model",
    "none",
)
#: Any PEM CA bundle will do for the settings checks (httpx's dependency certifi ships one); its
#: public CAs did not sign the test broker's certificate.
PEM_CA = Path(certifi.where())


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def pki(test_pki: BrokerTls) -> BrokerTls:
    """The session's PKI for a broker that asks clients for no certificate."""
    return server_only(test_pki)


@pytest.fixture(scope="module")
def tls_broker(
    tmp_path_factory: pytest.TempPathFactory, pki: BrokerTls
) -> Iterator[ActiveMQProcess]:
    broker = start_activemq(
        tmp_path_factory.mktemp("tls-broker"), free_port(), tls=pki, short_lived=True
    )
    try:
        yield broker
    finally:
        broker.stop()


def tls_publish(broker: ActiveMQProcess, ca_file: Path, topic: str, body: dict, **tls) -> None:
    """Send one message over the broker's stomp+ssl connector."""
    host, port = broker.ssl_brokers.rsplit(":", 1)
    address = (host, int(port))
    connection = stomp.Connection12([address], reconnect_attempts_max=1)
    connection.set_ssl(for_hosts=[address], ca_certs=str(ca_file), **tls)
    connection.connect(wait=True)
    try:
        connection.send(topic, json.dumps(body))
    finally:
        connection.disconnect()


def loss_sample(source: str = SAMPLE_SOURCE) -> dict:
    return sample_body("packet-loss-rate.json", [current_minute_ts(1)], source=source)


def wait_ingested(service, publish, source: str = SAMPLE_SOURCE) -> dict:
    """Publish (again, every second: the subscription may still be on its way) until the
    sample's link is in /costmatrix; return the link."""

    def landed():
        publish()
        matrix = get_json(f"{service.url}/costmatrix") or {"links": []}
        return next((link for link in matrix["links"] if link["source"] == source), None)

    return wait_for(landed, timeout=30, interval=1.0, what=f"{source} ingested over TLS")


def wait_ready(service) -> None:
    wait_for(lambda: LOCAL_HTTP.get(f"{service.url}/readyz").status_code == 200, what="ready")


# --- TLS connects, a wrong CA does not --------------------------------------------------------


@pytest.mark.broker
@pytest.mark.slow
def test_serve_over_tls_ingests_a_sample(tls_broker, pki, nettel_service):
    service = nettel_service(
        tls_broker.ssl_brokers,
        *SERVE,
        "--broker-tls",
        "true",
        "--broker-ca-file",
        str(pki.ca_file),
        "--client-id",
        "tls-ingest",
    )
    wait_ready(service)
    link = wait_ingested(service, lambda: tls_publish(tls_broker, pki.ca_file, LOSS, loss_sample()))
    assert link["packet_loss"] == 0.046667  # the sample's first value, on the newest minute
    assert metric_value(service.url, "nettel_broker_connected") == 1.0
    assert VERIFY_FAILED not in service.log_text()


@pytest.mark.broker
@pytest.mark.slow
def test_wrong_ca_stays_unready_and_logs_the_tls_failure(tls_broker, nettel_service):
    wrong_ca = PEM_CA  # public CAs: none of them signed the broker's certificate
    service = nettel_service(
        tls_broker.ssl_brokers,
        *SERVE,
        "--broker-tls",
        "true",
        "--broker-ca-file",
        str(wrong_ca),
        "--client-id",
        "tls-wrong-ca",
    )
    wait_for(lambda: service.log_text().count(VERIFY_FAILED) >= 2, what="two refused handshakes")
    readiness = httpx.get(f"{service.url}/readyz")
    assert readiness.status_code == 503
    assert "not connected to a broker" in readiness.json()["problems"]
    assert metric_value(service.url, "nettel_broker_connected") == 0.0
    assert service.process.poll() is None
    entries = [json.loads(line) for line in service.log_text().splitlines() if line[:1] == "{"]
    ours = [entry for entry in entries if entry["message"] == "broker connect failed"]
    assert ours and all(entry["tls"] is True for entry in ours)


@pytest.mark.broker
@pytest.mark.slow
def test_plain_stomp_to_the_tls_port_stays_unready(tls_broker, nettel_service):
    service = nettel_service(tls_broker.ssl_brokers, *SERVE, "--client-id", "tls-plain")
    wait_for(
        lambda: "broker connect failed" in service.log_text(), timeout=40, what="a failed connect"
    )
    assert httpx.get(f"{service.url}/readyz").status_code == 503
    assert service.process.poll() is None


@pytest.mark.broker
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("openssl") is None, reason="client keys as PEM need openssl")
def test_client_certificate_for_a_broker_that_requires_one(
    test_pki, activemq_factory, nettel_service
):
    mutual = test_pki  # with its trust store: the broker requires client certificates
    assert mutual.need_client_auth
    cert, key = issue_client_certificate(mutual)
    broker = activemq_factory(tls=mutual)
    common = (*SERVE, "--broker-tls", "true", "--broker-ca-file", str(mutual.ca_file))
    without = nettel_service(broker.ssl_brokers, *common, "--client-id", "no-client-cert")
    with_cert = nettel_service(
        broker.ssl_brokers,
        *common,
        "--broker-cert-file",
        str(cert),
        "--broker-key-file",
        str(key),
        "--client-id",
        "client-cert",
    )
    wait_ready(with_cert)
    publish = lambda: tls_publish(  # noqa: E731
        broker, mutual.ca_file, LOSS, loss_sample(), cert_file=str(cert), key_file=str(key)
    )
    wait_ingested(with_cert, publish)
    assert httpx.get(f"{without.url}/readyz").status_code == 503
    assert without.process.poll() is None


# --- secrets ---------------------------------------------------------------------------------


@pytest.mark.broker
@pytest.mark.slow
def test_passcode_appears_nowhere(tls_broker, pki, nettel_service):
    service = nettel_service(
        tls_broker.ssl_brokers,
        *SERVE,
        "--broker-tls",
        "true",
        "--broker-ca-file",
        str(pki.ca_file),
        "--client-id",
        "tls-secret",
        "--log-level",
        "DEBUG",
        env={"NETTEL_BROKER_USER": "nettel", "NETTEL_BROKER_PASSWORD": SECRET},
    )
    wait_ready(service)
    wait_ingested(service, lambda: tls_publish(tls_broker, pki.ca_file, LOSS, loss_sample()))
    httpx.get(f"{service.url}/links/{SAMPLE_SOURCE}/198.51.100.20")  # something to log
    exposed = {
        path: httpx.get(f"{service.url}{path}").text
        for path in ("/metrics", "/openapi.json", "/readyz", "/healthz", "/costmatrix", "/docs")
    }
    service.stop()
    exposed["log"] = service.log_text()
    assert "nettel" in exposed["log"]  # the log is there and says something
    assert [where for where, text in exposed.items() if SECRET in text] == []


def run_serve(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """`nettel serve ARGS` with the passcode in the environment, through the command line's
    `main` in this process (it refuses invalid settings before it binds or starts anything):
    (exit status, stdout, stderr)."""
    monkeypatch.setenv("NETTEL_BROKER_PASSWORD", SECRET)
    status = main(["serve", "--listen", f"127.0.0.1:{free_port()}", *args])
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize(
    "args, env, named",
    [
        (["--heartbeat-ms", "-5"], {}, "--heartbeat-ms / NETTEL_HEARTBEAT_MS"),
        (["--brokers", "no-port"], {}, "--brokers / NETTEL_BROKERS"),
        (
            ["--broker-ca-file", "/nonexistent/ca.pem"],
            {"NETTEL_BROKER_TLS": "true"},
            "--broker-ca-file",
        ),
        (["--broker-tls", "maybe"], {}, "--broker-tls / NETTEL_BROKER_TLS"),
        (["--log-level", "LOUD"], {}, "--log-level / NETTEL_LOG_LEVEL"),
        (["--broker-password-file", "/nonexistent/pw"], {}, "/nonexistent/pw"),
    ],
)
def test_invalid_setting_names_the_setting_but_never_the_passcode(
    args, env, named, monkeypatch, capsys
):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    status, out, err = run_serve(monkeypatch, capsys, *args)
    assert status == 2, err
    assert named in err
    assert SECRET not in out + err


def test_config_error_and_settings_repr_hide_the_passcode():
    """Validation messages never echo input values (even a secret pasted into another field)."""
    with pytest.raises(ConfigError) as caught:
        load_settings(broker_password=SECRET, heartbeat_ms=-1, broker_tls=SECRET)
    assert SECRET not in str(caught.value)
    settings = load_settings(broker_password=SECRET)
    assert SECRET not in repr(settings) and SECRET not in str(settings.model_dump())
    assert settings.broker_passcode() == SECRET


# --- TLS settings --------------------------------------------------------------------------------


def test_tls_files_need_broker_tls():
    refused = "--broker-ca-file / NETTEL_BROKER_CA_FILE is set but --broker-tls / NETTEL_BROKER_TLS"
    with pytest.raises(ConfigError, match=f"{refused} is off"):
        load_settings(broker_ca_file=str(PEM_CA))
    settings = load_settings(broker_tls="true", broker_ca_file=str(PEM_CA))
    assert settings.broker_tls is True and settings.broker_ca_file == PEM_CA


def test_tls_files_must_exist_and_be_pem(tmp_path):
    missing = tmp_path / "missing.pem"
    with pytest.raises(
        ConfigError, match="--broker-ca-file / NETTEL_BROKER_CA_FILE: file .* does not exist"
    ):
        load_settings(broker_tls="true", broker_ca_file=str(missing))
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="holds no PEM CA certificate"):
        load_settings(broker_tls="true", broker_ca_file=str(garbage))


def test_client_certificate_and_key_go_together():
    with pytest.raises(ConfigError, match="must be given together"):
        load_settings(broker_tls="true", broker_cert_file=str(PEM_CA))
    with pytest.raises(ConfigError, match="must be given together"):
        load_settings(broker_tls="true", broker_key_file=str(PEM_CA))
    with pytest.raises(ConfigError, match="not a matching PEM certificate"):
        load_settings(broker_tls="true", broker_cert_file=str(PEM_CA), broker_key_file=str(PEM_CA))


def test_runtime_hands_the_tls_files_to_the_stomp_source():
    assert broker_tls_files(load_settings()) is None
    settings = load_settings(broker_tls="true", broker_ca_file=str(PEM_CA))
    assert broker_tls_files(settings) == TlsFiles(ca_file=str(PEM_CA))
    assert broker_tls_files(load_settings(broker_tls="true")) == TlsFiles()
