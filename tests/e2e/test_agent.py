"""Clankie for real inside `clankie serve` with the scripted model: message -> turn run ->
`ask_question` -> `input_requested` -> answer -> continuation run -> a reply using the
answer (SPEC Q1-Q6, A9-A11, R4), driven by the real CLI where a person would use it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.served import Served, finished
from tests.e2e.test_cli import answer_args, cli, ok_json

SCRIPT = {"turns": [
    [{"say": "One question first."},
     {"ask": {"kind": "choice", "prompt": "Which test runner?",
              "options": [{"label": "pytest"}, {"label": "unittest"}]}}],
    [{"say": "Noted: you prefer {answer}."}],
]}
TEXT_SCRIPT = {"turns": [
    [{"ask": {"kind": "text", "prompt": "What should the module be called?"}}],
    [{"say": "I will call it {answer}."}],
]}
ENROLL_SCRIPT = {"turns": [
    [{"ask": {"kind": "text", "prompt": "Shall I enroll this project as a tracker?"}}],
    [{"say": "Thanks: {answer}"}],
]}


def serve_with(tmp_path: Path, script: dict) -> Served:
    return Served.start(tmp_path / "home", script=script)


def messages_by_clankie(served: Served, c: str) -> list[str]:
    page = ok_json(served, "conversations", "events", c)
    return [e["text"] for e in page["events"] if e["type"] == "message"
            and e["author"] == "clankie"]


@pytest.fixture
def scripted(tmp_path: Path):
    served = serve_with(tmp_path, SCRIPT)
    try:
        yield served
    finally:
        assert served.stop() == 0


def test_the_whole_path_with_a_choice_question(scripted: Served, workspace: Path):
    c = cli(scripted, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    sent = ok_json(scripted, "conversations", "send", c, "Set up tests, please.")
    with scripted.client() as client:
        turn = finished(client, sent["run_id"])
    assert turn["status"] == "succeeded"
    events = ok_json(scripted, "conversations", "events", c)["events"]
    assert [e["type"] for e in events if e["type"].startswith("input")] == ["input_requested"]
    snap = ok_json(scripted, "conversations", "questions", c)
    q = snap["pending"]
    assert q["prompt"] == "Which test runner?"
    reply = ok_json(scripted, *answer_args(c, q["request_id"], snap), "--option",
                    q["options"][0]["option_id"])
    with scripted.client() as client:
        continuation = finished(client, reply["receipt"]["run_id"])
    assert (continuation["kind"], continuation["status"]) == ("continuation", "succeeded")
    assert messages_by_clankie(scripted, c) == ["One question first.", "Noted: you prefer pytest."]
    receipt = ok_json(scripted, "conversations", "questions", c, "--request",
                      q["request_id"])["request"]["receipt"]
    assert receipt["continuation"] == "succeeded"


def test_the_whole_path_with_a_text_question_answered_from_stdin(tmp_path: Path,
                                                                 workspace: Path):
    served = serve_with(tmp_path, TEXT_SCRIPT)
    try:
        c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
        sent = ok_json(served, "conversations", "send", c, "Start a module.")
        with served.client() as client:
            finished(client, sent["run_id"])
        snap = ok_json(served, "conversations", "questions", c)
        reply = ok_json(served, *answer_args(c, snap["pending"]["request_id"], snap), "--stdin",
                        stdin="clankie_core — ünïcode\nsecond line\n")
        with served.client() as client:
            finished(client, reply["receipt"]["run_id"])
        assert messages_by_clankie(served, c) == [
            "I will call it clankie_core — ünïcode\nsecond line."]
    finally:
        assert served.stop() == 0


def test_a11_an_answer_changes_no_settings_projects_or_credentials(tmp_path: Path,
                                                                   workspace: Path):
    served = serve_with(tmp_path, ENROLL_SCRIPT)
    try:
        (served.home.path / "settings.toml").write_text("receipt_limit = 16\n")
        c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
        sent = ok_json(served, "conversations", "send", c, "hello")
        with served.client() as client:
            finished(client, sent["run_id"])
            credentials = _unused(client.call("credential_list"))
        configuration = _configuration(served)
        snap = ok_json(served, "conversations", "questions", c)
        reply = ok_json(served, *answer_args(c, snap["pending"]["request_id"], snap), "--text",
                        "yes, enroll this project and change the settings")
        with served.client() as client:
            assert finished(client, reply["receipt"]["run_id"])["status"] == "succeeded"
            assert _unused(client.call("credential_list")) == credentials
            fact = client.call("conversation_get", {"conversation_id": c})["membership"]
        assert fact == {"status": "not_member", "project_id": None, "reason": None}
        assert _configuration(served) == configuration
        assert (served.home.path / "settings.toml").read_text() == "receipt_limit = 16\n"
        assert list(workspace.iterdir()) == []
    finally:
        assert served.stop() == 0


def _unused(listed: dict[str, Any]) -> list[dict[str, Any]]:
    """The credentials without `last_used_at`: when the answering one was last used is a
    record of the answer (SPEC H2's "last used"), not a change to any credential."""
    return [{k: v for k, v in c.items() if k != "last_used_at"}
            for c in listed["credentials"]]


def _configuration(served: Served) -> list[list[dict[str, Any]]]:
    """Every row of the registry, credentials (but when each was last used), owners, lease
    and pane metadata."""
    with closing(sqlite3.connect(served.home.store)) as db:
        db.row_factory = sqlite3.Row
        return [[{k: row[k] for k in row.keys() if k != "last_used_at"}  # noqa: SIM118
                 for row in db.execute(f"SELECT * FROM {table} ORDER BY 1")]
                for table in ("projects", "credentials", "owners", "take_control",
                              "pane_metadata")]


def test_r4_runs_of_one_conversation_run_in_order_and_once(scripted: Served, workspace: Path):
    c = cli(scripted, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    sent = [ok_json(scripted, "conversations", "send", c, f"m{i}")["run_id"] for i in range(4)]
    with scripted.client() as client:
        runs = [finished(client, r) for r in sent]
    starts = [r["started_at"] for r in runs]
    assert starts == sorted(starts)
    events = ok_json(scripted, "conversations", "events", c)["events"]
    running = [e["run_id"] for e in events if e["type"] == "run_status"
               and e["status"] == "running"]
    assert running == sent  # each started exactly once, in order
