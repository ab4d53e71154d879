"""The offline `scripted` model: each run of a conversation takes the next script entry.

Owns the script format of SPEC section 10: `{"turns": [[{"say": TEXT} | {"ask": ARGS}, ...],
...]}`. Run number k of a conversation plays entry k; in `say`, `{answer}` is the answer
that started a continuation run. Past the end of the script a run says nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .context import TurnContext
from .tools import ASK_QUESTION
from .transcript import ModelError, Text, ToolCall, ToolSpec, Turn

DEFAULT_SCRIPT: dict[str, Any] = {"turns": []}


class ScriptError(Exception):
    """A script file that cannot be used."""


def load_script(path: Path) -> dict[str, Any]:
    try:
        script = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScriptError(f"{path}: {exc}") from None
    entries = script.get("turns") if isinstance(script, dict) else None
    if not isinstance(entries, list) or not all(
            isinstance(entry, list) and all(_action(a) for a in entry) for entry in entries):
        raise ScriptError(f'{path}: a script is {{"turns": [[{{"say": TEXT}} or '
                          '{"ask": ARGS}, ...], ...]}')
    return script


def _action(action: Any) -> bool:
    return isinstance(action, dict) and len(action) == 1 and (
        isinstance(action.get("say"), str) or isinstance(action.get("ask"), dict))


class ScriptedModel:
    name = "scripted"

    def __init__(self, script: dict[str, Any] | None = None) -> None:
        self.script = script if script is not None else DEFAULT_SCRIPT

    def for_run(self, ctx: TurnContext) -> ScriptedRun:
        entries = self.script["turns"]
        entry = entries[ctx.run_index] if ctx.run_index < len(entries) else []
        answer = ctx.answered.answer if ctx.answered else ""
        return ScriptedRun(entry, answer)


class ScriptedRun:
    """The scripted model for one run: the whole entry on the first step, then nothing."""

    name = "scripted"

    def __init__(self, entry: list[dict[str, Any]], answer: str) -> None:
        self._entry = entry
        self._answer = answer
        self._done = False

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec]) -> list[Text | ToolCall]:
        if self._done:
            return []
        self._done = True
        blocks: list[Text | ToolCall] = []
        for number, action in enumerate(self._entry):
            if "say" in action:
                blocks.append(Text(action["say"].replace("{answer}", self._answer)))
            elif "ask" in action:
                blocks.append(ToolCall(f"scripted-{number}", ASK_QUESTION,
                                       json.dumps(action["ask"])))
            else:
                raise ModelError(f"unknown script action {action!r}")
        return blocks
