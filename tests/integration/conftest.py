"""Fixtures of the integration tests over TLS.

- `test_pki` (session): one throw-away PKI (`devtools.activemq.generate_test_pki`: a CA, a
  broker key store for 127.0.0.1, and a trust store holding the CA) for every TLS broker of a
  test process; keytool starts a JVM per step, so each PKI costs seconds. As is, a broker
  started with it requires client certificates signed by the CA; `server_only(test_pki)` is the
  same PKI without that demand.
"""

from __future__ import annotations

import dataclasses

import pytest

from devtools.activemq import BrokerTls, generate_test_pki


@pytest.fixture(scope="session")
def test_pki(tmp_path_factory: pytest.TempPathFactory) -> BrokerTls:
    """The session's CA and broker certificate; brokers started with it require client
    certificates (use `server_only` for brokers that do not)."""
    return generate_test_pki(tmp_path_factory.mktemp("pki"), need_client_auth=True)


def server_only(pki: BrokerTls) -> BrokerTls:
    """`pki` for a broker that asks no client for a certificate (no trust store)."""
    return dataclasses.replace(pki, truststore=None)
