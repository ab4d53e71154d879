"""SPEC section 13 (P2-P5) in the service: an agent credential asks in its own conversation
of a workspace, reads, waits on and cancels its own questions and nothing else; the owner
answers them as any other; an answer starts no run; `collected_at` is information only."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from clankie.core.errors import ClankieError
from tests.world import World

ASK = {"kind": "choice", "prompt": "Which licence do you prefer?",
       "options": [{"label": "MIT", "description": "short"}, {"label": "Apache-2.0"}]}
TEXT = {"kind": "text", "prompt": "What should the module be called?"}


def agent(world: World, name: str = "coder") -> str:
    return str(world.call("credential_issue", {"kind": "agent", "name": name})["token"])


def ask(world: World, token: str, args: dict[str, Any] | None = None,
        workspace: Path | None = None, **extra: Any) -> dict[str, Any]:
    payload = {"workspace": str(workspace or world.workspace), **(args or ASK), **extra}
    return world.call("agent_ask", payload, token)


def refused(world: World, op: str, payload: dict[str, Any], token: str) -> str:
    with pytest.raises(ClankieError) as err:
        world.call(op, payload, token)
    return str(err.value.code)


def owner_answers(world: World, conversation_id: str, **how: Any) -> dict[str, Any]:
    return world.answer(conversation_id, world.snapshot(conversation_id), **how)


def test_p4_ask_never_waits_and_returns_the_request_with_its_options(world: World):
    token = agent(world)
    got = ask(world, token)
    assert got["status"] == "pending" and got["duplicate"] is False
    assert [o["label"] for o in got["options"]] == ["MIT", "Apache-2.0"]
    assert got["expires_at"] and got["reason"] is None
    snap = world.snapshot(got["conversation_id"])
    assert snap["pending"]["request_id"] == got["request_id"]
    assert snap["pending"]["asker"] == {"credential_id": world.call("whoami", {}, token)[
        "credential_id"], "client": None, "name": "coder"}


def test_p4_the_same_ask_again_is_the_pending_request_a_different_one_is_refused(
        world: World):
    token = agent(world)
    first = ask(world, token)
    again = ask(world, token)
    assert (again["request_id"], again["duplicate"]) == (first["request_id"], True)
    other = ask(world, token, TEXT)
    assert other == {**other, "status": "refused", "reason": "question_pending",
                     "pending_request_id": first["request_id"], "request_id": None}
    changed = ask(world, token, {**ASK, "allow_text": True})
    assert changed["status"] == "refused"
    with world.db() as db:
        assert db.execute("SELECT count(*) FROM questions").fetchone() == (1,)


def test_p4_expires_in_s_is_at_most_question_ttl_and_bad_input_changes_nothing(world: World):
    token = agent(world)
    before = world.dump()
    too_long = world.service.settings.question_ttl + 1
    assert refused(world, "agent_ask", {"workspace": str(world.workspace), **ASK,
                                        "expires_in_s": too_long}, token) == "invalid_request"
    assert refused(world, "agent_ask", {"workspace": str(world.root / "nowhere"), **ASK},
                   token) == "invalid_request"
    assert refused(world, "agent_ask", {"workspace": str(world.workspace), **ASK,
                                        "prompt": ""}, token) == "invalid_request"
    assert world.dump() == before


def test_p3_one_conversation_per_agent_and_workspace_reused_by_every_later_ask(world: World):
    token, other = agent(world), agent(world, "another")
    first = ask(world, token)
    world.call("agent_cancel", {"request_id": first["request_id"]}, token)
    second = ask(world, token, TEXT)
    assert second["conversation_id"] == first["conversation_id"]
    elsewhere = world.root / "elsewhere"
    elsewhere.mkdir()
    assert ask(world, token, workspace=elsewhere)["conversation_id"] != first["conversation_id"]
    assert ask(world, other)["conversation_id"] != first["conversation_id"]
    listed = world.call("conversation_list")["conversations"]
    agents = [c for c in listed if c["kind"] == "agent"]
    assert len(agents) == 3
    assert {(c["asker"]["name"], c["workspace"]["path"]) for c in agents} == {
        ("coder", str(world.workspace)), ("coder", str(elsewhere)),
        ("another", str(world.workspace))}


def test_p3_the_owner_answers_an_agents_question_and_no_run_starts(world: World):
    token = agent(world)
    asked = ask(world, token)
    reply = owner_answers(world, asked["conversation_id"], option=1)
    receipt = reply["receipt"]
    assert (receipt["outcome"], receipt["run_id"], receipt["continuation"]) == (
        "answered", None, None)
    with world.db() as db:
        assert db.execute("SELECT count(*) FROM runs").fetchone() == (0,)
    got = world.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 0}, token)
    assert got["status"] == "answered"
    assert got["answer"] == {"option_id": asked["options"][1]["option_id"],
                             "label": "Apache-2.0"}
    assert got["answered_by"] == {"kind": "operator", "name": "operator"}
    assert got["receipt_id"] == receipt["receipt_id"] and got["resolved_at"]


def test_p3_a_text_answer_reads_as_text(world: World):
    token = agent(world)
    asked = ask(world, token, TEXT)
    owner_answers(world, asked["conversation_id"], text="ledger")
    got = world.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 0}, token)
    assert (got["status"], got["answer"]) == ("answered", {"text": "ledger"})


def test_p3_collected_at_is_set_by_the_first_read_and_never_changes_or_hides(world: World):
    token = agent(world)
    asked = ask(world, token)
    read = {"request_id": asked["request_id"], "wait_s": 0}
    assert world.call("agent_wait", read, token)["collected_at"] is None
    owner_answers(world, asked["conversation_id"], option=0)
    snap_before = world.snapshot(asked["conversation_id"], asked["request_id"])
    assert snap_before["request"]["receipt"]["collected_at"] is None
    world.clock.advance(5)
    first = world.call("agent_wait", read, token)
    world.clock.advance(5)
    later = world.call("agent_wait", read, token)
    assert first == later and first["collected_at"] is not None
    listed = world.call("agent_list", {"workspace": str(world.workspace)}, token)
    assert listed["questions"] == [first]
    receipt = world.snapshot(asked["conversation_id"], asked["request_id"])["request"]["receipt"]
    assert receipt == {**snap_before["request"]["receipt"], "collected_at": first["collected_at"]}


def test_p4_wait_returns_as_soon_as_the_owner_answers(world: World):
    token = agent(world)
    asked = ask(world, token)
    got: list[dict[str, Any]] = []
    waiter = threading.Thread(target=lambda: got.append(world.call(
        "agent_wait", {"request_id": asked["request_id"], "wait_s": 30}, token)))
    waiter.start()
    try:
        deadline = threading.Event()
        for _ in range(200):  # the waiter is parked before the owner answers
            if world.service.waiting:
                break
            deadline.wait(0.01)
        owner_answers(world, asked["conversation_id"], option=0)
    finally:
        waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert got[0]["status"] == "answered"


def test_p4_wait_s_bounds_and_a_wait_that_times_out_says_pending(world: World):
    token = agent(world)
    asked = ask(world, token)
    assert refused(world, "agent_wait", {"request_id": asked["request_id"], "wait_s": 31},
                   token) == "invalid_request"
    got = world.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 0}, token)
    assert (got["status"], got["answer"], got["receipt_id"]) == ("pending", None, None)


def test_p4_an_expired_question_reads_expired_and_the_agent_may_ask_again(world: World):
    token = agent(world)
    asked = ask(world, token, expires_in_s=60)
    world.clock.advance(61)
    got = world.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 0}, token)
    assert (got["status"], got["reason"], got["answer"]) == ("expired", "expired", None)
    assert ask(world, token, TEXT)["status"] == "pending"


def test_p4_cancel_ends_the_own_pending_question_repeats_and_refuses_an_answered_one(
        world: World):
    token = agent(world)
    asked = ask(world, token)
    ref = {"request_id": asked["request_id"]}
    first = world.call("agent_cancel", ref, token)
    assert (first["question"]["status"], first["question"]["reason"], first["duplicate"]) == (
        "cancelled", "explicit", False)
    again = world.call("agent_cancel", ref, token)
    assert again["question"] == first["question"] and again["duplicate"] is True
    answered = ask(world, token, TEXT)
    owner_answers(world, answered["conversation_id"], text="x")
    before = world.dump()
    assert refused(world, "agent_cancel", {"request_id": answered["request_id"]},
                   token) == "already_answered"
    assert world.dump() == before


def test_p4_list_is_the_pending_one_then_the_kept_receipts_newest_first(world: World):
    token = agent(world)
    ids = []
    for n in range(3):
        asked = ask(world, token, {**TEXT, "prompt": f"Question {n}?"})
        ids.append(asked["request_id"])
        if n < 2:
            owner_answers(world, asked["conversation_id"], text=str(n))
        world.clock.advance(1)
    listed = world.call("agent_list", {"workspace": str(world.workspace)}, token)
    assert [q["request_id"] for q in listed["questions"]] == [ids[2], ids[1], ids[0]]
    assert [q["status"] for q in listed["questions"]] == ["pending", "answered", "answered"]
    elsewhere = world.root / "elsewhere"
    elsewhere.mkdir()
    assert world.call("agent_list", {"workspace": str(elsewhere)}, token) == {"questions": []}


def test_p2_another_credentials_question_is_unknown_never_forbidden(world: World):
    token, other = agent(world), agent(world, "another")
    asked = ask(world, token)
    before = world.dump()
    for op, payload in [("agent_wait", {"request_id": asked["request_id"], "wait_s": 0}),
                        ("agent_cancel", {"request_id": asked["request_id"]})]:
        assert refused(world, op, payload, other) == "unknown_request"
    assert world.dump() == before
    assert world.call("agent_list", {"workspace": str(world.workspace)}, other) == {
        "questions": []}
    # Clankie's own question is no agent's either
    c = world.conversation()
    own = world.ask(c)["pending"]["request_id"]
    assert refused(world, "agent_wait", {"request_id": own, "wait_s": 0}, token) == \
        "unknown_request"


def test_p2_an_agent_never_answers_nor_reads_the_owners_conversations(world: World):
    token = agent(world)
    asked = ask(world, token)
    snap = world.snapshot(asked["conversation_id"])
    before = world.dump()
    with pytest.raises(ClankieError) as err:
        owner_answers(world, asked["conversation_id"], option=0, token=token)
    assert err.value.code == "forbidden"
    # New-user trial: "a agent credential cannot call ...", and no word on which token to use.
    assert err.value.detail.startswith("an agent credential cannot call input_answer: ")
    assert "the owner's token" in err.value.detail
    for op, payload in [("input_get", {"conversation_id": asked["conversation_id"]}),
                        ("conversation_list", {}), ("service_info", {}),
                        ("credential_rotate", {}),
                        ("conversation_create", {"workspace": str(world.workspace)})]:
        assert refused(world, op, payload, token) == "forbidden", op
    assert world.dump() == before
    assert snap["pending"]["status"] == "pending"


def test_p2_whoami_names_the_tokens_kind(world: World):
    token = agent(world)
    assert world.call("whoami", {}, token)["kind"] == "agent"
    assert world.call("whoami")["kind"] == "operator"
    assert world.call("whoami", {}, token)["name"] == "coder"


def test_p5_r3_a_restart_cancels_the_pending_question_and_the_agent_may_ask_again(
        world: World):
    token = agent(world)
    asked = ask(world, token)
    report = world.service.runs.recover()
    assert report.cancelled_questions == 1
    got = world.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 0}, token)
    assert (got["status"], got["reason"]) == ("cancelled", "restart")
    assert ask(world, token, TEXT)["status"] == "pending"


def test_p3_the_client_name_is_kept_and_shown_with_the_question(world: World):
    token = agent(world)
    asked = ask(world, token, client="claude-code")
    snap = world.snapshot(asked["conversation_id"])
    assert snap["pending"]["asker"]["client"] == "claude-code"
    got = world.call("conversation_get", {"conversation_id": asked["conversation_id"]})
    assert got["asker"]["client"] == "claude-code" and got["asker"]["name"] == "coder"


def test_p3_r1_an_evicted_receipt_is_gone_from_the_list_and_unknown_to_a_read(make_world):
    from clankie.settings import Settings

    world = make_world(Settings(receipt_limit=2))
    token = agent(world)
    ids = []
    for n in range(3):
        asked = ask(world, token, {**TEXT, "prompt": f"Question {n}?"})
        ids.append(asked["request_id"])
        owner_answers(world, asked["conversation_id"], text=str(n))
        world.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 0}, token)
    listed = world.call("agent_list", {"workspace": str(world.workspace)}, token)
    assert [q["request_id"] for q in listed["questions"]] == [ids[2], ids[1]]
    assert refused(world, "agent_wait", {"request_id": ids[0], "wait_s": 0},
                   token) == "unknown_request"
    with world.db() as db:  # its note of collection went with it
        assert db.execute("SELECT count(*) FROM collections").fetchone() == (2,)


def test_p3_a_message_to_an_agents_conversation_is_refused_and_changes_nothing(world: World):
    """The agent reads only answers (P4 has no tool that reads messages): a message sent
    there would reach nobody, look like a reply in the log, and move the revision the
    owner's answer is bound to. It is `not_eligible`, with nothing stored."""
    c = ask(world, agent(world))["conversation_id"]
    before = world.snapshot(c)
    assert refused(world, "conversation_send", {"conversation_id": c, "text": "8080"},
                   world.operator) == "not_eligible"
    assert world.snapshot(c) == before
    assert not [e for e in world.call("events_tail", {"conversation_id": c, "after": 0,
                                                       "wait_ms": 0})["events"]
                if e["type"] == "message_posted"]
    owner_answers(world, c, option=0)  # the answer bound before the attempt still lands


@pytest.mark.parametrize("op,extra", [("conversation_set_workspace", "workspace"),
                                      ("native_takeover", "seat")])
def test_p3_an_agents_conversation_keeps_its_workspace_and_takes_no_native_seat(
        world: World, op: str, extra: str):
    """Red team: moving agent conversation A into the workspace of its conversation B made
    two conversations of one agent there, a second pending question (beside Q4's one per
    conversation) and a list that no longer showed B's; a native seat then refused every
    later ask there. Both are `not_eligible` and change nothing."""
    token = agent(world)
    other = world.workspace.parent / "other"
    other.mkdir()
    a = ask(world, token)["conversation_id"]
    ask(world, token, TEXT, workspace=other)
    before = world.dump()
    value = str(other) if extra == "workspace" else "seat-1"
    assert refused(world, op, {"conversation_id": a, extra: value},
                   world.operator) == "not_eligible"
    assert world.dump() == before


def test_p4_a_cancel_by_the_owner_reads_as_no_answer_with_nobody_who_answered(world: World):
    """Red team: the owner's cancel came to the agent with `answered_by: {operator}`, and
    Claude Code and Codex show their model only the structured result (P4: no answer must
    never read like one)."""
    token = agent(world)
    asked = ask(world, token)
    world.cancel(asked["conversation_id"], world.snapshot(asked["conversation_id"]))
    got = world.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 0}, token)
    assert (got["status"], got["reason"], got["answer"], got["answered_by"]) == (
        "cancelled", "explicit", None, None)


def test_p3_one_agent_cannot_flood_the_owner_with_pending_questions(world: World):
    """Red team: 400 asks in 400 workspaces stored 400 conversations, each with a pending
    question (and a notification each). At most AGENT_PENDING_MAX are pending at once for
    one agent credential; past that a new ask is `too_many_pending`, with no conversation
    made; the pending ones still read, repeat as duplicates and end as before."""
    from clankie.core.lifecycle import AGENT_PENDING_MAX

    token = agent(world)
    asked = []
    for n in range(AGENT_PENDING_MAX + 1):
        where = world.workspace.parent / f"w{n}"
        where.mkdir()
        asked.append((where, ask(world, token, workspace=where)))
    assert [a["status"] for _, a in asked] == ["pending"] * AGENT_PENDING_MAX + ["refused"]
    assert asked[-1][1]["reason"] == "too_many_pending"
    assert asked[-1][1]["conversation_id"] is None
    assert len([c for c in world.call("conversation_list", {"limit": 500})["conversations"]
                if c["kind"] == "agent"]) == AGENT_PENDING_MAX
    first_where, first = asked[0]
    assert ask(world, token, workspace=first_where)["duplicate"] is True
    world.call("agent_cancel", {"request_id": first["request_id"]}, token)
    again = ask(world, token, workspace=asked[-1][0])
    assert again["status"] == "pending"
    # Another agent is not crowded by this one.
    assert ask(world, agent(world, "other"))["status"] == "pending"


def test_e_p2_revoking_an_agent_ends_its_waiting_question_invalidated_asker_revoked(
        world: World):
    """Issue 42: a revoked agent's question stayed pending until it expired, though nobody
    could read an answer to it. Like an owner's revocation (section 6's row), it ends at
    once: `invalidated`, reason `asker_revoked`, with a receipt, one `input_resolved` event
    and one revision; another agent's question, and the answered ones, are untouched."""
    token, other = agent(world), agent(world, "reviewer")
    asked, kept = ask(world, token), ask(world, other)
    c = asked["conversation_id"]
    before = world.snapshot(c)["revision"]
    me = world.call("whoami", {}, token)["credential_id"]
    world.call("credential_revoke", {"credential_id": me})
    snap = world.snapshot(c, asked["request_id"])
    assert snap["pending"] is None and snap["revision"] == before + 1
    ended = snap["request"]
    assert (ended["status"], ended["receipt"]["outcome"], ended["receipt"]["reason"]) == (
        "invalidated", "invalidated", "asker_revoked")
    assert ended["receipt"]["answered_by"] is None
    resolved = [e for e in world.events(c) if e["type"] == "input_resolved"]
    assert [(e["request_id"], e["outcome"]) for e in resolved] == [
        (asked["request_id"], "invalidated")]
    assert world.snapshot(kept["conversation_id"])["pending"]["request_id"] == \
        kept["request_id"]
    assert refused(world, "agent_wait", {"request_id": asked["request_id"], "wait_s": 0},
                   token) == "unauthenticated"  # H2: refused from its next request
    world.call("credential_revoke", {"credential_id": me})  # again: nothing more ends
    assert world.snapshot(c)["revision"] == before + 1


def test_e_p4_a_wait_in_flight_when_its_agent_is_revoked_ends_at_once(world: World):
    """The waiting agent is told at once (its wait wakes and is refused `unauthenticated`),
    not after `wait_s`."""
    token = agent(world)
    asked = ask(world, token)
    me = world.call("whoami", {}, token)["credential_id"]
    got: list[str] = []

    def wait() -> None:
        try:
            world.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 30}, token)
        except ClankieError as err:
            got.append(str(err.code))

    waiter = threading.Thread(target=wait)
    waiter.start()
    try:
        parked = threading.Event()
        for _ in range(200):  # the waiter is parked before the owner revokes it
            if world.service.waiting:
                break
            parked.wait(0.01)
        world.call("credential_revoke", {"credential_id": me})
    finally:
        waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert got == ["unauthenticated"]
