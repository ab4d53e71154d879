"""The service: one method per dispatcher operation, plus the run hooks and start-up recovery.

Owns the order of every operation: validate the input (`clankie.dto`), open one
transaction, authenticate the token and authorize the op in it, load, let `clankie.core`
decide, save, commit, and only then act on the outside (start a run, wake long-polls).
It knows nothing of HTTP: `call(op, token, payload)` is the whole entry point.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from clankie import dto
from clankie.agent.context import HISTORY, AnsweredQuestion, EndedQuestion, TurnContext
from clankie.core import lifecycle
from clankie.core.authority import WHO_MAY, authorize
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import AskArgs, Change, Facts, RunCommand, Submission
from clankie.core.model import (
    Answer,
    Author,
    Conversation,
    ConversationKind,
    CredentialKind,
    DeviceMode,
    Principal,
    Question,
    QuestionKind,
    Run,
    RunStatus,
    Status,
    WorkspaceIdentity,
    iso,
)
from clankie.settings import Settings
from clankie.store import Store, Tx
from clankie.store.tx import CredentialRow, LeaseRow, ProjectRow
from clankie.workspace.identity import identify, identify_saved
from clankie.workspace.membership import Membership, membership

from . import views
from .credentials import authenticate, new_token, token_hash

log = logging.getLogger("clankie.service")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_uuid() -> str:
    return str(uuid.uuid4())


class Executor(Protocol):
    """Where queued runs are handed after their commit (the agent runtime)."""

    def submit(self, conversation_id: str, run_id: str) -> None: ...


assert dto.OPS.keys() == WHO_MAY.keys()


@dataclass
class _Call:
    tx: Tx
    principal: Principal
    now: datetime
    raise_after_commit: ClankieError | None = None


@dataclass(frozen=True)
class Recovery:
    """What start-up recovery did (SPEC R3)."""

    cancelled_questions: int
    failed_runs: int


@dataclass
class Service:
    store: Store
    settings: Settings = field(default_factory=Settings)
    clock: Callable[[], datetime] = utcnow
    new_id: Callable[[], str] = new_uuid
    executor: Executor | None = None

    def __post_init__(self) -> None:
        self._changed = threading.Condition()
        self._generation = 0
        self._stopping = False
        self._waiting = 0

    # ---------------------------------------------------------------------- entry point

    def call(self, op: str, token: str | None, payload: Any) -> BaseModel:
        """Perform `op` for the holder of `token`; raise `ClankieError` on any refusal."""
        spec = dto.OPS.get(op)
        if spec is None:
            raise ClankieError("not_found", f"there is no operation {op!r}")
        if not isinstance(payload, Mapping):
            raise ClankieError("invalid_request", "the request body must be a JSON object")
        try:
            request = spec.input.model_validate(payload)
        except ValidationError as exc:
            raise invalid_request(exc) from None
        handler: Callable[[str | None, Any], BaseModel] = getattr(self, op)
        return handler(token, request)

    def init_owner(self, *, reissue: bool = False) -> str | None:
        """Create the owner and a first operator token, unless a live owner exists.

        With `reissue`, a live owner gets one more operator token (for a lost token file).
        """
        now = self.clock()
        with self._storage(), self.store.write() as tx:
            owner_id = tx.active_owner()
            if owner_id is not None and not reissue:
                return None
            if owner_id is None:
                owner_id = self.new_id()
                tx.insert_owner(owner_id, now)
            return self._issue(tx, owner_id, CredentialKind.OPERATOR, None, "operator", now).token

    def has_owner(self) -> bool:
        with self._storage(), self.store.read() as tx:
            return tx.active_owner() is not None

    @property
    def waiting(self) -> int:
        """How many long-polls are waiting now."""
        with self._changed:
            return self._waiting

    def stop_waiting(self) -> None:
        """Shutting down: every long-poll returns now, and new ones do not wait."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()

    # ------------------------------------------------------------------- transactions

    @contextmanager
    def _storage(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            log.error("storage failure: %s", exc)
            raise ClankieError("storage_unavailable",
                               "the store could not complete this operation; nothing changed",
                               ) from exc

    @contextmanager
    def _write(self, op: str, token: str | None) -> Iterator[_Call]:
        """One write transaction, with the caller authenticated and authorized inside it."""
        now = self.clock()
        with self._storage(), self.store.write() as tx:
            principal = authenticate(tx, token, now)
            authorize(op, principal)
            call = _Call(tx, principal, now)
            try:
                yield call
            except ClankieError as err:
                raise views.error(tx, err) from None
        self._notify()
        if call.raise_after_commit is not None:
            raise call.raise_after_commit

    @contextmanager
    def _read(self, op: str, token: str | None) -> Iterator[_Call]:
        now = self.clock()
        with self._storage(), self.store.read() as tx:
            principal = authenticate(tx, token, now)
            authorize(op, principal)
            yield _Call(tx, principal, now)

    def _notify(self) -> None:
        with self._changed:
            self._generation += 1
            self._changed.notify_all()

    def _save(self, tx: Tx, change: Change | None) -> None:
        if change is not None:
            tx.save(change, receipt_limit=self.settings.receipt_limit,
                    event_retention=self.settings.event_retention)

    @staticmethod
    def _conversation(tx: Tx, conversation_id: str, owner_id: str | None = None) -> Conversation:
        """The conversation, if it exists and (for a caller) belongs to the caller's owner."""
        conversation = tx.conversation(conversation_id)
        if conversation is None or owner_id not in (None, conversation.owner_id):
            raise ClankieError("not_found", "there is no such conversation",
                               conversation_id=conversation_id)
        return conversation

    @staticmethod
    def _facts(tx: Tx, conversation: Conversation, now: datetime) -> Facts:
        workspace = identify_saved(conversation.workspace) if conversation.workspace else None
        return Facts(now, tx.owner_revoked(conversation.owner_id), workspace)

    # ------------------------------------------------------------------- conversations

    def conversation_create(self, token: str | None,
                            r: dto.ConversationCreate) -> dto.ConversationOut:
        kind = ConversationKind(r.kind)
        with self._write("conversation_create", token) as c:
            workspace = _existing_dir(r.workspace, "workspace") if r.workspace else None
            if kind is ConversationKind.OWNER and workspace is None:
                raise ClankieError("invalid_request", "an owner conversation needs a workspace")
            conversation = Conversation(self.new_id(), kind, c.principal.owner_id, workspace,
                                        self.new_id(), 1, None, c.now)
            c.tx.insert_conversation(conversation)
            return views.conversation(conversation)

    def conversation_get(self, token: str | None, r: dto.ConversationRef) -> dto.ConversationOut:
        """The conversation, with the membership fact (section 9) of an owner conversation."""
        with self._read("conversation_get", token) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            projects = c.tx.projects()
        fact = self._membership(conversation, projects)  # Git runs outside any transaction
        return views.conversation(conversation, fact)

    def _membership(self, conversation: Conversation,
                    projects: list[ProjectRow]) -> Membership | None:
        if conversation.kind is not ConversationKind.OWNER or conversation.workspace is None:
            return None
        return membership(conversation.workspace,
                          [(p.project_id, p.root) for p in projects], self.settings.git_timeout)

    def run_context(self, run_id: str) -> TurnContext:
        """What a run is told (agent/context.py), read in one snapshot; Git is asked after."""
        with self._storage(), self.store.read() as tx:
            run = self._run(tx, run_id)
            conversation = self._conversation(tx, run.conversation_id)
            history = tuple((m.author.value, m.text)
                            for m in tx.messages(run.conversation_id, HISTORY))
            pending = tx.pending_question(run.conversation_id)
            answered = tx.question_by_receipt(run.receipt_id) if run.receipt_id else None
            latest = tx.latest_ended_question(run.conversation_id)
            index = tx.started_before(run)
            projects = tx.projects()
        notes = ()
        if run.receipt_id and answered is None:
            notes = ("The answer that started this run is no longer on record (its receipt "
                     "was evicted); do not assume what it was.",)
        ended = None
        if pending is None and latest is not None and latest.status is not Status.ANSWERED:
            assert latest.receipt is not None
            ended = EndedQuestion(latest.prompt, latest.status.value, latest.receipt.reason)
        fact = self._membership(conversation, projects)
        return TurnContext(
            run_kind=run.kind.value,  # type: ignore[arg-type]
            run_index=index,
            workspace=conversation.workspace.path if conversation.workspace else "-",
            history=history,
            membership=fact.as_dict() if fact else None,
            answered=_answered(answered) if answered else None,
            ended=ended,
            pending_prompt=pending.prompt if pending else None,
            notes=notes)

    def conversation_list(self, token: str | None, r: dto.Nothing) -> dto.ConversationsOut:
        with self._read("conversation_list", token) as c:
            return dto.ConversationsOut(conversations=[
                views.conversation(x) for x in c.tx.conversations(c.principal.owner_id)])

    def conversation_send(self, token: str | None, r: dto.ConversationSend) -> dto.SendOut:
        with self._write("conversation_send", token) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change, message, turn = lifecycle.post_message(
                conversation, Author.OWNER, r.text, c.now, self.new_id, start_turn=True)
            self._save(c.tx, change)
        if turn is not None:
            self._start(r.conversation_id, turn.run_id)
        return dto.SendOut(message_id=message.message_id, run_id=turn.run_id if turn else None)

    def conversation_reset(self, token: str | None, r: dto.ConversationRef) -> dto.ResetOut:
        with self._write("conversation_reset", token) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change = lifecycle.reset(conversation, c.tx.pending_question(r.conversation_id),
                                     c.tx.unfinished_runs(r.conversation_id), c.now, self.new_id)
            self._save(c.tx, change)
            return dto.ResetOut(incarnation=change.conversation.incarnation,
                                revision=change.conversation.revision)

    def conversation_set_workspace(self, token: str | None,
                                   r: dto.ConversationSetWorkspace) -> dto.ConversationOut:
        with self._write("conversation_set_workspace", token) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            workspace = _existing_dir(r.workspace, "workspace")
            change = lifecycle.set_workspace(conversation,
                                             c.tx.pending_question(r.conversation_id),
                                             workspace, c.now, self.new_id)
            self._save(c.tx, change)
            return views.conversation(change.conversation if change else conversation)

    def native_takeover(self, token: str | None, r: dto.NativeTakeover) -> dto.ConversationOut:
        with self._write("native_takeover", token) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change = lifecycle.native_takeover(
                conversation, c.tx.pending_question(r.conversation_id),
                c.tx.unfinished_runs(r.conversation_id), r.seat, c.now, self.new_id)
            self._save(c.tx, change)
            return views.conversation(change.conversation)

    def room_post(self, token: str | None, r: dto.RoomPost) -> dto.MessageOut:
        with self._write("room_post", token) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            if conversation.kind is not ConversationKind.ROOM:
                raise ClankieError("not_eligible", "room_post takes a room conversation")
            change, message, _ = lifecycle.post_message(
                conversation, Author.ROOM, r.text, c.now, self.new_id, start_turn=False)
            self._save(c.tx, change)
            return dto.MessageOut(message_id=message.message_id)

    def pane_metadata_set(self, token: str | None, r: dto.PaneMetadataSet) -> dto.Empty:
        with self._write("pane_metadata_set", token) as c:
            self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            c.tx.set_pane_metadata(r.conversation_id, r.key, r.value, c.now)
            return dto.Empty()

    def project_register(self, token: str | None, r: dto.ProjectRegister) -> dto.ProjectOut:
        with self._write("project_register", token) as c:
            root = _existing_dir(r.root, "root")
            project = ProjectRow(self.new_id(), r.name, root, c.now)
            c.tx.insert_project(project)
            return dto.ProjectOut(project_id=project.project_id)

    # -------------------------------------------------------------------------- events

    def events_tail(self, token: str | None, r: dto.EventsTail) -> dto.EventsOut:
        """SPEC V1: events after `after`; waits up to `wait_ms` for one when there are none."""
        deadline = time.monotonic() + r.wait_ms / 1000
        while True:
            with self._changed:
                generation = self._generation
            with self._read("events_tail", token) as c:
                self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
                page = c.tx.events_after(r.conversation_id, r.after, r.limit)
            trimmed = r.after < page.trimmed_through
            remaining = deadline - time.monotonic()
            if page.events or trimmed or remaining <= 0 or self._stopping:
                return dto.EventsOut(
                    events=page.events,
                    next_after=page.events[-1]["seq"] if page.events else r.after,
                    oldest_seq=page.trimmed_through + 1,
                    trimmed=trimmed)
            with self._changed:
                self._waiting += 1
                try:
                    self._changed.wait_for(
                        lambda g=generation: self._generation != g or self._stopping, remaining)
                finally:
                    self._waiting -= 1

    def run_get(self, token: str | None, r: dto.RunRef) -> dto.RunOut:
        with self._read("run_get", token) as c:
            run = self._run(c.tx, r.run_id)
            self._conversation(c.tx, run.conversation_id, c.principal.owner_id)
            return views.run(run)

    # -------------------------------------------------------------- credentials, devices

    def _issue(self, tx: Tx, owner_id: str, kind: CredentialKind, mode: DeviceMode | None,
               name: str, now: datetime) -> dto.TokenOut:
        token = new_token()
        row = CredentialRow(self.new_id(), owner_id, kind, mode, name, token_hash(token), now,
                            None)
        tx.insert_credential(row)
        return dto.TokenOut(credential_id=row.credential_id, token=token)

    def device_pair(self, token: str | None, r: dto.DevicePair) -> dto.TokenOut:
        with self._write("device_pair", token) as c:
            return self._issue(c.tx, c.principal.owner_id, CredentialKind.DEVICE,
                               DeviceMode(r.mode), r.name, c.now)

    def credential_issue(self, token: str | None, r: dto.CredentialIssue) -> dto.TokenOut:
        with self._write("credential_issue", token) as c:
            return self._issue(c.tx, c.principal.owner_id, CredentialKind(r.kind), None, r.name,
                               c.now)

    def credential_rotate(self, token: str | None, r: dto.CredentialRotate) -> dto.TokenOut:
        with self._write("credential_rotate", token) as c:
            target = r.credential_id or c.principal.credential_id
            if target != c.principal.credential_id and \
                    c.principal.kind is not CredentialKind.OPERATOR:
                raise ClankieError("forbidden", "only an operator rotates another credential")
            row = c.tx.credential(target)
            if row is None or row.owner_id != c.principal.owner_id:
                raise ClankieError("not_found", "there is no such credential")
            fresh = new_token()
            c.tx.replace_token(target, token_hash(fresh), c.now)
            return dto.TokenOut(credential_id=target, token=fresh)

    def credential_list(self, token: str | None, r: dto.Nothing) -> dto.CredentialsOut:
        with self._read("credential_list", token) as c:
            lease = c.tx.lease()
            holder = lease.credential_id if lease and c.now < lease.expires_at else None
            return dto.CredentialsOut(credentials=[
                dto.CredentialOut(
                    credential_id=row.credential_id, kind=row.kind.value,  # type: ignore[arg-type]
                    mode=row.mode.value if row.mode else None,  # type: ignore[arg-type]
                    name=row.name, created_at=iso(row.created_at),
                    rotated_at=iso(row.rotated_at) if row.rotated_at else None,
                    holds_lease=row.credential_id == holder)
                for row in c.tx.credentials() if row.owner_id == c.principal.owner_id])

    def device_take_control(self, token: str | None, r: dto.DeviceTakeControl) -> dto.LeaseOut:
        with self._write("device_take_control", token) as c:
            ttl = r.ttl_s if r.ttl_s is not None else self.settings.take_control_ttl
            lease = LeaseRow(self.new_id(), c.principal.credential_id, c.now,
                             c.now + timedelta(seconds=ttl))
            c.tx.set_lease(lease)  # supersedes any other device's lease
            return dto.LeaseOut(lease_id=lease.lease_id, expires_at=iso(lease.expires_at))

    def device_release(self, token: str | None, r: dto.Nothing) -> dto.Empty:
        with self._write("device_release", token) as c:
            c.tx.clear_lease(c.principal.credential_id)
            return dto.Empty()

    def owner_revoke(self, token: str | None, r: dto.Nothing) -> dto.Empty:
        """Known owner revocation: every pending question of the owner ends at once."""
        with self._write("owner_revoke", token) as c:
            owner_id = c.principal.owner_id
            c.tx.revoke_owner(owner_id, c.now)
            for conversation in c.tx.conversations(owner_id):
                pending = c.tx.pending_question(conversation.conversation_id)
                self._save(c.tx, lifecycle.owner_revoked(conversation, pending, c.now,
                                                         self.new_id))
            return dto.Empty()

    # ----------------------------------------------------------------------- questions

    def input_get(self, token: str | None, r: dto.InputGet) -> dto.Snapshot:
        """SPEC S1-S5: the snapshot, read from current state; expiry is committed on read."""
        with self._write("input_get", token) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            pending = c.tx.pending_question(r.conversation_id)
            expired = lifecycle.expire_if_due(conversation, pending, c.now, self.new_id)
            if expired is not None:
                self._save(c.tx, expired)
                conversation, pending = expired.conversation, None
            request = None
            if r.request_id is not None:
                request = c.tx.question(r.conversation_id, r.request_id)
                if request is None:
                    raise ClankieError("unknown_request", "no such question in this "
                                       "conversation, or its receipt was evicted",
                                       request_id=r.request_id)
            return dto.Snapshot(
                conversation_id=conversation.conversation_id,
                incarnation=conversation.incarnation,
                revision=conversation.revision,
                pending=views.question(c.tx, pending) if pending else None,
                request=views.question(c.tx, request) if request else None)

    def input_answer(self, token: str | None, r: dto.InputAnswer) -> dto.AnswerReply:
        submission = Submission(r.request_id, r.incarnation, r.revision,
                                Answer(option_id=r.option_id, text=r.text))
        return self._resolve("input_answer", token, r.conversation_id, submission)

    def input_cancel(self, token: str | None, r: dto.InputCancel) -> dto.AnswerReply:
        submission = Submission(r.request_id, r.incarnation, r.revision)
        return self._resolve("input_cancel", token, r.conversation_id, submission)

    def _resolve(self, op: str, token: str | None, conversation_id: str,
                 submission: Submission) -> dto.AnswerReply:
        decide = lifecycle.answer if submission.answer is not None else lifecycle.cancel
        with self._write(op, token) as c:
            conversation = self._conversation(c.tx, conversation_id, c.principal.owner_id)
            question = c.tx.question(conversation_id, submission.request_id)
            decision = decide(conversation, question, c.principal, submission,
                              self._facts(c.tx, conversation, c.now), self.new_id)
            self._save(c.tx, decision.change)
            if decision.error is not None:
                c.raise_after_commit = views.error(c.tx, decision.error)
            assert decision.receipt is not None or decision.error is not None
            receipt = decision.receipt
        assert receipt is not None
        if receipt.run_id is not None and not decision.duplicate:
            self._start(conversation_id, receipt.run_id)  # A10: after the commit, never before
        with self._storage(), self.store.read() as tx:
            return dto.AnswerReply(receipt=views.receipt(tx, receipt),
                                   duplicate=decision.duplicate)

    # ------------------------------------------------------------- runs (the executor's)

    def _start(self, conversation_id: str, run_id: str) -> None:
        """Hand a committed queued run to the executor; a failure is recorded on the run."""
        if self.executor is None:
            return
        try:
            self.executor.submit(conversation_id, run_id)
        except Exception as exc:  # an executor of any kind may fail; its failure is recorded
            log.error("could not start run %s: %s", run_id, exc)
            try:
                self.finish_run(run_id, RunStatus.FAILED, f"start_failed: {exc}")
            except ClankieError as err:
                log.error("run %s stays queued; recovery will fail it: %s", run_id, err)

    def claim_next_run(self, conversation_id: str) -> Run | None:
        """SPEC R4: the oldest queued run, if no run of the conversation is running."""
        with self._storage(), self.store.write() as tx:
            conversation = self._conversation(tx, conversation_id)
            unfinished = tx.unfinished_runs(conversation_id)
            if not unfinished or unfinished[0].status is not RunStatus.QUEUED:
                return None
            change = lifecycle.move_run(conversation, unfinished[0], RunCommand.START,
                                        self.clock())
            self._save(tx, change)
        self._notify()
        return change.runs[0]

    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None) -> Run:
        command = {RunStatus.SUCCEEDED: RunCommand.SUCCEED, RunStatus.FAILED: RunCommand.FAIL,
                   RunStatus.CANCELLED: RunCommand.CANCEL}[status]
        with self._storage(), self.store.write() as tx:
            run = self._run(tx, run_id)
            change = lifecycle.move_run(self._conversation(tx, run.conversation_id), run,
                                        command, self.clock(), error)
            self._save(tx, change)
        self._notify()
        return change.runs[0]

    @staticmethod
    def _run(tx: Tx, run_id: str) -> Run:
        run = tx.run(run_id)
        if run is None:
            raise ClankieError("not_found", "there is no such run", run_id=run_id)
        return run

    def ask_question(self, run_id: str, arguments: Any) -> dto.AskResult:
        """The `ask_question` tool (SPEC Q1-Q5): returns at once; refusal is a result."""
        try:
            parsed = dto.ASK_QUESTION_ARGS.validate_python(arguments)
        except ValidationError as exc:
            return dto.AskResult(status="refused", reason="invalid_request",
                                 detail=invalid_request(exc).detail)
        if isinstance(parsed, dto.ChoiceAsk):
            args = AskArgs(QuestionKind.CHOICE, parsed.prompt,
                           tuple((o.label, o.description) for o in parsed.options),
                           parsed.allow_text)
        else:
            args = AskArgs(QuestionKind.TEXT, parsed.prompt)
        now = self.clock()
        with self._storage(), self.store.write() as tx:
            run = self._run(tx, run_id)
            conversation = self._conversation(tx, run.conversation_id)
            asked = lifecycle.ask(conversation, tx.pending_question(conversation.conversation_id),
                                  run, args, self._facts(tx, conversation, now), self.new_id,
                                  timedelta(seconds=self.settings.question_ttl))
            self._save(tx, asked.change)
        self._notify()
        if asked.refused is not None:
            return dto.AskResult(status="refused", reason=asked.refused)
        return dto.AskResult(status="pending", request_id=asked.request_id)

    def post_reply(self, run_id: str, text: str) -> str:
        """Clankie's message from a running run; returns its message ID."""
        with self._storage(), self.store.write() as tx:
            run = self._run(tx, run_id)
            if run.status is not RunStatus.RUNNING:
                raise ClankieError("not_eligible", "only a running run can reply")
            change, message, _ = lifecycle.post_message(
                self._conversation(tx, run.conversation_id), Author.CLANKIE, text,
                self.clock(), self.new_id, start_turn=False)
            self._save(tx, change)
        self._notify()
        return message.message_id

    # ------------------------------------------------------------------------ recovery

    def recover(self) -> Recovery:
        """SPEC R3, before serving: pending questions cancelled (`restart`), unfinished runs
        failed (`orphaned_by_restart`). Nothing is executed again."""
        now = self.clock()
        questions = runs = 0
        with self._storage(), self.store.write() as tx:
            pending = {q.conversation_id: q for q in tx.pending_questions()}
            unfinished: dict[str, list[Run]] = {}
            for run in tx.unfinished_runs():
                unfinished.setdefault(run.conversation_id, []).append(run)
            for conversation_id in sorted(pending.keys() | unfinished.keys()):
                change = lifecycle.restart(self._conversation(tx, conversation_id),
                                           pending.get(conversation_id),
                                           unfinished.get(conversation_id, []), now, self.new_id)
                self._save(tx, change)
                questions += conversation_id in pending
                runs += len(unfinished.get(conversation_id, []))
        self._notify()
        return Recovery(questions, runs)


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


def invalid_request(exc: ValidationError) -> ClankieError:
    """A pydantic error as `invalid_request`: where and what, never the input's value."""
    errors = [{"loc": ".".join(str(p) for p in e["loc"]) or "(body)", "msg": e["msg"]}
              for e in exc.errors(include_url=False, include_input=False)]
    detail = "; ".join(f"{e['loc']}: {e['msg']}" for e in errors)
    return ClankieError("invalid_request", detail, errors=errors)


def _existing_dir(path: str, what: str) -> WorkspaceIdentity:
    if not path.startswith("/"):
        raise ClankieError("invalid_request", f"{what} must be an absolute path")
    identity = identify(path)
    if identity is None:
        raise ClankieError("invalid_request", f"{what} {path!r} is not an existing directory")
    return identity
