"""The shipped model bundle, if one is there: what the suite serves and how it says so."""

from __future__ import annotations

from functools import lru_cache

from service.analysis.features import FEATURE_NAMES
from service.config import DEFAULT_BUNDLE
from service.errors import ModelBundleError
from service.model.bundle import ModelBundle, load_bundle


@lru_cache(maxsize=1)
def shipped_model() -> ModelBundle | None:
    """The bundle in models/bundle, or None when it is absent or refused."""
    try:
        return load_bundle(DEFAULT_BUNDLE, FEATURE_NAMES)
    except ModelBundleError:
        return None


def serve_model_args() -> list[str]:
    """`nettel serve` flags: the default (shipped) model when present, else `--model none`."""
    return [] if shipped_model() is not None else ["--model", "none"]


def model_description() -> str:
    bundle = shipped_model()
    if bundle is None:
        return "none: models/bundle holds no loadable bundle, so services run with --model none"
    return f"shipped bundle {bundle.info.name} {bundle.info.version} ({bundle.info.sha256[:12]})"
