"""Refused settings are named as operators give them: the flag and the environment variable."""

from __future__ import annotations

import pytest

from service.config import load_settings, parse_address
from service.errors import ConfigError


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"retire_after": "5m"}, "--retire-after / NETTEL_RETIRE_AFTER: at least 32m"),
        ({"interval": "0"}, "--interval / NETTEL_INTERVAL: Input should be greater than 0"),
        ({"heartbeat_tolerance": "1"}, "--heartbeat-tolerance / NETTEL_HEARTBEAT_TOLERANCE: "),
        ({"rse_map": "/nonexistent/rses.yaml"}, "--rse-map / NETTEL_RSE_MAP: file /nonexistent"),
        ({"ha_lease_timeout": "1"}, "--ha-lease-timeout / NETTEL_HA_LEASE_TIMEOUT must be at"),
    ],
)
def test_a_refused_value_names_its_flag_and_variable(overrides: dict[str, str], message: str):
    with pytest.raises(ConfigError) as refused:
        load_settings(**overrides)
    assert message in str(refused.value)
    assert "retire_after" not in str(refused.value) and "Value error" not in str(refused.value)


def test_an_env_only_secret_is_named_by_its_variable(tmp_path):
    with pytest.raises(ConfigError, match=r"NETTEL_ADMIN_TOKEN: Input should be a valid string"):
        load_settings(admin_token=7)


@pytest.mark.parametrize(
    "brokers",
    ["127.0.0.1:61613;127.0.0.1:61614", "mq1:61613 mq2:61613", "mq.example.org:61613/x:1"],
)
def test_brokers_not_separated_by_commas_are_refused(brokers: str):
    with pytest.raises(ConfigError, match="--brokers / NETTEL_BROKERS: .* separated by commas"):
        load_settings(brokers=brokers)


def test_broker_lists_of_names_and_addresses_are_taken():
    listed = "mq-1.example.org:61613, 10.0.0.7:61614,[2001:db8::1]:61613,::1:61615,mq_2.:1"
    assert load_settings(brokers=listed).brokers == (
        ("mq-1.example.org", 61613),
        ("10.0.0.7", 61614),
        ("2001:db8::1", 61613),
        ("::1", 61615),
        ("mq_2.", 1),
    )
    with pytest.raises(ValueError, match="is not host:port"):
        parse_address("-bad.example.org:61613")
