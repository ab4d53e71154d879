"""The one client of the dispatcher (HTTP/1.1 over a Unix socket or TCP, sync and async).

Owns how a surface talks to the service: `Client` and `AsyncClient`, two thin drivers of
one core without I/O (`clankie.clientcore`: the request writer, keep-alive, T2, the
deadlines and the sorting of every outcome, written once), and the two transports that do
its steps: `Sockets` (plain sockets, for `Client`) and `Streams` (asyncio streams, for
`AsyncClient`). A transport is a seam: `Client(..., transport=...)` takes any other (the
tests' in memory). Requests are `POST /v1/ops/{op}`; `op(spec, request)` is the one typed
method (a row of `clankie.dto.OPS` in, its output model out), `call(name, payload)` the
untyped one (JSON in and out, for the light paths that load no pydantic, and raw tests).

The errors a surface must tell apart, one tree of siblings under `ClientError`, so an
`except` of one never catches another (`ApiError` and `NotClankie` share only a private
base that gives both their problem document's fields):

    ClientError              any failure of a call; `fix`, where there is one
    ├── BadServiceUrl        (also a ValueError) the URL is no address clankie can use: a
    │                        usage error; nothing was tried
    ├── ServiceUnreachable   nothing was sent (no socket, connection refused, or the
    │                        connection failed before a byte of the request was written)
    ├── NotYours             something listens at the address, but it is not known to be
    │                        the owner's service (SPEC T2): nothing was sent, the token
    │                        least of all
    ├── Uncertain            the request may have reached the service but no whole reply
    │                        came (broken or timed out once a byte was written, or not a
    │                        well-formed HTTP response): do not resend; read the state
    ├── ApiError             the service answered with a problem document (`problem`,
    │                        `code`, `status`, `detail`)
    └── NotClankie           what answered sent neither a result nor a problem document
                             (or a result that does not fit, or a cursor that does not
                             move on): it is not clankie. It carries clankie's own problem
                             document for it (code `not_clankie`), like an `ApiError`, but
                             is not one: catch it by name

It never retries a request by itself.

HTTP is its own, on the standard library only (the `import` costs a few milliseconds, which
the CLI's start-up needs; asyncio, ssl, pydantic and the DTOs load on first use): a request
is written by hand, the response read by the pure parser of `clankie.http1`. Connections
are kept alive for a few seconds and reused, one request at a time each; a kept one that
the server has closed meanwhile is dropped before anything is written.

T2 is kept where connections are made: every new connection (the first, and every later
one: keep-alive ends, reconnects) is opened, then `clankie.peer` is asked who is at the
other end of the raw socket, and it is closed unless that is the current user (or, where
it cannot be told, the URL is marked trusted). Nothing (not even a TLS hello) is written
to it before the check, so no request can reach an unchecked listener.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from clankie.clientcore import (
    DEFAULT_TIMEOUT,
    EMPTY_AT_ONCE_S,
    PAUSE_AFTER_EMPTY_S,
    READ_SIZE,
    ApiError,
    Ask,
    AsyncTransport,
    BadServiceUrl,
    ClientError,
    Core,
    Flow,
    NotClankie,
    NotYours,
    ServiceUnreachable,
    Step,
    Target,
    Transport,
    Uncertain,
    advance,
    fit_shape,
    left,
    trusted_url,
    typed,
)
from clankie.home import Home
from clankie.peer import Listener, listener_of

if TYPE_CHECKING:  # pydantic, the DTOs and asyncio load on first use: the CLI needs none
    import asyncio
    import ssl

    from clankie import dto
    from clankie.dto import InT, OutT

__all__ = ["DEFAULT_TIMEOUT", "EMPTY_AT_ONCE_S", "PAUSE_AFTER_EMPTY_S", "ApiError",
           "AsyncClient", "BadServiceUrl", "Client", "ClientError", "NotClankie", "NotYours",
           "ServiceUnreachable", "Sockets", "Streams", "Uncertain", "fit_shape",
           "trusted_url", "typed"]

T = TypeVar("T")
_OPENAPI = Ask("GET", "/v1/openapi.json", None)


def _tls_context() -> ssl.SSLContext:
    import ssl  # only for https: most clients never pay for it

    return ssl.create_default_context()


# --------------------------------------------------------------------------- sync

class Sockets:
    """`Client`'s transport: plain sockets, each step bounded by its deadline."""

    def connect(self, target: Target, timeout: float) -> socket.socket:
        if target.uds is None:
            return socket.create_connection((target.host, target.port), timeout)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(target.uds)
        except BaseException:
            sock.close()
            raise
        return sock

    def listener(self, conn: socket.socket) -> Listener:
        return listener_of(conn)

    def tls(self, conn: socket.socket, target: Target, timeout: float) -> socket.socket:
        return _tls_context().wrap_socket(conn, server_hostname=target.host)

    def alive(self, conn: socket.socket) -> bool:
        """Neither closed by the server nor sent anything since (nothing asked for it)."""
        try:
            conn.setblocking(False)
            try:
                conn.recv(1, socket.MSG_PEEK)  # b"": closed; a byte: nothing asked for it
                return False
            finally:
                conn.setblocking(True)
        except BlockingIOError:
            return True
        except OSError:
            return False

    def write(self, conn: socket.socket, data: memoryview, deadline: float) -> int:
        conn.settimeout(left(deadline))
        return conn.send(data)

    def flush(self, conn: socket.socket, deadline: float) -> None:
        return None  # `send` wrote to the socket itself

    def read(self, conn: socket.socket, deadline: float) -> bytes:
        conn.settimeout(left(deadline))
        return conn.recv(READ_SIZE)

    def close(self, conn: socket.socket) -> None:
        conn.close()


def _do(io: Any, step: Step) -> tuple[Any, BaseException | None]:
    try:
        return getattr(io, step.verb)(*step.args), None
    except BaseException as exc:  # the flow decides, KeyboardInterrupt included
        return None, exc


class Client(Core[Any]):
    """The sync driver: each step of the core's flow done at once by its transport."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 home: Home | None = None, timeout: float = DEFAULT_TIMEOUT,
                 fit: bool = False, transport: Transport[Any] | None = None) -> None:
        self._io: Transport[Any] = transport or Sockets()
        super().__init__(url, token, home, timeout, fit, self._io.close)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._idle():
            self._io.close(conn)

    def call(self, op: str, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One operation by its name; its result as JSON, or a `ClientError`."""
        return self._run(self._result(Ask.by_name(op, payload)))

    def op(self, spec: dto.Op[InT, OutT], request: InT | None = None) -> OutT:
        """One operation, typed by its row of the op table (`clankie.dto.OPS`): `request`
        (the op's input model; none for an op whose input is `Nothing`) goes out as JSON,
        and the result comes back as the op's output model (one that does not fit is
        `NotClankie`)."""
        return typed(spec, self._run(self._result(Ask.typed(spec, request))), self.url,
                     via_env=self.via_env)

    def openapi(self) -> dict[str, Any]:
        return self._run(self._result(_OPENAPI))

    def _run(self, flow: Flow[T]) -> T:
        got: tuple[Any, BaseException | None] = (None, None)
        while isinstance(step := advance(flow, got), Step):
            got = _do(self._io, step)
        return step.value


# -------------------------------------------------------------------------- async

class _Stream:
    """An asyncio connection: its two ends."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer


class Streams:
    """`AsyncClient`'s transport: asyncio streams, each step bounded by its deadline; who
    listens is asked on a thread (for TCP it reads /proc)."""

    async def connect(self, target: Target, timeout: float) -> _Stream:
        import asyncio

        async with asyncio.timeout(timeout):
            if target.uds is not None:
                return _Stream(*await asyncio.open_unix_connection(target.uds))
            return _Stream(*await asyncio.open_connection(target.host, target.port))

    async def listener(self, conn: _Stream) -> Listener:
        import asyncio

        sock = conn.writer.get_extra_info("socket")
        if sock is None:
            return Listener(None, "the connection has no socket to ask")
        return await asyncio.to_thread(listener_of, sock)

    async def tls(self, conn: _Stream, target: Target, timeout: float) -> _Stream:
        import asyncio

        async with asyncio.timeout(timeout):
            await conn.writer.start_tls(_tls_context(), server_hostname=target.host)
        return conn

    async def alive(self, conn: _Stream) -> bool:
        """As `Sockets.alive`; the socket itself is asked, as the loop may not have seen
        its end yet."""
        import select

        if conn.writer.is_closing() or conn.reader.at_eof():
            return False
        sock = conn.writer.get_extra_info("socket")
        if sock is None:
            return False
        poll = select.poll()
        poll.register(sock.fileno(), select.POLLIN)
        return not poll.poll(0)  # readable: closed, or something nobody asked for came

    async def write(self, conn: _Stream, data: memoryview, deadline: float) -> int:
        left(deadline)  # nothing was written yet
        if conn.writer.is_closing() or conn.reader.at_eof():
            raise ConnectionResetError("the connection was closed")
        conn.writer.write(data)  # all of it, buffered: from here on, it may have gone
        return len(data)

    async def flush(self, conn: _Stream, deadline: float) -> None:
        import asyncio

        async with asyncio.timeout(left(deadline)):
            await conn.writer.drain()

    async def read(self, conn: _Stream, deadline: float) -> bytes:
        import asyncio

        async with asyncio.timeout(left(deadline)):
            return await conn.reader.read(READ_SIZE)

    def close(self, conn: _Stream) -> None:
        conn.writer.close()

    async def wait_closed(self, conn: _Stream) -> None:
        with contextlib.suppress(OSError):
            await conn.writer.wait_closed()


async def _ado(io: Any, step: Step) -> tuple[Any, BaseException | None]:
    try:
        return await getattr(io, step.verb)(*step.args), None
    except BaseException as exc:  # the flow decides, cancellation included
        return None, exc


class AsyncClient(Core[Any]):
    """The async driver (the TUI's workers, the MCP bridge): each step of the core's flow
    awaited from its transport."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 home: Home | None = None, timeout: float = DEFAULT_TIMEOUT,
                 fit: bool = False, transport: AsyncTransport[Any] | None = None) -> None:
        self._io: AsyncTransport[Any] = transport or Streams()
        super().__init__(url, token, home, timeout, fit, self._io.close)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        idle = self._idle()
        for conn in idle:
            self._io.close(conn)
        for conn in idle:
            await self._io.wait_closed(conn)

    async def call(self, op: str, payload: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """`Client.call`, awaited."""
        return await self._run(self._result(Ask.by_name(op, payload)))

    async def op(self, spec: dto.Op[InT, OutT], request: InT | None = None) -> OutT:
        """`Client.op`, awaited."""
        return typed(spec, await self._run(self._result(Ask.typed(spec, request))), self.url,
                     via_env=self.via_env)

    async def _run(self, flow: Flow[T]) -> T:
        got: tuple[Any, BaseException | None] = (None, None)
        while isinstance(step := advance(flow, got), Step):
            got = await _ado(self._io, step)
        return step.value
