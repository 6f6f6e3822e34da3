"""A small Dockerfile reader for the deployment tests: instructions and stages, no Docker."""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int


@dataclass
class Stage:
    name: str
    base: str
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


def read_instructions(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined and comment lines dropped."""
    instructions, pending, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        keyword, _, args = (pending + line).partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), start))
        pending = ""
    return instructions


def read_stages(text: str) -> list[Stage]:
    """Stages in order; `FROM` arguments have the global ARG defaults substituted."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for instruction in read_instructions(text):
        if instruction.keyword == "ARG" and not stages:
            name, _, default = instruction.args.partition("=")
            global_args[name] = default.strip("\"'")
        elif instruction.keyword == "FROM":
            words = [w for w in instruction.args.split() if not w.startswith("--platform")]
            base = re.sub(
                r"\$\{?(\w+)\}?", lambda m: global_args.get(m.group(1), m.group(0)), words[0]
            )
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else str(len(stages))
            stages.append(Stage(name, base))
        elif stages:
            stages[-1].instructions.append(instruction)
    return stages


def copy_from(instruction: Instruction) -> str | None:
    match = re.search(r"--from=(\S+)", instruction.args)
    return match.group(1) if match else None


def closure(stages: dict[str, Stage], name: str) -> list[Stage]:
    """The stage and every stage it is built FROM or COPYs --from, recursively."""
    seen: dict[str, Stage] = {}

    def visit(stage_name: str) -> None:
        if stage_name in seen or stage_name not in stages:
            return
        stage = seen[stage_name] = stages[stage_name]
        visit(stage.base)
        for copy in stage.all("COPY"):
            source = copy_from(copy)
            if source:
                visit(source)

    visit(name)
    return list(seen.values())


def effective_user(stages: dict[str, Stage], name: str) -> str:
    """USER in force at the end of a stage (an external base image counts as root)."""
    stage = stages[name]
    users = stage.all("USER")
    if users:
        return users[-1].args
    return effective_user(stages, stage.base) if stage.base in stages else "root"
