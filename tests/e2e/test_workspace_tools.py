"""The workspace tools as they reach the model, in a real `clankie serve` with the scripted
model: `{tool_result}` says back exactly what a model received (SPEC W1, W4, W8-W10, V2-V4).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from clankie import dto
from tests.e2e.served import Served, finished
from tests.e2e.test_cli import cli

ASK = {"kind": "choice", "prompt": "Which test runner?",
       "options": [{"label": "pytest"}, {"label": "unittest"}]}


def project(path: Path) -> Path:
    path.mkdir()
    (path / "pyproject.toml").write_text('[project]\nname = "demo"\n')
    (path / "app.py").write_text("def main():\n    return 1\n")
    (path / ".env").write_text("API_KEY=sk-live-never-shown\n")
    return path


class Session:
    """A served home with one scripted script, one conversation in `workspace`."""

    def __init__(self, tmp_path: Path, turns: list[list[dict[str, Any]]],
                 env: dict[str, str] | None = None) -> None:
        self.workspace = project(tmp_path / "project")
        self.served = Served.start(tmp_path / "home", script={"turns": turns}, env=env)
        self.client = self.served.client()
        self.c = str(self.client.op(dto.CONVERSATION_CREATE,
                                    dto.ConversationCreate(workspace=str(self.workspace))).conversation_id)

    def run(self, text: str = "Set up tests.") -> dict[str, Any]:
        sent = self.client.call("conversation_send", {"conversation_id": self.c, "text": text})
        return finished(self.client, sent["run_id"])

    def events(self) -> list[dict[str, Any]]:
        return self.client.call("events_tail", {"conversation_id": self.c,
                                                "limit": 500})["events"]

    def said(self) -> list[str]:
        return [e["text"] for e in self.events()
                if e["type"] == "message" and e["author"] == "clankie"]

    def close(self) -> None:
        self.client.close()
        assert self.served.stop() == 0


def test_w1_w9_tool_results_reach_the_model_and_each_call_is_one_activity_event(
        tmp_path: Path):
    s = Session(tmp_path, [[
        {"tool": "list_files", "args": {}}, {"say": "{tool_result}"},
        {"tool": "read_file", "args": {"path": "pyproject.toml"}}, {"say": "{tool_result}"},
        {"tool": "read_file", "args": {"path": ".env"}}, {"say": "{tool_result}"},
        {"tool": "read_file", "args": {"path": "app.py", "bogus": 1}}, {"say": "{tool_result}"},
        {"tool": "git_status", "args": {}}, {"say": "{tool_result}"},
        {"ask": ASK},
    ]])
    try:
        assert s.run()["status"] == "succeeded"
        listed, read, secret, strict, git = (json.loads(text) for text in s.said())
        assert [(e["path"], e["denied"]) for e in listed["entries"]] == [
            (".env", True), ("app.py", False), ("pyproject.toml", False)]
        assert read["content"] == '[project]\nname = "demo"' and read["total_lines"] == 2
        assert secret["code"] == "denied_path" and "sk-live" not in json.dumps(secret)
        assert strict["code"] == "invalid_argument"
        assert git["code"] == "not_a_repository"
        events = s.events()
        activity = [e for e in events if e["type"] == "tool_activity"]
        assert [(e["tool"], e["status"], e["code"]) for e in activity] == [
            ("list_files", "ok", None), ("read_file", "ok", None),
            ("read_file", "refused", "denied_path"), ("read_file", "refused", "invalid_argument"),
            ("git_status", "refused", "not_a_repository"), ("ask_question", "ok", None)]
        assert activity[1]["summary"] == "read pyproject.toml lines 1-2 of 2"
        for e in activity:
            assert set(e) == {"type", "seq", "conversation_id", "run_id", "tool", "status",
                              "code", "summary", "at"}
            assert "name =" not in e["summary"] and len(e["summary"]) <= 200
        shown = cli(s.served, "conversations", "events", s.c).stdout
        assert re.search(r"#\d+ [-0-9]+ [:0-9]+ tool read_file refused denied_path: "
                         r"read_file \.env: refused denied_path: \.env matches the "
                         r"secret-path deny list", shown)
        assert "tool read_file ok: read pyproject.toml lines 1-2 of 2" in shown
        requested = [e for e in events if e["type"] == "input_requested"]
        assert [set(e) for e in requested] == [
            {"type", "seq", "conversation_id", "request_id", "prompt", "choices", "at"}]
        assert "sk-live-never-shown" not in s.served.home.store.read_bytes().decode("latin-1")
    finally:
        s.close()


def test_v3_tool_calls_never_answer_or_change_a_question_and_move_no_revision(
        tmp_path: Path):
    s = Session(tmp_path, [[{"ask": ASK}], [
        {"tool": "read_file", "args": {"path": "app.py"}},
        {"tool": "search_text", "args": {"pattern": "yes"}},
        {"tool": "list_files", "args": {"path": ".", "depth": 2}},
        {"say": "Looked around."}]])
    try:
        s.run()
        before = s.client.op(dto.INPUT_GET, dto.InputGet(conversation_id=s.c))
        assert before.pending is not None
        seq = s.events()[-1]["seq"]
        s.run("yes")
        after = s.client.op(dto.INPUT_GET, dto.InputGet(conversation_id=s.c))
        assert after.pending == before.pending  # same question, same status, no receipt
        new = [e for e in s.events() if e["seq"] > seq]
        assert [e["type"] for e in new].count("tool_activity") == 3
        # Four commits: the message with its queued run, running, the reply, succeeded.
        # The three tool calls moved no revision.
        assert after.revision - before.revision == 4
    finally:
        s.close()


def test_w8_a_workspace_replaced_under_a_conversation_is_refused_and_nothing_is_read(
        tmp_path: Path):
    s = Session(tmp_path, [[{"tool": "read_file", "args": {"path": "app.py"}},
                            {"say": "{tool_result}"}]])
    try:
        shutil.move(s.workspace, tmp_path / "moved")
        s.workspace.mkdir()
        (s.workspace / "app.py").write_text("IMPOSTOR CONTENT\n")
        assert s.run()["status"] == "succeeded"
        (reply,) = s.said()
        assert json.loads(reply)["code"] == "workspace_replaced"
        assert "IMPOSTOR" not in reply
    finally:
        s.close()


def test_w10_max_steps_and_the_tool_budget_are_settings(tmp_path: Path):
    looping = [{"tool": "list_files", "args": {}}] * 5
    s = Session(tmp_path, [looping], env={"CLANKIE_MAX_STEPS": "3"})
    (s.workspace / "notes.txt").write_text("n" * 400 + "\n")  # a result of about 600 bytes
    reads = [{"tool": "read_file", "args": {"path": "notes.txt"}}] * 4
    try:
        failed = s.run()
        assert failed["status"] == "failed" and failed["error"].startswith("model_error: max_steps")
        assert [e["tool"] for e in s.events() if e["type"] == "tool_activity"] == \
            ["list_files"] * 3  # three model calls: the fourth was never made
        s.served.stop()
        s.served = Served.start(tmp_path / "home", init=False,
                                script={"turns": [[], [*reads, {"say": "{tool_result}"}]]},
                                env={"CLANKIE_MAX_STEPS": "10",
                                     "CLANKIE_RUN_TOOL_BUDGET": "1024"})
        s.client.close()
        s.client = s.served.client()
        assert s.run("again")["status"] == "succeeded"
        assert json.loads(s.said()[-1])["code"] == "budget_exhausted"
        codes = [e["code"] for e in s.events() if e["type"] == "tool_activity"][3:]
        assert codes == [None, "budget_exhausted", "budget_exhausted", "budget_exhausted"]
    finally:
        s.close()


def test_issue19_tool_summary_says_a_result_in_words_and_tool_result_stays_json(
        tmp_path: Path):
    """Issue 19: the example script showed the owner raw JSON. `{tool_summary}` says the
    latest result readably; `{tool_result}` is still the JSON a model reads (SPEC section 10
    "Models"), so older scripts behave as before."""
    s = Session(tmp_path, [[
        {"tool": "list_files", "args": {}}, {"say": "{tool_summary}"},
        {"say": "{tool_result}"},
        {"tool": "read_file", "args": {"path": "pyproject.toml"}}, {"say": "{tool_summary}"},
        {"tool": "read_file", "args": {"path": ".env"}}, {"say": "{tool_summary}"},
        {"tool": "search_text", "args": {"pattern": "return"}}, {"say": "{tool_summary}"},
        {"ask": ASK}, {"say": "{tool_summary}"},
    ]])
    try:
        assert s.run()["status"] == "succeeded"
        both, read, secret, found, asked = s.said()
        listed, raw = both.split("\n\n", 1)  # one model call, one message (D2)
        assert listed == ".env (denied), app.py, pyproject.toml (3 entries)"
        assert [e["path"] for e in json.loads(raw)["entries"]] == [
            ".env", "app.py", "pyproject.toml"]
        assert read == 'pyproject.toml, lines 1-2 of 2:\n[project]\nname = "demo"'
        assert secret.startswith("refused (denied_path): ") and "sk-live" not in secret
        assert found == "'return': app.py:2: return 1 (1 match)"
        assert re.fullmatch(r"question [0-9a-f]{8} asked, waiting for the owner", asked)
        assert not any(text.lstrip().startswith("{") for text in (listed, read, secret, found))
    finally:
        s.close()


def test_w1_issue42_a_whole_number_written_as_a_float_is_an_integer_a_fraction_is_refused(
        tmp_path: Path):
    """Issue 42: models write whole numbers as floats (`"limit": 2.0`); JSON Schema's
    `integer` is any number without a fractional part, so the tool takes it. `2.5` is still
    refused `invalid_argument`, in words that say a whole number is wanted."""
    s = Session(tmp_path, [[
        {"tool": "read_file", "args": {"path": "app.py", "offset": 1.0, "limit": 1.0}},
        {"say": "{tool_result}"},
        {"tool": "read_file", "args": {"path": "app.py", "limit": 2.5}},
        {"say": "{tool_result}"},
        {"tool": "list_files", "args": {"depth": 2.0}}, {"say": "{tool_result}"},
    ]])
    try:
        assert s.run()["status"] == "succeeded"
        read, fraction, listed = (json.loads(text) for text in s.said())
        assert read["content"] == "def main():" and read["end_line"] == 1, read
        assert fraction["code"] == "invalid_argument", fraction
        assert "limit" in fraction["reason"] and "whole number" in fraction["reason"], fraction
        assert "app.py" in [e["path"] for e in listed["entries"]], listed
    finally:
        s.close()
