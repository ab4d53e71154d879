"""The shapes of Clankie's read-only workspace tools (SPEC W1): strict inputs, plain results.

Owns each tool's name, its argument model (strict: unknown fields, wrong types and
out-of-bound values are refused `invalid_argument`, W1), its result model, and the
JSON Schemas the models are shown (generated from these classes). Paths are plain strings
here: what makes a path acceptable is decided when it is opened (W2, `invalid_path`).
Owns too what a tool's integer takes (`WHOLE`, for the bridge's tools as well).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from clankie.core.vocabulary import Code, WorkspaceCode


def _whole(value: object) -> object:
    """A float without a fractional part (`25.0`) as that integer; any other float refused
    in words; the rest as it came, for the strict check."""
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise PydanticCustomError("int_from_float", "Input should be a whole number, not "
                                  "{value}", {"value": repr(value)})
    return value


# What an integer of a tool's arguments takes (issue 42), after its bounds:
# `Annotated[int, Field(ge=..), WHOLE]` (so that the schema keeps `minimum` and `maximum`).
# The schema says `"type": "integer"`, which JSON Schema defines as any number without a
# fractional part, and models write whole numbers as floats: 25.0 is taken as 25; 25.5, a
# boolean or a string is refused.
WHOLE = BeforeValidator(_whole)

Path = Annotated[str, Field(description="A path relative to the workspace, such as "
                            "\"src/app.py\"; \".\" is the workspace itself.")]


class ToolArgs(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ListFilesArgs(ToolArgs):
    """List a directory of the workspace (names, types, sizes), sorted, at most 200 entries."""

    path: Path = "."
    depth: Annotated[int, Field(ge=1, le=3, description="How many levels to descend."), WHOLE] = 1


class ReadFileArgs(ToolArgs):
    """Read lines of a text file of the workspace: a window of `limit` lines from `offset`."""

    path: Path
    offset: Annotated[int, Field(ge=1, description="The first line to read (1-based)."), WHOLE] = 1
    limit: Annotated[int, Field(ge=1, le=1_000, description="How many lines."), WHOLE] = 250


class SearchTextArgs(ToolArgs):
    """Search the workspace's text files for a regular expression (or a fixed string)."""

    pattern: Annotated[str, Field(min_length=1, max_length=1_000)]
    path: Path = "."
    fixed: Annotated[bool, Field(description="Match `pattern` literally.")] = False
    include_ignored: Annotated[bool, Field(
        description="Also search files that Git ignores (secret paths stay refused).")] = False
    max_results: Annotated[int, Field(ge=1, le=500), WHOLE] = 100


class GitStatusArgs(ToolArgs):
    """The workspace's Git status: branch and changed, staged and untracked paths."""


class GitLogArgs(ToolArgs):
    """Recent commits (hash, author, date, subject), optionally of one path."""

    path: Path | None = None
    limit: Annotated[int, Field(ge=1, le=50), WHOLE] = 20


class GitDiffArgs(ToolArgs):
    """The working tree's changes (or the staged ones, or against a revision) as a patch."""

    revision: Annotated[str | None, Field(max_length=256, description=(
        "Compare the working tree (or the index, when staged) with this commit."))] = None
    path: Path | None = None
    staged: bool = False


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Entry(Out):
    path: str
    type: str  # file, directory, symlink, submodule (a nested repository), other
    size: int | None
    denied: bool


class ListFilesResult(Out):
    entries: list[Entry]
    truncated: bool
    hidden_by_ignore: int
    note: str | None = None
    rules_skipped: int = 0  # rule lines past W5's bounds on rule files, or refused by RE2


class ReadFileResult(Out):
    path: str
    content: str
    start_line: int
    end_line: int
    total_lines: int | None
    truncated: bool
    next_offset: int | None
    replaced_bytes: int
    cut_lines: int = 0
    note: str | None = None


class Match(Out):
    path: str
    line: int
    text: str


class SearchTextResult(Out):
    pattern: str
    matches: list[Match]
    truncated: bool
    skipped_denied: int
    hidden_by_ignore: int
    skipped_binary: int = 0
    note: str | None = None
    rules_skipped: int = 0


class StatusEntry(Out):
    path: str
    status: str  # porcelain's XY (" M", "A ", "??", "UU"), or "submodule" or "filtered"


class GitStatusResult(Out):
    branch: str | None
    entries: list[StatusEntry]
    truncated: bool
    note: str | None = None
    skipped_denied: int = 0  # tracked secret-like paths never compared (W4)
    rules_skipped: int = 0


class Commit(Out):
    commit: str
    author: str
    date: str
    subject: str


class GitLogResult(Out):
    commits: list[Commit]


class GitDiffResult(Out):
    diff: str
    truncated: bool
    skipped_denied: int = 0  # secret-like paths never compared (W4): not said if they changed
    note: str | None = None


class Refused(Out):
    status: str = "refused"
    code: WorkspaceCode | Code  # `invalid_request`: `ask_question`'s arguments not JSON
    reason: str


def schema(args: type[ToolArgs]) -> dict[str, object]:
    """The JSON Schema a model is shown for a tool's arguments."""
    generated = args.model_json_schema()
    generated.pop("title", None)
    generated.pop("description", None)
    for prop in generated.get("properties", {}).values():
        prop.pop("title", None)
    generated.setdefault("properties", {})
    generated["additionalProperties"] = False
    return generated


# The workspace tools by name (SPEC W1): the names are fixed; each class's docstring is
# the description a model is shown.
TOOL_ARGS: dict[str, type[ToolArgs]] = {
    "list_files": ListFilesArgs,
    "read_file": ReadFileArgs,
    "search_text": SearchTextArgs,
    "git_status": GitStatusArgs,
    "git_log": GitLogArgs,
    "git_diff": GitDiffArgs,
}
