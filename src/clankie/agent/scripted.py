"""The offline `scripted` model: each run of a conversation takes the next script entry.

Owns the script format of SPEC section 10: `{"turns": [[ACTION, ...], ...]}` where an
action is `{"say": TEXT}`, `{"ask": ARGS}` or `{"tool": NAME, "args": {...}}`. Run number
k of a conversation plays entry k. A model step plays actions up to and including the
next tool call (`ask` is a call of `ask_question`); the next step, given the result,
plays on. In `say`, `{answer}` is the answer that started a continuation run and
`{tool_result}` the JSON text of the latest tool result, exactly as a model received it.
Past the end of the script a run says nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .context import TurnContext
from .tools import ASK_QUESTION
from .transcript import Text, ToolCall, ToolResult, ToolSpec, Turn

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
                          '{"ask": ARGS} or {"tool": NAME, "args": {...}}, ...], ...]}')
    return script


def _action(action: Any) -> bool:
    if not isinstance(action, dict):
        return False
    if set(action) == {"tool", "args"}:
        return isinstance(action["tool"], str) and isinstance(action["args"], dict)
    return len(action) == 1 and (
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
    """The scripted model for one run: each step plays on to the next tool call."""

    name = "scripted"

    def __init__(self, entry: list[dict[str, Any]], answer: str) -> None:
        self._entry = entry
        self._answer = answer
        self._next = 0

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: object = None) -> list[Text | ToolCall]:
        latest = _latest_result(turns)
        blocks: list[Text | ToolCall] = []
        while self._next < len(self._entry):
            number, action = self._next, self._entry[self._next]
            self._next += 1
            if "say" in action:
                blocks.append(Text(action["say"].replace("{answer}", self._answer)
                                   .replace("{tool_result}", latest)))
                continue
            name, args = (ASK_QUESTION, action["ask"]) if "ask" in action else (
                action["tool"], action["args"])
            blocks.append(ToolCall(f"scripted-{number}", name, json.dumps(args)))
            break
        return blocks


def _latest_result(turns: list[Turn]) -> str:
    for turn in reversed(turns):
        results = [b for b in turn.blocks if isinstance(b, ToolResult)]
        if results:
            return results[-1].content
    return ""
