"""The service: its parts, each with one job, and the dispatcher that calls them.

Owns the composition and the entry points. `Service(store, settings, ...)` builds one
`Context` (`base.py`: the store, settings, clock, long-polls, notifier, and how an
operation meets the store) and the parts that share it: `Conversations`
(`conversations.py`), `Questions` (`questions.py`), `Devices` (`devices.py`: credentials,
pairing, Take Control), `Agents` (`agents.py`) and `Runs` (`runs.py`: what the executor
calls, `RunHooks`, and recovery); the executor built from `Runs`, the notifier and the
page's address (`web_url`) given here, never set later. Callers outside reach a part by
its name (`service.runs.recover()`, `service.devices.init_owner()`): the service forwards
nothing. `call(op, token, payload)` is the whole entry point: it validates the input
(`clankie.dto`) and calls the method the dispatcher table (`@serves`, `base.py`) says
serves the op, with the `Caller` its transaction authorizes under that op's rule: on the
store's writer for an op that writes, on the caller's thread for one that reads.
`call_soon` is the same for a caller that does not wait on a thread (the HTTP edge): a
write op is queued to the writer. `open_poll` is the same for a long-poll (`events_tail`,
`agent_wait`) by a caller that waits in its own way. Every op method keeps one order: open
one transaction, authenticate and authorize in it, load, let `clankie.core` decide, save,
and leave what acts on the outside (start a run, wake long-polls) to after the commit
(`WriteTx.on_commit`). It knows nothing of HTTP.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from functools import partial
from typing import Any, ClassVar, Final

from pydantic import BaseModel, ValidationError

from clankie import __version__, dto
from clankie.agent.providers import model_in_use
from clankie.core.errors import ClankieError
from clankie.core.model import iso
from clankie.core.vocabulary import Code
from clankie.settings import Settings
from clankie.settings import shown as settings_shown
from clankie.store import Store
from clankie.store.db import Done

from .agents import Agents
from .base import (
    Caller,
    Context,
    Served,
    dispatch_table,
    invalid_request,
    new_uuid,
    serves,
    storage,
    storage_failure,
    utcnow,
)
from .conversations import Conversations
from .credentials import authenticate
from .devices import Devices
from .longpoll import Poll, Wake
from .notify import Notifier
from .questions import Questions
from .runs import MakeExecutor, Runs

log = logging.getLogger("clankie.service")


class Service:
    """The parts, each with one job, sharing one `Context`; the dispatcher table
    (`@serves`) maps each op to the part's method that serves it. Callers reach a part by
    its name (`service.runs`, `service.devices`): the service forwards nothing (issue 32)."""

    def __init__(self, store: Store, settings: Settings | None = None, *,
                 clock: Callable[[], datetime] = utcnow,
                 new_id: Callable[[], str] = new_uuid,
                 executor: MakeExecutor | None = None,
                 notifier: Notifier | None = None,
                 web_url: str | None = None) -> None:
        """Everything the service uses is given here, never set later: `executor` builds
        the run executor from the run side (`RunHooks`, which it calls back only once a
        run is handed to it), `notifier` runs the notification hook (SPEC N1); without
        them runs stay queued and no hook runs. `web_url` is where the phone page is
        reached (SPEC H1: `web_origin`, or the `--web` listener's own address), None
        while no page is served."""
        self.ctx = Context(store, settings if settings is not None else Settings(), clock,
                           new_id, notifier)
        self.runs = Runs(self.ctx, executor)
        self.conversations = Conversations(self.ctx, self.runs)
        self.questions = Questions(self.ctx, self.runs)
        self.devices = Devices(self.ctx)
        self.agents = Agents(self.ctx)
        self.web_url: Final = web_url
        self.started_at: Final = clock()  # what `service_info` reports
        self._table = dispatch_table(self.ops, self._parts())
        self._stopping = threading.Event()

    # What it was built with, and its life: being stopped.

    @property
    def store(self) -> Store:
        return self.ctx.store

    @property
    def settings(self) -> Settings:
        return self.ctx.settings

    @property
    def waiting(self) -> int:
        """How many long-polls are waiting now (each holds a slot of its credential)."""
        return self.ctx.long_polls.waiting

    def stop_waiting(self) -> None:
        """Shutting down: every long-poll returns now, and new ones do not wait."""
        self.ctx.long_polls.stop()

    def start_checkpoints(self) -> None:
        """Checkpoint the replies being written, every `stream_checkpoint` seconds (D9)."""
        threading.Thread(target=self.runs.checkpoints, args=(self._stopping,), daemon=True,
                         name="clankie-checkpoints").start()

    def stop(self, timeout: float) -> None:
        """Shutting down, after the last request: the executor starts no more runs and
        gives running ones `timeout` seconds; the notifier runs no more hooks. The replies
        being written are checkpointed first (D9: what readers saw survives the stop)."""
        self._stopping.set()
        if self.ctx.live.checkpoints():
            try:
                self.ctx.on_store(self.runs.checkpoint_replies)
            except ClankieError as exc:
                log.error("the replies being written could not be checkpointed: %s", exc)
        if self.runs.executor is not None:
            self.runs.executor.stop(timeout)
        if self.ctx.notifier is not None:
            self.ctx.notifier.stop()

    # ----------------------------------------------------------------- the dispatcher

    # The op table this service serves (`dto.OPS`), by wire name: every op of it has its
    # one method on one of `_parts`, checked when the service is made and, for this class,
    # at import. The edge reads an op's flags here (a long-poll, a credential in the body).
    ops: ClassVar[Mapping[str, dto.Op[Any, Any]]] = dto.OPS

    def _parts(self) -> tuple[object, ...]:
        """Where the ops' methods are (`@serves`): the service and its op parts."""
        return self, self.conversations, self.questions, self.devices, self.agents

    def call(self, op: str, token: str | None, payload: Any, *, peer: str | None = None,
             user_agent: str | None = None) -> BaseModel:
        """Perform `op` for the holder of `token`; raise `ClankieError` on any refusal.
        `peer` and `user_agent` say who is trying, as the edge saw them (H2)."""
        served, request = self._validated(op, payload)
        work = partial(served.method, Caller(served.op, token, peer, user_agent), request)
        return self.ctx.on_store(work) if served.writes else work()

    def call_soon(self, op: str, token: str | None, payload: Any, done: Done, *,
                  peer: str | None = None, user_agent: str | None = None) -> bool:
        """`call` for a caller that waits in its own way: an op that writes is queued to the
        store's writer and this returns True; `done(result, error)` is called on the
        writer once its transaction has committed, with the result or the `ClankieError`
        (a storage failure as `storage_unavailable`). An op that only reads is not
        started: False, and the caller `call`s it on a thread of its own. Bad input raises
        here, before anything is queued."""
        served, request = self._validated(op, payload)
        if not served.writes:
            return False
        work = partial(served.method, Caller(served.op, token, peer, user_agent), request)
        self.ctx.store.submit(work, partial(_as_served, done), urgent=True)
        return True

    def known_token(self, token: str) -> bool:
        """The dispatcher's first look (`/v1/ops`), in memory, without a thread: True when
        `token` is a live credential's other than a browser's; False when the store must be
        asked (`authenticate`)."""
        return self.ctx.tokens.known(token)

    def authenticate(self, token: str | None) -> None:
        """The dispatcher's check (`/v1/ops`): refuse `unauthenticated` unless `token` is a
        live credential (T6: asked before a request's body is read, so a stranger's body is
        never parsed) other than a browser's. A credential paired by a code is a browser's
        (H2, H3): its token lives in a cookie that browsers send to every port of the host,
        so it is good only on the page, together with the page's key."""
        now = self.ctx.clock()
        with storage(), self.ctx.store.read() as tx:
            principal = authenticate(tx, token, now)
            if tx.paired_by_code(principal.credential_id):
                raise ClankieError(Code.UNAUTHENTICATED, "this token is a browser's (paired "
                                   "by a code): it works only on clankie's page, with the "
                                   "page's key, never on /v1/ops")

    def open_poll(self, op: str, token: str | None, payload: Any, wake: Wake) -> Poll:
        """A long-poll op (its `long_poll` flag) for a caller that waits in its own way:
        validated here (no I/O), then read with `Poll.read` as `longpoll.py` says; `wake` is
        called on a commit thread when there may be something new."""
        served, request = self._validated(op, payload)
        polls: dict[dto.Op[Any, Any], Callable[[Caller, Any, Wake], Poll]] = {
            dto.AGENT_WAIT: self.agents.poll, dto.EVENTS_TAIL: self.conversations.tail}
        return polls[served.op](Caller(served.op, token), request, wake)

    def _validated(self, op: str, payload: Any) -> tuple[Served, Any]:
        """The op's row of the table and its input shape, or `not_found` (no such op) /
        `invalid_request`."""
        served = self._table.get(op)
        if served is None:
            raise ClankieError(Code.NOT_FOUND, f"there is no operation {op!r}")
        if not isinstance(payload, Mapping):
            raise ClankieError(Code.INVALID_REQUEST, "the request body must be a JSON object")
        try:
            return served, served.op.input.model_validate(payload)
        except ValidationError as exc:
            raise invalid_request(exc) from None

    @serves(dto.SERVICE_INFO)
    def service_info(self, caller: Caller, r: dto.Nothing) -> dto.ServiceInfoOut:
        """What this service is and runs with, for any reader; the model as the settings it
        was started with choose it (`serve --model` included), never a key or a token."""
        with self.ctx.read(caller):
            pass  # authenticated and authorized; the answer is not in the store
        model = model_in_use(self.ctx.settings)
        return dto.ServiceInfoOut(
            version=__version__, started_at=iso(self.started_at),
            model=dto.ModelOut(provider=model.provider, model=model.model,
                               endpoint_host=model.endpoint_host,
                               endpoint_digest=model.endpoint_digest,
                               key_set=model.key_set, streaming=self.ctx.streaming),
            settings=settings_shown(self.ctx.settings), web_url=self.web_url)


# The dispatcher table is whole: each op of `dto.OPS` has one method (and, in `dto`, one
# rule), and each `@serves` method serves an op of it.
dispatch_table(dto.OPS, (Service, Conversations, Questions, Devices, Agents))


def _as_served(done: Done, result: Any, error: BaseException | None) -> None:
    """A write op's end as `Service.call` would raise it: a storage failure (its commit's
    included) as `storage_unavailable`."""
    done(result, storage_failure(error) if isinstance(error, sqlite3.Error) else error)
