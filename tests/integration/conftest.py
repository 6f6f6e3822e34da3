"""Fixtures of the integration tests over TLS.

- `test_pki` (session): one throw-away PKI (`devtools.activemq.generate_test_pki`: a CA, a
  broker key store for 127.0.0.1, and a trust store holding the CA) for every TLS broker of a
  test run; keytool starts a JVM per step, so each PKI costs seconds (about 7 CPU-s). Under
  xdist the first worker that needs it makes it in the run's directory and the others read it
  from there. As is, a broker started with it requires client certificates signed by the CA;
  `server_only(test_pki)` is the same PKI without that demand.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from devtools.activemq import BrokerTls, generate_test_pki
from tests.run_directory import locked, run_directory


@pytest.fixture(scope="session")
def test_pki(tmp_path_factory: pytest.TempPathFactory) -> BrokerTls:
    """The run's CA and broker certificate; brokers started with it require client
    certificates (use `server_only` for brokers that do not)."""
    return shared_pki(run_directory(tmp_path_factory))


def shared_pki(run_dir: Path) -> BrokerTls:
    """The PKI in `run_dir/pki`, made there by the first caller (the others wait for it)."""
    record = run_dir / "pki.json"
    with locked(run_dir / "pki.lock"):
        if record.exists():
            return pki_from_record(record.read_text())
        pki = generate_test_pki(run_dir / "pki", need_client_auth=True)
        record.write_text(pki_record(pki))
        return pki


def pki_record(pki: BrokerTls) -> str:
    """`pki` as JSON (its paths as strings)."""
    fields = dataclasses.asdict(pki)
    return json.dumps({name: value and str(value) for name, value in fields.items()})


def pki_from_record(text: str) -> BrokerTls:
    """The `BrokerTls` that `pki_record` wrote."""
    fields = json.loads(text)
    truststore = fields["truststore"]
    return BrokerTls(
        folder=Path(fields["folder"]),
        ca_file=Path(fields["ca_file"]),
        keystore=Path(fields["keystore"]),
        truststore=None if truststore is None else Path(truststore),
        password=fields["password"],
    )


def server_only(pki: BrokerTls) -> BrokerTls:
    """`pki` for a broker that asks no client for a certificate (no trust store)."""
    return dataclasses.replace(pki, truststore=None)
