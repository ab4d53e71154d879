"""The one client of the dispatcher (HTTP/1.1 over a Unix socket or TCP, sync and async).

Owns how a surface talks to the service: the URL and token rules of `clankie.home`,
requests as `POST /v1/ops/{op}`, results parsed into the `clankie.dto` output shapes, and
the kinds of failure that a surface must tell apart:

- `BadServiceUrl`: the URL is not an address clankie can use (a usage error); nothing was
  tried.
- `ApiError`: the service answered with a problem document (`code`, `status`, `problem`).
  `NotClankie`, one of them: what answered sent neither a result nor a problem document,
  so it is not clankie (some other program of the owner's at CLANKIE_URL, say).
- `ServiceUnreachable`: nothing was sent (no socket, connection refused, or the
  connection failed before a byte of the request was written).
- `NotYours`: something listens at the address, but it is not known to be the owner's
  service (SPEC T2), so nothing was sent, the token least of all.
- `Uncertain`: the request may have reached the service but no whole reply came (the
  connection broke or timed out once a byte was written, or what came back was not a
  well-formed HTTP response). The caller must not resend it; it should read the current
  state instead.

It never retries a request by itself.

HTTP is its own, on the standard library only (the `import` costs a few milliseconds, which
the CLI's start-up needs): a request is written by hand, the response read by the pure
parser of `clankie.http1`; the sync client over a plain socket, the async one over asyncio
streams. Connections are kept alive for a few seconds and reused, one request at a time
each; a kept one that the server has closed meanwhile is dropped before anything is written.

T2 is kept where connections are made: every new connection (the first, and every later
one: keep-alive ends, reconnects) is opened, then `clankie.peer` is asked who is at the
other end of the raw socket, and it is closed unless that is the current user (or, where
it cannot be told, the URL is marked trusted). Nothing (not even a TLS hello) is written
to it before the check, so no request can reach an unchecked listener.
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
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clankie import __version__
from clankie.home import SOCKET, Home, operator_token, service_url
from clankie.http1 import Malformed, Response, ResponseParser
from clankie.peer import ConnectedSocket, Listener, listener_of

if TYPE_CHECKING:  # pydantic, the DTOs and asyncio load on first use: the CLI needs none
    import asyncio
    import ssl

    from clankie import dto
    from clankie.dto import InT, OutT

__all__ = ["ApiError", "AsyncClient", "BadServiceUrl", "Client", "ClientError", "NotClankie",
           "NotYours", "ServiceUnreachable", "Uncertain", "fit_shape", "service_address",
           "trusted_url"]

DEFAULT_TIMEOUT = 30.0
# A long-poll that comes back empty at once found no free slot (V5: 8 a credential):
# a follower pauses this long before asking again, rather than asking in a tight loop.
EMPTY_AT_ONCE_S = 0.25
PAUSE_AFTER_EMPTY_S = 1.0


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


class ApiError(ClientError):
    def __init__(self, problem: dict[str, Any]) -> None:
        self.problem = problem
        self.code = str(problem.get("code", "internal_error"))
        status = problem.get("status")  # whatever came: "abc", null, 1e999 are not statuses
        self.status = status if type(status) is int and 100 <= status <= 599 else 500
        self.detail = str(problem.get("detail", ""))
        super().__init__(f"{self.code}: {self.detail}")


class NotClankie(ApiError):
    """What answered at `address` is not clankie: neither a result nor a problem document
    came back (some other program of the owner's, say). Its `problem` is clankie's own
    account of that, code `not_clankie` with the HTTP status that came."""

    def __init__(self, address: str, status: int, *, via_env: bool, why: str = "") -> None:
        detail = (f"the service at {address} did not answer like clankie (HTTP {status}"
                  f"{'; ' + why if why else ''}); "
                  + ("check CLANKIE_URL" if via_env else "is `clankie serve` what listens "
                     "there?"))
        fix = ("point CLANKIE_URL at clankie's own address (unset: the home's socket)"
               if via_env else f"stop what listens at {address} and start `clankie serve`")
        super().__init__({"type": "urn:clankie:problem:not_clankie", "title": "not clankie",
                          "status": status, "detail": detail, "code": "not_clankie",
                          "fix": fix})
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


class _PeerCheck:
    """Admits a new connection only if the owner's service is at its other end (T2)."""

    def __init__(self, address: str, trusted: bool) -> None:
        self.address = address
        self.trusted = trusted

    def admit(self, sock: ConnectedSocket | None) -> None:
        listener = (listener_of(sock) if sock is not None
                    else Listener(None, "the connection has no socket to ask"))
        if listener.uid == os.geteuid() or (listener.uid is None and self.trusted):
            return
        raise NotYours(self.address, listener, trusted=self.trusted)


KEEP_IDLE_S = 4.0  # a kept-alive connection is dropped after this (the server's keep-alive: 5 s)
MAX_IDLE = 20  # kept-alive connections at most; more close once their reply has come
CONNECT_TIMEOUT_S = 5.0
AGENT_WAIT_DEFAULT_S = 25  # `agent_wait`'s default wait (P4; dto.AgentWait, checked by a test)
READ_SIZE = 65536
_TOKEN = re.compile(r"[\x21-\x7e]+")  # what an Authorization header can carry
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


class _Sent(Exception):
    """A transport failure once a byte of the request was written (so: uncertain)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


def _timeouts(op: str, payload: Mapping[str, Any], base: float) -> tuple[float, float]:
    """(connecting, the exchange once connected): a long-poll's wait adds to the second."""
    if op == "events_tail":
        wait = payload.get("wait_ms", 0)
        wait_s = wait / 1000 if isinstance(wait, int) else 0.0
    elif op == "agent_wait":
        wait = payload.get("wait_s", AGENT_WAIT_DEFAULT_S)
        wait_s = float(wait) if isinstance(wait, int) else 0.0
    else:
        wait_s = 0.0
    return min(base, CONNECT_TIMEOUT_S), base + wait_s


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN, Infinity: json.loads would take them


def _finite(text: str) -> float:
    number = float(text)
    if number in (math.inf, -math.inf):  # 1e999: JSON, but no number `--json` can print
        raise ValueError(f"{text} is beyond any float")
    return number


def _result(response: Response, target: _Target, op: str | None = None,
            payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The result of a 200, else the problem as `ApiError`, else `NotClankie`. With `op`
    and the target's `fit`, a result must also fit the op's output shape (`fit_shape`); an
    `events_tail` page must move its cursor on (`_moves_on`) whatever `fit` says."""
    try:
        body = json.loads(response.body, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError):  # not JSON (or not UTF-8, or NaN), or too nested
        body = None
    if response.status == 200 and isinstance(body, dict):
        if op is not None and target.fit:
            fit_shape(op, body, target.url, via_env=target.via_env)
        if op == "events_tail":
            _moves_on(body, (payload or {}).get("after", 0), target)
        return body
    if (isinstance(body, dict) and isinstance(body.get("code"), str)
            and type(body.get("status")) is int):
        raise ApiError(body)
    raise NotClankie(target.url, response.status, via_env=target.via_env)


def _moves_on(page: dict[str, Any], after: Any, target: _Target) -> None:
    """V1: a page with events has a `next_after` past `after`; one that does not would
    have a follower ask for the same events forever: `NotClankie`, never a loop."""
    events, next_after = page.get("events"), page.get("next_after")
    if (isinstance(events, list) and events and type(next_after) is int
            and type(after) is int and next_after <= after):
        raise NotClankie(target.url, 200, via_env=target.via_env,
                         why=f"its events_tail cursor stayed at {after} after "
                             f"{len(events)} events")


def fit_shape(op: str, result: dict[str, Any], address: str, *,
              via_env: bool = False) -> dict[str, Any]:
    """`result` if it fits `op`'s output shape in `clankie.dto` (imported here, so only a
    caller that asks pays for pydantic; an op it does not name passes), else `NotClankie`:
    a JSON object is not yet a clankie result (a `{}`, say)."""
    from pydantic import ValidationError

    from clankie import dto

    known = dto.OPS.get(op)
    if known is not None:
        try:
            known.output.model_validate(result, strict=True)  # JSON has no "1" for 1
        except ValidationError as exc:
            raise NotClankie(address, 200, via_env=via_env,
                             why=f"its {op} result has {exc.error_count()} misfit(s), the "
                                 f"first at {_where(exc)}") from None
    return result


def _typed(spec: dto.Op[Any, OutT], result: dict[str, Any], target: _Target) -> OutT:
    """`result` as the op's output shape; one that does not fit is `NotClankie`."""
    fit_shape(spec.name, result, target.url, via_env=target.via_env)
    return spec.output.model_validate(result)


def _payload(request: dto.Strict | None) -> dict[str, Any]:
    """An op's input model as the JSON object sent: only the fields the caller set, so the
    service applies its own defaults (as for a request written by hand)."""
    return {} if request is None else request.model_dump(mode="json", exclude_unset=True)


def _where(exc: Any) -> str:
    first = exc.errors()[0]
    return ".".join(str(part) for part in first.get("loc", ())) or "the top"


def _unreachable(exc: BaseException, target: _Target) -> ServiceUnreachable:
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


def _uncertain(exc: BaseException, target: _Target) -> Uncertain:
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


class _Target:
    """Where a client sends, and with which token (the rules of `clankie.home`), and the
    request and outcome rules both clients share."""

    def __init__(self, url: str | None, token: str | None, home: Home | None,
                 timeout: float, fit: bool = False) -> None:
        self.fit = fit  # `call`'s results must fit the op's shape in clankie.dto
        home = home or Home.from_env()
        self.url = service_address(url or service_url(home))
        given = os.environ.get("CLANKIE_URL", "")
        self.via_env = bool(given) and _same_address(given, self.url)  # advice names it
        self.token = token if token is not None else operator_token(home)
        self._base_timeout = timeout
        self._check = _PeerCheck(self.url, trusted_url(self.url))
        scheme, _, where = self.url.partition("://")
        self._uds = where if scheme == "unix" else None
        host, _, port = where.rpartition(":")
        self._host = "" if self._uds else host.strip("[]")
        self._port = 0 if self._uds else int(port)
        self._tls = scheme == "https"
        self._host_header = "clankie" if self._uds else where

    def _request(self, method: str, path: str, payload: Mapping[str, Any] | None) -> bytes:
        """The request's bytes; a token that no header can carry is refused unsent."""
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self._host_header}", "Accept: */*",
                 f"User-Agent: clankie/{__version__}"]
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
        if payload is not None:
            body = json.dumps(payload, ensure_ascii=False, separators=(",", ":"),
                              allow_nan=False).encode()
            lines += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body

    def _tls_context(self) -> ssl.SSLContext:
        import ssl  # only for https: most clients never pay for it

        return ssl.create_default_context()


def _op_path(op: str) -> str:
    quoted = "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in op.encode())
    return f"/v1/ops/{quoted}"


class _Connection:
    """A sync connection, checked under T2 when it was made."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        """Kept recently, and the server has neither closed it nor sent anything since."""
        if now - self.idle_since > KEEP_IDLE_S:
            return False
        try:
            self.sock.setblocking(False)
            try:
                self.sock.recv(1, socket.MSG_PEEK)  # b"": closed; a byte: nothing asked for it
                return False
            finally:
                self.sock.setblocking(True)
        except BlockingIOError:
            return True
        except OSError:
            return False

    def exchange(self, request: bytes, deadline: float) -> Response:
        """Write `request`, read the response. `_Sent` wraps a failure after the first byte
        was written; one before comes as it is (an `OSError`)."""
        sock, view, sent = self.sock, memoryview(request), False
        try:
            while view:
                sock.settimeout(_left(deadline))
                n = sock.send(view)
                sent = sent or n > 0
                view = view[n:]
        except OSError as exc:
            if not sent:
                raise
            if isinstance(exc, TimeoutError):
                raise _Sent(exc) from exc
            try:
                return _not_kept(self._read(deadline))
            except (OSError, Malformed):
                raise _Sent(exc) from exc
        try:
            return self._read(deadline)
        except (OSError, Malformed) as exc:
            raise _Sent(exc) from exc

    def _read(self, deadline: float) -> Response:
        parser = ResponseParser()
        while True:
            self.sock.settimeout(_left(deadline))
            data = self.sock.recv(READ_SIZE)
            response = parser.feed(data) if data else parser.feed_eof()
            if response is not None:
                return response

    def close(self) -> None:
        self.sock.close()


def _not_kept(response: Response) -> Response:
    """The answer that came though writing the request failed midway: the server may answer
    before it has read the whole request (a problem `413`, say) and hang up. The
    connection is not kept."""
    return Response(response.status, response.headers, response.body, keep_alive=False)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("timed out")
    return left


class Client(_Target):
    def __init__(self, url: str | None = None, token: str | None = None, *,
                 home: Home | None = None, timeout: float = DEFAULT_TIMEOUT,
                 fit: bool = False) -> None:
        super().__init__(url, token, home, timeout, fit)
        self._idle: list[_Connection] = []
        self._lock = threading.Lock()
        # How many connections were opened: a follower that sees a new one asks whether the
        # service restarted meanwhile (`clankie.cli.follow`).
        self.connections = 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def call(self, op: str, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One operation; its result as JSON, or a `ClientError`."""
        payload = dict(payload or {})
        connect_s, exchange_s = _timeouts(op, payload, self._base_timeout)
        return _result(self._send(self._request("POST", _op_path(op), payload), connect_s,
                                  exchange_s), self, op, payload)

    def _send(self, request: bytes, connect_s: float, exchange_s: float) -> Response:
        conn = self._kept() or self._connect(connect_s)
        try:
            response = conn.exchange(request, time.monotonic() + exchange_s)
        except _Sent as exc:
            conn.close()
            raise _uncertain(exc.cause, self) from None
        except (OSError, Malformed) as exc:
            conn.close()
            raise _unreachable(exc, self) from None
        except BaseException:
            conn.close()
            raise
        self._keep(conn) if response.keep_alive else conn.close()
        return response

    def _kept(self) -> _Connection | None:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if conn.reusable(now):
                    return conn
                conn.close()
        return None

    def _keep(self, conn: _Connection) -> None:
        conn.idle_since = time.monotonic()
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self, timeout: float) -> _Connection:
        """A new connection, admitted under T2 before anything is written to it."""
        try:
            if self._uds is not None:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.settimeout(timeout)
                    sock.connect(self._uds)
                except BaseException:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection((self._host, self._port), timeout)
        except OSError as exc:  # refused, no such socket, no such host, timed out
            raise _unreachable(exc, self) from None
        try:
            self._check.admit(sock)
            if self._tls:
                sock = self._tls_context().wrap_socket(sock, server_hostname=self._host)
        except OSError as exc:  # the TLS handshake: no byte of the request was written
            sock.close()
            raise _unreachable(exc, self) from None
        except BaseException:
            sock.close()
            raise
        self.connections += 1
        return _Connection(sock)

    def op(self, spec: dto.Op[InT, OutT], request: InT | None = None) -> OutT:
        """One operation, typed by its row of the op table (`clankie.dto.OPS`): `request`
        (the op's input model; none for an op whose input is `Nothing`) goes out as JSON,
        and the result comes back as the op's output model (one that does not fit is
        `NotClankie`)."""
        return _typed(spec, self.call(spec.name, _payload(request)), self)

    def openapi(self) -> dict[str, Any]:
        connect_s, exchange_s = _timeouts("openapi", {}, self._base_timeout)
        return _result(self._send(self._request("GET", "/v1/openapi.json", None), connect_s,
                                  exchange_s), self)


class _AsyncConnection:
    """An asyncio connection, checked under T2 when it was made."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def reusable(self, now: float) -> bool:
        """As `_Connection.reusable`; the socket itself is asked, as the loop may not have
        seen its end yet."""
        import select

        if (now - self.idle_since > KEEP_IDLE_S or self.writer.is_closing()
                or self.reader.at_eof()):
            return False
        sock = self.writer.get_extra_info("socket")
        if sock is None:
            return False
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        return not poll.poll(0)  # readable: closed, or something nobody asked for came

    async def exchange(self, request: bytes, deadline: float) -> Response:
        import asyncio

        left = _left(deadline)  # nothing was written yet
        try:
            async with asyncio.timeout(left):
                if self.writer.is_closing() or self.reader.at_eof():
                    raise ConnectionResetError("the connection was closed")
                self.writer.write(request)  # from here on, the request may have gone
                try:
                    await self.writer.drain()
                except OSError as exc:
                    try:
                        return _not_kept(await self._read())
                    except (OSError, Malformed):
                        raise _Sent(exc) from exc
                try:
                    return await self._read()
                except (OSError, Malformed) as exc:
                    raise _Sent(exc) from exc
        except TimeoutError as exc:  # asyncio.timeout's, raised outside of the block
            raise _Sent(exc) from exc

    async def _read(self) -> Response:
        parser = ResponseParser()
        while True:
            data = await self.reader.read(READ_SIZE)
            response = parser.feed(data) if data else parser.feed_eof()
            if response is not None:
                return response

    def close(self) -> None:
        self.writer.close()


class AsyncClient(_Target):
    """The same client for asyncio callers (the TUI's workers)."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 home: Home | None = None, timeout: float = DEFAULT_TIMEOUT,
                 fit: bool = False) -> None:
        super().__init__(url, token, home, timeout, fit)
        self._idle: list[_AsyncConnection] = []

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for conn in idle:
            with contextlib.suppress(OSError):
                await conn.writer.wait_closed()

    async def call(self, op: str, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        payload = dict(payload or {})
        connect_s, exchange_s = _timeouts(op, payload, self._base_timeout)
        request = self._request("POST", _op_path(op), payload)
        conn = self._kept() or await self._connect(connect_s)
        try:
            response = await conn.exchange(request, time.monotonic() + exchange_s)
        except _Sent as exc:
            conn.close()
            raise _uncertain(exc.cause, self) from None
        except (OSError, Malformed) as exc:
            conn.close()
            raise _unreachable(exc, self) from None
        except BaseException:
            conn.close()
            raise
        self._keep(conn) if response.keep_alive else conn.close()
        return _result(response, self, op, payload)

    def _kept(self) -> _AsyncConnection | None:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable(now):
                return conn
            conn.close()
        return None

    def _keep(self, conn: _AsyncConnection) -> None:
        conn.idle_since = time.monotonic()
        if len(self._idle) < MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()

    async def _connect(self, timeout: float) -> _AsyncConnection:
        """A new connection, admitted under T2 (the check reads /proc for TCP, so it runs
        on a thread) before anything is written to it."""
        import asyncio

        try:
            async with asyncio.timeout(timeout):
                if self._uds is not None:
                    reader, writer = await asyncio.open_unix_connection(self._uds)
                else:
                    reader, writer = await asyncio.open_connection(self._host, self._port)
        except OSError as exc:  # refused, no such socket, no such host, timed out
            raise _unreachable(exc, self) from None
        try:
            await asyncio.to_thread(self._check.admit, writer.get_extra_info("socket"))
            if self._tls:
                async with asyncio.timeout(timeout):
                    await writer.start_tls(self._tls_context(), server_hostname=self._host)
        except OSError as exc:  # the TLS handshake: no byte of the request was written
            writer.close()
            raise _unreachable(exc, self) from None
        except BaseException:
            writer.close()
            raise
        return _AsyncConnection(reader, writer)

    async def op(self, spec: dto.Op[InT, OutT], request: InT | None = None) -> OutT:
        """`Client.op`, awaited."""
        return _typed(spec, await self.call(spec.name, _payload(request)), self)
