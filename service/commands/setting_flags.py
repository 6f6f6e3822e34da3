"""A command's flags made from a settings class: one `--name` per setting, None unless given, so
that `load_settings_of` puts only the flags given over the `NETTEL_*` environment variables."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from pydantic_settings import BaseSettings

from service.config import Settings, environment_variable


def add_setting_flags(
    command: argparse.ArgumentParser, names: Iterable[str], kind: type[BaseSettings] = Settings
) -> None:
    """A `--name` flag for each setting of `kind` in `names`, left None unless given."""
    for name in names:
        field = kind.model_fields[name]
        switch = field.annotation is bool  # `--broker-tls` alone means true; a value still works
        command.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            default=None,
            nargs="?" if switch else None,
            const="true" if switch else None,
            metavar="true|false" if switch else None,
            help=f"{field.description or name} [env {environment_variable(name, kind)}]",
        )


def given_settings(args: argparse.Namespace, kind: type[BaseSettings]) -> dict[str, object]:
    """The flags of `kind`'s settings as parsed (None where not given)."""
    return {name: getattr(args, name, None) for name in kind.model_fields}
