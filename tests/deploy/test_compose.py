"""docker-compose.yml, read with PyYAML (no Docker needed): services, pinned images, ports,
healthchecks, depends_on, volumes, and that every local file it builds from or mounts exists
and agrees with the config inside it (Prometheus rule paths, Grafana provisioning paths)."""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from service.config import Settings
from tests.deploy.dockerfile_reader import read_stages
from tests.deploy.support import REPO_ROOT

COMPOSE = REPO_ROOT / "docker-compose.yml"
DOCKERFILE = REPO_ROOT / "Dockerfile"
SERVICES = {
    "activemq", "inventory", "nettel", "simulator", "prometheus", "grafana", "nettel-b", "haproxy"
}  # fmt: skip
#: The second replica and HAProxy in front of both: `docker compose --profile ha up`.
HA_PROFILE = {"nettel-b", "haproxy"}
HAPROXY_CONFIG = "/usr/local/etc/haproxy/haproxy.cfg"
PINNED_IMAGES = {
    "activemq": r"apache/activemq-classic:\d+\.\d+\.\d+",
    "haproxy": r"haproxy:2\.6\.\d+",  # Debian 12's series, which the tests run
    "prometheus": r"prom/prometheus:v\d+\.\d+\.\d+",
    "grafana": r"grafana/grafana(-oss)?:\d+\.\d+\.\d+",
}
PUBLISHED = {
    "activemq": 61613,
    "nettel": 8080,
    "prometheus": 9090,
    "grafana": 3000,
    "haproxy": 8080,
}
NAMED_VOLUMES = {
    "activemq": "activemq-data",
    "prometheus": "prometheus-data",
    "grafana": "grafana-data",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def parse_port(spec: str | int) -> tuple[str, int, int]:
    """'127.0.0.1:8080:80' -> ('127.0.0.1', 8080, 80); '8080:80' -> ('', 8080, 80).

    >>> parse_port("127.0.0.1:61613:61613")
    ('127.0.0.1', 61613, 61613)
    """
    parts = str(spec).split("/")[0].split(":")
    container = int(parts[-1])
    host = int(parts[-2]) if len(parts) >= 2 else container
    return (":".join(parts[:-2]), host, container)


def mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) for each short-syntax volume."""
    return [tuple(spec.split(":")[:2]) for spec in service.get("volumes", [])]  # type: ignore[misc]


def bind_mounts(service: dict[str, Any]) -> dict[str, Path]:
    """Container path -> repo path, for mounts of local files and directories."""
    return {
        target: (COMPOSE.parent / source).resolve()
        for source, target in mounts(service)
        if source.startswith((".", "/"))
    }


def host_path(service: dict[str, Any], container_path: str) -> Path:
    """The repo file behind a container path, through the service's bind mounts."""
    wanted = PurePosixPath(container_path)
    for target, source in bind_mounts(service).items():
        if wanted == PurePosixPath(target) or PurePosixPath(target) in wanted.parents:
            return source / wanted.relative_to(target)
    raise AssertionError(f"{container_path} is not mounted from the repo")


def environment(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


# ---- services and images ---------------------------------------------------------------------


def test_services_present(services: dict[str, dict[str, Any]]) -> None:
    assert SERVICES <= set(services)


@pytest.mark.parametrize("name", sorted(PINNED_IMAGES))
def test_third_party_images_are_pinned(services: dict[str, dict[str, Any]], name: str) -> None:
    image = services[name]["image"]
    assert re.fullmatch(PINNED_IMAGES[name], image), f"{name}: pin an exact tag, not {image!r}"


@pytest.mark.parametrize("name", ["nettel", "simulator"])
def test_nettel_images_build_the_serve_target(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    build = services[name]["build"]
    context = (COMPOSE.parent / build["context"]).resolve()
    dockerfile = context / build.get("dockerfile", "Dockerfile")
    assert dockerfile.resolve() == DOCKERFILE
    assert build["target"] == "serve"
    assert build["target"] in {stage.name for stage in read_stages(DOCKERFILE.read_text())}


# ---- ports -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_ports_published_on_loopback_only(services: dict[str, dict[str, Any]], name: str) -> None:
    ports = [parse_port(spec) for spec in services[name].get("ports", [])]
    assert PUBLISHED[name] in {container for _, _, container in ports}, name
    for address, _, _ in ports:
        assert address == "127.0.0.1", f"{name}: publish on 127.0.0.1 (anonymous broker, demo)"


def test_simulator_publishes_no_port(services: dict[str, dict[str, Any]]) -> None:
    assert not services["simulator"].get("ports")


# ---- nettel and the demo feed ----------------------------------------------------------------


def test_nettel_environment(services: dict[str, dict[str, Any]]) -> None:
    env = environment(services["nettel"])
    assert env["NETTEL_BROKERS"] == "activemq:61613"
    assert env["NETTEL_LISTEN"] == "0.0.0.0:8080"
    known = {f"NETTEL_{name.upper()}" for name in Settings.model_fields}
    unknown = {key for key in env if key.startswith("NETTEL_")} - known
    assert not unknown, f"not a Settings field (typo?): {unknown}"


def test_nettel_healthcheck_probes_healthz_on_its_listen_port(
    services: dict[str, dict[str, Any]],
) -> None:
    port = environment(services["nettel"])["NETTEL_LISTEN"].rpartition(":")[2]
    probe = " ".join(services["nettel"]["healthcheck"]["test"])
    assert f":{port}/healthz" in probe


def test_the_replicas_read_the_demo_inventory_the_one_shot_writes(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    """Sites and the Rucio RSE map, as scripts/run.sh gives them: a site view and the CSV."""
    inventory = services["inventory"]
    command = inventory["command"]
    assert command[:3] == ["simulate", "--seed", "1"] and command[-1] == "--no-feed"
    written = {command[i]: command[i + 1] for i in range(len(command) - 1)}
    assert inventory["healthcheck"] == {"disable": True} and inventory["restart"] == "no"
    assert ("demo-inventory", "/demo") in mounts(inventory)
    assert "demo-inventory" in compose["volumes"]
    for name in ("nettel", "nettel-b"):
        env = environment(services[name])
        assert env["NETTEL_TOPOLOGY"] == written["--write-topology"]
        assert env["NETTEL_RSE_MAP"] == written["--write-rse-map"]
        assert "demo-inventory:/demo:ro" in services[name]["volumes"]
        condition = services[name]["depends_on"]["inventory"]["condition"]
        assert condition == "service_completed_successfully"


def test_simulator_runs_the_seeded_demo_feed(services: dict[str, dict[str, Any]]) -> None:
    simulator = services["simulator"]
    assert simulator["command"] == ["simulate", "--brokers", "activemq:61613", "--seed", "1"]
    assert simulator["healthcheck"] == {"disable": True}, "the image's /healthz probe would fail"


# ---- healthchecks and start order ------------------------------------------------------------


@pytest.mark.parametrize("name", ["activemq", "nettel", "prometheus", "grafana"])
def test_long_running_services_have_healthchecks(
    services: dict[str, dict[str, Any]], name: str
) -> None:
    check = services[name]["healthcheck"]
    assert check["test"][0] in {"CMD", "CMD-SHELL"}
    for key in ("interval", "timeout", "retries"):
        assert key in check, f"{name}: healthcheck without {key}"


def test_depends_on(services: dict[str, dict[str, Any]]) -> None:
    expected = {
        ("nettel", "activemq"): "service_healthy",
        ("simulator", "activemq"): "service_healthy",
        ("prometheus", "nettel"): "service_started",
        ("grafana", "prometheus"): "service_healthy",
    }
    for (service, dependency), condition in expected.items():
        assert services[service]["depends_on"][dependency]["condition"] == condition
    for name, service in services.items():
        for dependency, spec in service.get("depends_on", {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if spec.get("condition") == "service_healthy":
                check = services[dependency].get("healthcheck", {})
                assert check and not check.get("disable"), f"{dependency} has no healthcheck"


# ---- volumes and local files -----------------------------------------------------------------


def test_named_volumes_declared_and_used(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    declared = set(compose["volumes"])
    for name, volume in NAMED_VOLUMES.items():
        assert volume in declared
        assert volume in {source for source, _ in mounts(services[name])}, name
    used = {s for service in services.values() for s, _ in mounts(service) if s[0] not in "./"}
    assert used <= declared, f"undeclared volumes {used - declared}"


def test_every_local_mount_exists(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for target, source in bind_mounts(service).items():
            assert source.exists(), f"{name}: {source} (mounted at {target}) does not exist"
            assert REPO_ROOT in source.parents, f"{name}: {source} is outside the repo"


def test_prometheus_config_and_rules_are_mounted(services: dict[str, dict[str, Any]]) -> None:
    prometheus = services["prometheus"]
    [config_flag] = [a for a in prometheus["command"] if a.startswith("--config.file=")]
    config_path = config_flag.partition("=")[2]
    config_file = host_path(prometheus, config_path)
    assert config_file == REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml"
    config = yaml.safe_load(config_file.read_text())
    for rule_file in config["rule_files"]:
        in_container = PurePosixPath(config_path).parent / rule_file
        assert host_path(prometheus, str(in_container)).is_file(), rule_file
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == "nettel"]
    host, _, port = job["static_configs"][0]["targets"][0].partition(":")
    assert host in services
    assert environment(services[host])["NETTEL_LISTEN"].endswith(f":{port}")


def test_grafana_provisioning_is_mounted(services: dict[str, dict[str, Any]]) -> None:
    grafana = services["grafana"]
    for kind in ("datasources", "dashboards"):
        assert host_path(grafana, f"/etc/grafana/provisioning/{kind}").is_dir(), kind
    providers = host_path(grafana, "/etc/grafana/provisioning/dashboards/nettel.yml")
    [provider] = yaml.safe_load(providers.read_text())["providers"]
    dashboards = host_path(grafana, provider["options"]["path"])
    assert (dashboards / "nettel.json").is_file()
    home = environment(grafana)["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert host_path(grafana, home).is_file()
    sources = host_path(grafana, "/etc/grafana/provisioning/datasources/prometheus.yml")
    [source] = yaml.safe_load(sources.read_text())["datasources"]
    host, _, port = source["url"].removeprefix("http://").partition(":")
    assert host in services and int(port) == PUBLISHED[host]


# ---- replicas behind HAProxy (profile ha) ----------------------------------------------------


def test_ha_profile_holds_the_second_replica_and_haproxy_only(
    services: dict[str, dict[str, Any]],
) -> None:
    profiled = {name for name, service in services.items() if "ha" in service.get("profiles", [])}
    assert profiled == HA_PROFILE
    assert services["nettel-b"]["build"] == services["nettel"]["build"]


def test_replicas_have_their_own_client_ids_in_one_group(
    services: dict[str, dict[str, Any]],
) -> None:
    replicas = [environment(services[name]) for name in ("nettel", "nettel-b")]
    assert replicas[0]["NETTEL_CLIENT_ID"] != replicas[1]["NETTEL_CLIENT_ID"]
    assert replicas[0]["NETTEL_HA_GROUP"] == replicas[1]["NETTEL_HA_GROUP"] == "demo"
    for name in ("NETTEL_BROKERS", "NETTEL_LISTEN"):
        assert replicas[0][name] == replicas[1][name]


def test_haproxy_balances_over_both_replicas_on_their_listen_port(
    services: dict[str, dict[str, Any]],
) -> None:
    haproxy = services["haproxy"]
    config = host_path(haproxy, HAPROXY_CONFIG)
    assert config == REPO_ROOT / "deploy" / "haproxy" / "haproxy.cfg"
    servers = re.findall(r"^\s+server \S+ (\S+):(\d+) check$", config.read_text(), re.M)
    assert {host for host, _ in servers} == {"nettel", "nettel-b"}
    for host, port in servers:
        assert environment(services[host])["NETTEL_LISTEN"].endswith(f":{port}")
        assert haproxy["depends_on"][host]["condition"] == "service_healthy"
    [frontend] = re.findall(r"^\s+bind :(\d+)$", config.read_text(), re.M)
    assert int(frontend) == PUBLISHED["haproxy"]
