"""SPEC section 13 on the owner's side, with a real `clankie serve` and the real CLI: an
agent credential is issued like the others (P2), its question is listed and shown with who
asks (the credential's name, the MCP client's name and the workspace, P3), the owner
answers it with the CLI as any other (A1), the agent reads `answered` (P4), and names an
agent or its client chose are shown as text, never acted on (section 10 "Text from
others")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from clankie import wording
from clankie.client import ApiError
from tests.e2e.served import Served
from tests.e2e.test_cli import answer_args, cli, ok_json

LICENCE = {"kind": "choice", "prompt": "Which licence do you prefer?",
           "options": [{"label": "MIT", "description": "short"}, {"label": "Apache-2.0"}]}
# A name the owner pasted and a client name the agent chose: markup, escapes, a fake line.
HOSTILE_NAME = 'bot\x1b[2J"\n#9 owner: approve all [bold]<b>x</b>'
HOSTILE_CLIENT = "cc\x1b]52;c;ZXZpbA==\x07\u202eRLO [@click=app.quit]q[/] <img src=x>"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")


def issue_agent(served: Served, name: str = "coder") -> tuple[str, str]:
    """`clankie credentials issue --kind agent NAME` as the owner types it: (id, token)."""
    done = cli(served, "credentials", "issue", "--kind", "agent", name)
    assert done.returncode == 0, done.stderr
    found = re.search(r"^agent ([0-9a-f-]{36})\ntoken \(shown once\): (\S+)$",
                      done.stdout, re.M)
    assert found, done.stdout
    return found.group(1), found.group(2)


def agent_asks(served: Served, token: str, workspace: Path, client: str | None = "claude-code",
               args: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = {"workspace": str(workspace), **(args or LICENCE)}
    if client is not None:
        payload["client"] = client
    with served.client(token=token) as agent:
        asked = agent.call("agent_ask", payload)
    assert asked["status"] == "pending", asked
    return asked


def test_p2_credentials_issue_kind_agent_prints_its_token_and_list_shows_its_kind(
        served: Served):
    credential_id, token = issue_agent(served)
    with served.client(token=token) as agent:
        assert agent.call("whoami", {}) == {"credential_id": credential_id, "kind": "agent",
                                            "name": "coder"}
    as_json = ok_json(served, "credentials", "issue", "--kind", "agent", "other")
    assert set(as_json) == {"credential_id", "token"}
    listed = cli(served, "credentials", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if credential_id in line)
    assert row.split()[1:3] == ["agent", "coder"], row
    assert "operator" in listed.stdout  # the home's own token is listed too
    kinds = {c["credential_id"]: c["kind"]
             for c in ok_json(served, "credentials", "list")["credentials"]}
    assert kinds[credential_id] == "agent"
    devices = cli(served, "devices", "list").stdout
    assert credential_id not in devices  # an agent is not a device
    help_ = cli(served, "credentials", "issue", "--help").stdout
    assert "agent" in help_ and "CLANKIE_AGENT_TOKEN" in cli(
        served, "credentials", "issue", "--kind", "agent", "third").stdout


def test_p2_credentials_revoke_refuses_an_agents_token_from_its_next_request(
        served: Served, workspace: Path):
    credential_id, token = issue_agent(served)
    asked = agent_asks(served, token, workspace)
    done = cli(served, "credentials", "revoke", credential_id[:8])
    assert done.returncode == 0 and f"revoked {credential_id}" in done.stdout, done
    # issue 42: its waiting question ends at once (it stayed pending until it expired)
    assert "has ended: invalidated (asker_revoked)" in done.stdout, done.stdout
    c, r = asked["conversation_id"], asked["request_id"]
    shown = cli(served, "conversations", "questions", c, "--request", r)
    assert shown.returncode == 0, shown.stderr
    assert ("invalidated (asker_revoked: the agent that asked it was revoked, so no answer "
            "can reach it)") in " ".join(shown.stdout.split()), shown.stdout
    receipt = ok_json(served, "conversations", "questions", c, "--request", r)["request"]
    assert (receipt["status"], receipt["receipt"]["reason"]) == ("invalidated",
                                                                 "asker_revoked")
    with served.client(token=token) as agent:
        try:
            agent.call("whoami", {})
        except ApiError as err:
            assert err.code == "unauthenticated"
        else:
            raise AssertionError("a revoked agent token was accepted")
    assert "revoked" in next(line for line in cli(served, "credentials", "list").stdout
                             .splitlines() if credential_id in line)


def test_p3_an_agent_asks_the_owner_answers_with_the_cli_and_the_agent_reads_answered(
        served: Served, workspace: Path):
    credential_id, token = issue_agent(served)
    asked = agent_asks(served, token, workspace)
    c, r = asked["conversation_id"], asked["request_id"]
    where = str(workspace.resolve())
    # P3: `conversations list` (and --json) show who asks: name, client, workspace
    row = next(line for line in cli(served, "conversations", "list").stdout.splitlines()
               if c in line)
    assert row.split()[:3] == ["?", c, "agent"] and where in row  # `?`: its question waits
    assert 'agent "coder" through "claude-code"' in row, row
    listed = ok_json(served, "conversations", "list")["conversations"]
    assert next(x for x in listed if x["conversation_id"] == c)["asker"] == {
        "credential_id": credential_id, "name": "coder", "client": "claude-code"}
    shown = cli(served, "conversations", "show", c).stdout
    assert 'asker: agent "coder" through "claude-code"' in shown
    # the question: who asks, what an answer is to the agent, how to answer it
    question = cli(served, "conversations", "questions", c)
    assert question.returncode == 0, question.stderr
    assert f'Agent "coder" asks, through "claude-code", in {where}' in question.stdout
    assert wording.AGENT_ANSWER in question.stdout
    assert "1. MIT - short" in question.stdout and "--choice N" in question.stdout
    # A1: the owner answers with the CLI, exactly as any other question
    snap = ok_json(served, "conversations", "questions", c)
    assert snap["pending"]["asker"]["name"] == "coder"
    done = cli(served, *answer_args(c, r[:8], snap), "--choice", "1")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Accepted: receipt ")
    assert wording.accepted({"run_id": None}) in done.stdout
    assert "None" not in done.stdout and "continuation run" not in done.stdout
    again = cli(served, *answer_args(c, r, snap), "--choice", "1")
    assert again.returncode == 0 and again.stdout.startswith("Already accepted")
    assert "None" not in again.stdout
    # P4: the agent reads how it ended
    with served.client(token=token) as agent:
        read = agent.call("agent_wait", {"request_id": r, "wait_s": 0})
    assert read["status"] == "answered" and read["answer"]["label"] == "MIT"
    assert read["answered_by"]["kind"] == "operator"
    receipt = cli(served, "conversations", "questions", c, "--request", r).stdout
    assert "answer: option" in receipt and "(MIT)" in receipt
    assert "read by the agent: " in receipt and "continuation run" not in receipt


def test_p3_a_question_the_agent_has_not_read_yet_says_so(served: Served, workspace: Path):
    _, token = issue_agent(served)
    asked = agent_asks(served, token, workspace, client=None)
    c, r = asked["conversation_id"], asked["request_id"]
    snap = ok_json(served, "conversations", "questions", c)
    assert 'Agent "coder" asks, in ' in cli(served, "conversations", "questions", c).stdout
    done = cli(served, "conversations", "cancel-question", c, r, "--incarnation",
               snap["incarnation"], "--revision", str(snap["revision"]))
    assert done.returncode == 0 and "Cancelled: receipt" in done.stdout, done
    receipt = cli(served, "conversations", "questions", c, "--request", r).stdout
    assert "not read by the agent yet" in receipt


def test_p3_names_an_agent_or_its_client_chose_are_shown_as_text_in_the_cli(
        served: Served, workspace: Path):
    """Section 10 "Text from others": a credential name or an MCP client name with escape
    sequences, markup and a line break is shown with its controls visible and its line
    break escaped, in quotes it cannot end: it acts on nothing and poses as no line."""
    with served.client() as owner:
        token = owner.call("credential_issue", {"kind": "agent", "name": HOSTILE_NAME})[
            "token"]
    asked = agent_asks(served, token, workspace, client=HOSTILE_CLIENT)
    c = asked["conversation_id"]
    for args in (("conversations", "list"), ("conversations", "show", c),
                 ("conversations", "questions", c), ("credentials", "list")):
        out = cli(served, *args).stdout
        assert not RAW.search(out), (args, out)
        assert "#9 owner: approve all" in out and not any(
            line.startswith("#9") for line in out.splitlines()), (args, out)
        assert "[bold]<b>x</b>" in out and "\\x1b[2J" in out, (args, out)
    question = cli(served, "conversations", "questions", c).stdout
    assert '"cc\\x1b]52;c;ZXZpbA==\\x07\\u202eRLO [@click=app.quit]q[/] <img src=x>"' \
        in question
    assert 'Agent "bot\\x1b[2J\\"\\n#9 owner: approve all [bold]<b>x</b>" asks' in question
    raw = cli(served, "conversations", "list", "--json").stdout  # the service's object
    assert not RAW.search(raw)
    assert json.loads(raw)["conversations"][0]["asker"]["client"] == HOSTILE_CLIENT


def test_r9_p5_after_a_restart_the_cli_says_the_agent_may_ask_again_not_to_send_a_message(
        tmp_path: Path, workspace: Path):
    """Issue 42: after a restart the CLI said of an agent's question "...nothing was
    answered or run; send a message to carry on", yet a message to an agent's conversation
    is refused `not_eligible`; P5's way on is that the agent asks again."""
    home = tmp_path / "home"
    served = Served.start(home)
    try:
        _, token = issue_agent(served)
        asked = agent_asks(served, token, workspace)
        c, r = asked["conversation_id"], asked["request_id"]
        assert served.stop() == 0  # SIGTERM
        served = Served.start(home, init=False)
        outputs = [cli(served, "conversations", "questions", c),
                   cli(served, "conversations", "questions", c, "--request", r),
                   cli(served, "conversations", "events", c)]
        for done in outputs:
            assert done.returncode == 0, done.stderr
            shown = " ".join(done.stdout.split())
            assert wording.RESTARTED_AGENT_QUESTION in shown, shown
            assert "send a message" not in shown and "carry on" not in shown, shown
        refused = cli(served, "conversations", "send", c, "hello")
        assert refused.returncode != 0, refused.stdout  # why: a message carries nothing on
    finally:
        served.stop()


def test_h5_p3_an_answer_to_a_question_its_agent_cancelled_is_refused_naming_the_agent(
        served: Served, workspace: Path):
    """Issue 42: the receipt of a question its agent cancelled says `answered_by.kind:
    agent`; the CLI's refusal of a later answer says the agent that asked cancelled it."""
    _, token = issue_agent(served)
    asked = agent_asks(served, token, workspace)
    c, r = asked["conversation_id"], asked["request_id"]
    snap = ok_json(served, "conversations", "questions", c)
    with served.client(token=token) as agent:
        agent.call("agent_cancel", {"request_id": r})
    done = cli(served, *answer_args(c, r, snap), "--choice", "1")
    assert done.returncode != 0 and done.stdout == "", done
    said = " ".join(done.stderr.split())
    assert "This question has ended: cancelled (explicit) by the agent that asked it" in said
    shown = " ".join(cli(served, "conversations", "questions", c, "--request", r).stdout.split())
    assert "cancelled (explicit) by the agent that asked it" in shown
