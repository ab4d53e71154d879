"""The recipe "Add a workspace tool" (docs/architecture.md), followed once in a test's scope
(issue 32). A throwaway tool, `count_lines`, gets its arguments and result (step 1, as
`clankie.tool_dto`'s), a function over the confined `Root` that refuses with a
`WorkspaceCode` (step 2) and a `Tool` row (step 3), added for the test only with
`monkeypatch.setitem` on `TOOLS` and `TOOL_ARGS`. With no other edit, the system prompt's
list of tools (`clankie.agent.context`) and a run's dispatch and recording of a call
(`clankie.service.tooling.RunTools` over `clankie.workspace.tools.call_tool`) pick it up.

Built once at import, so a test-scoped row cannot reach them: the tool specs a model is
given (`clankie.agent.tools.WORKSPACE_TOOL_SPECS`, made from `TOOL_ARGS` when the module is
imported) and `clankie.workspace.tools`'s check that `TOOLS` and `TOOL_ARGS` agree. For
those this test shows that they are made from the table (the specs follow `TOOL_ARGS`, in
its order, and the throwaway shape makes a spec the same way), not that they see the row.
"""

from __future__ import annotations

import inspect
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import pytest
from pydantic import Field

from clankie import tool_dto as t
from clankie.agent import tools as agent_tools
from clankie.agent.context import TurnContext, system_prompt
from clankie.agent.transcript import ToolCall, ToolSpec
from clankie.core.model import WorkspaceIdentity
from clankie.core.vocabulary import WorkspaceCode
from clankie.service.runs import CallRecord
from clankie.service.tooling import RunTools
from clankie.settings import Settings
from clankie.workspace import tools as workspace_tools
from clankie.workspace.confine import Refusal, Root, check_path, shown
from clankie.workspace.identity import identify
from clankie.workspace.tools import Outcome, Tool, ToolSettings


# Step 1 (`tool_dto.py`): the arguments (the docstring is what the model reads) and result.
class CountLinesArgs(t.ToolArgs):
    """Count the lines of a text file of the workspace."""

    path: t.Path
    max_bytes: Annotated[int, Field(ge=1, le=65_536)] = 4_096


class CountLinesResult(t.Out):
    path: str
    lines: int


# Step 2: a function over the confined `Root`; a refusal is a `Refusal` with a WorkspaceCode.
def count_lines(root: Root, a: CountLinesArgs, s: ToolSettings) -> CountLinesResult:
    path = check_path(a.path)
    fd, _ = root.open_file(path, s.deny.denies)
    try:
        data = os.read(fd, a.max_bytes)
    finally:
        os.close(fd)
    if b"\0" in data:
        raise Refusal(WorkspaceCode.BINARY_FILE, f"{shown(path)} is not a text file")
    return CountLinesResult(path=path, lines=data.count(b"\n"))


# Step 3 (`workspace/tools.py`): the row, with the summary the `tool_activity` event shows.
COUNT_LINES = Tool("count_lines", CountLinesArgs, CountLinesResult, count_lines,
                   lambda a, r: f"counted {r.path}: {r.lines} lines")


@pytest.fixture
def added(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(t.TOOL_ARGS, "count_lines", CountLinesArgs)
    monkeypatch.setitem(workspace_tools.TOOLS, "count_lines", COUNT_LINES)


@pytest.fixture
def workspace(tmp_path: Path) -> WorkspaceIdentity:
    (tmp_path / "three.txt").write_text("a\nb\nc\n")
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2\n")
    (tmp_path / "sub").mkdir()
    found = identify(str(tmp_path))
    assert found is not None
    return found


@dataclass
class Hooks:
    """The part of `RunHooks` that `RunTools` uses for a workspace tool; it keeps the
    records the run side would store."""

    workspace: WorkspaceIdentity
    settings: Settings = field(default_factory=Settings)
    home: None = None
    recorded: list[tuple[CallRecord, Outcome]] = field(default_factory=list)

    def home_files(self) -> frozenset[tuple[int, int]]:
        return frozenset()

    def workspace_of(self, run_id: str) -> WorkspaceIdentity:
        return self.workspace

    def post_replies(self, run_id: str, texts: Any) -> None:
        raise AssertionError("nothing was said")

    def record_tool_call(self, run_id: str, call: CallRecord, outcome: Outcome,
                         unsaid: Any) -> None:
        self.recorded.append((call, outcome))


def run_call(hooks: Hooks, arguments: dict[str, Any]) -> dict[str, Any]:
    tools = RunTools(hooks, "run-1")  # type: ignore[arg-type]  # the hooks a tool call uses
    result: dict[str, Any] = json.loads(
        tools.call(1, ToolCall("call-1", "count_lines", json.dumps(arguments))))
    return result


def test_the_system_prompt_names_the_new_tool(added: None):
    prompt = system_prompt(TurnContext(run_kind="turn", run_index=0, workspace="/w",
                                       history=(("owner", "hello"),), membership=None))
    assert "git_diff, count_lines)" in prompt  # the table's order, the new row last


def test_a_run_dispatches_and_records_a_call_of_the_new_tool(added: None,
                                                             workspace: WorkspaceIdentity):
    hooks = Hooks(workspace)
    assert run_call(hooks, {"path": "three.txt"}) == {"path": "three.txt", "lines": 3}
    [(record, outcome)] = hooks.recorded
    assert (record.name, record.step, outcome.status) == ("count_lines", 1, "ok")
    assert outcome.summary == "counted three.txt: 3 lines"


def test_its_refusals_come_back_as_w_says(added: None, workspace: WorkspaceIdentity):
    hooks = Hooks(workspace)
    # its own: {"status": "refused", "code", "reason"}, and the summary names code and reason
    assert run_call(hooks, {"path": "blob.bin"}) == {
        "status": "refused", "code": "binary_file", "reason": "blob.bin is not a text file"}
    assert hooks.recorded[-1][1].summary == (
        "count_lines blob.bin: refused binary_file: blob.bin is not a text file")
    # the confinement's (W2, W3) and the arguments' (W1), with no code in the tool for them
    assert run_call(hooks, {"path": "sub"})["code"] == WorkspaceCode.IS_DIRECTORY
    assert run_call(hooks, {"path": "../x"})["code"] == WorkspaceCode.INVALID_PATH
    assert run_call(hooks, {"path": "three.txt", "max_bytes": 0})["code"] == (
        WorkspaceCode.INVALID_ARGUMENT)
    assert [o.code for _, o in hooks.recorded] == [
        "binary_file", "is_directory", "invalid_path", "invalid_argument"]


def test_without_the_row_the_tool_is_unknown(workspace: WorkspaceIdentity):
    assert run_call(Hooks(workspace), {"path": "three.txt"})["code"] == (
        WorkspaceCode.UNKNOWN_TOOL)


def test_the_specs_a_model_is_given_are_made_from_the_table_at_import():
    assert [s.name for s in agent_tools.WORKSPACE_TOOL_SPECS] == list(t.TOOL_ARGS)
    assert "count_lines" not in t.TOOL_ARGS  # the row above was the test's only
    for spec in agent_tools.WORKSPACE_TOOL_SPECS:  # each made as the new one would be
        args = t.TOOL_ARGS[spec.name]
        assert spec == ToolSpec(spec.name, inspect.getdoc(args) or spec.name, t.schema(args))
    schema = t.schema(CountLinesArgs)
    assert schema["required"] == ["path"] and schema["additionalProperties"] is False
    assert schema["properties"]["max_bytes"]["maximum"] == 65_536  # type: ignore[index]
