"""The service: its parts, each with one job, and the dispatcher that calls them.

Owns the composition and the entry points. `Service(store, settings, ...)` builds one
`Context` (`base.py`: the store, settings, clock, long-polls, notifier, and how an
operation meets the store) and the parts that share it: `Conversations`
(`conversations.py`), `Questions` (`questions.py`), `Devices` (`devices.py`: credentials,
pairing, Take Control), `Agents` (`agents.py`) and `Runs` (`runs.py`: what the executor
calls, `RunHooks`, and recovery); the executor built from `Runs`, the notifier and the
page's address (`web_url`) given here, never set later. Callers outside reach a part by
its name (`service.runs.recover()`, `service.devices.init_owner()`): the service forwards
nothing. `call(op, token,
payload)` is the whole entry point: it validates the input (`clankie.dto`) and calls the
method the dispatcher table (`@op`, `base.py`) says serves the op, with the `Caller` its
transaction authorizes under that op's rule. `open_tail` is the same for `events_tail` by
a caller that waits in its own way (the HTTP edge, without a thread). Every op method
keeps one order: open one transaction, authenticate and authorize in it, load, let
`clankie.core` decide, save, commit, and only then act on the outside (start a run, wake
long-polls). It knows nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from pydantic import BaseModel, ValidationError

from clankie import __version__, dto
from clankie.agent.providers import model_in_use
from clankie.core.authority import WHO_MAY
from clankie.core.errors import ClankieError
from clankie.core.model import iso
from clankie.core.vocabulary import Code
from clankie.settings import Settings
from clankie.settings import shown as settings_shown
from clankie.store import Store

from .agents import Agents
from .base import (
    OPS_SERVED,
    Caller,
    Context,
    invalid_request,
    new_uuid,
    op,
    storage,
    utcnow,
)
from .conversations import Conversations
from .credentials import authenticate
from .devices import Devices
from .longpoll import Poll, Wake
from .notify import Notifier
from .questions import Questions
from .runs import MakeExecutor, Runs


class Service:
    """The parts, each with one job, sharing one `Context`; the dispatcher table (`@op`)
    maps each op to the part's method that serves it. Callers reach a part by its name
    (`service.runs`, `service.devices`): the service forwards nothing (issue 32)."""

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
        self._table = _bound(self, self.conversations, self.questions, self.devices,
                             self.agents)

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

    def stop(self, timeout: float) -> None:
        """Shutting down, after the last request: the executor starts no more runs and
        gives running ones `timeout` seconds; the notifier runs no more hooks."""
        if self.runs.executor is not None:
            self.runs.executor.stop(timeout)
        if self.ctx.notifier is not None:
            self.ctx.notifier.stop()

    # ----------------------------------------------------------------- the dispatcher

    def call(self, op: str, token: str | None, payload: Any, *, peer: str | None = None,
             user_agent: str | None = None) -> BaseModel:
        """Perform `op` for the holder of `token`; raise `ClankieError` on any refusal.
        `peer` and `user_agent` say who is trying, as the edge saw them (H2)."""
        request = _validated(op, payload)
        return self._table[op](Caller(op, token, peer, user_agent), request)

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
        """A long-poll op (`LONG_POLLS`) for a caller that waits in its own way: validated
        here (no I/O), then read with `Poll.read` as `longpoll.py` says; `wake` is called
        on a commit thread when there may be something new."""
        request = _validated(op, payload)
        if op == Agents.agent_wait.__name__:  # each op named once: by its method
            return self.agents.poll(Caller(op, token), request, wake)
        assert op == Conversations.events_tail.__name__
        return self.conversations.tail(Caller(op, token), request, wake)

    @op
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
                               key_set=model.key_set),
            settings=settings_shown(self.ctx.settings), web_url=self.web_url)


def _bound(*parts: object) -> dict[str, Callable[[Caller, Any], BaseModel]]:
    """The dispatcher table with each op's method bound to the part that has it."""
    table: dict[str, Callable[[Caller, Any], BaseModel]] = {
        op: getattr(part, op) for part in parts for op, method in OPS_SERVED.items()
             if getattr(type(part), op, None) is method}
    assert table.keys() == OPS_SERVED.keys(), OPS_SERVED.keys() - table.keys()
    return table


# The ops that may wait (long-polls): the HTTP edge waits for them on its loop.
LONG_POLLS = frozenset({Conversations.events_tail.__name__, Agents.agent_wait.__name__})

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
