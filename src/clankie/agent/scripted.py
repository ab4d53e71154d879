"""The offline `scripted` model: each run of a conversation takes the next script entry.

Owns the script format of SPEC section 10: `{"turns": [[ACTION, ...], ...]}` where an
action is `{"say": TEXT}`, `{"ask": ARGS}` or `{"tool": NAME, "args": {...}}`. Run number
k of a conversation plays entry k. A model step plays actions up to and including the
next tool call (`ask` is a call of `ask_question`); the next step, given the result,
plays on. In `say`, `{answer}` is the answer that started a continuation run (empty in
a run a message started: a message is never an answer, A2),
`{tool_result}` the JSON text of the latest tool result, exactly as a model received it,
and `{tool_summary}` the same result in words a person reads (`readable`: the names a
listing found, the lines read, the matches, the commits; a refusal as its code and
reason). Past the end of the script a run says nothing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict, TypeGuard, final

from .context import TurnContext
from .tools import ASK_QUESTION
from .transcript import NO_WAITS, Text, ToolCall, ToolResult, ToolSpec, Turn, Waits


@final
class Say(TypedDict):
    say: str
    pace_ms: NotRequired[int]  # SPEC D18: written word by word, this far apart (0..1,000)


@final
class Ask(TypedDict):
    ask: dict[str, object]  # `ask_question`'s arguments, as the model would send them


@final
class UseTool(TypedDict):
    tool: str
    args: dict[str, object]  # the tool's arguments, as the model would send them


Action = Say | Ask | UseTool


class Script(TypedDict):
    turns: list[list[Action]]  # run k of a conversation plays entry k


DEFAULT_SCRIPT: Script = {"turns": []}


class ScriptError(Exception):
    """A script file that cannot be used."""


SHAPE = ('a script is {"turns": [[ACTION, ...], ...]}, each ACTION {"say": TEXT} (with '
         '"pace_ms": 0..1000 to write it word by word), {"ask": ARGS} or '
         '{"tool": NAME, "args": {...}}')
MAX_PACE_MS = 1_000
WORD = re.compile(r"\s*\S+\s*|\s+")  # a word with the spaces around it


def load_script(path: Path) -> Script:
    """The script at `path`; a `ScriptError` says where it is wrong (the entry, the
    action) and what the shape is."""
    try:
        script = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScriptError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ScriptError(f"{path}: not JSON ({exc})") from None
    entries = script.get("turns") if isinstance(script, dict) else None
    if not isinstance(script, dict) or not isinstance(entries, list):  # (narrows `script`)
        raise ScriptError(f'{path}: no "turns" list; {SHAPE}')
    turns: list[list[Action]] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, list):
            raise ScriptError(f"{path}: turns[{i}] is not a list of actions; {SHAPE}")
        actions: list[Action] = []
        for j, action in enumerate(entry):
            if not _action(action):
                shown = json.dumps(action)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                raise ScriptError(f"{path}: turns[{i}][{j}] {shown} is not an action; "
                                  f"{SHAPE}")
            actions.append(action)
        turns.append(actions)
    return {"turns": turns}


def _action(action: object) -> TypeGuard[Action]:
    if not isinstance(action, dict):
        return False
    if set(action) == {"tool", "args"}:
        return isinstance(action["tool"], str) and isinstance(action["args"], dict)
    if set(action) == {"say", "pace_ms"}:
        pace = action["pace_ms"]
        return (isinstance(action["say"], str) and isinstance(pace, int)
                and not isinstance(pace, bool) and 0 <= pace <= MAX_PACE_MS)
    return len(action) == 1 and (
        isinstance(action.get("say"), str) or isinstance(action.get("ask"), dict))


class ScriptedModel:
    name = "scripted"

    def __init__(self, script: Script | None = None) -> None:
        self.script = script if script is not None else DEFAULT_SCRIPT

    def for_run(self, ctx: TurnContext) -> ScriptedRun:
        entries = self.script["turns"]
        entry = entries[ctx.run_index] if ctx.run_index < len(entries) else []
        answer = ctx.answered.answer if ctx.answered else ""
        return ScriptedRun(entry, answer, ctx.run_index)


class ScriptedRun:
    """The scripted model for one run: each step plays on to the next tool call."""

    name = "scripted"

    def __init__(self, entry: list[Action], answer: str, run_index: int = 0) -> None:
        self._entry = entry
        self._answer = answer
        self._run_index = run_index
        self._next = 0

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits = NO_WAITS) -> list[Text | ToolCall]:
        """Plays on to the next tool call, shown as it goes (D2): a `say` with `pace_ms`
        word by word, that far apart (slept as the run sleeps: a stop ends it), else in
        one piece."""
        live = waits.live
        live.begin()
        latest = _latest_result(turns)
        blocks: list[Text | ToolCall] = []
        while self._next < len(self._entry):
            number, action = self._next, self._entry[self._next]
            self._next += 1
            if "say" in action:
                text = (action["say"].replace("{answer}", self._answer)
                        .replace("{tool_result}", latest)
                        .replace("{tool_summary}", readable(latest)))
                block = len(blocks)
                pace = action.get("pace_ms")
                for word in WORD.findall(text) if pace is not None else [text]:
                    if pace:
                        waits.sleep(pace / 1000)
                    live.text(word, block)
                blocks.append(Text(text))
                continue
            name, args = (ASK_QUESTION, action["ask"]) if "ask" in action else (
                action["tool"], action["args"])
            live.calling(name)
            # unique in the conversation (R8): a later provider replays them as they are
            blocks.append(ToolCall(f"scripted-{self._run_index}-{number}", name, json.dumps(args)))
            break
        live.end()
        return blocks


def _latest_result(turns: list[Turn]) -> str:
    for turn in reversed(turns):
        results = [b for b in turn.blocks if isinstance(b, ToolResult)]
        if results:
            return results[-1].content
    return ""


SHOWN_ITEMS = 20  # names, matches or commits a summary lists before "and N more"


def readable(result: str) -> str:
    """A tool result's JSON text in words a person reads, for `{tool_summary}`: a listing's
    names (`README.md, src/ (2 entries)`), a read's lines, a search's matches, Git's
    status, commits or diff, a refusal's code and reason. Anything else, or text that is
    not a JSON object, as `key: value` pairs or as it is."""
    try:
        value = json.loads(result)
    except ValueError:
        return result
    if not isinstance(value, dict):
        return result
    try:
        return _words(value)
    except (KeyError, TypeError, AttributeError):  # a shape of no known tool
        return _pairs(value)


def _words(v: dict[str, Any]) -> str:
    if v.get("status") in ("refused", "error"):
        code = f" ({v['code']})" if v.get("code") else ""
        return f"{v['status']}{code}: {v.get('reason', '')}".rstrip(": ")
    if v.get("status") == "pending" and "request_id" in v:
        return f"question {v['request_id'][:8]} asked, waiting for the owner"
    if "branch" in v and "entries" in v:
        changes = [f"{e['path']} ({e['status'].strip()})" for e in v["entries"]]
        return (f"on {v['branch'] or 'a detached HEAD'}: "
                f"{_listed(changes, v['truncated'], 'change') if changes else 'no changes'}")
    if "entries" in v:
        names = [e["path"] + ("/" if e["type"] == "directory" else "")
                 + (" (denied)" if e["denied"] else "") for e in v["entries"]]
        return _listed(names, v["truncated"], "entry") if names else "an empty folder"
    if "content" in v:
        total = v["total_lines"] if v["total_lines"] is not None else "?"
        return (f"{v['path']}, lines {v['start_line']}-{v['end_line']} of {total}:\n"
                f"{v['content'].rstrip()}")
    if "matches" in v:
        found = [f"{m['path']}:{m['line']}: {m['text'].strip()}" for m in v["matches"]]
        return (f"{v['pattern']!r}: {_listed(found, v['truncated'], 'match', '; ')}"
                if found else f"{v['pattern']!r}: no matches")
    if "commits" in v:
        commits = [f"{c['commit'][:8]} {c['subject']}" for c in v["commits"]]
        return _listed(commits, False, "commit", "; ") if commits else "no commits"
    if "diff" in v:
        return v["diff"].rstrip() or "no changes"
    return _pairs(v)


def _listed(items: list[str], truncated: bool, noun: str, sep: str = ", ") -> str:
    shown = sep.join(items[:SHOWN_ITEMS])
    more = len(items) - SHOWN_ITEMS
    plural = (noun[:-1] + "ies" if noun.endswith("y") else
              noun + "es" if noun.endswith("ch") else noun + "s")
    count = f"{len(items)}{'+' if truncated else ''} {noun if len(items) == 1 else plural}"
    return f"{shown}{f'{sep}and {more} more' if more > 0 else ''} ({count})"


def _pairs(v: Mapping[str, object]) -> str:
    return ", ".join(f"{key}: {value if isinstance(value, str) else json.dumps(value)}"
                     for key, value in v.items())
