"""The TUI's decisions, pure (`clankie.tui.decide`), in the fast loop (issue 32: they were
tested only through Pilot, which `make check` leaves out).

What a typed line means given the snapshot and what the panel showed (SPEC section 10
"Operator TUI": each answer binds to the displayed request, incarnation and revision; on a
conflict nothing is sent; any other text, `yes` included, is chat, A2, and a chat line that
looks like an answer is said to be chat with the command that answers; R9's `/continue`;
P3's agent conversations), and the follow loop's step (V1, V3: the snapshot is read again
on a question's start or end, a reset, a trimmed tail and after a reconnect, never
otherwise; connected again within 1 s of the service coming back; T2's refusal stops it).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from clankie import dto, wording
from clankie.client import ApiError, NotClankie, NotYours
from clankie.peer import Listener
from clankie.tui import decide
from clankie.tui.commands import (
    AGENT_USAGE,
    USAGE,
    AnswerOption,
    AnswerText,
    CancelQuestion,
    ShowQuestion,
    Stop,
    parse,
)
from tests.test_entry import imported, loaded

C = "3c1e9a7b-8d2f-4e6a-9b0c-1d2e3f4a5b6c"
R = "00000001-0000-4000-8000-000000000001"
I = "00000002-0000-4000-8000-000000000002"  # noqa: E741  (the incarnation)
AGENT = {"credential_id": "9" * 32, "name": "coder", "client": "claude-code"}


def question(request_id: str = R, *, kind: str = "choice", allow_text: bool = False,
             status: str = "pending", asker: dict[str, Any] | None = None) -> dict[str, Any]:
    options = [] if kind == "text" else [
        {"option_id": f"o{n}", "label": label, "description": ""}
        for n, label in enumerate(("tabs", "spaces"), start=1)]
    return {"request_id": request_id, "kind": kind, "prompt": "Tabs or spaces?",
            "options": options, "allow_text": allow_text, "status": status,
            "incarnation": I, "asked_at": "2026-12-01T09:00:00.000000Z",
            "expires_at": "2026-12-02T09:00:00.000000Z", "receipt": None, "asker": asker}


def snapshot(pending: dict[str, Any] | None = None, revision: int = 5,
             request: dict[str, Any] | None = None) -> dto.Snapshot:
    return dto.Snapshot.model_validate({"conversation_id": C, "incarnation": I,
                                        "revision": revision, "pending": pending,
                                        "request": request})


SHOWN = snapshot(question())

# ------------------------------------------------------------ binding an answer


def test_an_answer_binds_to_the_displayed_option_request_incarnation_and_revision():
    """Section 10: `/question answer N` answers with the N-th *displayed* option, bound to
    the displayed request, incarnation and revision."""
    bound = decide.bind_answer(SHOWN, decide.shown(SHOWN), AnswerOption(2))
    assert bound == decide.Resolve(R, I, 5, option_id="o2")
    assert bound.op is dto.INPUT_ANSWER
    assert bound.payload(C) == {"conversation_id": C, "request_id": R, "incarnation": I,
                                "revision": 5, "option_id": "o2"}


def test_text_and_cancel_bind_alike():
    q = snapshot(question(allow_text=True))
    text = decide.bind_answer(q, decide.shown(q), AnswerText("four spaces"))
    assert text.payload(C) == {"conversation_id": C, "request_id": R, "incarnation": I,
                               "revision": 5, "text": "four spaces"}
    cancel = decide.bind_answer(q, decide.shown(q), CancelQuestion())
    assert isinstance(cancel, decide.Resolve) and cancel.op is dto.INPUT_CANCEL
    assert cancel.payload(C) == {"conversation_id": C, "request_id": R, "incarnation": I,
                                 "revision": 5}


def test_a_line_begun_before_the_panel_was_read_binds_to_what_it_shows():
    assert decide.bind_answer(SHOWN, None, AnswerOption(1)) == decide.Resolve(
        R, I, 5, option_id="o1")


@pytest.mark.parametrize(("shown", "command", "said"), [
    (None, AnswerOption(1), "The question is not read yet"),
    (snapshot(), AnswerOption(1), f"{wording.NO_QUESTION}; nothing was sent."),
    (snapshot(request=question(status="cancelled")), CancelQuestion(),
     f"{wording.NO_QUESTION}; nothing was sent."),
    (SHOWN, AnswerOption(3), "There is no option 3; the question shows 2."),
    (SHOWN, AnswerText("tabs"), "This question takes one of its options, not text"),
    (snapshot(question(kind="text", allow_text=True)), AnswerOption(1),
     "This question takes words, not an option: /question text WORDS."),
])
def test_what_cannot_be_answered_is_said_and_nothing_is_sent(
        shown: dto.Snapshot | None, command: Any, said: str):
    """Section 10: an ended question (by any surface) is never answered from the panel; a
    number out of range or the wrong kind of answer is refused on the spot."""
    out = decide.bind_answer(shown, None, command)
    assert isinstance(out, decide.Say) and said in out.words and not out.keep


def test_an_answer_typed_for_one_question_is_never_sent_to_the_next():
    """Section 10: the answer binds to the question displayed when the line was begun;
    one that replaced it meanwhile is not answered."""
    begun = decide.shown(SHOWN)
    now = snapshot(question("00000003-0000-4000-8000-000000000003"), revision=7)
    out = decide.bind_answer(now, begun, AnswerOption(1))
    assert isinstance(out, decide.Say)
    assert out.words.startswith("The question changed while you typed")


def test_a_stale_revision_is_said_not_sent():
    """Section 10 with A6: the conversation moved on while the owner typed; the answer is
    not bound to a revision the owner did not see."""
    out = decide.bind_answer(snapshot(question(), revision=6), decide.shown(SHOWN),
                             AnswerOption(1))
    assert isinstance(out, decide.Say)
    assert "revision 5 is now 6" in out.words and "nothing was sent" in out.words


def test_what_the_panel_showed_is_its_request_and_revision():
    assert decide.shown(SHOWN) == decide.Shown(R, 5)
    assert decide.shown(snapshot()) == decide.Shown("", 0)
    assert decide.shown(None) == decide.Shown("", 0)


def test_an_agents_question_is_answered_alike_and_said_to_be_the_agents():
    """P3: the owner answers an agent's question with the same commands."""
    q = snapshot(question(asker=AGENT))
    bound = decide.bind_answer(q, decide.shown(q), AnswerOption(1))
    assert isinstance(bound, decide.Resolve) and bound.agent and bound.option_id == "o1"


def reply(outcome: str, duplicate: bool = False, run_id: str | None = "run") -> dto.AnswerReply:
    return dto.AnswerReply.model_validate({"duplicate": duplicate, "receipt": {
        "receipt_id": "0123456789abcdef", "request_id": R, "outcome": outcome,
        "reason": None, "answer": None, "answered_by": None, "run_id": run_id,
        "continuation": None, "continuation_error": None,
        "resolved_at": "2026-12-01T09:01:00.000000Z", "revision": 6}})


def test_a4_the_reply_is_said_once_a_duplicate_as_already():
    bound = decide.Resolve(R, I, 5, option_id="o1")
    assert decide.answered(bound, reply("answered")) == (
        "Accepted (receipt 01234567): Clankie continues with it.")
    assert decide.answered(bound, reply("answered", duplicate=True)).startswith(
        "Already accepted (receipt 01234567)")
    cancel = decide.Resolve(R, I, 5, cancel=True)
    assert decide.answered(cancel, reply("cancelled")) == "Cancelled the question."
    assert decide.answered(cancel, reply("cancelled", True)) == "Already cancelled."


def test_p3_an_answer_to_an_agent_says_the_agent_reads_it_and_no_run_starts():
    agent = decide.Resolve(R, I, 5, option_id="o1", agent=True)
    assert decide.answered(agent, reply("answered", run_id=None)) == (
        "Accepted (receipt 01234567). The agent reads it when it next looks; no run of "
        "Clankie starts.")


def test_section10_a_conflict_is_said_and_the_question_shown_again_never_resent():
    """Section 10: on a conflict the TUI says so and shows the question again; it never
    resubmits by itself (the app sends nothing on any of these)."""
    words, again = decide.refused("stale_revision", "moved", None)
    assert again and words.startswith("The question changed since it was shown")
    words, again = decide.refused("already_answered", "done",
                                  {"outcome": "cancelled", "reason": "restart"})
    assert again and words == ("That question has ended: cancelled (restart). Here is the "
                               "current state.")
    assert decide.refused("invalid_request", "text: too long", None) == (
        "Refused: invalid_request: text: too long", False)


def test_r9_an_answer_that_could_not_reach_the_service_says_the_question_will_end():
    """R9 (issue 31): an answer not sent while clankie restarts: the question will end and
    the owner will be told how to carry on; a cancel is only "not sent"."""
    answer = decide.Resolve(R, I, 5, text="four spaces")
    assert decide.unsent(answer, "cannot reach clankie") == (
        f"Your answer was not sent: cannot reach clankie. {wording.ANSWER_NOT_SENT}")
    assert decide.unsent(answer, "is it running?").startswith(
        "Your answer was not sent: is it running? If")
    assert decide.unsent(decide.Resolve(R, I, 5, cancel=True), "down") == "Not sent: down"


# ------------------------------------------------------------ what a line means


@pytest.mark.parametrize(("typed", "command"), [
    ("1", "/question answer 1"), ("  2 ", "/question answer 2"),
    ("SPACES", "/question answer 2"), ("yes", "/question answer N"),
    ("No", "/question answer N"),
])
def test_a2_chat_that_looks_like_an_answer_is_sent_as_chat_with_the_command(
        typed: str, command: str):
    """A2 and section 10: `yes`, a number or a label is a chat message, never an answer;
    the TUI then says it was chat and gives the command that answers."""
    out = decide.line(parse(typed), SHOWN, decide.shown(SHOWN), agent=False)
    assert isinstance(out, decide.SendChat) and out.text == typed
    assert out.hint is not None and out.hint.endswith(f"To answer it: {command}")


@pytest.mark.parametrize(("shown", "typed"), [(SHOWN, "one more thing"), (snapshot(), "yes"),
                                              (None, "1")])
def test_other_chat_or_chat_without_a_question_gets_no_hint(shown: Any, typed: str):
    assert decide.line(parse(typed), shown, None, agent=False) == decide.SendChat(typed)


def test_a_question_command_line_is_bound_not_sent_as_chat():
    out = decide.line(parse("/question answer 1"), SHOWN, decide.shown(SHOWN), agent=False)
    assert isinstance(out, decide.Resolve)


def test_commands_that_send_nothing_are_said():
    assert decide.line(parse("/help"), SHOWN, None, agent=False) == decide.Say(USAGE)
    assert decide.line(parse("/help"), SHOWN, None, agent=True) == decide.Say(AGENT_USAGE)
    refused = decide.line(parse("/quit"), SHOWN, None, agent=False)
    assert isinstance(refused, decide.Say) and "is not a command; nothing was sent" in (
        refused.words)
    assert decide.line(parse("   "), SHOWN, None, agent=False) is None
    assert decide.line(parse("/question"), SHOWN, None, agent=False) == ShowQuestion()
    assert decide.line(parse("/stop"), SHOWN, None, agent=False) == Stop()


def test_r9_continue_is_an_ordinary_message():
    assert decide.line(parse("/continue"), SHOWN, None, agent=False) == decide.SendChat(
        wording.CONTINUE_MESSAGE)


def test_p3_in_an_agents_conversation_chat_continue_and_stop_send_nothing():
    """P3: the agent reads only answers; no run of Clankie works there."""
    chat = decide.line(parse("yes"), SHOWN, None, agent=True)
    assert isinstance(chat, decide.Say) and chat.keep  # kept, to become `/question text`
    assert chat.words.startswith("Not sent: the agent reads only your answer")
    for typed in ("/continue", "/stop"):
        out = decide.line(parse(typed), SHOWN, None, agent=True)
        assert isinstance(out, decide.Say) and not out.keep
        assert "agent's conversation" in out.words


# --------------------------------------------------------- the question shown


def test_s1_a_read_that_raced_a_newer_one_is_dropped():
    assert decide.newer(None, SHOWN)
    assert decide.newer(SHOWN, snapshot(revision=5)) and decide.newer(SHOWN, snapshot(
        revision=6))
    assert not decide.newer(SHOWN, snapshot(question(), revision=4))


def test_s5_a_shown_question_past_its_expiry_is_read_again():
    assert not decide.expired(SHOWN, datetime(2026, 12, 2, 8, 59, tzinfo=UTC))
    assert decide.expired(SHOWN, datetime(2026, 12, 2, 9, 0, 1, tzinfo=UTC))
    assert not decide.expired(snapshot(), datetime(2027, 1, 1, tzinfo=UTC))


# ------------------------------------------------------------- the follow loop


def event(seq: int, kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "seq": seq, "conversation_id": C,
            "at": "2026-12-01T09:00:00.000000Z", **fields}


MESSAGE = event(3, "message", message_id="m", author="clankie", text="hello")
ASKED = event(4, "input_requested", request_id=R, prompt="Tabs?", choices=["tabs"])
ENDED = event(5, "input_resolved", request_id=R, outcome="answered")
RESET = event(6, "conversation_reset")
ACTIVITY = event(7, "tool_activity", run_id="r", tool="read_file", status="ok",
                 summary="read a")


def page(*events: dict[str, Any], trimmed: bool = False, next_after: int = 9) -> dto.EventsOut:
    return dto.EventsOut.model_validate({"events": list(events), "next_after": next_after,
                                         "oldest_seq": 3, "trimmed": trimmed})


def test_v1_the_cursor_moves_to_the_pages_next_after():
    state, _ = decide.after_page(decide.Follow(after=2, stale=False), page(MESSAGE), False)
    assert state == decide.Follow(after=9, failures=0, stale=False)


@pytest.mark.parametrize(("events", "read", "about", "announce"), [
    ((ASKED,), True, R, True),
    ((MESSAGE, ENDED), True, R, False),
    ((RESET,), True, None, False),
    ((MESSAGE, ACTIVITY), False, None, False),
    ((), False, None, False),
])
def test_v3_the_snapshot_is_read_again_on_a_questions_start_or_end_and_a_reset_only(
        events: tuple[dict[str, Any], ...], read: bool, about: str | None, announce: bool):
    """V3: no other event (messages, runs, tool activity) means a question was answered."""
    _, step = decide.after_page(decide.Follow(stale=False), page(*events), pending=False)
    assert step == decide.Step(read, about, announce)


def test_v3_a_trimmed_tail_is_said_and_read_again():
    trimmed = page(trimmed=True)
    assert decide.trimmed(trimmed) == "(events before #3 were trimmed)"
    assert decide.trimmed(page()) is None
    assert decide.after_page(decide.Follow(), trimmed, False)[1].read


def test_section10_while_a_question_is_pending_any_event_reads_the_panel_again():
    """Section 10: the panel shows the latest snapshot: any change moves the revision an
    answer binds to, so while a question is pending any event reads it again."""
    _, step = decide.after_page(decide.Follow(), page(MESSAGE), pending=True)
    assert step == decide.Step(True, None, False)
    _, quiet = decide.after_page(decide.Follow(), page(), pending=True)
    assert not quiet.read


def test_v1_an_empty_page_that_came_back_at_once_is_not_asked_again_at_once():
    assert decide.pause_after(page(), 0.0) > 0
    assert decide.pause_after(page(), 30.0) == 0
    assert decide.pause_after(page(MESSAGE), 0.0) == 0


def test_section10_a_lost_service_is_said_once_and_tried_again_within_a_second():
    """Section 10: when the service comes back after a restart, the TUI is connected
    again within 1 s; the loss is said once, not at every try."""
    state = decide.Follow(after=4, stale=False)
    said, waits = [], []
    for _ in range(5):
        state, lost = decide.lost(state, "cannot reach clankie")
        said.append(lost.notice)
        waits.append(lost.wait_s)
    assert said == ["Lost the service: cannot reach clankie", None, None, None, None]
    assert waits == [0.2, 0.5, 0.8, 0.8, 0.8] and max(waits) < 1.0
    assert state == decide.Follow(after=4, failures=5, stale=True)  # the cursor kept
    state, back = decide.reconnected(state)
    assert back and state == decide.Follow(after=4, failures=0, stale=False)
    assert decide.reconnected(decide.Follow()) == (decide.Follow(stale=False), False)


def test_t2_a_listener_that_is_not_the_owners_stops_the_loop_and_is_said_with_the_fix():
    refused = NotYours("http://127.0.0.1:18900", Listener(65534, "/proc/net/tcp"))
    stop = decide.stopped(refused)
    assert stop.say is not None and stop.say.startswith("Stopped following: ")
    assert f"Fix: {refused.fix}; then start `clankie chat` again." in stop.say
    assert stop.title == "Not your service" and stop.disconnected


def test_a_refusal_or_a_listener_that_is_not_clankie_stops_the_loop():
    refused = decide.stopped(ApiError({"code": "forbidden", "status": 403, "detail": "no"}))
    assert refused == decide.Stopped(None, "forbidden: no", disconnected=False)
    other = NotClankie("http://127.0.0.1:9", 200, via_env=False, why="a {}")
    stop = decide.stopped(other)
    assert stop.say == f"Stopped following: {other} (fix: {other.fix})"
    assert stop.title == "Not clankie" and stop.disconnected


def test_issue32_the_decisions_load_no_textual_and_no_event_loop():
    """Issue 32: the TUI's decisions are pure, tested in the fast loop: importing them
    loads neither Textual nor Rich (nor asyncio, the app's event loop)."""
    _, names = imported("-c", "import clankie.tui.decide")
    assert loaded(names, "clankie.tui.decide")
    assert [p for p in ("textual", "rich", "asyncio") if loaded(names, p)] == []


def test_h5_p3_an_answer_to_a_question_the_agent_cancelled_says_the_agent_did_it():
    """Issue 42: a refusal worded from the receipt names who ended the question when it was
    the agent that asked (`answered_by.kind: agent`), not some other surface of the owner."""
    words, again = decide.refused("request_closed", "ended", {
        "outcome": "cancelled", "reason": "explicit",
        "answered_by": {"credential_id": "9" * 32, "kind": "agent"}})
    assert again and words == ("That question has ended: cancelled (explicit) by the agent "
                               "that asked it. Here is the current state.")
