"""The system prompt names the tools a model is given, read off the tool table (issue 20):
a tool added to the table cannot be left out of the prompt (SPEC W1, Q1)."""

from __future__ import annotations

import re

import pytest

from clankie import tool_dto
from clankie.agent.context import TurnContext, system_prompt
from clankie.agent.tools import TOOL_SPECS
from clankie.workspace.tools import TOOLS


def prompt() -> str:
    return system_prompt(TurnContext(run_kind="turn", run_index=0, workspace="/w",
                                     history=(("owner", "hello"),), membership=None))


def named(text: str) -> set[str]:
    return set(re.findall(r"\b[a-z]+(?:_[a-z]+)+\b", text))


def test_w1_every_workspace_tool_and_ask_question_is_named_in_the_system_prompt():
    assert set(TOOLS) <= named(prompt())
    assert {spec.name for spec in TOOL_SPECS} <= named(prompt())


def test_a_tool_added_to_the_table_is_named_in_the_system_prompt(
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(tool_dto.TOOL_ARGS, "count_lines", tool_dto.ReadFileArgs)
    assert "count_lines" in named(prompt())


def test_the_read_only_tools_are_listed_in_the_table_s_order():
    listed = re.search(r"read-only tools \(([^)]*)\)", prompt())
    assert listed is not None
    assert listed.group(1).split(", ") == list(tool_dto.TOOL_ARGS)
