"""The state diagrams of `docs/lifecycle.md`, rendered from the transition tables.

Owns only the rendering: the tables in `lifecycle` are the truth, and a test checks that
the document equals `render()`. Pure: it returns text and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import TypeVar

from .lifecycle import QUESTION_TRANSITIONS, RUN_TRANSITIONS

State = TypeVar("State", bound=StrEnum)
Command = TypeVar("Command", bound=StrEnum)


def _mermaid(table: Mapping[State, Mapping[Command, State]], start: State) -> list[str]:
    lines = ["```mermaid", "stateDiagram-v2", f"    [*] --> {start.value}"]
    for state, row in table.items():
        for command, target in row.items():
            lines.append(f"    {state.value} --> {target.value}: {command.value}")
        if not row:
            lines.append(f"    {state.value} --> [*]")
    lines.append("```")
    return lines


def render() -> str:
    question_start = next(iter(QUESTION_TRANSITIONS))
    run_start = next(iter(RUN_TRANSITIONS))
    lines = [
        "# Lifecycles",
        "",
        "Generated from the transition tables in `src/clankie/core/lifecycle.py` by",
        "`make docs`; `tests/core/test_diagram.py` fails when this file and the tables differ.",
        "A command missing from a state's row is refused and changes nothing; terminal states",
        "have no rows.",
        "",
        "## A question",
        "",
        *_mermaid(QUESTION_TRANSITIONS, question_start),
        "",
        "## A run",
        "",
        *_mermaid(RUN_TRANSITIONS, run_start),
        "",
    ]
    return "\n".join(lines)
