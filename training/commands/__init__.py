"""The `nettel` subcommands that run training code: simulate, train, evaluate, dataset.

`service.cli` finds them through the `nettel.commands` entry points (pyproject.toml) and imports
a module here only to run or describe its command, so `nettel serve` never imports `training`.
"""
