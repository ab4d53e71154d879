"""The one client of the dispatcher (httpx, Unix socket or TCP, sync and async).

Owns how a surface talks to the service: the URL and token rules of `clankie.home`,
requests as `POST /v1/ops/{op}`, results parsed into the `clankie.dto` output shapes, and
the kinds of failure that a surface must tell apart:

- `BadServiceUrl`: the URL is not an address clankie can use (a usage error); nothing was
  tried.
- `ApiError`: the service answered with a problem document (`code`, `status`, `problem`).
  `NotClankie`, one of them: what answered sent neither a result nor a problem document,
  so it is not clankie (some other program of the owner's at CLANKIE_URL, say).
- `ServiceUnreachable`: nothing was sent (no socket, connection refused).
- `NotYours`: something listens at the address, but it is not known to be the owner's
  service (SPEC T2), so nothing was sent, the token least of all.
- `Uncertain`: the request may have reached the service but no reply came. The caller
  must not resend it; it should read the current state instead.

It never retries a request by itself.

T2 is kept below httpx, where connections are made: httpx's own transport runs over an
httpcore connection pool whose network backend connects as usual, then asks
`clankie.peer` who is at the other end of the raw socket and closes it unless that is the
current user (or, where it cannot be told, the URL is marked trusted). A connection is
made this way for the first request and for every later one the pool opens (keep-alive
ends, reconnects), and no byte is written to it before the check, so no request, however
it is built, can reach an unchecked listener.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpcore
import httpx

from clankie.home import SOCKET, Home, operator_token, service_url
from clankie.peer import ConnectedSocket, Listener, listener_of

if TYPE_CHECKING:  # pydantic and the DTOs load on first use: `clankie --help` needs neither
    from clankie import dto

__all__ = ["ApiError", "AsyncClient", "BadServiceUrl", "CheckedBackend", "Client", "NotClankie",
           "NotYours",
           "ServiceUnreachable", "Uncertain", "service_address", "trusted_url"]

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

    def __init__(self, url: str) -> None:
        super().__init__(f"CLANKIE_URL={url!r} is not an address clankie can use: write "
                         "http://HOST:PORT (an IPv6 host in brackets, as in "
                         "http://[::1]:18900) or unix:///path/to/clankie.sock")
        self.fix = ("set CLANKIE_URL to http://HOST:PORT or unix:///path/to/clankie.sock, "
                    "or unset it to use the home's socket")


class ApiError(ClientError):
    def __init__(self, problem: dict[str, Any]) -> None:
        self.problem = problem
        self.code = str(problem.get("code", "internal_error"))
        self.status = int(problem.get("status", 500))
        self.detail = str(problem.get("detail", ""))
        super().__init__(f"{self.code}: {self.detail}")


class NotClankie(ApiError):
    """What answered at `address` is not clankie: neither a result nor a problem document
    came back (some other program of the owner's, say). Its `problem` is clankie's own
    account of that, code `not_clankie` with the HTTP status that came."""

    def __init__(self, address: str, status: int, *, via_env: bool) -> None:
        detail = (f"the service at {address} did not answer like clankie (HTTP {status}); "
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
    if http is None or not 0 < int(http["port"]) <= 65535:
        raise BadServiceUrl(url)
    host = http["host"]
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
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


class Admit(Protocol):
    """Who may be at the other end of a new connection: raises to refuse it."""

    def admit(self, sock: ConnectedSocket | None) -> None: ...


SocketOptions = Iterable[httpcore.SOCKET_OPTION] | None


class CheckedBackend(httpcore.NetworkBackend):
    """httpcore's own backend (or `inner`, any with its interface: the model SDKs bring
    `httpcore2`'s); each stream is handed on only once its peer is admitted."""

    def __init__(self, check: Admit, inner: Any = None) -> None:
        self._inner = inner if inner is not None else httpcore.SyncBackend()
        self._check = check

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: SocketOptions = None) -> httpcore.NetworkStream:
        return self._admitted(self._inner.connect_tcp(host, port, timeout, local_address,
                                                      socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: SocketOptions = None) -> httpcore.NetworkStream:
        return self._admitted(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)

    def _admitted(self, stream: httpcore.NetworkStream) -> httpcore.NetworkStream:
        try:
            self._check.admit(stream.get_extra_info("socket"))
        except BaseException:
            stream.close()
            raise
        return stream


class _AsyncCheckedBackend(httpcore.AsyncNetworkBackend):
    """The same for asyncio; the check (a read of /proc for TCP) runs on a thread."""

    def __init__(self, check: _PeerCheck) -> None:
        self._inner = httpcore.AnyIOBackend()
        self._check = check

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                          local_address: str | None = None,
                          socket_options: SocketOptions = None) -> httpcore.AsyncNetworkStream:
        return await self._admitted(await self._inner.connect_tcp(
            host, port, timeout, local_address, socket_options))

    async def connect_unix_socket(self, path: str, timeout: float | None = None,
                                  socket_options: SocketOptions = None
                                  ) -> httpcore.AsyncNetworkStream:
        return await self._admitted(await self._inner.connect_unix_socket(
            path, timeout, socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)

    async def _admitted(self, stream: httpcore.AsyncNetworkStream
                        ) -> httpcore.AsyncNetworkStream:
        try:
            await asyncio.to_thread(self._check.admit, stream.get_extra_info("socket"))
        except BaseException:
            await stream.aclose()
            raise
        return stream


def _pool_args(url: str, uds: str | None) -> dict[str, Any]:
    """httpx's defaults for its own pool (`httpx.HTTPTransport`), with retries off."""
    return {"ssl_context": httpx.create_ssl_context() if url.startswith("https://") else None,
            "max_connections": 100, "max_keepalive_connections": 20, "keepalive_expiry": 5.0,
            "http1": True, "http2": False, "uds": uds, "retries": 0}


def _swap_pool(transport: httpx.HTTPTransport | httpx.AsyncHTTPTransport,
               pool: httpcore.ConnectionPool | httpcore.AsyncConnectionPool) -> None:
    """Put the checked pool where httpx's transport sends from. httpx has no public way to
    choose the network backend (encode/httpx#3749), so this sets its one private name;
    an httpx that keeps its pool elsewhere is refused here, rather than sending unchecked."""
    if not isinstance(getattr(transport, "_pool", None), type(pool)):
        raise RuntimeError("this httpx keeps its connection pool where clankie cannot check "
                           "whose service it connects to (SPEC T2); install the httpx "
                           "version in constraints.txt")
    transport._pool = pool


class _CheckedTransport(httpx.HTTPTransport):
    def __init__(self, url: str, uds: str | None, check: Admit) -> None:
        super().__init__(retries=0, uds=uds)
        _swap_pool(self, httpcore.ConnectionPool(network_backend=CheckedBackend(check),
                                                 **_pool_args(url, uds)))


class _AsyncCheckedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, url: str, uds: str | None, check: _PeerCheck) -> None:
        super().__init__(retries=0, uds=uds)
        _swap_pool(self, httpcore.AsyncConnectionPool(
            network_backend=_AsyncCheckedBackend(check), **_pool_args(url, uds)))


def _transport_args(url: str) -> tuple[str, str | None]:
    """The base URL of requests, and the Unix socket's path if it is one (`url` as
    `service_address` returns it)."""
    if url.startswith("unix://"):
        return "http://clankie", url.removeprefix("unix://")
    return url, None


def _timeout(op: str, payload: Mapping[str, Any], base: float) -> httpx.Timeout:
    wait = payload.get("wait_ms", 0) if op == "events_tail" else 0
    wait_s = wait / 1000 if isinstance(wait, int) else 0.0
    return httpx.Timeout(base + wait_s, connect=min(base, 5.0))


def _result(response: httpx.Response, target: _Target) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code == 200 and isinstance(body, dict):
        return body
    if isinstance(body, dict) and "code" in body:
        raise ApiError(body)
    raise NotClankie(target.url, response.status_code, via_env=target.via_env)


def _failure(exc: httpx.TransportError, target: _Target) -> ClientError:
    url = target.url
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.UnsupportedProtocol):
        if target.via_env:  # plain `clankie serve` listens only on the home's socket
            nothing = "answers" if isinstance(exc, httpx.ConnectTimeout) else "listens"
            return ServiceUnreachable(f"nothing {nothing} at CLANKIE_URL={url} ({exc})",
                                      f"{_serve_at(url)}, or unset CLANKIE_URL to use the "
                                      "home's socket")
        return ServiceUnreachable(f"cannot reach clankie at {url}: {exc}; is `clankie serve` "
                                  "running?", "start it: `clankie serve` (after `clankie "
                                  "init`)")
    return Uncertain(f"no reply from clankie at {url} ({type(exc).__name__}); the request may "
                     "or may not have been carried out")


def _serve_at(url: str) -> str:
    """How to start clankie at `url` (as `service_address` returns it)."""
    if url.startswith("unix://"):
        path = Path(url.removeprefix("unix://"))
        if path.name == SOCKET:
            return f"start `CLANKIE_HOME={shlex.quote(str(path.parent))} clankie serve` there"
        return "start `clankie serve` in the home whose socket that is"
    return f"start `clankie serve --tcp {url.partition('://')[2]}` there"


class _Target:
    """Where a client sends, and with which token (the rules of `clankie.home`)."""

    def __init__(self, url: str | None, token: str | None, home: Home | None,
                 timeout: float) -> None:
        home = home or Home.from_env()
        self.url = service_address(url or service_url(home))
        given = os.environ.get("CLANKIE_URL", "")
        self.via_env = bool(given) and _same_address(given, self.url)  # advice names it
        self.token = token if token is not None else operator_token(home)
        self._base_timeout = timeout
        self._base_url, self._uds = _transport_args(self.url)
        self._check = _PeerCheck(self.url, trusted_url(self.url))

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


class Client(_Target):
    def __init__(self, url: str | None = None, token: str | None = None, *,
                 home: Home | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(url, token, home, timeout)
        self._http = httpx.Client(base_url=self._base_url, trust_env=False,
                                  transport=_CheckedTransport(self.url, self._uds, self._check))

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def call(self, op: str, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One operation; its result as JSON, or a `ClientError`."""
        payload = dict(payload or {})
        try:
            response = self._http.post(f"/v1/ops/{op}", json=payload, headers=self._headers(),
                                       timeout=_timeout(op, payload, self._base_timeout))
        except httpx.TransportError as exc:
            raise _failure(exc, self) from None
        return _result(response, self)

    def op(self, op: str, **payload: Any) -> Any:
        """One operation; its result as the op's output shape (`clankie.dto.OPS`)."""
        from clankie import dto

        return dto.OPS[op].output.model_validate(self.call(op, payload))

    def openapi(self) -> dict[str, Any]:
        try:
            response = self._http.get("/v1/openapi.json", timeout=self._base_timeout)
        except httpx.TransportError as exc:
            raise _failure(exc, self) from None
        return _result(response, self)

    # The question contract, typed.

    def input_get(self, conversation_id: str, request_id: str | None = None) -> dto.Snapshot:
        from clankie import dto

        payload = {"conversation_id": conversation_id}
        if request_id is not None:
            payload["request_id"] = request_id
        return dto.Snapshot.model_validate(self.call("input_get", payload))

    def input_answer(self, conversation_id: str, request_id: str, *, incarnation: str,
                     revision: int, option_id: str | None = None,
                     text: str | None = None) -> dto.AnswerReply:
        payload: dict[str, Any] = {"conversation_id": conversation_id, "request_id": request_id,
                                   "incarnation": incarnation, "revision": revision}
        if option_id is not None:
            payload["option_id"] = option_id
        if text is not None:
            payload["text"] = text
        from clankie import dto

        return dto.AnswerReply.model_validate(self.call("input_answer", payload))

    def input_cancel(self, conversation_id: str, request_id: str, *, incarnation: str,
                     revision: int) -> dto.AnswerReply:
        from clankie import dto

        return dto.AnswerReply.model_validate(self.call("input_cancel", {
            "conversation_id": conversation_id, "request_id": request_id,
            "incarnation": incarnation, "revision": revision}))


class AsyncClient(_Target):
    """The same client for asyncio callers (the TUI's workers)."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 home: Home | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(url, token, home, timeout)
        self._http = httpx.AsyncClient(
            base_url=self._base_url, trust_env=False,
            transport=_AsyncCheckedTransport(self.url, self._uds, self._check))

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(self, op: str, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        payload = dict(payload or {})
        try:
            response = await self._http.post(f"/v1/ops/{op}", json=payload,
                                             headers=self._headers(),
                                             timeout=_timeout(op, payload, self._base_timeout))
        except httpx.TransportError as exc:
            raise _failure(exc, self) from None
        return _result(response, self)

    async def op(self, op: str, **payload: Any) -> Any:
        from clankie import dto

        return dto.OPS[op].output.model_validate(await self.call(op, payload))
