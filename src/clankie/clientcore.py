"""The client's core, without I/O: every decision `clankie.client` makes, written once.

Owns, for both the sync `Client` and the async `AsyncClient` (the thin drivers in
`clankie.client`), as h11 and httpx split them:
- the exception tree (documented in `clankie.client`'s docstring) and every sentence it
  says;
- the URL and trust rules (`service_address`, `trusted_url`) and the request writer
  (`Target.request`: a token no header can carry is refused unsent);
- one call as a *flow*: a generator that says each thing to do that may block or wait
  (`Step`: connect, ask who listens, TLS, peek at a kept connection, write, flush, read)
  and takes its outcome back, so the same lines decide for either driver. The flow owns
  keep-alive (`Pool`: which kept connection to reuse, which to drop, how many to keep), T2
  (`admit`: nothing is written to a new connection before its listener is known to be the
  owner's), the deadlines (`Ask`: a long-poll's wait is added to the exchange) and what a
  failure means (nothing was sent: `ServiceUnreachable`; a byte was written but no whole
  reply came: `Uncertain`);
- the sorting of a whole reply (`outcome`): a result, the service's problem (`ApiError`),
  or what clankie never sends (`NotClankie`: not JSON, a NaN, a misfit of the op's shape
  with `fit`, an events page whose cursor does not move on).

A transport (`Transport`, `AsyncTransport`) does the steps: `clankie.client` has one over
sockets and one over asyncio streams; the tests have one in memory. Closing a connection
neither blocks nor waits, so the flow calls it rather than yields it. The DTOs, pydantic and
asyncio are not imported here (the CLI's start-up needs none of them): a typed call's
`dto.Op` comes from its caller.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import math
import os
import re
import shlex
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from clankie import __version__
from clankie.core.vocabulary import CODES
from clankie.home import SOCKET, Home, operator_token, service_url
from clankie.http1 import Malformed, Response, ResponseParser
from clankie.peer import Listener

if TYPE_CHECKING:  # pydantic and the DTOs load on first use: the CLI needs none
    from clankie import dto
    from clankie.dto import OutT

__all__ = ["ApiError", "AsyncTransport", "BadServiceUrl", "ClientError", "NotClankie",
           "NotYours", "ServiceUnreachable", "Step", "Transport", "Uncertain", "fit_shape",
           "service_address", "trusted_url"]

DEFAULT_TIMEOUT = 30.0
# A long-poll that comes back empty at once found no free slot (V5: 8 a credential):
# a follower pauses this long before asking again, rather than asking in a tight loop.
EMPTY_AT_ONCE_S = 0.25
PAUSE_AFTER_EMPTY_S = 1.0
KEEP_IDLE_S = 4.0  # a kept-alive connection is dropped after this (the server's keep-alive: 5 s)
MAX_IDLE = 20  # kept-alive connections at most; more close once their reply has come
CONNECT_TIMEOUT_S = 5.0
READ_SIZE = 65536
# A long-poll input's wait field and its unit in seconds (`dto.EventsTail.wait_ms`,
# `dto.AgentWait.wait_s`): the service may hold the reply that much longer.
WAIT_FIELDS: Mapping[str, float] = {"wait_ms": 0.001, "wait_s": 1.0}
# The wait a long poll called by its name alone (`call`, no `dto` loaded) gets when its
# payload leaves the field out: its input's default, so the client never gives up before
# the service answers (P5). `tests/api/test_client_core.py` holds it to the op table.
DEFAULT_WAITS: Mapping[str, tuple[str, int]] = {"events_tail": ("wait_ms", 0),
                                                 "agent_wait": ("wait_s", 25)}
_TOKEN = re.compile(r"[\x21-\x7e]+")  # what an Authorization header can carry
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

T = TypeVar("T")
C = TypeVar("C")


# ------------------------------------------------------------------------------ errors

class ClientError(Exception):
    """Base of the client's errors; `fix`, where there is one, says what to do."""

    fix: str | None = None


class BadServiceUrl(ClientError, ValueError):
    """`CLANKIE_URL` is not an address clankie can use: usage or invalid input (exit 2)."""

    def __init__(self, url: str, why: str = "") -> None:
        super().__init__(f"CLANKIE_URL={url!r} is not an address clankie can use"
                         + (f" ({why})" if why else "") + ": write http://HOST:PORT (an "
                         "IPv6 host in brackets, as in http://[::1]:18900) or "
                         "unix:///path/to/clankie.sock")
        self.fix = ("set CLANKIE_URL to http://HOST:PORT or unix:///path/to/clankie.sock, "
                    "or unset it to use the home's socket")


class _Problem(ClientError):
    """A problem document's fields (`problem`, `code`, `status`, `detail`), as both
    `ApiError` and `NotClankie` carry one; private, so no caller catches the two at once
    by mistake."""

    def __init__(self, problem: dict[str, Any]) -> None:
        self.problem = problem
        self.code = str(problem.get("code", "internal_error"))
        status = problem.get("status")  # whatever came: "abc", null, 1e999 are not statuses
        self.status = status if type(status) is int and 100 <= status <= 599 else 500
        self.detail = str(problem.get("detail", ""))
        super().__init__(f"{self.code}: {self.detail}")


class ApiError(_Problem):
    """The service answered with a problem document (`code`, `status`, `detail`)."""


class NotClankie(_Problem):
    """What answered at `address` is not clankie: neither a result nor a problem document
    came back (some other program of the owner's, say). Its `problem` is clankie's own
    account of that, code `not_clankie` with the HTTP status that came. Not an `ApiError`:
    an `except ApiError` does not catch it."""

    def __init__(self, address: str, status: int, *, via_env: bool, why: str = "") -> None:
        detail = (f"the service at {address} did not answer like clankie (HTTP {status}"
                  f"{'; ' + why if why else ''}); "
                  + ("check CLANKIE_URL" if via_env else "is `clankie serve` what listens "
                     "there?"))
        fix = ("point CLANKIE_URL at clankie's own address (unset: the home's socket)"
               if via_env else f"stop what listens at {address} and start `clankie serve`")
        super().__init__({"type": "urn:clankie:problem:not_clankie", "title": "not clankie",
                          "status": status, "detail": detail, "code": "not_clankie",
                          "fix": fix, "sent": "unknown"})
        self.args = (detail,)
        self.fix = fix


class ServiceUnreachable(ClientError):
    """The service could not be reached; the request was not sent. `fix`: how to start it
    where the client looks for it."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


class Uncertain(ClientError):
    """The request may have reached the service, but no reply came."""


class NotYours(ClientError):
    """The listener at `address` is not known to be the owner's: nothing was sent (T2).

    `certain`: it is another user's (a trust mark never covers that: `trusted` says the URL
    was marked all the same); otherwise who listens cannot be told here and the URL is not
    marked trusted. `fix` says what to do.
    """

    def __init__(self, address: str, listener: Listener, *, trusted: bool = False) -> None:
        self.address = address
        self.listener = listener
        self.certain = listener.uid is not None
        if self.certain:
            super().__init__(f"the service at {address} is not yours: it is served by "
                             f"{listener.describe()}, told by {listener.how}; the token was "
                             "not sent")
            self.fix = _not_yours_fix(address) + (
                "; CLANKIE_URL_TRUSTED does not cover a listener known to be someone else's"
                if trusted else "")
        else:
            super().__init__(f"the service at {address} is not known to be yours: clankie "
                             f"cannot tell who listens at {address} ({listener.how}); the "
                             "token was not sent")
            self.fix = ("if it is your own service (a tunnel to it, say), mark that URL "
                        f"trusted: export CLANKIE_URL_TRUSTED='{address}'")


def _not_yours_fix(address: str) -> str:
    """Another user's listener: who can stop it, and how to reach the owner's own."""
    if address.startswith("unix://"):
        path = address.removeprefix("unix://")
        return (f"another user's process holds {path} (`ss -xlp src {shlex.quote(path)}` "
                "shows it), and only that user or root can stop it: unset CLANKIE_URL to use "
                "your home's own socket (start it with `clankie serve`)")
    where = address.partition("://")[2].rstrip("/")
    host, _, port = where.rpartition(":")
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        loopback = False
    return (f"another user's process holds {where} (`ss -ltnp 'sport = :{port}'` shows "
            "it), and only that user or root can stop it: serve your own on a free port "
            f"(`clankie serve --tcp {host if loopback else '127.0.0.1'}:PORT`) and point "
            "CLANKIE_URL at it, or unset CLANKIE_URL to use the home's socket")


def unreachable(exc: BaseException, target: Target) -> ServiceUnreachable:
    """Nothing was sent: why, in the system's words, and how to start clankie there."""
    url = target.url
    reason = _reason(exc)
    if isinstance(exc, socket.gaierror):  # no address for the name: nothing to start there
        host = url.partition("://")[2].rpartition(":")[0]
        return ServiceUnreachable(
            f"cannot reach clankie at {url}: the host name {host} does not resolve "
            f"({reason})", "check the host in CLANKIE_URL (a typing error? a name only "
            "another network knows?), or unset CLANKIE_URL to use the home's socket")
    if target.via_env:  # plain `clankie serve` listens only on the home's socket
        nothing = "answers" if isinstance(exc, TimeoutError) else "listens"
        return ServiceUnreachable(f"nothing {nothing} at CLANKIE_URL={url} ({reason})",
                                  f"{_serve_at(url)}, or unset CLANKIE_URL to use the "
                                  "home's socket")
    return ServiceUnreachable(f"cannot reach clankie at {url}: {reason}; is `clankie serve` "
                              "running?", "start it: `clankie serve` (after `clankie "
                              "init`)")


def uncertain(exc: BaseException, target: Target) -> Uncertain:
    what = f"a malformed reply: {exc}" if isinstance(exc, Malformed) else _reason(exc)
    return Uncertain(f"no reply from clankie at {target.url} ({what}); the request may or "
                     "may not have been carried out")


def _reason(exc: BaseException) -> str:
    """Why, in the system's words ("connection refused"), not Python's exception names."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return str(exc) or type(exc).__name__


def _serve_at(url: str) -> str:
    """How to start clankie at `url` (as `service_address` returns it)."""
    if url.startswith("unix://"):
        path = Path(url.removeprefix("unix://"))
        if path.name == SOCKET:
            return f"start `CLANKIE_HOME={shlex.quote(str(path.parent))} clankie serve` there"
        return "start `clankie serve` in the home whose socket that is"
    return f"start `clankie serve --tcp {url.partition('://')[2]}` there"


# ------------------------------------------------------------------ addresses and trust

_HTTP_URL = re.compile(r"(?P<scheme>https?)://(?P<host>\[[0-9a-f:.]+\]|[a-z0-9._-]+)"
                       r":(?P<port>[0-9]{1,5})/?", re.IGNORECASE)
_UNIX_URL = re.compile(r"unix://(?P<path>/.+)", re.IGNORECASE | re.DOTALL)


def service_address(url: str) -> str:
    """`url` as clankie uses it, if it is one: `http://HOST:PORT` (or https; an IPv6 host in
    brackets; the scheme in any case; one trailing slash) or `unix:///absolute/path`, else
    `BadServiceUrl`. The scheme comes back in lower case and without the trailing slash."""
    if unix := _UNIX_URL.fullmatch(url):
        return f"unix://{unix['path']}"
    http = _HTTP_URL.fullmatch(url)
    if http is None:
        raise BadServiceUrl(url)
    if not 0 < int(http["port"]) <= 65535:
        raise BadServiceUrl(url, f"port {http['port']} is not one (1 to 65535)")
    host = http["host"]
    try:
        if host.startswith("["):
            ipaddress.IPv6Address(host[1:-1])
        else:
            host.encode("idna")  # a label empty or over 63 characters is no host name
    except ValueError:  # UnicodeError among them
        raise BadServiceUrl(url) from None
    return f"{http['scheme'].lower()}://{host}:{int(http['port'])}"


def _same_address(one: str, other: str) -> bool:
    def canonical(url: str) -> str:
        try:
            return service_address(url)
        except BadServiceUrl:
            return url.rstrip("/")
    return canonical(one) == canonical(other)


def trusted_url(url: str, environ: Mapping[str, str] | None = None) -> bool:
    """Whether the owner marked `url` trusted: `CLANKIE_URL_TRUSTED` names that very URL
    (a mark is for one address, so one left in a profile trusts no other)."""
    env = os.environ if environ is None else environ
    mark = env.get("CLANKIE_URL_TRUSTED", "").strip()
    return bool(mark) and _same_address(mark, url)


def admit(listener: Listener, target: Target) -> None:
    """T2: a new connection is used only if the owner's service is at its other end (or,
    where that cannot be told, the URL is marked trusted); else `NotYours`."""
    if listener.uid == os.geteuid() or (listener.uid is None and target.trusted):
        return
    raise NotYours(target.url, listener, trusted=target.trusted)


class Target:
    """Where a client sends, and with which token (the rules of `clankie.home`), and how
    a request is written."""

    def __init__(self, url: str | None, token: str | None, home: Home | None,
                 timeout: float = DEFAULT_TIMEOUT, fit: bool = False) -> None:
        self.fit = fit  # `call`'s results must fit the op's shape in clankie.dto
        home = home or Home.from_env()
        self.url = service_address(url or service_url(home))
        given = os.environ.get("CLANKIE_URL", "")
        self.via_env = bool(given) and _same_address(given, self.url)  # advice names it
        self.token = token if token is not None else operator_token(home)
        self.base_timeout = timeout
        self.trusted = trusted_url(self.url)
        scheme, _, where = self.url.partition("://")
        self.uds = where if scheme == "unix" else None
        host, _, port = where.rpartition(":")
        self.host = "" if self.uds else host.strip("[]")
        self.port = 0 if self.uds else int(port)
        self.tls = scheme == "https"
        self.host_header = "clankie" if self.uds else where

    def request(self, ask: Ask) -> bytes:
        """The request's bytes; a token that no header can carry is refused unsent."""
        lines = [f"{ask.method} {ask.path} HTTP/1.1", f"Host: {self.host_header}",
                 "Accept: */*", f"User-Agent: clankie/{__version__}"]
        if self.token:
            if not _TOKEN.fullmatch(self.token):
                raise ApiError({"type": "urn:clankie:problem:unauthenticated",
                                "title": "unauthenticated", "status": 401,
                                "code": "unauthenticated",
                                "detail": "the token has characters that no HTTP header "
                                          "carries, so it is not one; it was not sent",
                                "fix": "check CLANKIE_TOKEN (or the home's token file)"})
            lines.append(f"Authorization: Bearer {self.token}")
        body = b""
        if ask.payload is not None:
            body = json.dumps(ask.payload, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False).encode()
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# ------------------------------------------------------------------------- one request

@dataclass(frozen=True)
class Ask:
    """One request as the flow sees it. `op`: the op's name (None: not an op); `long_poll`:
    the op's flag where its `dto.Op` is known, None where only its name is (`call`);
    `values`: what the wait and the cursor are read from (the payload, or a typed request
    with its defaults)."""

    method: str
    path: str
    payload: dict[str, Any] | None
    op: str | None = None
    long_poll: bool | None = False
    values: Mapping[str, Any] | None = None

    @classmethod
    def by_name(cls, op: str, payload: Mapping[str, Any] | None) -> Ask:
        """An op known by its name only: a wait field in its payload is the wait it asks
        for (only a long poll's input has one; the service refuses it on any other op, at
        once), and a page of events must move its cursor on."""
        sent = dict(payload or {})
        field, default = DEFAULT_WAITS.get(op, (None, None))
        values = sent if field is None or field in sent else {**sent, field: default}
        return cls("POST", _op_path(op), sent, op, None, values)

    @classmethod
    def typed(cls, spec: dto.Op[Any, Any], request: dto.Strict | None) -> Ask:
        """An op of the table with its input model: only the fields the caller set are
        sent (the service applies its own defaults, as for a request written by hand); a
        long poll's wait is the request's, its default included."""
        sent = {} if request is None else request.model_dump(mode="json", exclude_unset=True)
        values = ({} if request is None or not spec.long_poll
                  else request.model_dump(mode="json"))
        return cls("POST", _op_path(spec.name), sent, spec.name, spec.long_poll, values)

    def timeouts(self, base: float) -> tuple[float, float]:
        """(connecting, the exchange once connected): a long poll's wait adds to the
        second, so the client never gives up before the service answers (P5)."""
        wait_s = 0.0
        if self.long_poll is not False:
            for field, unit in WAIT_FIELDS.items():
                wait = (self.values or {}).get(field)
                if type(wait) is int:  # anything else the service refuses at once
                    wait_s = wait * unit
        return min(base, CONNECT_TIMEOUT_S), base + wait_s

    def after(self) -> int | None:
        """The cursor a page of events must move past (V1), where this may be one."""
        if self.long_poll is False:
            return None
        after = (self.values or {}).get("after", 0)
        return after if type(after) is int else None


def _op_path(op: str) -> str:
    quoted = "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in op.encode())
    return f"/v1/ops/{quoted}"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: json.loads would take them


def _finite(text: str) -> float:
    number = float(text)
    if number in (math.inf, -math.inf):  # 1e999: JSON, but no number `--json` can print
        raise ValueError(f"{text} is beyond any float")
    return number


def outcome(response: Response, target: Target, ask: Ask) -> dict[str, Any]:
    """The result of a 200, else the problem as `ApiError`, else `NotClankie`: a problem
    whose code is none of SPEC section 10's is not clankie's refusal, whatever its status
    (a 418 from something else at the address), and is not said as one. With the
    target's `fit`, an op's result must also fit its output shape (`fit_shape`); a page of
    events must move its cursor on (`_moves_on`) whatever `fit` says."""
    try:
        body = json.loads(response.body, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError):  # not JSON (or not UTF-8, or NaN), or too nested
        body = None
    if response.status == 200 and isinstance(body, dict):
        if ask.op is not None and target.fit:
            fit_shape(ask.op, body, target.url, via_env=target.via_env)
        _moves_on(body, ask, target)
        return body
    if (isinstance(body, dict) and isinstance(body.get("code"), str)
            and type(body.get("status")) is int):
        if body["code"] in CODES:
            raise ApiError(body)
        unknown = body["code"][:80]
        raise NotClankie(target.url, response.status, via_env=target.via_env,
                         why=f"a problem code that is none of clankie's: {unknown!r}")
    raise NotClankie(target.url, response.status, via_env=target.via_env)


def _moves_on(page: dict[str, Any], ask: Ask, target: Target) -> None:
    """V1: a page with events has a `next_after` past the `after` it was asked for; one
    that does not would have a follower ask for the same events forever: `NotClankie`,
    never a loop. Asked of a long poll's result (or of any op's known by name only) that
    is shaped like a page."""
    after = ask.after()
    events, next_after = page.get("events"), page.get("next_after")
    if (after is not None and isinstance(events, list) and events
            and type(next_after) is int and next_after <= after):
        raise NotClankie(target.url, 200, via_env=target.via_env,
                         why=f"its {ask.op} cursor stayed at {after} after "
                             f"{len(events)} events")


def fit_shape(op: str, result: dict[str, Any], address: str, *,
              via_env: bool = False) -> dict[str, Any]:
    """`result` if it fits `op`'s output shape in `clankie.dto` (imported here, so only a
    caller that asks pays for pydantic; an op it does not name passes), else `NotClankie`:
    a JSON object is not yet a clankie result (a `{}`, say)."""
    from clankie import dto

    known = dto.OPS.get(op)
    if known is not None:
        typed(known, result, address, via_env=via_env)
    return result


def typed(spec: dto.Op[Any, OutT], result: Mapping[str, object], address: str, *,
          via_env: bool = False) -> OutT:
    """`result` as the op's output model, checked once and strictly (JSON has no "1" for
    1); one that does not fit is `NotClankie`, saying where: a JSON object is not yet a
    clankie result (a `{}` from some other JSON service, say)."""
    from pydantic import ValidationError

    try:
        return spec.output.model_validate(result, strict=True)
    except ValidationError as exc:
        raise NotClankie(address, 200, via_env=via_env,
                         why=f"its {spec.name} result has {exc.error_count()} misfit(s), "
                             f"the first at {_where(exc)}") from None


def _where(exc: Any) -> str:
    first = exc.errors()[0]
    return ".".join(str(part) for part in first.get("loc", ())) or "the top"


# ---------------------------------------------------------------- steps and transports

@dataclass(frozen=True)
class Step:
    """One thing for a transport to do that may block or wait: its method `verb`, called
    with `args`; what it returns (or raises) goes back into the flow."""

    verb: str
    args: tuple[Any, ...]


Flow = Generator[Step, Any, T]


class Transport(Protocol[C]):
    """The sync side of the seam: how the steps are done (`clankie.client.Sockets`; the
    tests' in-memory one). `deadline` is a `time.monotonic()` instant; past it, a step
    raises `TimeoutError`."""

    def connect(self, target: Target, timeout: float) -> C: ...
    def listener(self, conn: C) -> Listener: ...  # who listens at the other end (T2)
    def tls(self, conn: C, target: Target, timeout: float) -> C: ...
    def alive(self, conn: C) -> bool: ...  # a kept one: neither closed nor sent to since
    def write(self, conn: C, data: memoryview, deadline: float) -> int: ...  # bytes taken
    def flush(self, conn: C, deadline: float) -> None: ...
    def read(self, conn: C, deadline: float) -> bytes: ...  # b"": the end
    def close(self, conn: C) -> None: ...


class AsyncTransport(Protocol[C]):
    """The async side of the seam (`clankie.client.Streams`): `Transport`'s steps,
    awaited (`close` neither blocks nor waits)."""

    def connect(self, target: Target, timeout: float) -> Awaitable[C]: ...
    def listener(self, conn: C) -> Awaitable[Listener]: ...
    def tls(self, conn: C, target: Target, timeout: float) -> Awaitable[C]: ...
    def alive(self, conn: C) -> Awaitable[bool]: ...
    def write(self, conn: C, data: memoryview, deadline: float) -> Awaitable[int]: ...
    def flush(self, conn: C, deadline: float) -> Awaitable[None]: ...
    def read(self, conn: C, deadline: float) -> Awaitable[bytes]: ...
    def close(self, conn: C) -> None: ...
    def wait_closed(self, conn: C) -> Awaitable[None]: ...  # after `close`, at the end


@dataclass(frozen=True)
class Done(Generic[T]):
    """A flow's end: its value."""

    value: T


def advance(flow: Flow[T], got: tuple[Any, BaseException | None]) -> Step | Done[T]:
    """The flow's next step, given what the last one returned or raised; or its end."""
    value, error = got
    try:
        return flow.throw(error) if error is not None else flow.send(value)
    except StopIteration as stop:
        return Done(stop.value)


# --------------------------------------------------------------------- keep-alive pool

class Pool(Generic[C]):
    """The kept-alive connections, the latest kept first out; safe across threads (the
    sync client may be shared), never held across a step."""

    def __init__(self) -> None:
        self._idle: list[tuple[C, float]] = []
        self._lock = threading.Lock()

    def pop(self, now: float) -> tuple[C, bool] | None:
        """The latest kept connection, and whether it is recent enough to reuse."""
        with self._lock:
            if not self._idle:
                return None
            conn, since = self._idle.pop()
        return conn, now - since <= KEEP_IDLE_S

    def keep(self, conn: C, now: float) -> bool:
        """Keep `conn` for a later request, unless `MAX_IDLE` are kept already."""
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append((conn, now))
                return True
        return False

    def drain(self) -> list[C]:
        """Every kept connection, given up (to close)."""
        with self._lock:
            idle, self._idle = self._idle, []
        return [conn for conn, _ in idle]


class _Sent(Exception):
    """A transport failure once a byte of the request was written (so: uncertain)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Core(Target, Generic[C]):
    """A client without its I/O: the target, the kept connections and the flow of one
    call. `close` is the transport's (closing neither blocks nor waits)."""

    def __init__(self, url: str | None, token: str | None, home: Home | None,
                 timeout: float, fit: bool, close: Callable[[C], None]) -> None:
        super().__init__(url, token, home, timeout, fit)
        self._pool: Pool[C] = Pool()
        self._close = close
        # How many connections were opened: a follower that sees a new one asks whether the
        # service restarted meanwhile (`clankie.cli.follow`).
        self.connections = 0

    def _result(self, ask: Ask) -> Flow[dict[str, Any]]:
        """One call: its result, or the `ClientError` that says what happened."""
        return outcome((yield from self._send(ask)), self, ask)

    def _send(self, ask: Ask) -> Flow[Response]:
        request = self.request(ask)  # a bad token is refused before any connection
        connect_s, exchange_s = ask.timeouts(self.base_timeout)
        conn = yield from self._connection(connect_s)
        with self._failing(conn):
            response = yield from _exchange(conn, request, time.monotonic() + exchange_s)
        if not (response.keep_alive and self._pool.keep(conn, time.monotonic())):
            self._close(conn)
        return response

    def _connection(self, timeout: float) -> Flow[C]:
        """A kept connection still open, else a new one admitted under T2 (and its TLS
        handshake done) before anything is written to it."""
        now = time.monotonic()
        while (kept := self._pool.pop(now)) is not None:
            conn, recent = kept
            if recent and (yield Step("alive", (conn,))):
                return conn
            self._close(conn)
        try:
            conn = yield Step("connect", (self, timeout))
        except OSError as exc:  # refused, no such socket, no such host, timed out
            raise unreachable(exc, self) from None
        with self._failing(conn):
            admit((yield Step("listener", (conn,))), self)
            if self.tls:  # no byte of the request is written before the handshake ends
                conn = yield Step("tls", (conn, self, timeout))
        self.connections += 1
        return conn

    @contextlib.contextmanager
    def _failing(self, conn: C) -> Iterator[None]:
        """Whatever fails while `conn` is in use closes it, and says what it means: a
        failure once a byte of the request was written is `Uncertain`, one before (the
        TLS handshake's among them) `ServiceUnreachable`; anything else (`NotYours`,
        Ctrl+C) goes on as it is."""
        try:
            yield
        except _Sent as exc:
            self._close(conn)
            raise uncertain(exc.cause, self) from None
        except (OSError, Malformed) as exc:
            self._close(conn)
            raise unreachable(exc, self) from None
        except BaseException:
            self._close(conn)
            raise

    def _idle(self) -> list[C]:
        """The kept connections, given up (the driver closes them)."""
        return self._pool.drain()


def _exchange(conn: Any, request: bytes, deadline: float) -> Flow[Response]:
    """Write `request`, read the response. `_Sent` wraps a failure after the first byte was
    written; one before comes as it is (an `OSError`)."""
    view, sent = memoryview(request), False
    try:
        while view:
            n = yield Step("write", (conn, view, deadline))
            sent = sent or n > 0
            view = view[n:]
        yield Step("flush", (conn, deadline))
    except OSError as exc:
        if not sent:
            raise
        if isinstance(exc, TimeoutError):
            raise _Sent(exc) from exc
        try:  # the server may answer before it has read the whole request, and hang up
            return _not_kept((yield from _read(conn, deadline)))
        except (OSError, Malformed):
            raise _Sent(exc) from exc
    try:
        return (yield from _read(conn, deadline))
    except (OSError, Malformed) as exc:
        raise _Sent(exc) from exc


def _read(conn: Any, deadline: float) -> Flow[Response]:
    parser = ResponseParser()
    while True:
        data = yield Step("read", (conn, deadline))
        response = parser.feed(data) if data else parser.feed_eof()
        if response is not None:
            return response


def _not_kept(response: Response) -> Response:
    """The answer that came though writing the request failed midway (a problem `413`,
    say): the connection is not kept."""
    return Response(response.status, response.headers, response.body, keep_alive=False)


def left(deadline: float) -> float:
    """Seconds until `deadline`; none left is `TimeoutError`."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise TimeoutError("timed out")
    return remaining
