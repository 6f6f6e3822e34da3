"""No tracked file depends on a path of the machine it was written on: a clone runs anywhere."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Not preceded by a name character, so the match starts an absolute path or a file URL's
#: path (`$dir/x/`, `a/x/` are relative).
_PATH_START = r"(?<![\w.$}-])/"

# Written in pieces so that this file does not name what it looks for.
FORBIDDEN = [
    re.compile(re.escape(".." + "/shared")),
    re.compile(re.escape("shared" + "/samples")),
    # Home and data folders of developers' and cluster machines (system paths like /usr, /etc,
    # /opt and /tmp name what an image or package installs, not a machine's files).
    re.compile(_PATH_START + "(?:work|root|mnt|srv|data|scratch|Users)" + "/"),
    # The runtime image's own home directory (Dockerfile's nettel user) is not a host path.
    re.compile(_PATH_START + "home" + r"/(?!nettel\b)"),
]


def tracked_files() -> list[Path]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [ROOT / name for name in listing.decode().split("\0") if name]


def is_binary(data: bytes) -> bool:
    """Git's own test: a NUL byte in the first 8000 bytes (models, images)."""
    return b"\0" in data[:8000]


def offending_lines(path: Path) -> list[str]:
    data = path.read_bytes()
    if is_binary(data):
        return []
    relative = path.relative_to(ROOT)
    return [
        f"{relative}:{number}: {line.strip()}"
        for number, line in enumerate(data.decode(errors="replace").splitlines(), start=1)
        if any(pattern.search(line) for pattern in FORBIDDEN)
    ]


def test_the_patterns_catch_machine_paths_and_spare_relative_ones() -> None:
    def flagged(line: str) -> bool:
        return any(pattern.search(line) for pattern in FORBIDDEN)

    for line in [
        'SAMPLES = Path("' + "/work" + "/shared" + '/samples")',
        "see .." + "/shared/x.json",
        "cp " + "/root" + "/.config/x .",
        "cd " + "/home" + "/alice/nettel",
        "file://" + "/work" + "/main/README.md",
        "--perfsonar-dir " + "/data" + "/ps-archive",
        "open(" + '"/mnt' + '/shared/router.csv")',
        "ls " + "/scratch" + "/alice/rows",
    ]:
        assert flagged(line), line
    for line in [
        'cp "$scratch' + "/root" + '/usr/bin/promtool" .',
        "WORKDIR " + "/home" + "/nettel",
        "tests/data/owdelay-v2-push.json",
        "benchmarks" + "/work" + "/load.py",
    ]:
        assert not flagged(line), line


def test_no_tracked_file_names_a_path_outside_the_repository() -> None:
    files = [path for path in tracked_files() if path.is_file()]
    assert len(files) > 100  # the listing worked
    offences = [hit for path in files for hit in offending_lines(path)]
    assert not offences, "paths outside the repository:\n" + "\n".join(offences)
