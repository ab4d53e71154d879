"""The question lifecycle and the run lifecycle of SPEC sections 3, 5, 6 and 7: pure decisions.

Theory of operation. Every operation that may change a conversation is a function here
that takes the current state (loaded by the service in one transaction), the facts found
on use (`Facts`: the clock, owner revocation, the workspace's identity now), and a source
of new IDs, and returns a `Change`: the new conversation (its revision bumped exactly
once), the question and run rows to save, the messages and the events to append. A
refusal that changes nothing is raised as `ClankieError`; a refusal that must first
commit a transition (expiry or invalidation found on use, A7) is returned as a `Decision`
carrying both the change and the error, and the service raises after committing.

The two state machines are tables below (state x command -> state). A command missing
from a row is an illegal transition: `transition` raises and nothing changes. Terminal
states have empty rows. `docs/lifecycle.md` is generated from these tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Final, TypeVar

from .authority import Guarded, authorize
from .errors import ClankieError
from .model import (
    Actor,
    Answer,
    Asker,
    Author,
    Conversation,
    ConversationKind,
    ConversationResetDone,
    Event,
    InputRequested,
    InputResolved,
    Message,
    MessagePosted,
    Option,
    Principal,
    Question,
    QuestionKind,
    QuestionStatus,
    Receipt,
    Run,
    RunKind,
    RunStatus,
    RunStatusChanged,
    WorkspaceIdentity,
)
from .vocabulary import AskRefusal, Code, Partial, Reason, RunError

NewId = Callable[[], str]


class Command(StrEnum):
    """What can happen to a pending question."""

    ANSWER = "answer"
    CANCEL = "cancel"
    EXPIRE = "expire"
    INVALIDATE = "invalidate"
    RESTART = "restart"


QUESTION_TRANSITIONS: Final[Mapping[QuestionStatus, Mapping[Command, QuestionStatus]]] = {
    QuestionStatus.PENDING: {
        Command.ANSWER: QuestionStatus.ANSWERED,
        Command.CANCEL: QuestionStatus.CANCELLED,
        Command.EXPIRE: QuestionStatus.EXPIRED,
        Command.INVALIDATE: QuestionStatus.INVALIDATED,
        Command.RESTART: QuestionStatus.CANCELLED,
    },
    QuestionStatus.ANSWERED: {},
    QuestionStatus.CANCELLED: {},
    QuestionStatus.EXPIRED: {},
    QuestionStatus.INVALIDATED: {},
}


class RunCommand(StrEnum):
    """What can happen to a run. `cancel` is a reset's or a native takeover's (a queued run
    only); `stop` is the owner's `run_cancel` (R7), of a queued or a running run."""

    START = "start"
    SUCCEED = "succeed"
    FAIL = "fail"
    CANCEL = "cancel"
    STOP = "stop"


RUN_TRANSITIONS: Final[Mapping[RunStatus, Mapping[RunCommand, RunStatus]]] = {
    RunStatus.QUEUED: {
        RunCommand.START: RunStatus.RUNNING,
        RunCommand.FAIL: RunStatus.FAILED,
        RunCommand.CANCEL: RunStatus.CANCELLED,
        RunCommand.STOP: RunStatus.CANCELLED,
    },
    RunStatus.RUNNING: {
        RunCommand.SUCCEED: RunStatus.SUCCEEDED,
        RunCommand.FAIL: RunStatus.FAILED,
        RunCommand.STOP: RunStatus.CANCELLED,
    },
    RunStatus.SUCCEEDED: {},
    RunStatus.FAILED: {},
    RunStatus.CANCELLED: {},
}


# How a run ends: the command that moves it to each final status.
FINISHING: Final[Mapping[RunStatus, RunCommand]] = {
    RunStatus.SUCCEEDED: RunCommand.SUCCEED,
    RunStatus.FAILED: RunCommand.FAIL,
    RunStatus.CANCELLED: RunCommand.STOP,
}


class IllegalTransition(Exception):
    """A command that the current state's row of the table does not list."""


def transition(status: QuestionStatus, command: Command) -> QuestionStatus:
    try:
        return QUESTION_TRANSITIONS[status][command]
    except KeyError:
        raise IllegalTransition(f"a {status.value} question cannot {command.value}") from None


def run_transition(status: RunStatus, command: RunCommand) -> RunStatus:
    try:
        return RUN_TRANSITIONS[status][command]
    except KeyError:
        raise IllegalTransition(f"a {status.value} run cannot {command.value}") from None


@dataclass(frozen=True, slots=True)
class Facts:
    """What the service found, on use, in the transaction: SPEC A7 and Q3 are decided on it."""

    now: datetime
    owner_revoked: bool
    workspace: WorkspaceIdentity | None  # the saved path's identity now; None: missing


@dataclass(frozen=True, slots=True)
class Change:
    """Everything one change commits for one conversation. The revision moved by one (a
    transaction may hold several changes: a run's words and its question, say)."""

    conversation: Conversation
    questions: tuple[Question, ...] = ()
    runs: tuple[Run, ...] = ()
    messages: tuple[Message, ...] = ()
    events: tuple[Event, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    """The result of answering or cancelling: commit `change` (if any), then reply or raise."""

    change: Change | None = None
    receipt: Receipt | None = None
    duplicate: bool = False
    error: ClankieError | None = None


@dataclass(frozen=True, slots=True)
class AskArgs:
    """`ask_question`'s arguments (Q1), already checked against the bounds by the DTO."""

    kind: QuestionKind
    prompt: str
    options: tuple[tuple[str, str], ...] = ()  # (label, description)
    allow_text: bool = False

    def __post_init__(self) -> None:
        if self.kind is QuestionKind.TEXT and self.options:
            raise ValueError("a text question has no options")
        if self.kind is QuestionKind.CHOICE and len(self.options) < 2:
            raise ValueError("a choice question has at least two options")


@dataclass(frozen=True, slots=True)
class Asked:
    """The tool's result (Q2): the change to commit, and the request or the refusal reason
    (with `question_pending`, an agent's ask names the pending request; P4)."""

    change: Change | None
    request_id: str | None = None
    refused: AskRefusal | None = None
    duplicate: bool = False  # an agent asked the pending question again (P4)


@dataclass(frozen=True, slots=True)
class Submission:
    """An `input_answer` (with `answer`) or an `input_cancel` (without)."""

    request_id: str
    incarnation: str
    revision: int
    answer: Answer | None = None


def _change(
    conversation: Conversation,
    *,
    questions: Iterable[Question] = (),
    runs: Iterable[Run] = (),
    messages: Iterable[Message] = (),
    events: Iterable[Event] = (),
) -> Change:
    bumped = replace(conversation, revision=conversation.revision + 1)
    return Change(bumped, tuple(questions), tuple(runs), tuple(messages), tuple(events))


def _end(
    conversation: Conversation,
    question: Question,
    status: QuestionStatus,
    reason: Reason | None,
    now: datetime,
    new_id: NewId,
    *,
    answer: Answer | None = None,
    actor: Actor | None = None,
    run_id: str | None = None,
) -> tuple[Question, InputResolved]:
    """End a pending question in `status` (the table's say: `transition`, or a restart
    plan's) with its receipt, at the revision the transaction commits."""
    receipt = Receipt(
        receipt_id=new_id(),
        request_id=question.request_id,
        outcome=status,
        reason=reason,
        answer=answer,
        answered_by=actor,
        run_id=run_id,
        resolved_at=now,
        revision=conversation.revision + 1,
    )
    ended = replace(question, status=status, receipt=receipt)
    return ended, InputResolved(question.conversation_id, question.request_id, status, now)


def _cancel_queued(runs: Iterable[Run], now: datetime) -> list[Run]:
    return [
        replace(r, status=run_transition(r.status, RunCommand.CANCEL), finished_at=now)
        for r in runs
        if r.status is RunStatus.QUEUED
    ]


def _run_events(runs: Iterable[Run], now: datetime) -> list[Event]:
    return [RunStatusChanged(r, now) for r in runs]


def _found_on_use(question: Question, conversation: Conversation,
                  facts: Facts) -> tuple[Command, Reason] | None:
    """SPEC A7 (and the "on use" rows of section 6): why a pending question must end now."""
    if question.expired_at(facts.now):
        return Command.EXPIRE, Reason.EXPIRED
    if facts.owner_revoked:
        return Command.INVALIDATE, Reason.OWNER_REVOKED
    if facts.workspace is None:
        return Command.INVALIDATE, Reason.WORKSPACE_MISSING
    if not question.workspace.same_directory(facts.workspace):
        return Command.INVALIDATE, Reason.WORKSPACE_REPLACED
    if conversation.native_owner is not None:
        return Command.INVALIDATE, Reason.NATIVE_TAKEOVER
    return None


def _end_on_use(conversation: Conversation, question: Question, facts: Facts,
                new_id: NewId) -> Decision | None:
    found = _found_on_use(question, conversation, facts)
    if found is None:
        return None
    command, reason = found
    ended, event = _end(conversation, question, transition(question.status, command), reason,
                        facts.now, new_id)
    assert ended.receipt is not None
    if command is Command.EXPIRE:
        error = ClankieError(Code.REQUEST_EXPIRED, "the question expired before this answer",
                             receipt=ended.receipt)
    else:
        error = ClankieError(Code.REQUEST_CLOSED, f"the question was invalidated: {reason}",
                             receipt=ended.receipt)
    return Decision(_change(conversation, questions=[ended], events=[event]), ended.receipt,
                    error=error)


# ---------------------------------------------------------------------------------- asking


def ask(
    conversation: Conversation,
    pending: Question | None,
    run: Run,
    args: AskArgs,
    facts: Facts,
    new_id: NewId,
    ttl: timedelta,
) -> Asked:
    """SPEC Q2-Q5: store a question, or refuse with a Q3 reason (a tool result, not a crash).

    A pending question found expired or invalid on use is ended first (section 6), and
    that transition is committed even when the ask is then refused.
    """
    ended, ended_events, pending = _ended_on_use(conversation, pending, facts, new_id)
    refusal = _ask_refusal(conversation, pending, run, facts)
    if refusal is not None:
        change = _change(conversation, questions=ended, events=ended_events) if ended else None
        return Asked(change, refused=refusal)
    question, event = _new_question(conversation, args, facts, new_id, ttl, run.run_id, None)
    change = _change(conversation, questions=[*ended, question], events=[*ended_events, event])
    return Asked(change, question.request_id)


AGENT_PENDING_MAX: Final = 10  # an agent credential's pending questions, all workspaces


def agent_ask(
    conversation: Conversation,
    pending: Question | None,
    asker: Asker,
    args: AskArgs,
    facts: Facts,
    new_id: NewId,
    ttl: timedelta,
    crowded: bool = False,
) -> Asked:
    """SPEC P3-P4: an agent's question, stored as Q2-Q5 say with no run behind it. The
    same ask as the pending one (kind, prompt, options, `allow_text`) is that question
    again (`Asked.duplicate`); a different one while one is pending is refused
    `question_pending`, naming it. A pending question found ended on use is ended first.
    `crowded`: the agent has `AGENT_PENDING_MAX` questions pending in its other
    conversations, so a new one is refused `too_many_pending` (one token cannot flood the
    owner's lists and notifications)."""
    ended, ended_events, pending = _ended_on_use(conversation, pending, facts, new_id)
    change = _change(conversation, questions=ended, events=ended_events) if ended else None
    refusal = _agent_refusal(conversation, asker, facts)
    if refusal is not None:
        return Asked(change, refused=refusal)
    if pending is not None:
        if _same_ask(pending, args):
            return Asked(change, pending.request_id, duplicate=True)
        return Asked(change, pending.request_id, refused=AskRefusal.QUESTION_PENDING)
    if crowded:
        return Asked(change, refused=AskRefusal.TOO_MANY_PENDING)
    question, event = _new_question(conversation, args, facts, new_id, ttl, None, asker)
    return Asked(_change(conversation, questions=[*ended, question],
                         events=[*ended_events, event]), question.request_id)


def _ended_on_use(conversation: Conversation, pending: Question | None, facts: Facts,
                  new_id: NewId) -> tuple[list[Question], list[Event], Question | None]:
    """Section 6 on use, before an ask: the pending question found expired or invalid is
    ended (the question, its event) and no longer pending; else nothing changes."""
    found = _found_on_use(pending, conversation, facts) if pending else None
    if pending is None or found is None:
        return [], [], pending
    command, reason = found
    closed, resolved = _end(conversation, pending, transition(pending.status, command),
                            reason, facts.now, new_id)
    return [closed], [resolved], None


def _new_question(conversation: Conversation, args: AskArgs, facts: Facts, new_id: NewId,
                  ttl: timedelta, run_id: str | None, asker: Asker | None
                  ) -> tuple[Question, InputRequested]:
    """Q5: the question as stored, asked by a run of Clankie's or by an agent, and its
    `input_requested` event."""
    assert conversation.workspace is not None
    options = tuple(Option(new_id(), label, description) for label, description in args.options)
    question = Question(
        request_id=new_id(),
        conversation_id=conversation.conversation_id,
        kind=args.kind,
        prompt=args.prompt,
        options=options,
        allow_text=args.allow_text or args.kind is QuestionKind.TEXT,
        status=QuestionStatus.PENDING,
        incarnation=conversation.incarnation,
        workspace=conversation.workspace,
        asked_at=facts.now,
        expires_at=facts.now + ttl,
        asked_by_run=run_id,
        asker=asker,
    )
    return question, InputRequested(conversation.conversation_id, question.request_id,
                                    args.prompt, tuple(o.label for o in options), facts.now)


def _same_ask(question: Question, args: AskArgs) -> bool:
    return (question.kind is args.kind and question.prompt == args.prompt
            and tuple((o.label, o.description) for o in question.options) == args.options
            and question.allow_text == (args.allow_text or args.kind is QuestionKind.TEXT))


def _agent_refusal(conversation: Conversation, asker: Asker, facts: Facts) -> AskRefusal | None:
    """SPEC Q3 as P3 reads it for an agent's conversation."""
    if conversation.kind is not ConversationKind.AGENT or \
            conversation.agent is None or \
            conversation.agent.credential_id != asker.credential_id:
        return AskRefusal.NOT_OWNER_CONVERSATION
    return _place_refusal(conversation, facts)


def _place_refusal(conversation: Conversation, facts: Facts) -> AskRefusal | None:
    """SPEC Q3's middle, for Clankie's questions and an agent's alike: the owner, the
    workspace and the native seat, in that order."""
    if facts.owner_revoked:
        return AskRefusal.OWNER_REVOKED
    if facts.workspace is None:
        return AskRefusal.WORKSPACE_MISSING
    if conversation.workspace is None or not conversation.workspace.same_directory(
            facts.workspace):
        return AskRefusal.WORKSPACE_REPLACED
    if conversation.native_owner is not None:
        return AskRefusal.NATIVE_OWNED
    return None


def _ask_refusal(conversation: Conversation, pending: Question | None, run: Run,
                 facts: Facts) -> AskRefusal | None:
    """SPEC Q3, in its order."""
    if conversation.kind is not ConversationKind.OWNER:
        return AskRefusal.NOT_OWNER_CONVERSATION
    if (placed := _place_refusal(conversation, facts)) is not None:
        return placed
    if (run.conversation_id != conversation.conversation_id
            or run.incarnation != conversation.incarnation
            or run.status is not RunStatus.RUNNING):
        return AskRefusal.STALE_RUN
    if pending is not None:
        return AskRefusal.QUESTION_PENDING
    return None


# ------------------------------------------------------------------- answering, cancelling


def answer(
    conversation: Conversation,
    question: Question | None,
    principal: Principal,
    submission: Submission,
    facts: Facts,
    new_id: NewId,
    *,
    op: Guarded,
) -> Decision:
    """SPEC A1-A10, in their order; `op` is the op answering (`input_answer`), whose rule
    is A1's."""
    given = submission.answer
    if given is None:
        raise ValueError("an answer submission carries an answer")
    question = _which(conversation, question, principal, op, submission)
    if question.status is not QuestionStatus.PENDING:
        return _answer_to_ended(question, submission, given)
    _check_fresh(conversation, submission)
    ended = _end_on_use(conversation, question, facts, new_id)
    if ended is not None:
        return ended
    _check_valid(question, given)
    actor = Actor(principal.credential_id, principal.kind)
    if question.asker is not None:  # an agent asked: its answer starts no run (P3)
        answered, event = _end(conversation, question,
                               transition(question.status, Command.ANSWER), None, facts.now,
                               new_id, answer=given, actor=actor)
        return Decision(_change(conversation, questions=[answered], events=[event]),
                        answered.receipt)
    run_id = new_id()
    answered, event = _end(conversation, question, transition(question.status, Command.ANSWER),
                           None, facts.now, new_id, answer=given, actor=actor, run_id=run_id)
    assert answered.receipt is not None
    continuation = Run(
        run_id=run_id,
        conversation_id=conversation.conversation_id,
        kind=RunKind.CONTINUATION,
        status=RunStatus.QUEUED,
        incarnation=conversation.incarnation,
        created_at=facts.now,
        receipt_id=answered.receipt.receipt_id,
    )
    change = _change(conversation, questions=[answered], runs=[continuation],
                     events=[event, RunStatusChanged(continuation, facts.now)])
    return Decision(change, answered.receipt)


def cancel(
    conversation: Conversation,
    question: Question | None,
    principal: Principal,
    submission: Submission,
    facts: Facts,
    new_id: NewId,
    *,
    op: Guarded,
) -> Decision:
    """SPEC A12: the checks of A1 (under `op`'s rule: `input_cancel`'s), A3, A6, A7, then
    `cancelled`/`explicit` with no run. As `agent_cancel` (P4), an agent's own question,
    which only it may cancel so: the submission is made from the current state (an agent
    decides nothing a person reads)."""
    question = _which(conversation, question, principal, op, submission)
    if question.status is not QuestionStatus.PENDING:
        receipt = question.receipt
        assert receipt is not None
        if (question.status is QuestionStatus.CANCELLED and receipt.reason == Reason.EXPLICIT
                and submission.incarnation == question.incarnation):
            return Decision(receipt=receipt, duplicate=True)
        raise _closed(question, receipt)
    _check_fresh(conversation, submission)
    ended = _end_on_use(conversation, question, facts, new_id)
    if ended is not None:
        return ended
    cancelled, event = _end(conversation, question, transition(question.status, Command.CANCEL),
                            Reason.EXPLICIT, facts.now, new_id,
                            actor=Actor(principal.credential_id, principal.kind))
    return Decision(_change(conversation, questions=[cancelled], events=[event]), cancelled.receipt)


def _which(conversation: Conversation, question: Question | None, principal: Principal,
           op: Guarded, submission: Submission) -> Question:
    authorize(op, principal)  # A1
    if question is None or question.conversation_id != conversation.conversation_id:  # A3
        raise ClankieError(Code.UNKNOWN_REQUEST,
                           "no such question in this conversation's pending question or recent "
                           "receipts; it never existed or its receipt was evicted",
                           request_id=submission.request_id)
    return question


def _answer_to_ended(question: Question, submission: Submission, given: Answer) -> Decision:
    receipt = question.receipt
    assert receipt is not None
    if (question.status is QuestionStatus.ANSWERED and receipt.answer == given
            and submission.incarnation == question.incarnation):  # A4
        return Decision(receipt=receipt, duplicate=True)
    raise _closed(question, receipt)  # A5


def _closed(question: Question, receipt: Receipt) -> ClankieError:
    if question.status is QuestionStatus.ANSWERED:
        return ClankieError(Code.ALREADY_ANSWERED, "this question was already answered "
                            "differently; it is never answered twice", receipt=receipt)
    return ClankieError(Code.REQUEST_CLOSED, f"this question has ended: {question.status.value}"
                        + (f" ({receipt.reason})" if receipt.reason else ""), receipt=receipt)


def _check_fresh(conversation: Conversation, submission: Submission) -> None:
    """SPEC A6: the answer was prepared against the current incarnation and revision."""
    current = {"incarnation": conversation.incarnation, "revision": conversation.revision}
    if submission.incarnation != conversation.incarnation:
        raise ClankieError(Code.STALE_INCARNATION, "the conversation was reset since this question "
                           "was read; read it again and decide", **current)
    if submission.revision != conversation.revision:
        raise ClankieError(Code.STALE_REVISION, "the conversation moved on since this question was "
                           "read; read it again and decide", **current)


def _check_valid(question: Question, given: Answer) -> None:
    """SPEC A8."""
    if given.option_id is not None and question.option(given.option_id) is None:
        raise ClankieError(Code.INVALID_ANSWER, "option_id is not one of this question's options")
    if given.text is not None and not question.allow_text:
        raise ClankieError(Code.INVALID_ANSWER, "this question takes one of its options, not text")


# ------------------------------------------------------------ ending without an answer (E)


def expire_if_due(conversation: Conversation, pending: Question | None, now: datetime,
                  new_id: NewId) -> Change | None:
    """SPEC S5: a read after `expires_at` commits the expiry."""
    if pending is None or not pending.expired_at(now):
        return None
    ended, event = _end(conversation, pending, transition(pending.status, Command.EXPIRE),
                        Reason.EXPIRED, now, new_id)
    return _change(conversation, questions=[ended], events=[event])


def reset(conversation: Conversation, pending: Question | None, runs: Iterable[Run],
          now: datetime, new_id: NewId) -> Change:
    """`conversation_reset`: rotate the incarnation; the pending question is invalidated."""
    questions, events = _invalidate(conversation, pending, Reason.RESET, now, new_id)
    cancelled = _cancel_queued(runs, now)
    events += _run_events(cancelled, now)
    events.append(ConversationResetDone(conversation.conversation_id, now))
    return _change(replace(conversation, incarnation=new_id()), questions=questions,
                   runs=cancelled, events=events)


def native_takeover(conversation: Conversation, pending: Question | None, runs: Iterable[Run],
                    seat: str, now: datetime, new_id: NewId) -> Change:
    """Persist the native owner; the pending question and every queued run are cancelled.
    An agent's conversation has no native seat: its agent asks in it, nobody else (P3)."""
    _not_an_agents(conversation, "takes no native seat")
    questions, events = _invalidate(conversation, pending, Reason.NATIVE_TAKEOVER, now, new_id)
    cancelled = _cancel_queued(runs, now)
    events += _run_events(cancelled, now)
    return _change(replace(conversation, native_owner=seat), questions=questions, runs=cancelled,
                   events=events)


def _not_an_agents(conversation: Conversation, what: str) -> None:
    if conversation.kind is ConversationKind.AGENT:
        raise ClankieError(Code.NOT_ELIGIBLE, f"an agent's conversation {what}")


def owner_revoked(conversation: Conversation, pending: Question | None, now: datetime,
                  new_id: NewId) -> Change:
    """Known owner revocation, for each conversation of that owner."""
    questions, events = _invalidate(conversation, pending, Reason.OWNER_REVOKED, now, new_id)
    return _change(conversation, questions=questions, events=events)


def asker_revoked(conversation: Conversation, pending: Question | None, now: datetime,
                  new_id: NewId) -> Change | None:
    """The agent credential that asks in `conversation` (P3) was revoked: its pending
    question ends at once, as an owner's revocation ends the owner's, since no answer can
    reach the agent any more; None when none waits."""
    if pending is None:
        return None
    questions, events = _invalidate(conversation, pending, Reason.ASKER_REVOKED, now, new_id)
    return _change(conversation, questions=questions, events=events)


def set_workspace(conversation: Conversation, pending: Question | None,
                  workspace: WorkspaceIdentity, now: datetime, new_id: NewId) -> Change | None:
    """Rebind the workspace; a different identity invalidates the pending question. An
    agent's conversation keeps its workspace: it is the agent's one conversation of that
    workspace (P3), and a second one there would split its questions."""
    _not_an_agents(conversation, "keeps the workspace it was asked in")
    if conversation.workspace is not None and conversation.workspace.same_directory(workspace):
        return None
    questions, events = _invalidate(conversation, pending, Reason.WORKSPACE_REPLACED, now, new_id)
    return _change(replace(conversation, workspace=workspace), questions=questions, events=events)


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """SPEC R3 as data: the one statement of what a restart does to a conversation.

    Its question in a status that `questions` maps (the pending one) ends in the status it
    maps to, with `reason`, a receipt and one `InputResolved`; each run in a status that
    `runs` maps (the unfinished ones) ends in the status it maps to, with `error`, and one
    `RunStatusChanged`, oldest first after the question's; all at `now`, in one revision.
    `restart` applies it to one conversation; the store applies it to every conversation
    at once (`WriteTx.restart_all`), set-based, taking each status, reason, error and
    event body it writes from here. Built by `restart_plan` from the transition tables.
    """

    now: datetime
    questions: Mapping[QuestionStatus, QuestionStatus]
    reason: Reason
    runs: Mapping[RunStatus, RunStatus]
    error: RunError

    def __post_init__(self) -> None:
        if any(after not in QUESTION_TRANSITIONS[before].values()
               for before, after in self.questions.items()) or any(
                after not in RUN_TRANSITIONS[before].values()
                for before, after in self.runs.items()):
            raise IllegalTransition("a restart moves along the transition tables only")

    def end_question(self, conversation: Conversation, question: Question,
                     new_id: NewId) -> tuple[Question, InputResolved]:
        """The question ended by the restart, with its receipt and its event."""
        if question.status not in self.questions:
            raise IllegalTransition(f"a restart does not end a {question.status.value} question")
        ended, _ = _end(conversation, question, self.questions[question.status],
                          self.reason, self.now, new_id)
        return ended, self.resolved(question.conversation_id, question.request_id,
                                    question.status)

    def resolved(self, conversation_id: str, request_id: str,
                 status: QuestionStatus) -> InputResolved:
        """The event of a question in `status` that the restart ends."""
        return InputResolved(conversation_id, request_id, self.questions[status], self.now)

    def end_run(self, run: Run) -> Run:
        """The run ended by the restart (a run it does not end raises `KeyError`)."""
        return replace(run, status=self.runs[run.status], error=self.error,
                       finished_at=self.now)

    def run_event(self, ended: Run) -> RunStatusChanged:
        """The event of a run the restart ended (`end_run`)."""
        return RunStatusChanged(ended, self.now)

    def apply(self, conversation: Conversation, pending: Question | None,
              runs: Iterable[Run], new_id: NewId) -> Change | None:
        """The plan for one conversation; None when it ends nothing there."""
        questions: list[Question] = []
        events: list[Event] = []
        if pending is not None:
            ended, event = self.end_question(conversation, pending, new_id)
            questions, events = [ended], [event]
        orphaned = [self.end_run(r) for r in runs if r.status in self.runs]
        if not questions and not orphaned:
            return None
        return _change(conversation, questions=questions, runs=orphaned,
                       events=events + [self.run_event(r) for r in orphaned])


_State = TypeVar("_State", QuestionStatus, RunStatus)
_Command = TypeVar("_Command", Command, RunCommand)


def _moves(table: Mapping[_State, Mapping[_Command, _State]],
           command: _Command) -> dict[_State, _State]:
    """Each state that `command` leaves, and where it goes (a column of a table)."""
    return {before: row[command] for before, row in table.items() if command in row}


def restart_plan(now: datetime) -> RestartPlan:
    """SPEC R3, before serving: the pending question is cancelled (`restart`) and every
    unfinished run fails (`orphaned_by_restart`). Nothing is executed again: a failed run
    is terminal in `RUN_TRANSITIONS`."""
    return RestartPlan(now, _moves(QUESTION_TRANSITIONS, Command.RESTART), Reason.RESTART,
                       _moves(RUN_TRANSITIONS, RunCommand.FAIL), RunError.ORPHANED_BY_RESTART)


def restart(conversation: Conversation, pending: Question | None, runs: Iterable[Run],
            now: datetime, new_id: NewId) -> Change | None:
    """SPEC R3 for one conversation: `restart_plan` applied to it."""
    return restart_plan(now).apply(conversation, pending, runs, new_id)


def _invalidate(conversation: Conversation, pending: Question | None, reason: Reason, now: datetime,
                new_id: NewId) -> tuple[list[Question], list[Event]]:
    if pending is None:
        return [], []
    ended, event = _end(conversation, pending, transition(pending.status, Command.INVALIDATE),
                        reason, now, new_id)
    return [ended], [event]


# ------------------------------------------------------------------------ messages and runs


def post_message(conversation: Conversation, author: Author, text: str, now: datetime,
                 new_id: NewId, *, start_turn: bool, message_id: str | None = None,
                 partial: Partial | None = None) -> tuple[Change, Message, Run | None]:
    """A message; an owner's message in an owner conversation that no native seat owns
    queues a turn run. Text is never an answer (A2), whatever it says. An agent's
    conversation takes none: the agent reads only answers (P4), so a message there would
    reach nobody and look like a reply. A reply of Clankie's that was shown while written
    is stored under its `reply_id` (`message_id`), and says if it was cut off (D6)."""
    if conversation.kind is ConversationKind.AGENT:
        raise ClankieError(Code.NOT_ELIGIBLE, "an agent's conversation takes no messages: the "
                           "agent reads only the answer to its question")
    message = Message(message_id or new_id(), conversation.conversation_id, author, text, now,
                      partial)
    turn = None
    if (start_turn and conversation.kind is ConversationKind.OWNER
            and conversation.native_owner is None):
        turn = Run(new_id(), conversation.conversation_id, RunKind.TURN, RunStatus.QUEUED,
                   conversation.incarnation, now)
    runs = [turn] if turn else []
    change = _change(conversation, messages=[message], runs=runs,
                     events=[MessagePosted(message), *_run_events(runs, now)])
    return change, message, turn


def stop_run(conversation: Conversation, run: Run, now: datetime) -> Change | None:
    """SPEC R7, `run_cancel`: a queued or running run ends `cancelled`/`stopped_by_owner`
    with one `run_status` event; None for a run that has ended already (a duplicate stop
    returns it unchanged). A question the run asked is not touched: it was stored."""
    if not RUN_TRANSITIONS[run.status]:
        return None
    return move_run(conversation, run, RunCommand.STOP, now, RunError.STOPPED_BY_OWNER)


def move_run(conversation: Conversation, run: Run, command: RunCommand, now: datetime,
             error: str | None = None) -> Change:
    """One step of a run's lifecycle; an illegal step raises `IllegalTransition`. `error`
    is kept on a run that fails or is stopped."""
    status = run_transition(run.status, command)
    moved = replace(
        run,
        status=status,
        error=error if status in (RunStatus.FAILED, RunStatus.CANCELLED) else run.error,
        started_at=now if command is RunCommand.START else run.started_at,
        finished_at=now if status in (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)
        else run.finished_at,
    )
    return _change(conversation, runs=[moved], events=[RunStatusChanged(moved, now)])
