"""The machine and software a run measured: CPU, cores, RAM, versions, nettel commit, date."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def describe_environment(load_generator: str, model: str) -> dict[str, Any]:
    commit, dirty = _git_commit()
    return {
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "ram_bytes": _ram_bytes(),
        "os": _os_name(),
        "python": platform.python_version(),
        "numpy": _version("numpy"),
        "stomp_py": _version("stomp.py"),
        "orjson": _version("orjson"),
        "fastapi": _version("fastapi"),
        "uvicorn": _version("uvicorn"),
        "activemq": _command_output(["dpkg-query", "-W", "-f=${Version}", "activemq"]),
        "rabbitmq": _command_output(["dpkg-query", "-W", "-f=${Version}", "rabbitmq-server"]),
        "java": _java_version(),
        "load_generator": load_generator,
        "git_commit": commit,
        "git_dirty": dirty,
        "model": model,
        "python_executable": _in_repo(Path(sys.executable)),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _ram_bytes() -> int:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def _os_name() -> str:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"') + f", kernel {platform.release()}"
    return platform.platform()


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _java_version() -> str:
    if shutil.which("java") is None:
        return "not installed"
    result = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    first = (result.stderr or result.stdout).splitlines()
    return first[0].strip() if first else "unknown"


def _git_commit() -> tuple[str, bool]:
    """HEAD and whether the work tree differs from it (read-only git commands), not counting
    docs/performance.md: the suite writes it, so a second partial run would count as dirty."""
    commit = _command_output(["git", "-C", str(REPO_ROOT), "rev-parse", "--short=12", "HEAD"])
    status = _command_output(
        ["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--", ".", ":!docs/performance.md"]
    )
    return commit, bool(status and status != "unknown")


def _command_output(command: list[str]) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return result.stdout.strip()


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _in_repo(path: Path) -> str:
    """`path` relative to the repository when inside it: the report is committed in the docs."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else path.name
