"""The service's foundation: the dispatcher table and the context its parts share.

Owns the dispatcher table (`@serves(dto.X)` marks the one method serving an op of the op
table, and whether it writes; `dispatch_table` finds them on the service's parts) and how
every operation meets the store: a write op runs whole on the store's writer thread
(`Context.on_store`; so do the run side's steps, `stored`), its transaction opened there
with `Context.write`; a read op on its caller's thread with `Context.read`; in either the
caller is authenticated and authorized under the rule of the op the table gave it. Also
storage failures as `storage_unavailable`, saving a `Change`, waking long-polls and
running hooks after a commit (`longpoll.py`), and the lookups every operation shares.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial, wraps
from typing import Any, Concatenate, Generic, ParamSpec, Protocol, TypeVar

from pydantic import BaseModel, ValidationError

from clankie import dto
from clankie.core.authority import authorize
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import Change, Facts
from clankie.core.model import (
    Conversation,
    ConversationKind,
    InputRequested,
    InputResolved,
    Principal,
    Run,
)
from clankie.core.vocabulary import Code
from clankie.settings import Settings
from clankie.store import ReadTx, Store, WriteTx
from clankie.store.tx import ProjectRow
from clankie.workspace.confine import FileId, file_id
from clankie.workspace.identity import identify_saved
from clankie.workspace.membership import Membership, membership

from . import views
from .credentials import LiveTokens, authenticate
from .live import LiveReplies
from .longpoll import LongPolls
from .notify import Notifier, document

log = logging.getLogger("clankie.service")


def utcnow() -> datetime:
    return datetime.now(UTC)


def new_uuid() -> str:
    return str(uuid.uuid4())


class Executor(Protocol):
    """Where started runs are handed after their commit (the agent runtime)."""

    def submit(self, conversation_id: str, run: Run) -> None:
        """Execute `run`, started (`running`) by the transaction that just committed, and
        then each run of its conversation that its finish starts (R4)."""
        ...

    def stop_run(self, run_id: str) -> None:
        """A running run was stopped (R7, committed): abandon what it is doing now."""
        ...

    def stop(self, timeout: float) -> None:
        """Start no more runs; give running ones `timeout` seconds (the service stops)."""
        ...


TxT = TypeVar("TxT", ReadTx, WriteTx)
T = TypeVar("T")
P = ParamSpec("P")
PartT = TypeVar("PartT")
InT = TypeVar("InT", bound=dto.Strict)
OutT = TypeVar("OutT", bound=dto.Out)
Method = Callable[[PartT, "Caller", InT], OutT]


def serves(spec: dto.Op[InT, OutT], *, writes: bool = False
           ) -> Callable[[Method[PartT, InT, OutT]], Method[PartT, InT, OutT]]:
    """Mark the method serving `spec` (`@serves(dto.INPUT_GET)`); mypy holds its input and
    output to the op's. It is named like the op (refused otherwise), and called as
    `method(part, caller, request)` once `dispatch_table` has found it on its part. A
    method that `writes` is called on the store's writer (`Context.on_store`), where it
    opens its transaction with `Context.write`; any other reads, on its caller's thread
    (`Context.read`), and hands a write it may need to the writer itself."""
    def mark(method: Method[PartT, InT, OutT]) -> Method[PartT, InT, OutT]:
        if getattr(method, "__name__", None) != spec.name:
            raise TypeError(f"the method serving {spec.name} must be named {spec.name}")
        setattr(method, _SERVES, (spec, writes))  # an attribute no type declares
        return method
    return mark


_SERVES = "clankie_serves"


@dataclass(frozen=True)
class Served:
    """One row of a dispatcher table: the op, the method serving it, bound to its part, and
    whether that method writes (it is then run on the store's writer)."""

    op: dto.Op[Any, Any]
    method: Callable[[Caller, Any], BaseModel]
    writes: bool


def dispatch_table(ops: Mapping[str, dto.Op[Any, Any]], parts: Iterable[object]
                   ) -> dict[str, Served]:
    """The dispatcher table of `ops` (by wire name) over `parts` (objects, or their classes
    to check the table before any is made): each op's `@serves` method, bound to the part
    that has it. `TypeError` unless every op has exactly one method and every method
    serves an op of `ops`."""
    table: dict[str, Served] = {}
    for part in parts:
        kind = part if isinstance(part, type) else type(part)
        for attribute in dir(kind):
            marked: tuple[dto.Op[Any, Any], bool] | None = getattr(
                getattr(kind, attribute), _SERVES, None)
            if marked is None:
                continue
            spec, writes = marked
            if spec.name not in ops or ops[spec.name] is not spec:
                raise TypeError(f"{attribute} serves {spec.name}, which is not a dispatcher op")
            if spec.name in table:
                raise TypeError(f"{spec.name} is served twice")
            table[spec.name] = Served(spec, getattr(part, attribute), writes)
    if missing := ops.keys() - table.keys():
        raise TypeError(f"no method serves {', '.join(sorted(missing))}")
    return table


@dataclass(frozen=True)
class Caller:
    """Who calls, and which op's rule admits them: made by the dispatcher (`Service.call`)
    from its table, never from a string a method writes. `op` None admits any live
    credential (a surface asking who it is, not an op). `peer` and `user_agent` are who
    is trying, as the edge saw them (a connection's address, its User-Agent header): they
    authenticate nobody; pairing limits wrong codes per peer and records the user agent
    (H2)."""

    op: dto.Op[Any, Any] | None
    token: str | None
    peer: str | None = None
    user_agent: str | None = None


class HasContext(Protocol):
    ctx: Context


SelfT = TypeVar("SelfT", bound=HasContext)


def stored(method: Callable[Concatenate[SelfT, P], T]) -> Callable[Concatenate[SelfT, P], T]:
    """A step of the run side (`RunHooks`), called from a run's thread: run on the store's
    writer after the requests waiting there (`Context.on_store`, not `urgent`), where its
    body opens its transactions; it returns once they have committed."""
    @wraps(method)
    def on_store(self: SelfT, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.ctx.on_store(partial(method, self, *args, **kwargs), urgent=False)
    return on_store


@dataclass
class Call(Generic[TxT]):
    """One caller's operation: its transaction (a `WriteTx` for a write op), who, and when."""

    tx: TxT
    principal: Principal
    now: datetime
    raise_after_commit: ClankieError | None = None


def has_owner(store: Store) -> bool:
    """Whether the store has a live owner (`clankie init` was run)."""
    with storage(), store.read() as tx:
        return tx.active_owner() is not None


@contextmanager
def storage() -> Iterator[None]:
    """A storage failure as `storage_unavailable` (logged; the transaction rolled back)."""
    try:
        yield
    except sqlite3.Error as exc:
        raise storage_failure(exc) from exc


def storage_failure(exc: sqlite3.Error) -> ClankieError:
    log.error("storage failure: %s", exc)
    return ClankieError(Code.STORAGE_UNAVAILABLE,
                        "the store could not complete this operation; nothing changed")


def home_of(store: Store) -> FileId | None:
    """The service's own home by identity: the folder holding its store (where `clankie
    init` puts it, beside `operator.token`); None for a store in memory."""
    if store.path == ":memory:":
        return None
    st = os.stat(os.path.dirname(os.path.abspath(store.path)))
    return st.st_dev, st.st_ino


def files_of(store_path: str, home: FileId | None) -> frozenset[FileId]:
    """The files directly in the home now, by identity (the token, the store, its log),
    so that a hard link or a bind mount of one elsewhere is denied too (SPEC W4); none
    when the folder at the store's path is no longer the home."""
    if home is None:
        return frozenset()
    folder = os.path.dirname(os.path.abspath(store_path))
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return frozenset()
    try:
        if file_id(os.fstat(fd)) != home:
            return frozenset()
        with os.scandir(fd) as entries:
            return frozenset(file_id(entry.stat(follow_symlinks=False)) for entry in entries
                             if entry.is_file(follow_symlinks=False))
    except OSError:
        return frozenset()
    finally:
        os.close(fd)


class Context:
    """What every part of the service shares: the store, the settings, the clock, new IDs,
    the long-polls to wake and the notifier to run after a commit, and how an operation
    meets the store (its transaction, its caller authenticated and authorized)."""

    def __init__(self, store: Store, settings: Settings, clock: Callable[[], datetime],
                 new_id: Callable[[], str], notifier: Notifier | None) -> None:
        self.store = store
        # Taken from the store, not given: no service can be made that forgets its home,
        # which its tools deny in every workspace (SPEC W4). By identity, once: a rename
        # of the folder does not lose it.
        self.home = home_of(store)
        self.settings = settings
        self.clock = clock
        self.new_id = new_id
        self.notifier = notifier
        self.long_polls = LongPolls()
        # The replies being written (D2-D5): memory only; a publish wakes live readers.
        self.live = LiveReplies(self.long_polls.published)
        self.streaming: bool | None = None  # whether model calls stream, once known (D18)
        self.tokens = LiveTokens(store)
        # When each credential was last used: reads note it here only, writes also store
        # it (`credential_list` shows the later of the two).
        self.last_used: dict[str, datetime] = {}

    # ------------------------------------------------------------------- transactions

    def on_store(self, work: Callable[[], T], *, urgent: bool = True) -> T:
        """Run `work` on the store's writer, where it may open write transactions
        (`write`, `internal_write`), and return its result once they have committed; a
        storage failure, the commit's included, is `storage_unavailable`. `urgent`: a
        request's work, done before the run side's (`stored`)."""
        with storage():
            return self.store.run(work, urgent=urgent)

    @contextmanager
    def write(self, caller: Caller) -> Iterator[Call[WriteTx]]:
        """One write transaction, with the caller authenticated and authorized inside it;
        only on the store's writer (an op that `writes`, or `on_store`)."""
        now = self.clock()
        with storage(), self.store.write() as tx:
            tx.on_commit.append(partial(self._after_commit, tx))
            principal = authenticate(tx, caller.token, now)
            if caller.op is not None:
                authorize(caller.op, principal)
            self.last_used[principal.credential_id] = now
            tx.credential_used(principal.credential_id, now)
            call = Call(tx, principal, now)
            try:
                yield call
            except ClankieError as err:
                raise views.error(tx, err) from None
        if call.raise_after_commit is not None:
            raise call.raise_after_commit

    @contextmanager
    def internal_write(self) -> Iterator[WriteTx]:
        """A write transaction of the service itself (runs, recovery): no caller to check;
        long-polls are woken after the commit, as for every other write. Only on the
        store's writer."""
        with storage(), self.store.write() as tx:
            tx.on_commit.append(partial(self._after_commit, tx))
            yield tx

    @contextmanager
    def read(self, caller: Caller) -> Iterator[Call[ReadTx]]:
        now = self.clock()
        with storage(), self.store.read() as tx:
            principal = authenticate(tx, caller.token, now)
            if caller.op is not None:
                authorize(caller.op, principal)
            self.last_used[principal.credential_id] = now
            yield Call(tx, principal, now)

    def _after_commit(self, tx: WriteTx) -> None:
        """Wake the long-polls of the conversations that got events; run the hooks."""
        if tx.touched:
            self.long_polls.changed(tx.touched)
        if self.notifier is not None:
            self._run_hooks(tx.saved)

    def streaming_is(self, streams: bool) -> None:
        """What the run side found of the model's endpoint (D18): `service_info` says it."""
        self.streaming = streams

    def generation(self, conversation_id: str) -> int:
        """How many commits added events to the conversation (a long-poll's wake-up)."""
        return self.long_polls.generation(conversation_id)

    def save(self, tx: WriteTx, change: Change | None) -> None:
        if change is not None:
            tx.save(change, receipt_limit=self.settings.receipt_limit,
                    event_retention=self.settings.event_retention)

    def _run_hooks(self, changes: list[Change]) -> None:
        """After a commit: the notification hook for each question event it holds."""
        assert self.notifier is not None
        for change in changes:
            for event in change.events:
                if isinstance(event, InputRequested) or (
                        isinstance(event, InputResolved) and self.settings.notify_on_resolved):
                    question = next((q for q in change.questions
                                     if q.request_id == event.request_id), None)
                    self.notifier.submit(change.conversation.conversation_id,
                                         document(change.conversation, event, question,
                                                  self.settings.web_origin))

    @staticmethod
    def conversation(tx: ReadTx, conversation_id: str,
                      owner_id: str | None = None) -> Conversation:
        """The conversation, if it exists and (for a caller) belongs to the caller's owner."""
        conversation = tx.conversation(conversation_id)
        if conversation is None or owner_id not in (None, conversation.owner_id):
            raise ClankieError(Code.NOT_FOUND, "there is no such conversation",
                               conversation_id=conversation_id)
        return conversation

    @staticmethod
    def facts(tx: ReadTx, conversation: Conversation, now: datetime) -> Facts:
        workspace = identify_saved(conversation.workspace) if conversation.workspace else None
        return Facts(now, tx.owner_revoked(conversation.owner_id), workspace)

    @staticmethod
    def load_run(tx: ReadTx, run_id: str) -> Run:
        run = tx.run(run_id)
        if run is None:
            raise ClankieError(Code.NOT_FOUND, "there is no such run", run_id=run_id)
        return run

    def membership(self, conversation: Conversation,
                    projects: list[ProjectRow]) -> Membership | None:
        return membership_of(conversation, projects, self.settings.git_timeout)


def membership_of(conversation: Conversation, projects: list[ProjectRow],
                  git_timeout: float) -> Membership | None:
    """The project-membership fact of an owner conversation's workspace (SPEC M1-M4)."""
    if conversation.kind is not ConversationKind.OWNER or conversation.workspace is None:
        return None
    return membership(conversation.workspace, [(p.project_id, p.root) for p in projects],
                      git_timeout)


def invalid_request(exc: ValidationError) -> ClankieError:
    """A pydantic error as `invalid_request`: where and what, never the input's value."""
    errors = [{"loc": ".".join(str(p) for p in e["loc"]) or "(body)",
               "msg": e["msg"].removeprefix("Value error, ")}  # our own words, as they are
              for e in exc.errors(include_url=False, include_input=False)]
    detail = "; ".join(f"{e['loc']}: {e['msg']}" for e in errors)
    return ClankieError(Code.INVALID_REQUEST, detail, errors=errors)


