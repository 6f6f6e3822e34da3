"""--topology, --topology-refresh and --psconfig-site-key as settings: what is accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.config import load_settings
from service.errors import ConfigError


def test_a_file_or_an_https_url_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "sites.yaml"
    path.write_text("A: [a.example.org]\n")
    assert load_settings(topology=path).topology == str(path)
    url = "https://wlcg-cric.cern.ch/api/core/rcsite/query/list/?json"
    assert load_settings(topology=url).topology == url
    assert load_settings(topology="http://127.0.0.1:8000/cric.json").topology is not None
    assert load_settings(topology="http://[::1]:8000/cric.json").topology is not None
    several = f"{path}, {url}"
    assert load_settings(topology=several).topology == several
    settings = load_settings()
    assert (settings.topology, settings.topology_refresh) == (None, 21_600.0)
    assert settings.psconfig_site_key == "display-name"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"topology": "/nonexistent/sites.yaml"}, "file /nonexistent/sites.yaml does not exist"),
        ({"topology": "http://cric.example.org/x"}, "must be https:// \\(http:// only on loopback"),
        ({"topology": "https:///x"}, "URL without a host"),
        ({"topology": "https://a.example.org/x,/nonexistent/b.json"}, "file /nonexistent/b.json"),
        ({"topology": " , "}, "no file or URL given"),
        ({"topology_refresh": -1}, "--topology-refresh / NETTEL_TOPOLOGY_REFRESH"),
        ({"topology_refresh": 8 * 86_400}, "--topology-refresh"),
        ({"psconfig_site_key": ""}, "--psconfig-site-key / NETTEL_PSCONFIG_SITE_KEY"),
    ],
)
def test_refused_values_name_the_setting(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_settings(**overrides)


def test_a_url_with_credentials_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as error:
        load_settings(topology="http://reader:s3cret@cric.example.org/x")
    assert "s3cret" not in str(error.value)
