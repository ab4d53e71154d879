"""The read-only workspace tools as one table: name -> (argument shape, function, summary).

Owns dispatching a tool call (SPEC W1-W8): arguments validated strictly
(`invalid_argument`), the workspace opened and checked against its saved identity on
every call (W8), a path argument in clankie's own home refused whatever the tool (W4),
the tool run, and every refusal turned into the short result of W
(`{"status": "refused", "code", "reason"}`). It also writes the one-line summary of each
call for the `tool_activity` event (W9): what was looked at, never file contents.
Adding a tool means one shape in `clankie.tool_dto`, one function and one row here.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from clankie import tool_dto as t
from clankie.core.model import WorkspaceIdentity
from clankie.core.vocabulary import Code, WorkspaceCode

from .confine import FileId, Refusal, Root, check_path, shown
from .deny import DenyList
from .git import git_diff, git_log, git_status
from .listing import list_files
from .reading import read_file
from .search import search_text

log = logging.getLogger("clankie.workspace")


@dataclass(frozen=True)
class ToolSettings:
    """What the tools need to know besides the call (built from `clankie.settings.Settings`
    by `service/tooling.py`)."""

    deny: DenyList
    home: FileId | None = None  # clankie's own home, denied in every workspace (W4)
    home_files: frozenset[FileId] = frozenset()  # its files by identity (hard links too)


A = TypeVar("A", bound=t.ToolArgs)
R = TypeVar("R", bound=t.Out)


@dataclass(frozen=True)
class Tool(Generic[A, R]):
    """One workspace tool: its arguments' shape, the call, and the activity's summary of
    a call (its arguments and its result, whose strings are text by then: `_text_only`)."""

    name: str
    args: type[A]
    result: type[R]
    run: Callable[[Root, A, ToolSettings], R]
    summary: Callable[[A, R], str]

    def call(self, root: Root, args: A, settings: ToolSettings, room: int | None = None
             ) -> tuple[dict[str, object], str]:
        """The result as the model reads it (its strings all text: `_text_only`; a list cut
        to fit `room` bytes: `fitted`), and the activity's summary of the call, made from
        that same result."""
        result = _text_only(self.run(root, args, settings).model_dump())
        assert isinstance(result, dict)
        if room is not None:
            result = fitted(result, room)
        return result, self.summary(args, self.result.model_validate(result))


def _list_summary(a: t.ListFilesArgs, r: t.ListFilesResult) -> str:
    more = " (truncated)" if r.truncated else ""
    return f"listed {a.path} depth {a.depth}: {_count(r.entries, 'entry')}{more}"


def _read_summary(a: t.ReadFileArgs, r: t.ReadFileResult) -> str:
    total = r.total_lines if r.total_lines is not None else "?"
    if r.end_line < r.start_line:
        return f"read {r.path}: no lines from {r.start_line} (of {total})"
    return f"read {r.path} lines {r.start_line}-{r.end_line} of {total}"


def _search_summary(a: t.SearchTextArgs, r: t.SearchTextResult) -> str:
    found = (f"{len(r.matches)}+ matches" if r.truncated
             else _count(r.matches, "match"))
    return f"searched {a.path} for {a.pattern!r}: {found}"


def _diff_summary(a: t.GitDiffArgs, r: t.GitDiffResult) -> str:
    what = "staged changes" if a.staged else "changes"
    against = f" against {a.revision}" if a.revision else ""
    where = f" in {a.path}" if a.path else ""
    size = f"{len(r.diff)} characters" if r.diff else "none"
    return f"git diff: {what}{against}{where}: {size}"


def _status_summary(a: t.GitStatusArgs, r: t.GitStatusResult) -> str:
    more = "+" if r.truncated else ""
    branch = r.branch or "a detached HEAD"
    return f"git status on {branch}: {_count(r.entries, 'entry')}{more}"


def _count(items: Sized, noun: str) -> str:
    plural = (noun[:-1] + "ies" if noun.endswith("y") else
              noun + "es" if noun.endswith(("s", "sh", "ch", "x")) else noun + "s")
    return f"{len(items)} {noun if len(items) == 1 else plural}"


def _log_summary(a: t.GitLogArgs, r: t.GitLogResult) -> str:
    return f"git log{' of ' + a.path if a.path else ''}: {_count(r.commits, 'commit')}"


def _list(root: Root, a: t.ListFilesArgs, s: ToolSettings) -> t.ListFilesResult:
    return list_files(root, a, s.deny)


def _read(root: Root, a: t.ReadFileArgs, s: ToolSettings) -> t.ReadFileResult:
    return read_file(root, a, s.deny)


def _search(root: Root, a: t.SearchTextArgs, s: ToolSettings) -> t.SearchTextResult:
    return search_text(root, a, s.deny)


def _status(root: Root, a: t.GitStatusArgs, s: ToolSettings) -> t.GitStatusResult:
    return git_status(root, s.deny.denies)


def _log(root: Root, a: t.GitLogArgs, s: ToolSettings) -> t.GitLogResult:
    return git_log(root, a, s.deny)


def _diff(root: Root, a: t.GitDiffArgs, s: ToolSettings) -> t.GitDiffResult:
    return git_diff(root, a, s.deny.denies)


TOOLS: dict[str, Tool[Any, Any]] = {tool.name: tool for tool in (
    Tool("list_files", t.ListFilesArgs, t.ListFilesResult, _list, _list_summary),
    Tool("read_file", t.ReadFileArgs, t.ReadFileResult, _read, _read_summary),
    Tool("search_text", t.SearchTextArgs, t.SearchTextResult, _search, _search_summary),
    Tool("git_status", t.GitStatusArgs, t.GitStatusResult, _status, _status_summary),
    Tool("git_log", t.GitLogArgs, t.GitLogResult, _log, _log_summary),
    Tool("git_diff", t.GitDiffArgs, t.GitDiffResult, _diff, _diff_summary),
)}
assert {name: tool.args for name, tool in TOOLS.items()} == t.TOOL_ARGS


@dataclass(frozen=True)
class Outcome:
    """A tool call's result as the model reads it, and what the activity event says."""

    result: dict[str, object]  # the JSON object the model reads
    status: str  # ok, refused, error
    code: str | None  # a `WorkspaceCode`, or `ask_question`'s refusal (`AskResult.reason`)
    summary: str

    @property
    def text(self) -> str:
        return json.dumps(self.result, ensure_ascii=False)


def refused(code: WorkspaceCode | Code, reason: str, summary: str) -> Outcome:
    return Outcome(t.Refused(code=code, reason=reason).model_dump(), "refused", code,
                   summary[:200])


def model_json(arguments: str) -> Any:
    """A model's arguments text as a JSON value (`{}` when blank). ValueError when it is not
    JSON, is nested past the parser, or holds a lone surrogate (`"\\ud800"`), which no
    store, event or log line can encode."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except RecursionError:
        raise ValueError("nested too deeply") from None
    return value  # json.JSONDecodeError and UnicodeEncodeError are ValueErrors

def parse_arguments(name: str, arguments: str) -> tuple[Tool[Any, Any], t.ToolArgs] | Outcome:
    """The tool and its validated arguments, or the refusal the model reads."""
    tool = TOOLS.get(name)
    if tool is None:
        return refused(WorkspaceCode.UNKNOWN_TOOL,
                       f"there is no tool {name[:60]!r}", f"{name[:60]}: unknown")
    try:
        raw = model_json(arguments)
    except ValueError:
        return refused(WorkspaceCode.INVALID_ARGUMENT,
                       "the arguments are not JSON", f"{name}: bad arguments")
    try:
        return tool, tool.args.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "(arguments)"
        return refused(WorkspaceCode.INVALID_ARGUMENT, f"{where}: {first['msg']}"[:160],
                       f"{name}: invalid arguments")


def call_tool(name: str, arguments: str, workspace: WorkspaceIdentity | None,
              settings: ToolSettings, room: int | None = None) -> Outcome:
    """Run one workspace tool call; never raises for anything a model or workspace does. A
    list result is cut to fit `room` bytes when given (`fitted`)."""
    parsed = parse_arguments(name, arguments)
    if isinstance(parsed, Outcome):
        return parsed
    tool, args = parsed
    target = _target(args)
    if workspace is None:
        return refused(WorkspaceCode.WORKSPACE_MISSING, "this conversation has no workspace",
                       f"{name}{target}: no workspace")
    try:
        with Root(workspace, home=settings.home, home_files=settings.home_files) as root:
            _not_in_home(root, args)
            result, summary = tool.call(root, args, settings, room)
    except Refusal as refusal:  # the reason too: the owner reads the summary, not the result
        return refused(refusal.code, refusal.reason,
                       f"{name}{target}: refused {refusal.code}: {refusal.reason}")
    except OSError as exc:
        log.warning("%s failed: %s", name, exc)
        return Outcome(t.Refused(status="error", code=WorkspaceCode.IO_ERROR,
                                 reason=f"the file system said: {exc.strerror}").model_dump(),
                       "error", WorkspaceCode.IO_ERROR, f"{name}{target}: error")
    return Outcome(result, "ok", None, summary[:200])


def fitted(result: dict[str, object], room: int) -> dict[str, object]:
    """A list result (`entries`) cut to its first entries so that its JSON fits the `room`
    bytes the run has left (W10), the cut said with numbers in its note (W5); unchanged
    when it fits, and when not even one entry would (the caller refuses it then)."""
    entries = result.get("entries")
    if not isinstance(entries, list) or _size(result) <= room:
        return result

    def cut(shown: int) -> dict[str, object]:
        said = (f"only the first {shown} of {len(entries)} entries are shown, to fit the "
                f"{room} bytes of tool results this run has left (setting run_tool_budget)")
        note = result.get("note")
        return {**result, "entries": entries[:shown], "truncated": True,
                "note": f"{note}; {said}" if note else said}

    fits, over = 0, len(entries)  # cut(fits) fits or is `result`, cut(over) does not
    while over - fits > 1:
        middle = (fits + over) // 2
        fits, over = (middle, over) if _size(cut(middle)) <= room else (fits, middle)
    return cut(fits) if fits else result


def _size(result: dict[str, object]) -> int:
    return len(Outcome(result, "ok", None, "").text.encode("utf-8"))


def _text_only(value: object) -> object:
    """A result whose strings are all text: a file name that is not UTF-8 reaches us with
    its bytes as lone surrogates, which no store, event or model request can carry; they
    become U+FFFD, as `read_file` shows bytes that are not UTF-8."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {key: _text_only(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_text_only(item) for item in value]
    return value
def _not_in_home(root: Root, args: Any) -> None:
    """Refuse a path argument in clankie's own home, whatever the tool (W4): the Git tools
    name paths without opening them, so the opener alone would not stop them."""
    path = getattr(args, "path", None)
    if isinstance(path, str) and root.in_home(check_path(path)):
        raise Refusal(WorkspaceCode.DENIED_PATH,
                      f"{shown(path)} lies in clankie's own home; it is never "
                      "read")


def _target(args: Any) -> str:
    path = getattr(args, "path", None)
    return f" {path[:120]}" if isinstance(path, str) else ""
