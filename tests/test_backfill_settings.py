"""The --backfill-* settings: validated at start, with a message naming the setting."""

from __future__ import annotations

import pytest

from service.config import load_settings
from service.errors import ConfigError
from service.runtime import backfill_settings


def test_an_archive_url_with_its_companions_makes_the_backfill_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert backfill_settings(load_settings()) is None
    monkeypatch.setenv("NETTEL_BACKFILL_FROM", "https://ps-archive.example.org:8443/archive")
    monkeypatch.setenv("NETTEL_BACKFILL_HISTORY", "86400")
    backfill = backfill_settings(load_settings(backfill_concurrency="32"))
    assert backfill is not None
    assert (backfill.url, backfill.history, backfill.concurrency) == (
        "https://ps-archive.example.org:8443/archive",
        86400.0,
        32,
    )
    assert (backfill.bound, backfill.timeout, backfill.page_size) == (60.0, 10.0, 10_000)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("backfill_from", "ftp://ps-archive.example.org"),
        ("backfill_from", "ps-archive.example.org"),
        ("backfill_from", "https://ps-archive.example.org/?event-type=x"),
        ("backfill_from", "http://ps-archive.example.org:70000"),
        ("backfill_from", "https://reader:secret-pw@ps-archive.example.org"),
        ("backfill_page_size", "10001"),
        ("backfill_history", "1800"),
        ("backfill_bound", "0"),
        ("backfill_concurrency", "0"),
        ("backfill_timeout", "-1"),
    ],
)
def test_invalid_backfill_settings_stop_the_start(setting: str, value: str) -> None:
    flag_and_variable = f"--{setting.replace('_', '-')} / NETTEL_{setting.upper()}"
    with pytest.raises(ConfigError, match=flag_and_variable) as refused:
        load_settings(**{setting: value})
    assert "secret-pw" not in str(refused.value)
