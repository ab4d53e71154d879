"""The run side of the service: what the executor calls, and start-up recovery.

Owns starting a committed run (A10), claiming the next run of a conversation in order
(R4), finishing runs, the `ask_question` tool (Q1-Q5), Clankie's replies, the context a
run is given (each earlier question with its outcome as of that run, R5; each owner message
whose run was stopped or failed, R9), and recovery before serving (R3). `RunHooks` names
exactly what the executor (`executor.py`) and a run's tools (`tooling.py`) use of it;
`Runs` builds its executor from itself, once, at construction (issue 32).
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property, partial
from typing import Any, Final, Protocol

from pydantic import ValidationError

from clankie import dto
from clankie.agent.context import (
    GONE,
    HISTORY,
    AnsweredQuestion,
    EndedQuestion,
    PastCall,
    PastStep,
    QuestionOutcome,
    TurnContext,
    Unfinished,
    with_outcome,
)
from clankie.agent.tools import ASK_QUESTION
from clankie.core import lifecycle
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import AskArgs, RunCommand
from clankie.core.model import (
    Author,
    InputResolved,
    Message,
    Partial,
    Question,
    QuestionKind,
    QuestionStatus,
    Run,
    RunActivity,
    RunStatus,
    ToolActivity,
    WorkspaceIdentity,
)
from clankie.core.vocabulary import Code, Reason
from clankie.settings import Settings
from clankie.store import ReadTx, WriteTx
from clankie.store.tx import QuestionEnd, ToolCallRow
from clankie.workspace.confine import FileId
from clankie.workspace.tools import Outcome

from .base import (
    Context,
    Executor,
    files_of,
    invalid_request,
    membership_of,
    storage,
    stored,
)
from .notify import HookDocument, continuation_document, document
from .showing import Publisher

log = logging.getLogger("clankie.service")
TOOL_CALLS_KEPT = 200  # per conversation: history beyond the history budget is not kept
ARGUMENTS_KEPT = 16_384  # characters of a call's arguments kept for the history

# A reply of Clankie's as a run hands it over: `(reply_id, text)`, the ID it was shown under
# while written (D2: its `message_id`), or None for words never shown.
Said = tuple[str | None, str]



@dataclass(frozen=True)
class Recovery:
    """What start-up recovery did (SPEC R3)."""

    cancelled_questions: int
    failed_runs: int


class RunHooks(Protocol):
    """What the run executor and a run's tools use of the service, and nothing else (issue
    32): the settings, the home its tools deny (W4), and the run side's steps. `Runs`
    satisfies it; the executor is built from it (`Service(executor=...)`)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def home(self) -> FileId | None: ...

    def home_files(self) -> frozenset[FileId]: ...

    @property
    def publisher(self) -> Publisher:
        """Where a run's replies are shown while written (D2, D3)."""
        ...

    def claim_next_run(self, conversation_id: str) -> Run | None: ...

    def run_context(self, run_id: str) -> TurnContext: ...

    def workspace_of(self, run_id: str) -> WorkspaceIdentity | None: ...

    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None, *,
                   said: Sequence[Said] = (), claim_next: bool = False) -> Run | None: ...

    def ask_question(self, run_id: str, arguments: Any, call: CallRecord | None = None,
                     said: Sequence[Said] = ()) -> dto.AskResult: ...

    def post_replies(self, run_id: str, said: Sequence[Said]) -> None: ...

    def record_tool_call(self, run_id: str, call: CallRecord, outcome: Outcome,
                         said: Sequence[Said] = ()) -> None: ...

    def record_model_retry(self, run_id: str, summary: str, retry_at: datetime) -> bool: ...


# How the service is given its executor: built from the run side it calls back, once.
MakeExecutor = Callable[["Runs"], Executor]


class Runs:
    """The run side: what the executor calls (`RunHooks`), starting and stopping runs,
    recovery."""

    def __init__(self, ctx: Context, executor: MakeExecutor | None) -> None:
        """`executor` builds the executor from this run side (which it calls back only once
        a run is handed to it); without it, committed runs stay queued."""
        self.ctx = ctx
        self.executor: Final = executor(self) if executor is not None else None

    @property
    def settings(self) -> Settings:
        return self.ctx.settings

    @property
    def home(self) -> FileId | None:
        """The service's own home, by identity: denied to the tools in every workspace."""
        return self.ctx.home

    def home_files(self) -> frozenset[FileId]:
        """The files in the home now, by identity: denied wherever they are linked."""
        return files_of(self.ctx.store.path, self.ctx.home)

    @cached_property
    def publisher(self) -> Publisher:
        """Runs executed in this process (tests' worlds) publish to its memory directly."""
        return Publisher(self.ctx.live.publish, self.settings, self.ctx.streaming_is)

    def run_context(self, run_id: str) -> TurnContext:
        return read_run_context(self.ctx.store.read, run_id, self.ctx.clock(),
                                self.settings.git_timeout)

    # ------------------------------------------------------------------ tool calls (W)

    def workspace_of(self, run_id: str) -> WorkspaceIdentity | None:
        return read_workspace(self.ctx.store.read, run_id)

    @stored
    def record_tool_call(self, run_id: str, call: CallRecord, outcome: Outcome,
                         said: Sequence[Said] = ()) -> None:
        """One tool call of a running run: kept for later runs' history, and shown as one
        `tool_activity` event (W9), after the words the run said before it (`said`). It
        changes nothing else: the revision stays."""
        with self.ctx.internal_write() as tx:
            run = self.ctx.load_run(tx, run_id)
            self._say(tx, run, said)
            self._record(tx, run, call, outcome)

    @stored
    def record_model_retry(self, run_id: str, summary: str, retry_at: datetime) -> bool:
        """SPEC R6, V4: a running run waits before asking the model again; one
        `run_activity` event says what failed and when the next try is, and which reply
        readers saw of the try that failed, now withdrawn (D8). A run that is no longer
        running (stopped meanwhile) records nothing: False. The revision stays."""
        with self.ctx.internal_write() as tx:
            run = self.ctx.load_run(tx, run_id)
            if run.status is not RunStatus.RUNNING:
                return False
            shown = self.ctx.live.of_run(run.conversation_id, run_id)
            withdrawn = (shown[0], len(shown[1])) if shown and shown[1] else None
            tx.append_events(run.conversation_id, [RunActivity(
                run.conversation_id, run.run_id, "model_retry", summary[:200], retry_at,
                self.ctx.clock(), withdrawn)], self.ctx.settings.event_retention)
            if shown is not None:
                tx.drop_checkpoint(run_id)
            self._settles(tx, run)
            return True

    def _record(self, tx: WriteTx, run: Run, call: CallRecord, outcome: Outcome) -> None:
        if run.status is not RunStatus.RUNNING:
            raise ClankieError(Code.NOT_ELIGIBLE, "only a running run calls tools")
        now = self.ctx.clock()
        tx.insert_tool_call(ToolCallRow(run.conversation_id, run.run_id, call.step,
                                        call.call_id[:200], call.name[:200],
                                        call.arguments[:ARGUMENTS_KEPT], outcome.text, now),
                            keep=TOOL_CALLS_KEPT)
        tx.append_events(run.conversation_id, [ToolActivity(
            run.conversation_id, run.run_id, call.name[:60], outcome.status, outcome.code,
            outcome.summary, now)], self.ctx.settings.event_retention)

    # ------------------------------------------------------------- runs (the executor's)

    def start_next(self, tx: WriteTx, conversation_id: str) -> None:
        """In the transaction that queued a run (A9, R4): start the conversation's next
        queued run, unless a run of it is running, and hand it to the executor once that
        transaction has committed (A10; no window in which it waits unseen). Without an
        executor runs stay queued."""
        if self.executor is None:
            return
        started = self._claim(tx, conversation_id)
        if started is not None:
            tx.on_commit.append(partial(self.hand, started))

    def hand(self, run: Run) -> None:
        """Hand a run, started by a transaction that has committed, to the executor; a
        failure is recorded on the run (A10)."""
        assert self.executor is not None
        try:
            self.executor.submit(run.conversation_id, run)
        except Exception as exc:  # an executor of any kind may fail; its failure is recorded
            log.error("could not start run %s: %s", run.run_id, exc)
            try:
                self.finish_run(run.run_id, RunStatus.FAILED, f"start_failed: {exc}")
            except ClankieError as err:
                log.error("run %s stays running; recovery will fail it: %s", run.run_id, err)

    def stopped(self, run_id: str) -> None:
        """Tell the executor that a running run was stopped (R7), after the commit. The
        store already refuses the run's writes; a failure here only delays the stop of
        its model call."""
        if self.executor is None:
            return
        try:
            self.executor.stop_run(run_id)
        except Exception as exc:
            log.error("could not tell the executor that run %s was stopped: %s", run_id, exc)

    @stored
    def fail_running(self, run_ids: Collection[str], error: str) -> list[Run]:
        """Fail each of these runs still running with `error` (the run process that held
        them ended), keeping what readers saw of its reply (D8), and start each one's next
        queued run in the same transaction (R4): the runs started, for the caller to `hand`
        to the executor."""
        started = []
        with self.ctx.internal_write() as tx:
            for run in tx.running_runs():
                if run.run_id not in run_ids:
                    continue
                self.keep_partial(tx, run, Partial.FAILED)
                conversation = self.ctx.conversation(tx, run.conversation_id)
                self.ctx.save(tx, lifecycle.move_run(
                    conversation, run, lifecycle.FINISHING[RunStatus.FAILED],
                    self.ctx.clock(), error))
                if (following := self._claim(tx, run.conversation_id)) is not None:
                    started.append(following)
        return started

    @stored
    def claim_next_run(self, conversation_id: str) -> Run | None:
        """SPEC R4: the oldest queued run, if no run of the conversation is running."""
        with self.ctx.internal_write() as tx:
            return self._claim(tx, conversation_id)

    def _claim(self, tx: WriteTx, conversation_id: str) -> Run | None:
        unfinished = tx.unfinished_runs(conversation_id)
        if not unfinished or unfinished[0].status is not RunStatus.QUEUED:
            return None
        change = lifecycle.move_run(self.ctx.conversation(tx, conversation_id), unfinished[0],
                                    RunCommand.START, self.ctx.clock())
        self.ctx.save(tx, change)
        return change.runs[0]

    @stored
    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None, *,
                   said: Sequence[Said] = (), claim_next: bool = False) -> Run | None:
        """End a run, after the last words it said (`said`); with `claim_next`, start the
        conversation's next queued run in the same transaction (R4) and return it. A run
        that failed keeps what readers saw of the reply it was writing (D8, `failed`)."""
        with self.ctx.internal_write() as tx:
            run = self.ctx.load_run(tx, run_id)
            self._say(tx, run, said)
            if status is RunStatus.FAILED:
                self.keep_partial(tx, run, Partial.FAILED, frozenset(reply for reply, _ in said))
            conversation = self.ctx.conversation(tx, run.conversation_id)
            self.ctx.save(tx, lifecycle.move_run(conversation, run, lifecycle.FINISHING[status],
                                                 self.ctx.clock(), error))
            return self._claim(tx, run.conversation_id) if claim_next else None

    @stored
    def ask_question(self, run_id: str, arguments: Any, call: CallRecord | None = None,
                     said: Sequence[Said] = ()) -> dto.AskResult:
        """The `ask_question` tool (SPEC Q1-Q5): returns at once; refusal is a result. With
        `call`, the call is recorded (W9) in the same transaction as the question, and so
        are the words the run said before it (`said`)."""
        try:
            parsed = dto.ASK_QUESTION_ARGS.validate_python(arguments)
        except ValidationError as exc:
            result = dto.AskResult(status="refused", reason="invalid_request",
                                   detail=invalid_request(exc).detail)
            if call is not None:
                self.record_tool_call(run_id, call, ask_outcome(result), said)
            return result
        if isinstance(parsed, dto.ChoiceAsk):
            args = AskArgs(QuestionKind.CHOICE, parsed.prompt,
                           tuple((o.label, o.description) for o in parsed.options),
                           parsed.allow_text)
        else:
            args = AskArgs(QuestionKind.TEXT, parsed.prompt)
        now = self.ctx.clock()
        with self.ctx.internal_write() as tx:
            run = self.ctx.load_run(tx, run_id)
            self._say(tx, run, said)
            conversation = self.ctx.conversation(tx, run.conversation_id)
            asked = lifecycle.ask(conversation, tx.pending_question(conversation.conversation_id),
                                  run, args, self.ctx.facts(tx, conversation, now), self.ctx.new_id,
                                  timedelta(seconds=self.ctx.settings.question_ttl))
            self.ctx.save(tx, asked.change)
            result = (dto.AskResult(status="refused", reason=asked.refused) if asked.refused
                      else dto.AskResult(status="pending", request_id=asked.request_id))
            if call is not None:
                self._record(tx, run, call, ask_outcome(result))
        return result

    @stored
    def post_replies(self, run_id: str, said: Sequence[Said]) -> None:
        """Clankie's messages from a running run, in one transaction."""
        with self.ctx.internal_write() as tx:
            self._say(tx, self.ctx.load_run(tx, run_id), said)

    def _say(self, tx: WriteTx, run: Run, said: Sequence[Said]) -> None:
        """Each reply a message of Clankie's (one change each), under the ID it was shown
        under while written, only from a running run. Every write of a run settles the
        reply it was writing: from its commit on the reply is stored, or what the write
        stores (a tool call, a question, a retry, the run's end) explains it (D5)."""
        if said and run.status is not RunStatus.RUNNING:
            raise ClankieError(Code.NOT_ELIGIBLE, "only a running run can reply")
        for reply_id, text in said:
            change, _, _ = lifecycle.post_message(
                self.ctx.conversation(tx, run.conversation_id), Author.CLANKIE, text,
                self.ctx.clock(), self.ctx.new_id, start_turn=False, message_id=reply_id)
            self.ctx.save(tx, change)
        self._settles(tx, run)

    def _settles(self, tx: WriteTx, run: Run) -> None:
        tx.on_commit.append(partial(self.ctx.live.settled, run.conversation_id, run.run_id))

    def keep_partial(self, tx: WriteTx, run: Run, how: Partial,
                     stored: frozenset[str | None] = frozenset()) -> None:
        """The run's live reply as last published, kept as a message cut off `how` (D7,
        D8) unless it is blank or stored already; it leaves memory after the commit."""
        shown = self.ctx.live.keep(run.conversation_id, run.run_id)
        if shown is not None and shown[0] not in stored and shown[1].strip():
            change, _, _ = lifecycle.post_message(
                self.ctx.conversation(tx, run.conversation_id), Author.CLANKIE, shown[1],
                self.ctx.clock(), self.ctx.new_id, start_turn=False, message_id=shown[0],
                partial=how)
            self.ctx.save(tx, change)
        self._settles(tx, run)

    # ----------------------------------------------------------- checkpoints (D9)

    def checkpoint_replies(self) -> None:
        """Every live reply published since its last checkpoint, as it stands now: on the
        store's writer (`checkpoints` hands it there, never waiting; a stop waits)."""
        live = self.ctx.live
        with self.ctx.internal_write() as tx:
            for conversation_id, run_id in live.checkpoints():
                got = live.to_checkpoint(conversation_id, run_id)
                if got is not None:
                    tx.checkpoint_reply(run_id, got[0], got[1], self.ctx.clock())

    def checkpoints(self, stopping: threading.Event) -> None:
        """Hand `checkpoint_replies` to the writer every `stream_checkpoint` seconds until
        `stopping` is set (a thread of `clankie serve`)."""
        def done(_: object, error: BaseException | None) -> None:
            if error is not None:
                log.error("the replies being written could not be checkpointed: %s", error)

        while not stopping.wait(self.settings.stream_checkpoint):
            if self.ctx.live.checkpoints():
                try:
                    self.ctx.store.submit(self.checkpoint_replies, done, urgent=False)
                except sqlite3.Error:  # closed: the service is stopping
                    return

    # ------------------------------------------------------------------------ recovery

    def recover(self) -> Recovery:
        """SPEC R3, before serving: pending questions cancelled (`restart`), unfinished runs
        failed (`orphaned_by_restart`), all conversations at once. Nothing is executed
        again. With `notify_on_resolved`, each question cancelled and each continuation
        failed is told to the hook like any other ending (R9), once its commit is made:
        in the order its events say, and never twice (a restart right after finds them
        ended already; one whose hook had not run by then is not told again)."""
        notifier = self.ctx.notifier if self.ctx.settings.notify_on_resolved else None
        told, recovery = self.ctx.on_store(partial(self._recover, notifier is not None))
        for conversation_id, doc in told:
            assert notifier is not None
            notifier.submit(conversation_id, doc)
        return recovery

    def _recover(self, telling: bool) -> tuple[list[tuple[str, HookDocument]], Recovery]:
        with self.ctx.internal_write() as tx:
            for run in tx.running_runs():  # D9: what readers saw, before the run's end
                kept = tx.reply_checkpoint(run.run_id)
                if kept is not None and kept[1].strip():
                    change, _, _ = lifecycle.post_message(
                        self.ctx.conversation(tx, run.conversation_id), Author.CLANKIE,
                        kept[1], kept[2], self.ctx.new_id, start_turn=False,
                        message_id=kept[0], partial=Partial.INTERRUPTED)
                    self.ctx.save(tx, change)
            tx.drop_checkpoints()
            ending = tx.restart_ends() if telling else []
            questions, runs = tx.restart_all(
                lifecycle.restart_plan(self.ctx.clock()),
                receipt_limit=self.ctx.settings.receipt_limit,
                event_retention=self.ctx.settings.event_retention)
            return [self._ended(tx, *end) for end in ending], Recovery(questions, runs)

    def _ended(self, tx: WriteTx, conversation_id: str, request_id: str | None,
               run_id: str | None) -> tuple[str, HookDocument]:
        """The hook's document for one of a restart's endings, read after it was written."""
        conversation = self.ctx.conversation(tx, conversation_id)
        origin = self.ctx.settings.web_origin
        if run_id is not None:
            run = self.ctx.load_run(tx, run_id)
            question = tx.question_by_receipt(run.receipt_id) if run.receipt_id else None
            return conversation_id, continuation_document(conversation, run, question, origin)
        assert request_id is not None
        question = tx.question_by_id(request_id)
        assert question is not None and question.receipt is not None
        event = InputResolved(conversation_id, request_id, question.status,
                              question.receipt.resolved_at)
        return conversation_id, document(conversation, event, question, origin)


# ----------------------------------------------------------- what a run reads, anywhere

# A read transaction's opener: the service's store, or the run process's own connections.
Reading = Callable[[], AbstractContextManager[ReadTx]]


def read_run_context(read: Reading, run_id: str, now: datetime, git_timeout: float
                     ) -> TurnContext:
    """What a run is told (agent/context.py), read in one snapshot; Git is asked after.
    Each earlier `ask_question` result that said `pending` is given with how that
    question stands as of this run (SPEC R5)."""
    with storage(), read() as tx:
        run = Context.load_run(tx, run_id)
        conversation = Context.conversation(tx, run.conversation_id)
        messages = tx.messages(run.conversation_id, HISTORY + 1)
        older, messages = len(messages) > HISTORY, messages[-HISTORY:]
        calls = tx.tool_calls_since(run.conversation_id, messages[0][0] if messages else 0)
        ends = tx.question_ends(run.conversation_id,
                                [r for r in (_asked(c) for _, c in calls) if r])
        pending = tx.pending_question(run.conversation_id)
        turn_runs = tx.turn_runs_since(run.conversation_id, messages[0][1].at) \
            if messages else []
        answered = tx.question_by_receipt(run.receipt_id) if run.receipt_id else None
        latest = tx.latest_ended_question(run.conversation_id)
        index = tx.started_before(run)
        projects = tx.projects()
    notes: tuple[str, ...] = ()
    if run.receipt_id and answered is None:
        notes = ("The answer that started this run is no longer on record (its receipt "
                 "was evicted); do not assume what it was.",)
    ended = None
    if pending is not None and pending.expired_at(now):  # ended as of this run (S5)
        ended = EndedQuestion(pending.prompt, QuestionStatus.EXPIRED.value, None)
        pending = None
    elif (pending is None and latest is not None
          and latest.status is not QuestionStatus.ANSWERED):
        assert latest.receipt is not None
        ended = EndedQuestion(latest.prompt, latest.status.value, latest.receipt.reason)
    outcomes = {request_id: _outcome(end, now) for request_id, end in ends.items()}
    fact = membership_of(conversation, projects, git_timeout)
    return TurnContext(
        run_kind=run.kind.value,
        run_index=index,
        workspace=conversation.workspace.path if conversation.workspace else "-",
        history=tuple((m.author.value, cut_off(m)) for _, m in messages),
        older_messages=older,
        unfinished=_unfinished([m for _, m in messages], turn_runs),
        steps=_steps([position for position, _ in messages], calls, outcomes),
        membership=fact.as_dict() if fact else None,
        answered=_answered(answered) if answered else None,
        ended=ended,
        pending_prompt=pending.prompt if pending else None,
        notes=notes)


CUT_OFF: Final = {  # SPEC D10: the line after a partial message, as the model reads it
    Partial.STOPPED: "[cut off here: the owner stopped this reply]",
    Partial.FAILED: "[cut off here: the model call failed]",
    Partial.INTERRUPTED: "[cut off here: clankie restarted; what followed was lost]"}


def cut_off(message: Message) -> str:
    """A message as the model reads it: a partial one followed by the line that says it
    was cut off (D10), never passed off as complete."""
    if message.partial is None:
        return message.text
    return f"{message.text}\n{CUT_OFF[message.partial]}"


def read_workspace(read: Reading, run_id: str) -> WorkspaceIdentity | None:
    """The workspace a run's conversation is bound to now (checked again on use, W8)."""
    with storage(), read() as tx:
        run = Context.load_run(tx, run_id)
        return Context.conversation(tx, run.conversation_id).workspace


@dataclass(frozen=True)
class CallRecord:
    """Which tool call of a run is being recorded: its model step, ID, name, arguments."""

    step: int
    call_id: str
    name: str
    arguments: str


def ask_outcome(result: dto.AskResult) -> Outcome:
    """An `ask_question` result as the model reads it and as its activity says it."""
    payload = result.model_dump(exclude_none=True)
    if result.status == "pending":
        return Outcome(payload, "ok", None, f"asked question {result.request_id}")
    return Outcome(payload, "refused", result.reason, f"ask_question: refused {result.reason}")


def _asked(call: ToolCallRow) -> str | None:
    """The request ID of an `ask_question` call whose result said `pending`, else None."""
    if call.name != ASK_QUESTION:
        return None
    try:
        result = json.loads(call.result)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(result, dict) or result.get("status") != "pending":
        return None
    request_id = result.get("request_id")
    return request_id if isinstance(request_id, str) else None


def _outcome(end: QuestionEnd, now: datetime) -> QuestionOutcome:
    """How a question stands as of a run at `now`: a pending one past its TTL is expired
    (S5: it can no longer be answered; the store commits that on its next use)."""
    if end.status is QuestionStatus.PENDING and now >= end.expires_at:
        return QuestionOutcome(QuestionStatus.EXPIRED.value, Reason.EXPIRED)
    if end.status is QuestionStatus.ANSWERED:
        return QuestionOutcome(
            end.status.value, answer=end.option_label if end.option_label is not None
            else end.text or "", by_option=end.option_label is not None,
            answered_by=end.answered_by.value if end.answered_by else None,
            unfinished=end.continuation)
    return QuestionOutcome(end.status.value, end.reason)


def _steps(positions: list[int], calls: list[tuple[int, ToolCallRow]],
           outcomes: dict[str, QuestionOutcome] | None = None) -> tuple[PastStep, ...]:
    """Tool calls grouped by model step, each placed after the messages before it; an
    `ask_question` result that said `pending` carries its question's outcome (R5), or says
    that question is no longer on record."""
    steps: list[PastStep] = []
    key = None
    for after_message, call in calls:
        request_id = _asked(call)
        result = call.result if request_id is None else with_outcome(
            call.result, (outcomes or {}).get(request_id, GONE))
        past = PastCall(call.call_id, call.name, call.arguments, result)
        if (call.run_id, call.step) == key:
            steps[-1] = PastStep(steps[-1].after, (*steps[-1].calls, past))
        else:
            key = (call.run_id, call.step)
            steps.append(PastStep(sum(p <= after_message for p in positions), (past,)))
    return tuple(steps)


def _unfinished(messages: list[Message], turn_runs: list[Run]) -> tuple[Unfinished, ...]:
    """The owner messages whose turn run was stopped or failed (SPEC R9). A message and
    the turn run it queued are written in one transaction with the same time; where a
    coarse clock gives several the same time, they pair in order, newest first (the
    window holds the newest messages)."""
    at: dict[datetime, list[Run]] = {}
    for turn in turn_runs:
        at.setdefault(turn.created_at, []).append(turn)
    found = []
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.author is Author.OWNER and (same := at.get(message.at)):
            turn = same.pop()
            if turn.status in (RunStatus.CANCELLED, RunStatus.FAILED):
                found.append(Unfinished(index, turn.status.value, turn.error))
    return tuple(reversed(found))


def _answered(question: Question) -> AnsweredQuestion:
    receipt = question.receipt
    assert receipt is not None and receipt.answer is not None
    option = question.option(receipt.answer.option_id) if receipt.answer.option_id else None
    return AnsweredQuestion(
        prompt=question.prompt,
        options=tuple(o.label for o in question.options),
        answer=option.label if option else (receipt.answer.text or ""),
        by_option=option is not None,
        answered_by=receipt.answered_by.kind.value if receipt.answered_by else "owner")


