"""The lifecycle rules of SPEC sections 3, 5, 6 and 7, decided by the pure core."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from clankie import dto
from clankie.core import lifecycle
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import (
    QUESTION_TRANSITIONS,
    RUN_TRANSITIONS,
    Command,
    IllegalTransition,
    RunCommand,
    Submission,
    ask,
    transition,
)
from clankie.core.model import (
    Answer,
    ConversationKind,
    DeviceMode,
    InputRequested,
    InputResolved,
    QuestionStatus,
    RunKind,
    RunStatus,
    RunStatusChanged,
    WorkspaceIdentity,
)
from tests.core.builders import (
    CAPTAIN,
    CHOICE,
    CHOICE_WITH_TEXT,
    OPERATOR,
    T0,
    TEXT,
    TTL,
    WS,
    NewIds,
    asked,
    conversation,
    device,
    facts,
    running_run,
)


def decide_answer(*args, **kw):
    """`lifecycle.answer` as `input_answer` decides it: A1 under that op's rule."""
    return lifecycle.answer(*args, op=dto.INPUT_ANSWER, **kw)


def decide_cancel(*args, **kw):
    """`lifecycle.cancel` as `input_cancel` decides it (A12): A1 under that op's rule."""
    return lifecycle.cancel(*args, op=dto.INPUT_CANCEL, **kw)


def submit(c, q, *, option: int | None = 0, text: str | None = None, incarnation=None,
           revision=None) -> Submission:
    answer = Answer(text=text) if text is not None else (
        Answer(option_id=q.options[option].option_id) if option is not None else None)
    return Submission(q.request_id, incarnation or c.incarnation,
                      c.revision if revision is None else revision, answer)


def accept(c, q, **kw):
    decision = decide_answer(c, q, OPERATOR, submit(c, q, **kw), facts(), NewIds())
    assert decision.error is None and decision.change is not None
    return decision


# ------------------------------------------------------------------------- the tables


def test_terminal_states_have_empty_rows_and_pending_lists_every_command():
    assert set(QUESTION_TRANSITIONS[QuestionStatus.PENDING]) == set(Command)
    for status in QuestionStatus:
        if status is not QuestionStatus.PENDING:
            assert QUESTION_TRANSITIONS[status] == {}
    for status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED):
        assert RUN_TRANSITIONS[status] == {}


@pytest.mark.parametrize("status", [s for s in QuestionStatus if s is not QuestionStatus.PENDING])
@pytest.mark.parametrize("command", list(Command))
def test_illegal_question_transition_raises(status, command):
    with pytest.raises(IllegalTransition):
        transition(status, command)


def test_r4_a_run_starts_at_most_once():
    c = conversation()
    run = running_run(c)
    with pytest.raises(IllegalTransition):
        lifecycle.move_run(c, run, RunCommand.START, T0)
    done = lifecycle.move_run(c, run, RunCommand.SUCCEED, T0).runs[0]
    for command in RunCommand:
        with pytest.raises(IllegalTransition):
            lifecycle.move_run(c, done, command, T0)


# ------------------------------------------------------------------------------ asking


def test_q2_ask_returns_pending_with_request_id_at_once():
    c = conversation()
    result = ask(c, None, running_run(c), CHOICE, facts(), NewIds(), TTL)
    assert result.refused is None
    assert result.change is not None
    assert result.request_id == result.change.questions[0].request_id


def test_q5_ask_binds_incarnation_workspace_ttl_ids_and_bumps_revision_once():
    c = conversation()
    result = ask(c, None, running_run(c), CHOICE, facts(), NewIds(), TTL)
    change = result.change
    assert change is not None
    q = change.questions[0]
    assert change.conversation.revision == c.revision + 1
    assert q.status is QuestionStatus.PENDING and q.receipt is None
    assert q.incarnation == c.incarnation and q.workspace == WS
    assert q.asked_at == T0 and q.expires_at == T0 + TTL
    ids = [q.request_id, *(o.option_id for o in q.options)]
    assert len(set(ids)) == len(ids) == 3
    assert change.events == (InputRequested(c.conversation_id, q.request_id, "Which runner?",
                                            ("pytest", "unittest"), T0),)


def test_q1_text_question_takes_text_and_has_no_options():
    _, q = asked(args=TEXT)
    assert q.options == () and q.allow_text


@pytest.mark.parametrize(("reason", "setup"), [
    ("not_owner_conversation", lambda c, r, f: (replace(c, kind=ConversationKind.SIDE), r, f)),
    ("owner_revoked", lambda c, r, f: (c, r, replace(f, owner_revoked=True))),
    ("workspace_missing", lambda c, r, f: (c, r, replace(f, workspace=None))),
    ("workspace_replaced",
     lambda c, r, f: (c, r, replace(f, workspace=WorkspaceIdentity(WS.path, WS.dev, 99)))),
    ("native_owned", lambda c, r, f: (replace(c, native_owner="seat-1"), r, f)),
    ("stale_run", lambda c, r, f: (c, replace(r, incarnation="old"), f)),
    ("stale_run", lambda c, r, f: (c, replace(r, status=RunStatus.QUEUED), f)),
])
def test_q3_refusals_are_results_and_store_nothing(reason, setup):
    c, run, f = setup(conversation(), running_run(conversation()), facts())
    result = ask(c, None, run, CHOICE, f, NewIds(), TTL)
    assert result.refused == reason
    assert result.change is None and result.request_id is None


def test_q3_q4_question_pending_refuses_a_second_question():
    c, q = asked()
    result = ask(c, q, running_run(c), TEXT, facts(), NewIds(), TTL)
    assert result.refused == "question_pending" and result.change is None


def test_q3_expired_pending_question_ends_on_use_and_the_new_one_is_asked_in_one_commit():
    c, q = asked()
    later = facts(T0 + TTL)
    result = ask(c, q, running_run(c), TEXT, later, NewIds(), TTL)
    assert result.refused is None and result.change is not None
    expired, new = result.change.questions
    assert expired.status is QuestionStatus.EXPIRED and new.status is QuestionStatus.PENDING
    assert result.change.conversation.revision == c.revision + 1


# ----------------------------------------------------------------------------- answering


def test_a9_accepted_answer_records_receipt_run_event_and_one_revision_bump():
    c, q = asked()
    decision = accept(c, q, option=1)
    change = decision.change
    assert change is not None and decision.receipt is not None and not decision.duplicate
    answered = change.questions[0]
    receipt = decision.receipt
    assert answered.status is QuestionStatus.ANSWERED and answered.receipt == receipt
    assert receipt.answer == Answer(option_id=q.options[1].option_id)
    assert receipt.answered_by is not None and receipt.answered_by.credential_id == \
        OPERATOR.credential_id
    (run,) = change.runs
    assert run.kind is RunKind.CONTINUATION and run.status is RunStatus.QUEUED
    assert run.run_id == receipt.run_id and run.receipt_id == receipt.receipt_id
    assert change.conversation.revision == c.revision + 1 == receipt.revision
    assert change.events == (InputResolved(c.conversation_id, q.request_id,
                                           QuestionStatus.ANSWERED, T0),
                             RunStatusChanged(run, T0))


def test_a1_only_operator_or_active_take_control_device_answers():
    c, q = asked()
    for who in (CAPTAIN, device(DeviceMode.READ_ONLY), device(DeviceMode.CONTROL, lease=False)):
        with pytest.raises(ClankieError) as err:
            decide_answer(c, q, who, submit(c, q), facts(), NewIds())
        assert err.value.code == "forbidden"
    decision = decide_answer(c, q, device(DeviceMode.CONTROL, lease=True), submit(c, q),
                                facts(), NewIds())
    assert decision.receipt is not None and decision.error is None


def test_a3_unknown_request_creates_no_run():
    c, _ = asked()
    with pytest.raises(ClankieError) as err:
        decide_answer(c, None, OPERATOR, Submission("x", c.incarnation, c.revision,
                                                       Answer(text="a")), facts(), NewIds())
    assert err.value.code == "unknown_request"


def test_a4_duplicate_identical_answer_returns_original_receipt_whatever_the_revision():
    c, q = asked()
    first = accept(c, q, option=0)
    assert first.change is not None
    answered = first.change.questions[0]
    moved = replace(first.change.conversation, revision=first.change.conversation.revision + 5)
    again = decide_answer(moved, answered, OPERATOR,
                             submit(c, q, option=0, revision=c.revision), facts(), NewIds())
    assert again.duplicate and again.change is None and again.receipt == first.receipt


def test_a4_duplicate_text_must_match_byte_for_byte():
    c, q = asked(args=TEXT)
    first = accept(c, q, option=None, text="café")
    assert first.change is not None
    answered = first.change.questions[0]
    assert decide_answer(c, answered, OPERATOR, submit(c, q, option=None, text="café"),
                            facts(), NewIds()).duplicate
    with pytest.raises(ClankieError) as err:
        decide_answer(c, answered, OPERATOR, submit(c, q, option=None, text="cafe\u0301"),
                         facts(), NewIds())
    assert err.value.code == "already_answered"


def test_a4_identical_answer_with_another_incarnation_is_not_a_duplicate():
    c, q = asked()
    first = accept(c, q)
    assert first.change is not None
    with pytest.raises(ClankieError) as err:
        decide_answer(c, first.change.questions[0], OPERATOR,
                         submit(c, q, incarnation="another"), facts(), NewIds())
    assert err.value.code == "already_answered"


def test_a5_different_answer_to_answered_request_is_refused_with_the_receipt():
    c, q = asked()
    first = accept(c, q, option=0)
    assert first.change is not None
    with pytest.raises(ClankieError) as err:
        decide_answer(c, first.change.questions[0], OPERATOR, submit(c, q, option=1),
                         facts(), NewIds())
    assert err.value.code == "already_answered"
    assert err.value.extra["receipt"] == first.receipt


@pytest.mark.parametrize("end", ["cancel", "expire", "invalidate"])
def test_a5_any_answer_to_an_ended_request_is_request_closed(end):
    c, q = asked()
    if end == "cancel":
        decision = decide_cancel(c, q, OPERATOR, submit(c, q, option=None), facts(), NewIds())
        assert decision.change is not None
        ended = decision.change.questions[0]
    elif end == "expire":
        change = lifecycle.expire_if_due(c, q, T0 + TTL, NewIds())
        assert change is not None
        ended = change.questions[0]
    else:
        ended = lifecycle.reset(c, q, [], T0, NewIds()).questions[0]
    with pytest.raises(ClankieError) as err:
        decide_answer(c, ended, OPERATOR, submit(c, q), facts(), NewIds())
    assert err.value.code == "request_closed"
    assert err.value.extra["receipt"] == ended.receipt


def test_a6_stale_incarnation_and_stale_revision_carry_the_current_ones():
    c, q = asked()
    for sub, code in ((submit(c, q, incarnation="other"), "stale_incarnation"),
                      (submit(c, q, revision=c.revision - 1), "stale_revision")):
        with pytest.raises(ClankieError) as err:
            decide_answer(c, q, OPERATOR, sub, facts(), NewIds())
        assert err.value.code == code
        assert err.value.extra == {"incarnation": c.incarnation, "revision": c.revision}


def test_a6_staleness_is_checked_before_validity():
    c, q = asked()
    sub = Submission(q.request_id, c.incarnation, c.revision - 1, Answer(option_id="nope"))
    with pytest.raises(ClankieError) as err:
        decide_answer(c, q, OPERATOR, sub, facts(), NewIds())
    assert err.value.code == "stale_revision"


def test_a7_expiry_on_use_commits_expired_and_refuses():
    c, q = asked()
    decision = decide_answer(c, q, OPERATOR, submit(c, q), facts(T0 + TTL), NewIds())
    assert decision.error is not None and decision.error.code == "request_expired"
    assert decision.change is not None
    ended = decision.change.questions[0]
    assert ended.status is QuestionStatus.EXPIRED and ended.receipt is not None
    assert ended.receipt.reason == "expired" and ended.receipt.run_id is None
    assert decision.change.runs == ()
    assert decision.change.conversation.revision == c.revision + 1


@pytest.mark.parametrize(("found", "reason"), [
    ({"owner_revoked": True}, "owner_revoked"),
    ({"workspace": None}, "workspace_missing"),
    ({"workspace": WorkspaceIdentity(WS.path, WS.dev, WS.ino + 1)}, "workspace_replaced"),
])
def test_a7_invalidated_on_use_is_request_closed(found, reason):
    c, q = asked()
    decision = decide_answer(c, q, OPERATOR, submit(c, q), facts(**found), NewIds())
    assert decision.error is not None and decision.error.code == "request_closed"
    assert decision.change is not None
    ended = decision.change.questions[0]
    assert ended.status is QuestionStatus.INVALIDATED and ended.receipt is not None
    assert ended.receipt.reason == reason
    assert decision.change.runs == ()


def test_a7_native_owner_present_invalidates_on_use():
    c, q = asked()
    c = replace(c, native_owner="seat-9")
    decision = decide_answer(c, q, OPERATOR, submit(c, q), facts(), NewIds())
    assert decision.error is not None and decision.error.code == "request_closed"
    assert decision.receipt is not None and decision.receipt.reason == "native_takeover"


def test_a8_option_must_belong_to_the_question_and_text_must_be_allowed():
    c, q = asked()
    for answer in (Answer(option_id="a0000000-0000-4000-8000-0000000000ff"), Answer(text="x")):
        with pytest.raises(ClankieError) as err:
            decide_answer(c, q, OPERATOR,
                             Submission(q.request_id, c.incarnation, c.revision, answer),
                             facts(), NewIds())
        assert err.value.code == "invalid_answer"


def test_a8_text_is_accepted_by_a_choice_question_that_allows_it():
    c, q = asked(args=CHOICE_WITH_TEXT)
    decision = accept(c, q, option=None, text="neither")
    assert decision.receipt is not None and decision.receipt.answer == Answer(text="neither")


def test_a12_cancel_resolves_explicit_without_a_run_and_repeats_as_duplicate():
    c, q = asked()
    decision = decide_cancel(c, q, OPERATOR, submit(c, q, option=None), facts(), NewIds())
    assert decision.change is not None and decision.receipt is not None
    assert decision.receipt.outcome is QuestionStatus.CANCELLED
    assert decision.receipt.reason == "explicit" and decision.receipt.run_id is None
    assert decision.change.runs == ()
    cancelled = decision.change.questions[0]
    again = decide_cancel(c, cancelled, OPERATOR, submit(c, q, option=None), facts(), NewIds())
    assert again.duplicate and again.receipt == decision.receipt and again.change is None


def test_a12_cancel_of_an_answered_request_is_already_answered():
    c, q = asked()
    first = accept(c, q)
    assert first.change is not None
    with pytest.raises(ClankieError) as err:
        decide_cancel(c, first.change.questions[0], OPERATOR, submit(c, q, option=None),
                         facts(), NewIds())
    assert err.value.code == "already_answered"


def test_a12_cancel_checks_who_and_staleness():
    c, q = asked()
    with pytest.raises(ClankieError) as err:
        decide_cancel(c, q, CAPTAIN, submit(c, q, option=None), facts(), NewIds())
    assert err.value.code == "forbidden"
    with pytest.raises(ClankieError) as err:
        decide_cancel(c, q, OPERATOR, submit(c, q, option=None, revision=1), facts(), NewIds())
    assert err.value.code == "stale_revision"


# ------------------------------------------------------------- ending without an answer


def test_e_reset_rotates_incarnation_invalidates_and_cancels_queued_runs():
    c, q = asked()
    queued = replace(running_run(c), status=RunStatus.QUEUED)
    change = lifecycle.reset(c, q, [queued], T0, NewIds())
    assert change.conversation.incarnation != c.incarnation
    assert change.conversation.revision == c.revision + 1
    (ended,) = change.questions
    assert ended.status is QuestionStatus.INVALIDATED and ended.receipt is not None
    assert ended.receipt.reason == "reset"
    assert [r.status for r in change.runs] == [RunStatus.CANCELLED]
    assert [e.type for e in change.events] == ["input_resolved", "run_status",
                                              "conversation_reset"]


def test_e_native_takeover_invalidates_and_cancels_queued_continuations():
    c, q = asked()
    first = accept(c, q)
    assert first.change is not None
    c2, q2 = asked(first.change.conversation)
    continuation = first.change.runs[0]
    change = lifecycle.native_takeover(c2, q2, [continuation], "seat-1", T0, NewIds())
    assert change.conversation.native_owner == "seat-1"
    assert change.questions[0].receipt is not None
    assert change.questions[0].receipt.reason == "native_takeover"
    assert change.runs[0].run_id == continuation.run_id
    assert change.runs[0].status is RunStatus.CANCELLED


def test_e_owner_revocation_invalidates():
    c, q = asked()
    change = lifecycle.owner_revoked(c, q, T0, NewIds())
    assert change.questions[0].receipt is not None
    assert change.questions[0].receipt.reason == "owner_revoked"


def test_e_p2_an_asking_agents_revocation_invalidates_a_pending_question_only():
    """Issue 42: the reason is `asker_revoked`; with none pending, nothing changes."""
    c, q = asked()
    change = lifecycle.asker_revoked(c, q, T0, NewIds())
    assert change is not None and change.questions[0].status is QuestionStatus.INVALIDATED
    assert change.questions[0].receipt is not None
    assert change.questions[0].receipt.reason == "asker_revoked"
    assert lifecycle.asker_revoked(c, None, T0, NewIds()) is None


def test_e_workspace_replacement_invalidates_only_when_the_identity_differs():
    c, q = asked()
    assert lifecycle.set_workspace(c, q, WS, T0, NewIds()) is None
    other = WorkspaceIdentity("/elsewhere", 1, 2)
    change = lifecycle.set_workspace(c, q, other, T0, NewIds())
    assert change is not None and change.conversation.workspace == other
    assert change.questions[0].receipt is not None
    assert change.questions[0].receipt.reason == "workspace_replaced"


def test_s5_expiry_is_checked_on_read():
    c, q = asked()
    assert lifecycle.expire_if_due(c, q, T0 + TTL - timedelta(microseconds=1), NewIds()) is None
    change = lifecycle.expire_if_due(c, q, T0 + TTL, NewIds())
    assert change is not None and change.questions[0].status is QuestionStatus.EXPIRED


def test_r3_restart_cancels_pending_and_fails_unfinished_runs_without_running_them():
    c, q = asked()
    running = running_run(c)
    queued = replace(running, run_id="f0000000-0000-4000-8000-000000000010",
                     status=RunStatus.QUEUED)
    change = lifecycle.restart(c, q, [running, queued], T0, NewIds())
    assert change is not None
    assert change.questions[0].status is QuestionStatus.CANCELLED
    assert change.questions[0].receipt is not None
    assert change.questions[0].receipt.reason == "restart"
    assert {r.status for r in change.runs} == {RunStatus.FAILED}
    assert {r.error for r in change.runs} == {"orphaned_by_restart"}
    assert lifecycle.restart(change.conversation, None, [], T0, NewIds()) is None


def test_every_end_writes_a_receipt_and_one_input_resolved_event():
    c, q = asked()
    changes = [
        lifecycle.reset(c, q, [], T0, NewIds()),
        lifecycle.native_takeover(c, q, [], "s", T0, NewIds()),
        lifecycle.owner_revoked(c, q, T0, NewIds()),
        lifecycle.asker_revoked(c, q, T0, NewIds()),
        lifecycle.set_workspace(c, q, WorkspaceIdentity("/x", 1, 1), T0, NewIds()),
        lifecycle.expire_if_due(c, q, T0 + TTL, NewIds()),
        lifecycle.restart(c, q, [], T0, NewIds()),
        decide_cancel(c, q, OPERATOR, submit(c, q, option=None), facts(), NewIds()).change,
    ]
    for change in changes:
        assert change is not None
        assert change.questions[0].receipt is not None
        assert [e.type for e in change.events].count("input_resolved") == 1
        assert change.conversation.revision == c.revision + 1


def test_a2_a_message_is_never_an_answer_and_queues_a_turn_only_in_an_owner_conversation():
    from clankie.core.model import Author

    c, _ = asked()
    for text in ("yes", "1", "/question answer 1"):
        change, _, turn = lifecycle.post_message(c, Author.OWNER, text, T0, NewIds(),
                                                 start_turn=True)
        assert change.questions == ()
        assert turn is not None and turn.kind is RunKind.TURN
    room = replace(c, kind=ConversationKind.ROOM)
    assert lifecycle.post_message(room, Author.ROOM, "yes", T0, NewIds(), start_turn=True)[2] \
        is None
    native = replace(c, native_owner="seat")
    assert lifecycle.post_message(native, Author.OWNER, "yes", T0, NewIds(),
                                  start_turn=True)[2] is None


# ------------------------------------------------------------------------- stopping (R7)


@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.RUNNING])
def test_r7_stop_ends_a_queued_or_running_run_cancelled_stopped_by_owner(status):
    c = conversation()
    run = replace(running_run(c), status=status)
    later = T0 + timedelta(seconds=3)
    change = lifecycle.stop_run(c, run, later)
    assert change is not None
    (stopped,) = change.runs
    assert (stopped.status, stopped.error, stopped.finished_at) == (
        RunStatus.CANCELLED, "stopped_by_owner", later)
    assert stopped.started_at == run.started_at  # a queued run stopped never started
    assert change.conversation.revision == c.revision + 1
    assert [e.type for e in change.events] == ["run_status"]
    assert change.questions == () and change.messages == ()


@pytest.mark.parametrize("status", [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED])
def test_r7_stopping_an_ended_run_changes_nothing(status):
    c = conversation()
    assert lifecycle.stop_run(c, replace(running_run(c), status=status), T0) is None


def test_r7_a_stopped_run_can_neither_succeed_fail_nor_start():
    c = conversation()
    change = lifecycle.stop_run(c, running_run(c), T0)
    assert change is not None
    for command in RunCommand:
        with pytest.raises(IllegalTransition):
            lifecycle.move_run(c, change.runs[0], command, T0)


def test_r7_only_a_stop_cancels_a_running_run_a_reset_leaves_it_running():
    c = conversation()
    with pytest.raises(IllegalTransition):
        lifecycle.move_run(c, running_run(c), RunCommand.CANCEL, T0)
    assert lifecycle.reset(c, None, [running_run(c)], T0, NewIds()).runs == ()


def test_r3_the_restart_plan_is_read_off_the_transition_tables():
    """Issue 20: restart decided once, in the core. The plan the store executes for every
    conversation (`WriteTx.restart_all`) is the one `restart` applies to one."""
    plan = lifecycle.restart_plan(T0)
    assert plan.questions == {QuestionStatus.PENDING: QuestionStatus.CANCELLED}
    assert plan.runs == {RunStatus.QUEUED: RunStatus.FAILED, RunStatus.RUNNING: RunStatus.FAILED}
    assert (plan.reason, plan.error, plan.now) == ("restart", "orphaned_by_restart", T0)
    c, q = asked()
    running = running_run(c)
    assert lifecycle.restart(c, q, [running], T0, NewIds()) == plan.apply(c, q, [running],
                                                                         NewIds())


def test_a_restart_plan_moves_along_the_tables_only():
    with pytest.raises(IllegalTransition):
        lifecycle.RestartPlan(T0, {QuestionStatus.ANSWERED: QuestionStatus.CANCELLED}, "r", {}, "e")
    with pytest.raises(IllegalTransition):
        lifecycle.RestartPlan(T0, {}, "r", {RunStatus.QUEUED: RunStatus.SUCCEEDED}, "e")
    c, q = asked()
    cancelled = decide_cancel(c, q, OPERATOR, submit(c, q, option=None), facts(),
                                 NewIds()).change
    assert cancelled is not None
    with pytest.raises(IllegalTransition):
        lifecycle.restart(cancelled.conversation, cancelled.questions[0], [], T0, NewIds())
