"""The service: one method per dispatcher operation.

Owns the order of every operation: validate the input (`clankie.dto`), open one
transaction, authenticate the token and authorize the op in it, load, let `clankie.core`
decide, save, commit, and only then act on the outside (start a run, wake long-polls).
It knows nothing of HTTP: `call(op, token, payload)` is the whole entry point (the method
marked `@op` with the op's name serves it, authorized under that op's rule), and
`open_tail` the same for `events_tail` by a caller that waits in its own way (the HTTP
edge, without a thread). The run side is `runs.py`; transactions and shared lookups are
`base.py`; long-poll waiting and its slots are `longpoll.py`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError

from clankie import __version__, dto
from clankie.agent.providers import model_in_use
from clankie.core import lifecycle
from clankie.core.authority import WHO_MAY
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import Submission
from clankie.core.model import (
    Answer,
    Author,
    Conversation,
    ConversationKind,
    CredentialKind,
    DeviceMode,
    RunStatus,
    WorkspaceIdentity,
    iso,
)
from clankie.core.vocabulary import Code
from clankie.settings import shown as settings_shown
from clankie.store import ReadTx, WriteTx
from clankie.store.tx import CredentialRow, LeaseRow, PairingRow, ProjectRow
from clankie.workspace.identity import identify

from . import views
from .base import OPS_SERVED, Call, Caller, invalid_request, op, storage
from .credentials import (
    PAIRING_TTL,
    authenticate,
    confirmation_word,
    new_pairing_code,
    new_token,
    token_hash,
)
from .longpoll import Tail, Wake
from .runs import RunHooks


@dataclass(frozen=True, slots=True)
class DeviceStatus:
    credential_id: str
    name: str
    kind: str
    mode: str | None
    lease_expires_at: str | None  # set while this credential holds Take Control


class Service(RunHooks):
    def call(self, op: str, token: str | None, payload: Any) -> BaseModel:
        """Perform `op` for the holder of `token`; raise `ClankieError` on any refusal."""
        request = _validated(op, payload)
        return OPS_SERVED[op](self, Caller(op, token), request)

    def authenticate(self, token: str | None) -> None:
        """Refuse `unauthenticated` unless `token` is a live credential (T6: the edge asks
        this before it reads a request's body, so a stranger's body is never parsed)."""
        now = self.clock()
        with storage(), self.store.read() as tx:
            authenticate(tx, token, now)

    def open_tail(self, token: str | None, payload: Any, wake: Wake) -> Tail:
        """`events_tail` for a caller that waits in its own way: validated here (no I/O),
        then read with `Tail.read` as `longpoll.py` says; `wake` is called on a commit
        thread when there may be something new."""
        op = Service.events_tail.__name__  # the op named once: by its method
        request: dto.EventsTail = _validated(op, payload)
        return self._tail(Caller(op, token), request, wake)

    def init_owner(self, *, reissue: bool = False) -> str | None:
        """Create the owner and a first operator token, unless a live owner exists.

        With `reissue`, a live owner gets one more operator token (for a lost token file).
        """
        now = self.clock()
        with self._internal_write() as tx:
            owner_id = tx.active_owner()
            if owner_id is not None and not reissue:
                return None
            if owner_id is None:
                owner_id = self.new_id()
                tx.insert_owner(owner_id, now)
            return self._issue(tx, owner_id, CredentialKind.OPERATOR, None, "operator", now).token

    # ------------------------------------------------------------------- conversations

    @op
    def conversation_create(self, caller: Caller,
                            r: dto.ConversationCreate) -> dto.ConversationOut:
        kind = ConversationKind(r.kind)
        with self._write(caller) as c:
            workspace = _existing_dir(r.workspace, "workspace") if r.workspace else None
            if kind is ConversationKind.OWNER and workspace is None:
                raise ClankieError(Code.INVALID_REQUEST, "an owner conversation needs a workspace")
            conversation = Conversation(self.new_id(), kind, c.principal.owner_id, workspace,
                                        self.new_id(), 1, None, c.now)
            c.tx.insert_conversation(conversation)
            return views.conversation(conversation)

    @op
    def conversation_get(self, caller: Caller, r: dto.ConversationRef) -> dto.ConversationOut:
        """The conversation, with the membership fact (section 9) of an owner conversation."""
        with self._read(caller) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            projects = c.tx.projects()
            unfinished = c.tx.unfinished_runs(r.conversation_id)
        fact = self._membership(conversation, projects)  # Git runs outside any transaction
        return views.conversation(conversation, fact, unfinished)

    @op
    def conversation_list(self, caller: Caller, r: dto.ConversationList
                          ) -> dto.ConversationsOut:
        """A page of the caller's conversations, latest activity first; its cost grows
        with the page, not with history."""
        with self._read(caller) as c:
            page = c.tx.conversation_page(c.principal.owner_id, r.limit + 1,
                                          int(r.after) if r.after else None, r.prefix)
        more = len(page) > r.limit
        page = page[:r.limit]
        return dto.ConversationsOut(
            conversations=[views.conversation(x) for _, x in page],
            next_after=str(page[-1][0]) if more else None)

    @op
    def conversation_send(self, caller: Caller, r: dto.ConversationSend) -> dto.SendOut:
        with self._write(caller) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change, message, turn = lifecycle.post_message(
                conversation, Author.OWNER, r.text, c.now, self.new_id, start_turn=True)
            self._save(c.tx, change)
        if turn is not None:
            self._start(r.conversation_id, turn.run_id)
        return dto.SendOut(message_id=message.message_id, run_id=turn.run_id if turn else None)

    @op
    def conversation_reset(self, caller: Caller, r: dto.ConversationRef) -> dto.ResetOut:
        with self._write(caller) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change = lifecycle.reset(conversation, c.tx.pending_question(r.conversation_id),
                                     c.tx.unfinished_runs(r.conversation_id), c.now, self.new_id)
            self._save(c.tx, change)
            return dto.ResetOut(incarnation=change.conversation.incarnation,
                                revision=change.conversation.revision)

    @op
    def conversation_set_workspace(self, caller: Caller,
                                   r: dto.ConversationSetWorkspace) -> dto.ConversationOut:
        with self._write(caller) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            workspace = _existing_dir(r.workspace, "workspace")
            change = lifecycle.set_workspace(conversation,
                                             c.tx.pending_question(r.conversation_id),
                                             workspace, c.now, self.new_id)
            self._save(c.tx, change)
            return views.conversation(change.conversation if change else conversation)

    @op
    def native_takeover(self, caller: Caller, r: dto.NativeTakeover) -> dto.ConversationOut:
        with self._write(caller) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change = lifecycle.native_takeover(
                conversation, c.tx.pending_question(r.conversation_id),
                c.tx.unfinished_runs(r.conversation_id), r.seat, c.now, self.new_id)
            self._save(c.tx, change)
            return views.conversation(change.conversation)

    @op
    def room_post(self, caller: Caller, r: dto.RoomPost) -> dto.MessageOut:
        with self._write(caller) as c:
            conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            if conversation.kind is not ConversationKind.ROOM:
                raise ClankieError(Code.NOT_ELIGIBLE, "room_post takes a room conversation")
            change, message, _ = lifecycle.post_message(
                conversation, Author.ROOM, r.text, c.now, self.new_id, start_turn=False)
            self._save(c.tx, change)
            return dto.MessageOut(message_id=message.message_id)

    @op
    def pane_metadata_set(self, caller: Caller, r: dto.PaneMetadataSet) -> dto.Empty:
        with self._write(caller) as c:
            self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
            c.tx.set_pane_metadata(r.conversation_id, r.key, r.value, c.now)
            return dto.Empty()

    @op
    def project_register(self, caller: Caller, r: dto.ProjectRegister) -> dto.ProjectOut:
        with self._write(caller) as c:
            root = _existing_dir(r.root, "root")
            project = ProjectRow(self.new_id(), r.name, root, c.now)
            c.tx.insert_project(project)
            return dto.ProjectOut(project_id=project.project_id)

    # -------------------------------------------------------------------------- events

    @op
    def events_tail(self, caller: Caller, r: dto.EventsTail) -> dto.EventsOut:
        """SPEC V1: events after `after`; waits up to `wait_ms` for one when there are none,
        on this thread, if its credential has a long-poll slot free (V5)."""
        woken = threading.Event()
        with self._tail(caller, r, woken.set) as tail:
            while True:
                woken.clear()
                page = tail.read()
                if page is not None:
                    return page
                woken.wait(tail.remaining())

    def _tail(self, caller: Caller, r: dto.EventsTail, wake: Wake) -> Tail:
        def read() -> tuple[str, dto.EventsOut]:
            with self._read(caller) as c:
                self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
                page = c.tx.events_after(r.conversation_id, r.after, r.limit)
            return c.principal.credential_id, dto.EventsOut(
                events=page.events,
                next_after=page.events[-1]["seq"] if page.events else r.after,
                oldest_seq=page.trimmed_through + 1,
                trimmed=r.after < page.trimmed_through)

        return Tail(self.long_polls, r.conversation_id, r.wait_ms, read, wake)

    @op
    def run_get(self, caller: Caller, r: dto.RunRef) -> dto.RunOut:
        with self._read(caller) as c:
            run = self._load_run(c.tx, r.run_id)
            self._conversation(c.tx, run.conversation_id, c.principal.owner_id)
            return views.run(run)

    @op
    def run_cancel(self, caller: Caller, r: dto.RunRef) -> dto.RunOut:
        """SPEC R7: stop a queued or running run (`cancelled`, `stopped_by_owner`, one
        `run_status` event), committed before the executor hears of it: from that commit
        on the store refuses every later write of the run, so nothing it says or calls
        after the stop is kept; the executor then abandons its model call (`_stop`). An
        ended run is returned unchanged."""
        with self._write(caller) as c:
            run = self._load_run(c.tx, r.run_id)
            conversation = self._conversation(c.tx, run.conversation_id, c.principal.owner_id)
            change = lifecycle.stop_run(conversation, run, c.now)
            self._save(c.tx, change)
        if change is None:
            return views.run(run)
        if run.status is RunStatus.RUNNING:
            self._stop(run.run_id)
        return views.run(change.runs[0])

    # -------------------------------------------------------------- credentials, devices

    def _issue(self, tx: WriteTx, owner_id: str, kind: CredentialKind, mode: DeviceMode | None,
               name: str, now: datetime, credential_id: str | None = None) -> dto.TokenOut:
        token = new_token()
        row = CredentialRow(credential_id or self.new_id(), owner_id, kind, mode, name,
                            token_hash(token), now, None)
        tx.insert_credential(row)
        return dto.TokenOut(credential_id=row.credential_id, token=token)

    @op
    def device_pair(self, caller: Caller, r: dto.DevicePair) -> dto.TokenOut:
        with self._write(caller) as c:
            return self._issue(c.tx, c.principal.owner_id, CredentialKind.DEVICE,
                               DeviceMode(r.mode), r.name, c.now)

    @op
    def device_pair_start(self, caller: Caller, r: dto.DevicePairStart) -> dto.PairingOut:
        """SPEC H2: a one-time code (stored as a hash only) for a browser to pair with."""
        with self._write(caller) as c:
            code = new_pairing_code()
            pairing = PairingRow(self.new_id(), c.principal.owner_id, token_hash(code), r.name,
                                 DeviceMode(r.mode), confirmation_word(), c.now,
                                 c.now + PAIRING_TTL)
            c.tx.insert_pairing(pairing)
            return dto.PairingOut(pairing_id=pairing.pairing_id, code=code,
                                  expires_at=iso(pairing.expires_at), word=pairing.word)

    def pairing_preview(self, code: str) -> PairingRow:
        """What a pairing code would pair (the page asks "Pair this browser as NAME?"),
        without using it. A wrong, used or expired code is refused alike, but is not a
        failed attempt (H2): opening a link pairs nothing, and any web page in the owner's
        browser can open links (`<img src=...>`), so counting them would let it keep
        pairing locked. Guessing a 192-bit code by looking is as hopeless as by pairing."""
        now = self.clock()
        self.pairing_lock.check(now)
        with storage(), self.store.read() as tx:
            pairing = self._live_pairing(tx, code, now)
        if pairing is None:
            raise ClankieError(Code.UNAUTHENTICATED, "this pairing code is wrong, used or "
                               "expired")
        return pairing

    @op
    def device_pair_finish(self, caller: Caller, r: dto.DevicePairFinish) -> dto.TokenOut:
        """SPEC H2: the code is the credential; it makes one device credential, once. Any
        bearer token is ignored: nobody's token grants this, and none is needed."""
        now = self.clock()
        self.pairing_lock.check(now)
        issued = None
        with self._internal_write() as tx:
            pairing = self._live_pairing(tx, r.code, now)
            if pairing is not None and tx.use_pairing(pairing.pairing_id, now):
                issued = self._issue(tx, pairing.owner_id, CredentialKind.DEVICE, pairing.mode,
                                     pairing.name, now, credential_id=pairing.pairing_id)
        if issued is None:
            self._pairing_failed(now)
        return issued

    def _live_pairing(self, tx: ReadTx, code: str, now: datetime) -> PairingRow | None:
        pairing = tx.pairing_by_hash(token_hash(code))
        if pairing is None or pairing.used_at is not None or now >= pairing.expires_at \
                or tx.owner_revoked(pairing.owner_id):
            return None
        return pairing

    def _pairing_failed(self, now: datetime) -> NoReturn:
        self.pairing_lock.failed(now)
        raise ClankieError(Code.UNAUTHENTICATED, "this pairing code is wrong, used or expired")

    @op
    def credential_revoke(self, caller: Caller, r: dto.CredentialRevoke) -> dto.Empty:
        """SPEC H2: the credential is refused from its next request; its lease ends."""
        with self._write(caller) as c:
            row = c.tx.credential(r.credential_id)
            if row is None or row.owner_id != c.principal.owner_id:
                raise ClankieError(Code.NOT_FOUND, "there is no such credential")
            if row.credential_id == c.principal.credential_id:
                raise ClankieError(Code.NOT_ELIGIBLE, "a credential cannot revoke itself")
            c.tx.revoke_credential(row.credential_id, c.now)
            c.tx.clear_lease(row.credential_id)
            return dto.Empty()

    @op
    def credential_issue(self, caller: Caller, r: dto.CredentialIssue) -> dto.TokenOut:
        with self._write(caller) as c:
            return self._issue(c.tx, c.principal.owner_id, CredentialKind(r.kind), None, r.name,
                               c.now)

    @op
    def credential_rotate(self, caller: Caller, r: dto.CredentialRotate) -> dto.TokenOut:
        with self._write(caller) as c:
            target = r.credential_id or c.principal.credential_id
            if target != c.principal.credential_id and \
                    c.principal.kind is not CredentialKind.OPERATOR:
                raise ClankieError(Code.FORBIDDEN, "only an operator rotates another credential")
            row = c.tx.credential(target)
            if row is None or row.owner_id != c.principal.owner_id:
                raise ClankieError(Code.NOT_FOUND, "there is no such credential")
            fresh = new_token()
            c.tx.replace_token(target, token_hash(fresh), c.now)
            return dto.TokenOut(credential_id=target, token=fresh)

    @op
    def credential_list(self, caller: Caller, r: dto.Nothing) -> dto.CredentialsOut:
        with self._read(caller) as c:
            lease = c.tx.lease()
            return dto.CredentialsOut(credentials=[
                views.credential(row, lease is not None and lease.held_by(row.credential_id,
                                                                          c.now),
                                 self.last_used.get(row.credential_id))
                for row in c.tx.credentials() if row.owner_id == c.principal.owner_id])

    @op
    def device_take_control(self, caller: Caller, r: dto.DeviceTakeControl) -> dto.LeaseOut:
        with self._write(caller) as c:
            ttl = r.ttl_s if r.ttl_s is not None else self.settings.take_control_ttl
            lease = LeaseRow(self.new_id(), c.principal.credential_id, c.now,
                             c.now + timedelta(seconds=ttl))
            c.tx.set_lease(lease)  # supersedes any other device's lease
            return dto.LeaseOut(lease_id=lease.lease_id, expires_at=iso(lease.expires_at))

    @op
    def device_release(self, caller: Caller, r: dto.Nothing) -> dto.Empty:
        with self._write(caller) as c:
            c.tx.clear_lease(c.principal.credential_id)
            return dto.Empty()

    @op
    def owner_revoke(self, caller: Caller, r: dto.Nothing) -> dto.Empty:
        """Known owner revocation: every pending question of the owner ends at once."""
        with self._write(caller) as c:
            owner_id = c.principal.owner_id
            c.tx.revoke_owner(owner_id, c.now)
            for conversation in c.tx.conversations(owner_id):
                pending = c.tx.pending_question(conversation.conversation_id)
                self._save(c.tx, lifecycle.owner_revoked(conversation, pending, c.now,
                                                         self.new_id))
            return dto.Empty()

    # ------------------------------------------------------------------------- service

    @op
    def service_info(self, caller: Caller, r: dto.Nothing) -> dto.ServiceInfoOut:
        """What this service is and runs with, for any reader; the model as the settings it
        was started with choose it (`serve --model` included), never a key or a token."""
        with self._read(caller):
            pass  # authenticated and authorized; the answer is not in the store
        model = model_in_use(self.settings)
        return dto.ServiceInfoOut(
            version=__version__, started_at=iso(self.started_at),
            model=dto.ModelOut(provider=model.provider, model=model.model,
                               endpoint_host=model.endpoint_host,
                               endpoint_digest=model.endpoint_digest,
                               key_set=model.key_set),
            settings=settings_shown(self.settings), web_url=self.web_url)

    def device_status(self, token: str | None) -> DeviceStatus:
        """Who this token is, for a surface to show (the phone page, H5): its name, mode and
        Take Control lease. Any live credential may ask about itself."""
        with self._read(Caller(None, token)) as c:  # any live credential, about itself
            row = c.tx.credential(c.principal.credential_id)
            lease = c.tx.lease()
        assert row is not None
        held = lease is not None and lease.held_by(row.credential_id, c.now)
        return DeviceStatus(row.credential_id, row.name, row.kind.value,
                            row.mode.value if row.mode else None,
                            iso(lease.expires_at) if held and lease else None)

    # ----------------------------------------------------------------------- questions

    @op
    def input_get(self, caller: Caller, r: dto.InputGet) -> dto.Snapshot:
        """SPEC S1-S5: the snapshot, read from current state. A read transaction suffices
        unless the pending question is due to expire: then the expiry is committed on
        read (S5), in a write transaction that decides again."""
        with self._read(caller) as c:
            snapshot = self._snapshot(c, r)
        if snapshot is not None:
            return snapshot
        with self._write(caller) as c:
            snapshot = self._snapshot(c, r)
        assert snapshot is not None
        return snapshot

    def _snapshot(self, c: Call[ReadTx] | Call[WriteTx], r: dto.InputGet
                  ) -> dto.Snapshot | None:
        """None when an expiry is due and `c` can only read: it is committed in a write."""
        conversation = self._conversation(c.tx, r.conversation_id, c.principal.owner_id)
        pending = c.tx.pending_question(r.conversation_id)
        expired = lifecycle.expire_if_due(conversation, pending, c.now, self.new_id)
        if expired is not None:
            if not isinstance(c.tx, WriteTx):
                return None
            self._save(c.tx, expired)
            conversation, pending = expired.conversation, None
        request = None
        if r.request_id is not None:
            request = c.tx.question(r.conversation_id, r.request_id)
            if request is None:
                raise ClankieError(Code.UNKNOWN_REQUEST, "no such question in this "
                                   "conversation, or its receipt was evicted",
                                   request_id=r.request_id)
        return dto.Snapshot(
            conversation_id=conversation.conversation_id,
            incarnation=conversation.incarnation,
            revision=conversation.revision,
            pending=views.question(c.tx, pending) if pending else None,
            request=views.question(c.tx, request) if request else None)

    @op
    def input_answer(self, caller: Caller, r: dto.InputAnswer) -> dto.AnswerReply:
        submission = Submission(r.request_id, r.incarnation, r.revision,
                                Answer(option_id=r.option_id, text=r.text))
        return self._resolve(caller, r.conversation_id, submission)

    @op
    def input_cancel(self, caller: Caller, r: dto.InputCancel) -> dto.AnswerReply:
        submission = Submission(r.request_id, r.incarnation, r.revision)
        return self._resolve(caller, r.conversation_id, submission)

    def _resolve(self, caller: Caller, conversation_id: str,
                 submission: Submission) -> dto.AnswerReply:
        decide = lifecycle.answer if submission.answer is not None else lifecycle.cancel
        with self._write(caller) as c:
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
        with storage(), self.store.read() as tx:
            return dto.AnswerReply(receipt=views.receipt(tx, receipt),
                                   duplicate=decision.duplicate)



# The dispatcher table is whole: each op of `dto.OPS` has one rule and one method.
assert dto.OPS.keys() == WHO_MAY.keys() == OPS_SERVED.keys()

def _validated(op: str, payload: Any) -> Any:
    """The op's input shape, or `not_found` (no such op) / `invalid_request`."""
    spec = dto.OPS.get(op)
    if spec is None:
        raise ClankieError(Code.NOT_FOUND, f"there is no operation {op!r}")
    if not isinstance(payload, Mapping):
        raise ClankieError(Code.INVALID_REQUEST, "the request body must be a JSON object")
    try:
        return spec.input.model_validate(payload)
    except ValidationError as exc:
        raise invalid_request(exc) from None


def _existing_dir(path: str, what: str) -> WorkspaceIdentity:
    if not path.startswith("/"):
        raise ClankieError(Code.INVALID_REQUEST, f"{what} must be an absolute path")
    identity = identify(path)
    if identity is None:
        raise ClankieError(Code.INVALID_REQUEST, f"{what} {path!r} is not an existing directory")
    return identity
