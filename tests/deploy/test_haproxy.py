"""deploy/haproxy/haproxy.cfg passes `haproxy -c` (Debian 12's haproxy 2.6), as shipped and as
devtools/haproxy.py points it at local replicas for the tests and benchmarks."""

from __future__ import annotations

import re

from devtools.haproxy import DEPLOY_CONFIG, check_config, local_config

SERVERS = [("nettel-a", "127.0.0.1:18081"), ("nettel-b", "127.0.0.1:18082")]


def problems(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "[WARNING]" in line or "[ALERT]" in line]


def test_shipped_config_is_valid_and_only_misses_the_compose_host_names():
    checked = check_config(DEPLOY_CONFIG)
    assert checked.returncode == 0, checked.stderr
    unresolved = [line for line in problems(checked.stderr) if "could not resolve address" in line]
    assert len(unresolved) == 2 and problems(checked.stderr) == unresolved  # nettel, nettel-b


def test_config_pointed_at_local_replicas_is_valid_without_a_warning(tmp_path):
    path = tmp_path / "haproxy.cfg"
    path.write_text(local_config(DEPLOY_CONFIG.read_text(), 18080, SERVERS))
    checked = check_config(path)
    assert checked.returncode == 0 and problems(checked.stderr) == [], checked.stderr
    text = path.read_text()
    assert re.findall(r"^\s+server (\S+) (\S+) check$", text, re.M) == SERVERS
    assert re.findall(r"^\s+bind (\S+)$", text, re.M) == ["127.0.0.1:18080"]


def test_retries_and_health_check_are_what_a_replica_kill_needs():
    defaults = DEPLOY_CONFIG.read_text().split("\ndefaults\n")[1].split("\nfrontend ")[0]
    assert re.search(r"^\s+retries [1-9]$", defaults, re.M)
    assert re.search(r"^\s+option redispatch 1$", defaults, re.M)
    [retry_on] = re.findall(r"^\s+retry-on (.+)$", defaults, re.M)
    assert {"conn-failure", "empty-response"} <= set(retry_on.split())
    backend = DEPLOY_CONFIG.read_text().split("\nbackend ")[1]
    assert "http-check send meth GET uri /readyz" in backend
    assert "http-check expect status 200" in backend
