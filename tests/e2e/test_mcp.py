"""SPEC section 13 end to end: `clankie mcp` spawned as a host spawns it, driven by the `mcp`
SDK's own client over stdio (or by hand, line by line), against a real `clankie serve`.

Covers the bridge's start (P1, P2: the token from CLANKIE_AGENT_TOKEN only, its kind; P3:
the workspace), both protocol eras (P1), each tool's schema and result (P4), the service
down and coming up (P1), abandoned calls, killed bridges and restarted services (P5, R3),
and what the bridge writes: only JSON-RPC on stdout, no token and no answer text on
stderr (P1, T5). Every wait is bounded; every process is stopped by what started it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp_types import CallToolResult, ElicitResult

from clankie import dto
from clankie.client import Client
from tests.e2e.bridged import HOST, RawBridge, connect, run_bridge, structured
from tests.e2e.served import Served, clankie, init_home
from tests.peers import DroppingPeer, DropsOneOp
from tests.polling import eventually

CHOICE = {"kind": "choice", "prompt": "Which licence do you prefer?",
          "options": [{"label": "MIT", "description": "short"}, {"label": "Apache-2.0"}]}
TEXT = {"kind": "text", "prompt": "What should the new module be called?"}
PENDING = "The owner has not answered yet. Do not assume an answer."
NO_CONSENT = "No answer: this is not consent."
TOOLS = {"ask_owner", "wait_answer", "get_question", "list_questions", "cancel_question"}
READS = {"wait_answer", "get_question", "list_questions"}
DEADLINE_S = 90  # no test of this file may take longer, whatever hangs


@pytest.fixture(scope="module")
def served(shared_served: Served) -> Served:
    """The module's one service (tests/e2e/conftest.py): each test asks as an agent of its
    own, in a workspace of its own; a test that stops or restarts the service starts one of
    its own (test time, docs/testing.md)."""
    return shared_served


@pytest.fixture
def home(served: Served) -> Path:
    return served.home.path


@pytest.fixture
def agent_token(served: Served) -> str:
    return issue(served, "agent", "coder")


@pytest.fixture
def stderr(tmp_path: Path) -> Path:
    return tmp_path / "bridge.stderr"


@pytest.fixture(autouse=True)
def bounded() -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < DEADLINE_S


def issue(served: Served, kind: str, name: str) -> str:
    with served.client() as op:
        return str(op.call("credential_issue", {"kind": kind, "name": name})["token"])


def operator(served: Served) -> Client:
    return served.client()


def conversation_of(served: Served, request_id: str) -> str:
    """The agent conversation that holds the question `request_id` (the owner's view)."""
    with operator(served) as op:
        listed = op.call("conversation_list", {"limit": 500})["conversations"]
        found = [c["conversation_id"] for c in listed if c["kind"] == "agent"
                 and (op.call("input_get", {"conversation_id": c["conversation_id"]})
                      ["pending"] or {}).get("request_id") == request_id]
    assert len(found) == 1, listed
    return str(found[0])


def owner_answers(served: Served, request_id: str, **how: Any) -> dict[str, Any]:
    """The owner answers through the service with the operator token, as the CLI does."""
    conversation_id = conversation_of(served, request_id)
    with operator(served) as op:
        snap = op.op(dto.INPUT_GET,
                     dto.InputGet(conversation_id=conversation_id, request_id=request_id))
        if "choice" in how:
            request = snap.request
            assert request is not None
            how = {"option_id": request.options[how.pop("choice")].option_id}
        answer = dto.InputAnswer(conversation_id=conversation_id, request_id=request_id,
                                 incarnation=snap.incarnation, revision=snap.revision, **how)
        return dict(op.op(dto.INPUT_ANSWER, answer).model_dump(mode="json"))


async def tool(session: Any, name: str, arguments: dict[str, Any] | None = None,
               **kwargs: Any) -> tuple[dict[str, Any], bool]:
    """A tool's structured content (checked against its output schema) and isError."""
    result: CallToolResult = await session.call_tool(name, arguments or {}, **kwargs)
    content = structured(result)
    listed = {t.name: t for t in (await session.list_tools()).tools}
    jsonschema.validate(content, listed[name].output_schema)
    return content, bool(result.is_error)


def error_text(stderr: Path) -> str:
    return stderr.read_text() if stderr.exists() else ""


# ------------------------------------------------------------------------ handshakes, P1


@pytest.mark.parametrize(("mode", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")])
async def test_p1_both_handshakes_serve_the_five_tools_with_output_schemas_and_hints(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path,
        mode: str, version: str):
    """P1: `initialize` (2025-11-25) and `server/discover` (2026-07-28) both serve; P4: each
    tool has an outputSchema, the read tools carry readOnlyHint, no tool answers; P7: no
    tasks capability; P6: nothing is asked of the client (it has no elicitation callback);
    P3: the client's `clientInfo.name` reaches the service with the question."""
    async with connect(home, agent_token, workspace, stderr, mode=mode) as session:
        assert session.protocol_version == version
        assert session.server_capabilities.tasks is None
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        for name, listed in tools.items():
            schema = listed.output_schema
            assert schema is not None and schema["type"] == "object", name
            assert {"status", "note"} <= set(schema["properties"]), name
            assert "status" in schema["required"] and "note" in schema["required"], name
            assert listed.input_schema["type"] == "object", name
            assert "$ref" not in json.dumps(listed.input_schema), name  # inlined for hosts
            hint = listed.annotations.read_only_hint if listed.annotations else None
            assert hint is (name in READS), name
        assert set(tools["ask_owner"].input_schema["properties"]) == {
            "kind", "prompt", "options", "allow_text", "expires_in_s"}
        asked, is_error = await tool(session, "ask_owner", CHOICE)
        assert (asked["status"], is_error) == ("pending", False)
    conversation_id = conversation_of(served, asked["request_id"])
    with operator(served) as op:
        pending = op.call("input_get", {"conversation_id": conversation_id})["pending"]
    assert pending["asker"]["client"] == HOST and pending["asker"]["name"] == "coder"


# ------------------------------------------------------------------------------- P4 tools


async def test_p4_ask_owner_is_pending_at_once_a_repeat_is_duplicate_another_is_refused(
        home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P4: ask_owner never waits; the identical ask is the same request (duplicate: true);
    a different one while it is pending is refused `question_pending`, naming it; the
    pending result's sentence is PENDING, carried in `note` and first in the text."""
    async with connect(home, agent_token, workspace, stderr) as session:
        started = time.monotonic()
        first, is_error = await tool(session, "ask_owner", CHOICE)
        assert time.monotonic() - started < 10
        assert (first["status"], first["duplicate"], is_error) == ("pending", False, False)
        assert first["note"].startswith(PENDING)
        assert [o["label"] for o in first["options"]] == ["MIT", "Apache-2.0"]
        assert all(set(o) == {"option_id", "label"} for o in first["options"])
        assert first["expires_at"]
        again, _ = await tool(session, "ask_owner", CHOICE)
        assert (again["request_id"], again["duplicate"]) == (first["request_id"], True)
        assert again["options"] == first["options"]
        other, is_error = await tool(session, "ask_owner", TEXT)
        assert (other["status"], other["reason"], is_error) == ("refused", "question_pending",
                                                                False)
        assert other["pending_request_id"] == first["request_id"]
        assert first["request_id"] in other["note"]


async def test_p3_p4_ask_owner_carries_the_conversation_id_the_service_returned(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P3, P4 (issue 42): `agent_ask` returns the agent conversation that holds the
    question; `ask_owner` carries it, so a program need not find it by reading; a
    duplicate ask carries the same one."""
    async with connect(home, agent_token, workspace, stderr) as session:
        asked, _ = await tool(session, "ask_owner", CHOICE)
        again, _ = await tool(session, "ask_owner", CHOICE)
    assert asked["conversation_id"] == conversation_of(served, asked["request_id"])
    assert again["conversation_id"] == asked["conversation_id"]


async def test_p4_the_owner_answers_and_wait_answer_returns_it_as_a_preference(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P4: a wait in progress returns as soon as the owner answers (through the service,
    with the operator token), with the option, the receipt and who answered; the sentence
    says it is the owner's preference, not an approval (A11); a second read returns the
    same receipt."""
    async with connect(home, agent_token, workspace, stderr) as session:
        asked, _ = await tool(session, "ask_owner", CHOICE)
        request_id = asked["request_id"]
        started = time.monotonic()
        waiting = asyncio.create_task(tool(session, "wait_answer",
                                           {"request_id": request_id, "wait_s": 25}))
        now, _ = await tool(session, "get_question", {"request_id": request_id})
        assert now["status"] == "pending" and not waiting.done()  # the bridge read the wait
        owner_answers(served, request_id, choice=1)
        got, is_error = await asyncio.wait_for(waiting, 20)
        assert time.monotonic() - started < 20
        assert (got["status"], is_error) == ("answered", False)
        assert got["answer"] == {"option_id": asked["options"][1]["option_id"],
                                 "label": "Apache-2.0"}
        assert got["answered_by"]["kind"] == "operator"
        assert "preference" in got["note"] and "not an approval" in got["note"]
        assert got["receipt_id"] and got["resolved_at"]
        again, _ = await tool(session, "get_question", {"request_id": request_id})
        assert again["receipt_id"] == got["receipt_id"] and again["answer"] == got["answer"]


async def test_p4_a_text_answer_reads_as_text(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path):
    async with connect(home, agent_token, workspace, stderr) as session:
        asked, _ = await tool(session, "ask_owner", TEXT)
        owner_answers(served, asked["request_id"], text="call it lantern")
        got, _ = await tool(session, "wait_answer", {"request_id": asked["request_id"],
                                                     "wait_s": 0})
        assert (got["status"], got["answer"]) == ("answered", {"text": "call it lantern"})


async def test_p4_wait_s_0_is_a_plain_read_and_a_wait_that_times_out_says_pending(
        home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P4: `wait_s: 0` reads at once; a wait returns `pending` after wait_s (P5: never
    held longer); get_question has the same shape; a pending result says PENDING."""
    async with connect(home, agent_token, workspace, stderr) as session:
        asked, _ = await tool(session, "ask_owner", TEXT)
        args = {"request_id": asked["request_id"]}
        started = time.monotonic()
        now, is_error = await tool(session, "wait_answer", {**args, "wait_s": 0})
        assert time.monotonic() - started < 5
        assert (now["status"], is_error, now["note"]) == ("pending", False, PENDING)
        assert (now["prompt"], now["kind"]) == (TEXT["prompt"], "text")
        started = time.monotonic()
        waited, _ = await tool(session, "wait_answer", {**args, "wait_s": 1})
        assert 0.9 <= time.monotonic() - started < 10
        assert waited["status"] == "pending"
        read, _ = await tool(session, "get_question", args)
        assert read == now


async def test_p4_an_expired_question_is_no_answer_and_the_agent_may_ask_again(
        home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P4, S5: a question past `expires_in_s` reads `expired`; its sentence says that no
    answer is not consent; the agent may ask again."""
    async with connect(home, agent_token, workspace, stderr) as session:
        asked, _ = await tool(session, "ask_owner", {**TEXT, "expires_in_s": 1})
        deadline = time.monotonic() + 20
        while True:
            got, is_error = await tool(session, "wait_answer",
                                       {"request_id": asked["request_id"], "wait_s": 1})
            if got["status"] != "pending" or time.monotonic() > deadline:
                break
        assert (got["status"], is_error) == ("expired", False)
        assert got["note"].startswith(NO_CONSENT) and "answer" not in got
        again, _ = await tool(session, "ask_owner", TEXT)
        assert again["status"] == "pending" and again["request_id"] != asked["request_id"]


async def test_p4_a_wait_ends_when_the_question_expires_not_at_wait_s(
        home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P4: wait_answer "returns as soon as the question has ended"; expiry is an ending
    (red team: a 30 s wait on a question expiring in 2 s came back after the 30 s)."""
    async with connect(home, agent_token, workspace, stderr) as session:
        asked, _ = await tool(session, "ask_owner", {**TEXT, "expires_in_s": 2})
        began = time.monotonic()
        got, _ = await tool(session, "wait_answer",
                            {"request_id": asked["request_id"], "wait_s": 30})
        assert got["status"] == "expired", got
        assert time.monotonic() - began < 20  # not held to wait_s (30 s)


async def test_p4_cancel_repeats_with_the_same_receipt_and_an_answered_one_is_refused(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P4, A12: cancel ends the own pending question `cancelled`/`explicit` (no answer: not
    consent); a repeat returns the same receipt (duplicate); an answered question is
    refused `already_answered`, a plain result, not an error, and stays answered."""
    async with connect(home, agent_token, workspace, stderr) as session:
        asked, _ = await tool(session, "ask_owner", TEXT)
        args = {"request_id": asked["request_id"]}
        cancelled, is_error = await tool(session, "cancel_question", args)
        assert (cancelled["status"], cancelled["reason"], cancelled["duplicate"], is_error) == (
            "cancelled", "explicit", False, False)
        assert cancelled["note"].startswith(NO_CONSENT)
        repeat, _ = await tool(session, "cancel_question", args)
        assert (repeat["receipt_id"], repeat["duplicate"]) == (cancelled["receipt_id"], True)
        answered, _ = await tool(session, "ask_owner", CHOICE)
        owner_answers(served, answered["request_id"], choice=0)
        refused, is_error = await tool(session, "cancel_question",
                                       {"request_id": answered["request_id"]})
        assert (refused["status"], refused["reason"], is_error) == (
            "refused", "already_answered", False)
        still, _ = await tool(session, "get_question", {"request_id": answered["request_id"]})
        assert still["status"] == "answered"


async def test_p4_list_questions_is_the_pending_one_then_the_receipts_newest_first(
        home: Path, agent_token: str, workspace: Path, stderr: Path):
    async with connect(home, agent_token, workspace, stderr) as session:
        empty, _ = await tool(session, "list_questions")
        assert (empty["status"], empty["questions"]) == ("ok", [])
        first, _ = await tool(session, "ask_owner", TEXT)
        await tool(session, "cancel_question", {"request_id": first["request_id"]})
        second, _ = await tool(session, "ask_owner", CHOICE)
        listed, is_error = await tool(session, "list_questions")
        assert not is_error
        assert [(q["request_id"], q["status"]) for q in listed["questions"]] == [
            (second["request_id"], "pending"), (first["request_id"], "cancelled")]
        assert listed["questions"][0]["note"] == PENDING
        assert listed["questions"][1]["note"].startswith(NO_CONSENT)


async def test_p4_bad_arguments_are_refused_invalid_request_and_change_nothing(
        home: Path, agent_token: str, workspace: Path, stderr: Path):
    """Q's bounds and strict arguments: each bad call is `refused`/`invalid_request` with
    isError, says what is wrong, and asks or changes nothing."""
    bad: list[tuple[str, dict[str, Any]]] = [
        ("ask_owner", {**TEXT, "prompt": ""}),
        ("ask_owner", {**TEXT, "prompt": "x" * 2001}),
        ("ask_owner", {"kind": "choice", "prompt": "one?", "options": [{"label": "a"}]}),
        ("ask_owner", {**TEXT, "workspace": "/"}),  # not the agent's to choose
        ("ask_owner", {**TEXT, "expires_in_s": 86_401}),  # past question_ttl: the service's
        ("ask_owner", {"prompt": "no kind"}),
        ("wait_answer", {"request_id": "not-a-uuid"}),
        ("wait_answer", {"request_id": "0b7e4a4e-8f5b-4d7e-9c3a-2f1d5e6a7b8c", "wait_s": 31}),
        ("get_question", {}),
        ("cancel_question", {"request_id": 7}),
        ("list_questions", {"workspace": "/"}),
    ]
    async with connect(home, agent_token, workspace, stderr) as session:
        for name, arguments in bad:
            got, is_error = await tool(session, name, arguments)
            assert (got["status"], got["reason"], is_error) == ("refused", "invalid_request",
                                                                True), (name, arguments, got)
            assert got["detail"] and "Value error" not in got["detail"], got
        listed, _ = await tool(session, "list_questions")
        assert listed["questions"] == []


async def test_p4_issue42_a_whole_number_written_as_a_float_is_taken_a_fraction_is_refused(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path):
    """Issue 42: `wait_answer {wait_s: 25.0}` was refused "Input should be a valid integer",
    and the agent's next step was lost. JSON Schema's `integer` (the tools' inputSchema) is
    any number without a fractional part: 25.0 is taken; 25.5 is refused `invalid_request`
    in words that say a whole number is wanted, and asks or changes nothing."""
    async with connect(home, agent_token, workspace, stderr) as session:
        asked, is_error = await tool(session, "ask_owner", {**CHOICE, "expires_in_s": 600.0})
        assert (asked["status"], is_error) == ("pending", False), asked
        owner_answers(served, asked["request_id"], choice=0)
        got, is_error = await tool(session, "wait_answer",
                                   {"request_id": asked["request_id"], "wait_s": 25.0})
        assert (got["status"], got["answer"]["label"], is_error) == ("answered", "MIT", False)
        for name, arguments in [
                ("wait_answer", {"request_id": asked["request_id"], "wait_s": 25.5}),
                ("ask_owner", {**TEXT, "expires_in_s": 600.5})]:
            got, is_error = await tool(session, name, arguments)
            assert (got["status"], got["reason"], is_error) == (
                "refused", "invalid_request", True), got
            assert "whole number" in got["detail"] and "Value error" not in got["detail"], got
        listed, _ = await tool(session, "list_questions")
        assert [q["status"] for q in listed["questions"]] == ["answered"]  # nothing asked


async def test_p2_another_agents_request_id_is_unknown_request_never_forbidden(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path):
    other_token = issue(served, "agent", "other")
    async with connect(home, agent_token, workspace, stderr) as mine:
        asked, _ = await tool(mine, "ask_owner", TEXT)
    async with connect(home, other_token, workspace, stderr) as theirs:
        for name in ("get_question", "wait_answer", "cancel_question"):
            got, is_error = await tool(theirs, name, {"request_id": asked["request_id"]})
            assert (got["status"], got["reason"], is_error) == ("refused", "unknown_request",
                                                                True), (name, got)
        listed, _ = await tool(theirs, "list_questions")
        assert listed["questions"] == []
    async with connect(home, agent_token, workspace, stderr) as mine:
        still, _ = await tool(mine, "get_question", {"request_id": asked["request_id"]})
        assert still["status"] == "pending"


# ------------------------------------------------------------- start: token, workspace (P2)


def test_p2_the_readmes_way_an_agent_token_from_the_cli_starts_the_bridge(
        home: Path, workspace: Path):
    """P2 as docs/coding-agents.md says it: `clankie credentials issue --kind agent NAME` prints the
    token; the bridge started with it serves."""
    done = clankie("credentials", "issue", "--kind", "agent", "claude-code", "--json",
                   home=home)
    assert done.returncode == 0, done
    token = json.loads(done.stdout)["token"]
    raw = RawBridge(home, token, workspace)
    try:
        assert raw.initialize()["result"]["serverInfo"]["name"] == "clankie"
        listed = raw.tool("list_questions", {})
        assert (listed["isError"], listed["structuredContent"]["status"]) == (False, "ok")
    finally:
        assert raw.close() == 0
    assert token not in "".join(raw.stderr)


def test_p2_no_agent_token_exits_2_and_the_operator_token_is_never_used(
        served: Served, home: Path, workspace: Path):
    """P2: without CLANKIE_AGENT_TOKEN the bridge exits 2, though CLANKIE_TOKEN holds the
    operator's token and operator.token is in the home: it reads neither."""
    operator_token = (home / "operator.token").read_text().strip()
    done = run_bridge(home, None, workspace, env={"CLANKIE_TOKEN": operator_token})
    assert done.returncode == 2, done
    assert "CLANKIE_AGENT_TOKEN" in done.stderr and done.stdout == ""
    assert operator_token not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("token", ["", "not a token", "clk_" + "x" * 5000],
                         ids=["empty", "words", "too-long"])
def test_p2_an_empty_or_malformed_agent_token_exits_2(home: Path, workspace: Path, token: str):
    done = run_bridge(home, token, workspace)
    assert done.returncode == 2, done
    assert "CLANKIE_AGENT_TOKEN" in done.stderr and done.stdout == ""
    assert (token not in done.stderr or not token) and "Traceback" not in done.stderr


@pytest.mark.parametrize("kind", ["operator", "captain"])
def test_p2_a_token_of_another_kind_exits_2_when_the_service_says_so(
        served: Served, home: Path, workspace: Path, kind: str):
    token = issue(served, kind, f"not-an-agent-{kind}")
    done = run_bridge(home, token, workspace)
    assert done.returncode == 2, done
    assert kind in done.stderr and "agent" in done.stderr, done.stderr
    assert token not in done.stderr and done.stdout == "" and "Traceback" not in done.stderr


def test_p2_an_unknown_or_revoked_agent_token_exits_2(served: Served, home: Path,
                                                       workspace: Path, agent_token: str):
    with served.client(token=agent_token) as agent:
        me = agent.call("whoami")["credential_id"]
    with served.client() as op:
        op.call("credential_revoke", {"credential_id": me})
    done = run_bridge(home, agent_token, workspace)
    assert done.returncode == 2, done
    assert "CLANKIE_AGENT_TOKEN" in done.stderr and agent_token not in done.stderr


@pytest.mark.parametrize("where", ["missing", "file"])
def test_p3_a_workspace_that_is_not_an_existing_directory_exits_2(
        home: Path, agent_token: str, tmp_path: Path, where: str):
    path = tmp_path / "nowhere"
    if where == "file":
        path.write_text("a file")
    done = run_bridge(home, agent_token, path)
    assert done.returncode == 2, done
    assert str(path) in done.stderr and done.stdout == "" and "Traceback" not in done.stderr


def test_p3_the_workspace_is_the_working_directory_without_workspace(
        home: Path, agent_token: str, workspace: Path):
    """P3: without --workspace the bridge's working directory is the workspace: a question
    asked there is listed by a bridge given --workspace of that directory."""
    here = RawBridge(home, agent_token, None, cwd=workspace)
    try:
        here.initialize()
        asked = here.tool("ask_owner", TEXT)["structuredContent"]
    finally:
        assert here.close() == 0
    there = RawBridge(home, agent_token, workspace)
    try:
        there.initialize()
        listed = there.tool("list_questions", {})["structuredContent"]
    finally:
        there.close()
    assert [q["request_id"] for q in listed["questions"]] == [asked["request_id"]]


# ---------------------------------------------------------- the service down and up (P1, P2)


async def test_p1_the_service_down_gives_unavailable_the_bridge_stays_up_and_recovers(
        tmp_path: Path, workspace: Path, stderr: Path):
    """P1: with the service unreachable at start the bridge starts anyway (P2: it asks on the
    first call); every call is `unavailable` with isError and the bridge stays up; once the
    service is up, the same bridge works; stopped again, unavailable again."""
    home = tmp_path / "home"
    served = Served.start(home)
    try:
        token = issue(served, "agent", "coder")
    finally:
        served.stop()
    async with connect(home, token, workspace, stderr) as session:
        for name, arguments in [("ask_owner", TEXT), ("list_questions", {}),
                                ("get_question",
                                 {"request_id": "0b7e4a4e-8f5b-4d7e-9c3a-2f1d5e6a7b8c"})]:
            got, is_error = await tool(session, name, arguments)
            assert (got["status"], is_error) == ("unavailable", True), (name, got)
            assert (got["reason"], got["sent"]) == ("service_unreachable", "no")  # issue 42
            assert got["detail"]
        served = Served.start(home, init=False)
        try:
            asked, is_error = await tool(session, "ask_owner", TEXT)
            assert (asked["status"], is_error) == ("pending", False)
        finally:
            served.stop()
        down, is_error = await tool(session, "get_question",
                                    {"request_id": asked["request_id"]})
        assert (down["status"], is_error) == ("unavailable", True)
    assert "Traceback" not in error_text(stderr) and token not in error_text(stderr)


async def test_p1_unavailable_says_whether_the_call_was_sent(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path,
        tmp_path: Path):
    """P1 (issue 42): "may or may not have been carried out" and "nothing was sent" differ
    in a field, `sent`, not only in words. A call whose reply never came, after the
    service committed it, is `sent: "unknown"` (and the question is there); a call whose
    bridge could not even learn who its token is sent nothing (`sent: "no"`)."""
    peer = DropsOneOp(tmp_path / "drop.sock", served.home.socket, "agent_ask")
    try:
        async with connect(home, agent_token, workspace, stderr,
                           env={"CLANKIE_URL": f"unix://{tmp_path / 'drop.sock'}"}) as session:
            got, is_error = await tool(session, "ask_owner", CHOICE)
    finally:
        peer.close()
    assert (got["status"], got["sent"], is_error) == ("unavailable", "unknown", True), got
    assert got["reason"] == "uncertain"
    assert "may or may not have been carried out" in got["note"]
    async with connect(home, agent_token, workspace, stderr) as session:
        there, _ = await tool(session, "list_questions")
    assert [q["status"] for q in there["questions"]] == ["pending"]  # it was carried out
    dropping = DroppingPeer(tmp_path / "none.sock")  # whoami gets no reply: nothing else goes
    try:
        async with connect(home, agent_token, workspace, stderr,
                           env={"CLANKIE_URL": f"unix://{tmp_path / 'none.sock'}"}) as session:
            unsent, is_error = await tool(session, "cancel_question",
                                          {"request_id": there["questions"][0]["request_id"]})
    finally:
        dropping.close()
    assert (unsent["status"], unsent["sent"], is_error) == ("unavailable", "no", True), unsent
    assert unsent["reason"] == "uncertain"  # of whoami: the op was never sent
    assert all(b" /v1/ops/whoami " in r.split(b"\r\n", 1)[0] for r in dropping.requests)


async def test_p2_a_token_of_another_kind_found_later_makes_every_call_an_error(
        tmp_path: Path, workspace: Path, stderr: Path):
    """P2: the service was down at start, so the bridge started; when it answers that the
    token is an operator's, every call is an error result saying so, and nothing is asked."""
    home = tmp_path / "home"
    init_home(home)
    token = (home / "operator.token").read_text().strip()
    async with connect(home, token, workspace, stderr) as session:
        served = Served.start(home, init=False)
        try:
            for name, arguments in [("ask_owner", TEXT), ("list_questions", {})]:
                got, is_error = await tool(session, name, arguments)
                assert (got["status"], is_error) == ("refused", True), got
                assert got["reason"] == "not_an_agent_token"
                assert "operator" in got["note"], got
            with served.client() as op:
                assert op.call("conversation_list")["conversations"] == []
        finally:
            served.stop()
    assert token not in error_text(stderr)


# ------------------------------------------------------------------ what is written (P1, T5)


def test_p1_t5_stdout_carries_only_json_rpc_and_stderr_no_token_nor_answer_text(
        served: Served, home: Path, agent_token: str, workspace: Path):
    """P1: every line on stdout is a JSON-RPC 2.0 message; T5: stderr never carries the
    token or the answer's text, though the answer went through the bridge."""
    secret = "the answer is marmalade-7d1e"
    raw = RawBridge(home, agent_token, workspace)
    try:
        raw.initialize()
        raw.call("tools/list")
        asked = raw.tool("ask_owner", TEXT)["structuredContent"]
        owner_answers(served, asked["request_id"], text=secret)
        got = raw.tool("wait_answer", {"request_id": asked["request_id"], "wait_s": 0})
        assert got["structuredContent"]["answer"] == {"text": secret}
        raw.tool("ask_owner", {"kind": "text", "prompt": ""})  # a refusal too
        raw.tool("no_such_tool", {})
    finally:
        assert raw.close() == 0
    assert raw.lines
    for line in raw.lines:
        message = json.loads(line)
        assert message["jsonrpc"] == "2.0", line
        assert "id" in message or "method" in message, line
    err = "".join(raw.stderr)
    assert agent_token not in err and secret not in err and "marmalade" not in err
    assert "Traceback" not in err


def test_p1_a_lone_surrogate_from_a_host_still_gets_its_reply(
        served: Served, home: Path, agent_token: str, workspace: Path):
    """Red team: Node hosts write half an emoji as a lone `\\ud83d` escape; the SDK's
    reader dropped such a call unanswered (the host waited to its own time-out). The
    bridge reads it with U+FFFD in its place, as it reads invalid UTF-8 bytes."""
    raw = RawBridge(home, agent_token, workspace)
    try:
        raw.initialize()
        raw.send({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                  "params": {"name": "ask_owner",
                             "arguments": {"kind": "text", "prompt": "half \ud83d emoji?"}}})
        got = raw.response(99)["result"]["structuredContent"]
        assert got["status"] == "pending", got
        mine = raw.tool("get_question", {"request_id": got["request_id"]})
        assert mine["structuredContent"]["prompt"] == "half \ufffd emoji?"
        # A whole pair stays the character it is.
        raw.send({"jsonrpc": "2.0", "id": 100, "method": "tools/call",
                  "params": {"name": "cancel_question",
                             "arguments": {"request_id": got["request_id"]}}})
        assert raw.response(100)["result"]["structuredContent"]["status"] == "cancelled"
        pair = raw.tool("ask_owner", {"kind": "text", "prompt": "whole \U0001F600?"})
        assert pair["structuredContent"]["status"] == "pending"
        read = raw.tool("get_question", {"request_id": pair["structuredContent"]["request_id"]})
        assert read["structuredContent"]["prompt"] == "whole \U0001F600?"
    finally:
        assert raw.close() == 0


@pytest.mark.parametrize("before", [False, True], ids=["after-initialize", "first"])
def test_p1_a_message_that_is_not_json_rpc_2_gets_json_rpcs_error_with_id_null(
        home: Path, agent_token: str, workspace: Path, before: bool):
    """Issue 42: a line that is not JSON, or JSON that is no JSON-RPC 2.0 message, got no
    reply at all (the SDK drops it), so a host waited to its own time-out. JSON-RPC 2.0
    (section 5.1): -32700 "Parse error" or -32600 "Invalid Request", `id` null; the bridge
    goes on serving, whether the bad line came first or after the handshake."""
    parse, invalid = -32700, -32600
    lines = [("this is not json", parse), ('{"jsonrpc": "2.0", "id": 1, "method": ', parse),
             ('{"jsonrpc": "1.0", "id": 7, "method": "ping"}', invalid), ("[]", invalid),
             ("42", invalid), ('{"jsonrpc": "2.0", "method": 1, "params": "bar"}', invalid),
             ('[{"jsonrpc": "2.0", "id": 8, "method": "ping"}]', invalid)]
    raw = RawBridge(home, agent_token, workspace)
    try:
        if not before:
            raw.initialize()
        for line, code in lines:
            raw.write(line)
            got = raw.next_message()
            assert got["jsonrpc"] == "2.0" and got["id"] is None, (line, got)
            assert got["error"]["code"] == code, (line, got)
            assert got["error"]["message"] == ("Parse error" if code == parse
                                               else "Invalid Request")
        if before:
            raw.initialize()
        assert raw.call("ping")["result"] == {}
        assert raw.tool("list_questions", {})["structuredContent"]["questions"] == []
    finally:
        assert raw.close() == 0
    assert "Traceback" not in "".join(raw.stderr)


def test_e_p2_a_wait_in_flight_when_the_owner_revokes_the_agent_ends_at_once_saying_so(
        served: Served, home: Path, agent_token: str, workspace: Path):
    """Issue 42: revoking the agent ends its waiting question (`invalidated`,
    `asker_revoked`); a `wait_answer` in flight returns at once, not after `wait_s`, and
    tells the agent its question ended without an answer. (That a parked wait wakes at
    once is tests/service/test_agents.py's; here, whenever the revocation lands, the
    answer comes long before `wait_s`.)"""
    raw = RawBridge(home, agent_token, workspace)
    try:
        raw.initialize()
        asked = raw.tool("ask_owner", TEXT)["structuredContent"]
        wait_id = raw.request("tools/call", {"name": "wait_answer", "arguments": {
            "request_id": asked["request_id"], "wait_s": 30}})
        with served.client(token=agent_token) as agent:
            me = agent.call("whoami", {})["credential_id"]
        with operator(served) as op:
            op.call("credential_revoke", {"credential_id": me})
        started = time.monotonic()
        got = raw.response(wait_id, timeout=20)["result"]
        assert time.monotonic() - started < 15  # not the rest of its 30 s
        content = got["structuredContent"]
        assert (content["status"], content["reason"], got["isError"]) == (
            "refused", "unauthenticated", True)
        assert "asker_revoked" in content["note"] and "Do not assume an answer" in content["note"]
    finally:
        assert raw.close() == 0


# ----------------------------------------------------- abandoned calls, kills, restarts (P5)


def test_p5_notifications_cancelled_abandons_only_that_call_never_the_question(
        home: Path, agent_token: str, workspace: Path):
    """P5: a `notifications/cancelled` for a wait in progress abandons that call (no reply
    comes for it) and the bridge answers the next call at once; one for a call already
    answered is ignored (OpenCode sends one after every call); the question stays pending."""
    raw = RawBridge(home, agent_token, workspace)
    try:
        raw.initialize()
        ask_id = raw.request("tools/call", {"name": "ask_owner", "arguments": TEXT})
        asked = raw.response(ask_id)["result"]["structuredContent"]
        raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": ask_id, "reason": "done"}})
        wait_id = raw.request("tools/call", {"name": "wait_answer", "arguments": {
            "request_id": asked["request_id"], "wait_s": 25}})
        raw.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
                  "params": {"requestId": wait_id, "reason": "the user pressed Esc"}})
        started = time.monotonic()
        read = raw.tool("get_question", {"request_id": asked["request_id"]})
        assert time.monotonic() - started < 10
        assert read["structuredContent"]["status"] == "pending"
        listed = raw.tool("list_questions", {})["structuredContent"]
        assert [q["status"] for q in listed["questions"]] == ["pending"]
    finally:
        assert raw.close() == 0
    assert not [line for line in raw.lines if json.loads(line).get("id") == wait_id]


async def test_p5_a_client_that_gives_up_on_a_wait_loses_nothing(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P5: the SDK client's own read timeout (1 s) drops a 25 s wait mid-way (it sends the
    courtesy cancel); the owner answers; the next read returns the stored answer, and the
    same session goes on working."""
    from mcp.shared.exceptions import MCPError

    async with connect(home, agent_token, workspace, stderr) as session:
        asked, _ = await tool(session, "ask_owner", CHOICE)
        with pytest.raises(MCPError):
            await session.call_tool("wait_answer", {"request_id": asked["request_id"],
                                                    "wait_s": 25}, read_timeout_seconds=1)
        still, _ = await tool(session, "get_question", {"request_id": asked["request_id"]})
        assert still["status"] == "pending"
        owner_answers(served, asked["request_id"], choice=0)
        got, _ = await tool(session, "wait_answer", {"request_id": asked["request_id"],
                                                     "wait_s": 0})
        assert got["status"] == "answered" and got["answer"]["label"] == "MIT"


def test_p5_killing_the_bridge_mid_wait_loses_nothing(
        served: Served, home: Path, agent_token: str, workspace: Path):
    """P1, P5: the bridge holds no state: SIGKILLed in the middle of a wait, a new bridge
    lists the question; the owner's answer is there for it, the same receipt each read."""
    first = RawBridge(home, agent_token, workspace)
    try:
        first.initialize()
        asked = first.tool("ask_owner", CHOICE)["structuredContent"]
        first.request("tools/call", {"name": "wait_answer", "arguments": {
            "request_id": asked["request_id"], "wait_s": 25}})
        first.call("ping")  # the wait is in the bridge's hands
    finally:
        first.kill()
    owner_answers(served, asked["request_id"], choice=1)
    second = RawBridge(home, agent_token, workspace)
    try:
        second.initialize()
        listed = second.tool("list_questions", {})["structuredContent"]
        assert [(q["request_id"], q["status"]) for q in listed["questions"]] == [
            (asked["request_id"], "answered")]
        one = second.tool("get_question", {"request_id": asked["request_id"]})
        two = second.tool("wait_answer", {"request_id": asked["request_id"], "wait_s": 0})
        assert one["structuredContent"]["receipt_id"] == two["structuredContent"]["receipt_id"]
        assert one["structuredContent"]["answer"]["label"] == "Apache-2.0"
    finally:
        assert second.close() == 0


async def test_r3_restarting_the_service_cancels_the_pending_question_restart(
        tmp_path: Path, workspace: Path, stderr: Path):
    """P5, R3: the service restarts; the pending question reads `cancelled`/`restart` (no
    answer: not consent), never asked again by itself; the agent may ask anew; the bridge
    was never restarted."""
    home = tmp_path / "home"
    served = Served.start(home)
    try:
        token = issue(served, "agent", "coder")
        async with connect(home, token, workspace, stderr) as session:
            asked, _ = await tool(session, "ask_owner", TEXT)
            served.stop()
            served = Served.start(home, init=False)
            got, is_error = await tool(session, "get_question",
                                       {"request_id": asked["request_id"]})
            assert (got["status"], got["reason"], is_error) == ("cancelled", "restart", False)
            assert got["note"].startswith(NO_CONSENT)
            listed, _ = await tool(session, "list_questions")
            assert [q["status"] for q in listed["questions"]] == ["cancelled"]
            again, _ = await tool(session, "ask_owner", TEXT)
            assert again["status"] == "pending" and again["duplicate"] is False
    finally:
        served.stop()


def test_p4_a_wait_in_flight_when_the_service_stops_says_unavailable_and_that_it_stopped(
        tmp_path: Path, workspace: Path):
    """Issue 42: a `wait_answer` in flight while the service stopped (SIGTERM) returned
    `pending` before its `wait_s`, as if the owner had simply not answered within it. P4: a
    wait returns when the question ends or after `wait_s`; cut short by the stop, it says
    `unavailable` and that the service stopped (the restart then cancels the question, R3,
    which the agent reads once the service is back)."""
    home = tmp_path / "home"
    served = Served.start(home)
    bridge = None
    try:
        with operator(served) as op:
            made = op.call("credential_issue", {"kind": "agent", "name": "coder"})
        bridge = RawBridge(home, made["token"], workspace)
        bridge.initialize()
        asked = bridge.tool("ask_owner", CHOICE)["structuredContent"]

        def last_used() -> str | None:
            with operator(served) as op:
                listed = op.call("credential_list", {})["credentials"]
            return next(c["last_used_at"] for c in listed
                        if c["credential_id"] == made["credential_id"])

        asked_at = last_used()
        waiting = bridge.request("tools/call", {"name": "wait_answer", "arguments": {
            "request_id": asked["request_id"], "wait_s": 25}})
        eventually(last_used, "the wait to reach the service", timeout=20,
                   until=lambda used: used != asked_at)  # its first read noted the agent
        assert served.stop() == 0  # SIGTERM, a clean stop
        result = bridge.response(waiting, timeout=20)["result"]
        got = result["structuredContent"]
        assert (got["status"], result["isError"]) == ("unavailable", True), got
        assert got["reason"] == "service_stopped", got
        assert "stopped while this call waited" in got["note"], got
        assert "Do not assume an answer" in got["note"] and "answer" not in got, got
        served = Served.start(home, init=False)
        after = bridge.tool("get_question", {"request_id": asked["request_id"]})
        assert (after["structuredContent"]["status"],
                after["structuredContent"]["reason"]) == ("cancelled", "restart")
    finally:
        if bridge is not None:
            assert bridge.close() == 0
        served.stop()


async def test_p6_p7_an_elicitation_reply_never_answers_and_no_task_is_made(
        served: Served, home: Path, agent_token: str, workspace: Path, stderr: Path):
    """P6: a host that would answer an elicitation by itself ("accept", "yes") is never
    asked one, and the question stays pending until the owner answers; P7: a call returns
    a plain result, never a task."""
    asked_of_client: list[Any] = []

    async def would_accept(context: Any, params: Any) -> Any:
        asked_of_client.append(params)
        return ElicitResult(action="accept", content={"answer": "yes"})

    async with connect(home, agent_token, workspace, stderr,
                       elicitation_callback=would_accept) as session:
        assert session.server_capabilities.tasks is None
        asked, _ = await tool(session, "ask_owner", TEXT)
        got, is_error = await tool(session, "wait_answer",
                                   {"request_id": asked["request_id"], "wait_s": 1})
        assert (got["status"], is_error) == ("pending", False)
    assert asked_of_client == []
    conversation_id = conversation_of(served, asked["request_id"])
    with operator(served) as op:
        pending = op.call("input_get", {"conversation_id": conversation_id})["pending"]
    assert pending is not None and pending["request_id"] == asked["request_id"]
