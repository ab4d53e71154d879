"""Stopping a run (SPEC R7): the run's stop scope, and the network stream that obeys it.

Owns how a stop reaches a run that is blocked. The store decides that a run is stopped
(`run_cancel` commits `cancelled` first, and from then on refuses every write of the run);
this module only makes the worker that executes the run give up at once:

- `StopScope`: one per executing run, a `threading.Event` underneath. `check()` raises
  `Stopped` once it is set (the turn loop asks between steps and before each tool call);
  `wait(seconds)` is a sleep that ends early with `Stopped` (the seam for the model-call
  retry waits of R6); `stop()` sets it and shuts down every socket that is blocked in a
  read or write of the run's model call right now, so the SDK call fails at once instead
  of leaving a thread blocked until its timeout.
- `StoppableBackend`: the httpcore network backend of the model SDKs (`endpoint.py`); its
  connections and streams register their socket with the current run's scope (a context
  variable set by the executor on the run's worker thread) for as long as a connect, a
  read or a write blocks.

It also bounds one model call in time and bytes, through the same backend: `bounded`, a
call that does not stream, in all (R6's `model_timeout`); `streamed`, a call that streams
(D11): the wait for its first content, every silence after it (`content` says that content
came), and the whole call, each failing its read with a `StreamTimeout` saying which.

Outside a run (doctor's probe, say) the current scope is one that nobody stops.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from typing import Any, TypeVar

import httpcore2

try:  # httpcore's stream over a plain socket; private, so checked and optional
    from httpcore2._backends.sync import SyncStream
    _SyncStream: type[SyncStream] | None = SyncStream
except ImportError:  # pragma: no cover - only another httpcore2 layout
    _SyncStream = None

E = TypeVar("E", bound=BaseException)

__all__ = ["MAX_REPLY_BYTES", "ReplyTooLarge", "StopScope", "StoppableBackend", "Stopped",
           "StreamTimeout", "bounded", "cause", "content", "current", "streamed", "too_large",
           "wait", "within"]

MAX_REPLY_BYTES = 16 * 1024 * 1024  # of one model call's reply, headers included


class Stopped(Exception):
    """The run was stopped by its owner (R7): nothing more of it is done."""

    def __init__(self) -> None:
        super().__init__("the run was stopped by its owner")


class StopScope:
    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()

    @property
    def stopped(self) -> bool:
        return self._event.is_set()

    def stop(self) -> None:
        """Stop the run: every wait ends, every blocked read or write of its model call
        fails now, and every later `check` raises."""
        with self._lock:
            self._event.set()
            blocked = list(self._sockets)
        for sock in blocked:
            _shut(sock)

    def check(self) -> None:
        if self._event.is_set():
            raise Stopped()

    def wait(self, seconds: float) -> None:
        """Sleep `seconds`, or raise `Stopped` as soon as the run is stopped."""
        if self._event.wait(max(0.0, seconds)):
            raise Stopped()

    @contextmanager
    def blocking(self, sock: socket.socket | None) -> Iterator[None]:
        """While the body runs, a stop shuts `sock` down; raises at once if stopped."""
        with self._lock:
            if self._event.is_set():
                raise Stopped()
            if sock is not None:
                self._sockets.add(sock)
        try:
            yield
        finally:
            if sock is not None:
                with self._lock:
                    self._sockets.discard(sock)


class ReplyTooLarge(httpcore2.ReadError):
    """The endpoint sent more than a call's reply may hold (or a compressed reply, whose
    size cannot be bounded): the call is abandoned. Its text says which."""


class _Bounds:
    """One model call's whole-call bounds: a deadline for all of it (connect, send, every
    read: an endpoint that trickles a byte at a time cannot keep it alive) and the bytes
    its reply may hold (a reply of a gigabyte is not read into memory)."""

    def __init__(self, timeout: float, max_bytes: int) -> None:
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.left = max_bytes
        self.max_bytes = max_bytes

    def timeout_for(self, timeout: float | None, error: type[Exception]) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise error(f"no whole reply within {self.timeout:g} s")
        return left if timeout is None else min(timeout, left)

    def count(self, data: bytes) -> None:
        self.left -= len(data)
        if self.left < 0:
            raise ReplyTooLarge(f"larger than {self.max_bytes // 2**20} MiB")


class StreamTimeout(httpcore2.ReadTimeout):
    """A streamed call's read ran out of time (D11): `kind` is `first` (no content within
    `model_timeout` of the request), `stall` (none for `model_stall_timeout` after the
    last) or `limit` (the whole call past `model_stream_limit`), after `seconds`."""

    def __init__(self, kind: str, seconds: float) -> None:
        super().__init__(f"{kind}: {seconds:g} s")
        self.kind, self.seconds = kind, seconds


class _StreamBounds(_Bounds):
    """One streamed call's bounds (D11): the next content is due by `due` (the first
    within `first` seconds of the request, each later one within `stall` of the one
    before), and the whole call ends within `limit`. Pings, comments and keep-alives are
    read, but only `content()` moves `due`."""

    def __init__(self, first: float, stall: float, limit: float, max_bytes: int) -> None:
        super().__init__(limit, max_bytes)
        self.first, self.stall = first, stall
        self.due = time.monotonic() + first
        self.kind = "first"

    def content(self) -> None:
        self.due = time.monotonic() + self.stall
        self.kind = "stall"

    def expired(self) -> StreamTimeout:
        if self.deadline <= self.due:
            return StreamTimeout("limit", self.timeout)
        return StreamTimeout(self.kind, self.first if self.kind == "first" else self.stall)

    def timeout_for(self, timeout: float | None, error: type[Exception]) -> float:
        left = min(self.deadline, self.due) - time.monotonic()
        if left <= 0:
            raise self.expired()
        return left if timeout is None else min(timeout, left)


_bounds: ContextVar[_Bounds | None] = ContextVar("clankie_model_call_bounds", default=None)


@contextmanager
def bounded(timeout: float, max_bytes: int = MAX_REPLY_BYTES) -> Iterator[None]:
    """Make the body's model call (through `StoppableBackend`) end within `timeout`
    seconds in all, and fail once its reply passes `max_bytes` (SPEC R6: one call times
    out after `model_timeout` seconds; httpx's own timeout bounds each read only)."""
    token = _bounds.set(_Bounds(timeout, max_bytes))
    try:
        yield
    finally:
        _bounds.reset(token)


@contextmanager
def streamed(first: float, stall: float, limit: float,
             max_bytes: int = MAX_REPLY_BYTES) -> Iterator[None]:
    """Make the body's streamed model call (through `StoppableBackend`) get its first
    content within `first` seconds, each later one within `stall` seconds of the one
    before (`content()` says one came), end within `limit` seconds in all, and fail once
    its reply passes `max_bytes` (SPEC D11, D12). A read cut short by these fails with a
    `StreamTimeout`."""
    token = _bounds.set(_StreamBounds(first, stall, limit, max_bytes))
    try:
        yield
    finally:
        _bounds.reset(token)


def content() -> None:
    """Content of the current streamed call came (D11): the next is due within the
    stall timeout. Nothing outside a streamed call."""
    bounds = _bounds.get()
    if isinstance(bounds, _StreamBounds):
        bounds.content()


def cause(exc: BaseException, kind: type[E]) -> E | None:
    """The `kind` behind `exc` (an SDK wraps our own errors), if that is what it was."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None or isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def too_large(exc: BaseException) -> ReplyTooLarge | None:
    """The `ReplyTooLarge` behind an SDK's error, if that is what it was."""
    return cause(exc, ReplyTooLarge)


def _timeout(timeout: float | None, error: type[Exception]) -> float | None:
    bounds = _bounds.get()
    return timeout if bounds is None else bounds.timeout_for(timeout, error)


class _Unstopped(StopScope):
    """The scope outside any run: nothing stops it."""

    def stop(self) -> None:
        raise RuntimeError("only a run's own scope can be stopped")


NEVER: StopScope = _Unstopped()
_current: ContextVar[StopScope] = ContextVar("clankie_run_stop_scope", default=NEVER)


def current() -> StopScope:
    """The stop scope of the run this thread executes (`NEVER` outside a run)."""
    return _current.get()


@contextmanager
def within(scope: StopScope) -> Iterator[StopScope]:
    """Execute the body as part of the run whose scope is `scope`."""
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def wait(seconds: float) -> None:
    """A retry's sleep (R6) that a stop of the current run ends at once with `Stopped`."""
    current().wait(seconds)


def _shut(sock: socket.socket) -> None:
    """Shut the connection down under whoever is blocked on it. The plain socket's own
    `shutdown` even for a TLS socket: `SSLSocket.shutdown` would also drop its TLS state
    under the reading thread."""
    with suppress(OSError):  # closed or never connected: nothing is blocked on it
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _StoppableStream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def _guard(self, error: type[Exception]) -> Any:
        return _guarded(current(), self._inner.get_extra_info("socket"), error)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        timeout = _timeout(timeout, httpcore2.ReadTimeout)
        bounds = _bounds.get()
        try:
            with self._guard(httpcore2.ReadError):
                data = self._inner.read(max_bytes, timeout)
        except httpcore2.ReadTimeout:
            if isinstance(bounds, _StreamBounds) and \
                    min(bounds.deadline, bounds.due) <= time.monotonic() + 0.01:
                raise bounds.expired() from None
            raise
        if bounds is not None:
            bounds.count(data)
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        timeout = _timeout(timeout, httpcore2.WriteTimeout)
        with self._guard(httpcore2.WriteError):
            self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore2.NetworkStream:
        timeout = _timeout(timeout, httpcore2.ConnectTimeout)
        with self._guard(httpcore2.ConnectError):
            secured = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _StoppableStream(secured)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


@contextmanager
def _guarded(scope: StopScope, sock: socket.socket | None,
             error: type[Exception]) -> Iterator[None]:
    try:
        with scope.blocking(sock):
            yield
    except Stopped:
        raise error("the run was stopped by its owner") from None
    if scope.stopped:  # the read ended because of the stop (an empty read looks like EOF)
        raise error("the run was stopped by its owner")


def _connect(scope: StopScope, address: tuple[str, int], timeout: float | None,
             source: tuple[str, int] | None) -> socket.socket:
    """`socket.create_connection`, with each attempt's socket registered with `scope`."""
    failure: OSError | None = None
    for family, kind, proto, _, target in socket.getaddrinfo(*address, 0, socket.SOCK_STREAM):
        sock = socket.socket(family, kind, proto)
        try:
            sock.settimeout(timeout)
            if source is not None:
                sock.bind(source)
            with scope.blocking(sock):
                sock.connect(target)
            return sock
        except Stopped:
            sock.close()
            raise OSError("the run was stopped by its owner") from None
        except OSError as exc:
            sock.close()
            if scope.stopped:
                raise OSError("the run was stopped by its owner") from None
            failure = exc
    raise failure or OSError(f"getaddrinfo found no address for {address[0]}")


def _refuse_if_stopped(scope: StopScope) -> None:
    if scope.stopped:
        raise httpcore2.ConnectError("the run was stopped by its owner")


def _obeying(scope: StopScope, stream: httpcore2.NetworkStream) -> httpcore2.NetworkStream:
    """`stream`, obeying the stop from now on; closed if the stop came while connecting."""
    if scope.stopped:
        stream.close()
        raise httpcore2.ConnectError("the run was stopped by its owner")
    return _StoppableStream(stream)


class StoppableBackend(httpcore2.SyncBackend):
    """httpcore's own network backend, whose connections and streams obey the current
    run's stop: a stopped run connects nowhere, and a stop shuts down the socket of a
    connect, read, write or TLS handshake that blocks (a connect too: Linux wakes a
    blocked `connect` on `shutdown` with ECONNRESET)."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore2.NetworkStream:
        scope = current()
        _refuse_if_stopped(scope)
        timeout = _timeout(timeout, httpcore2.ConnectTimeout)
        if _SyncStream is None:  # another httpcore2 layout: connecting is not stoppable
            return _obeying(scope, super().connect_tcp(host, port, timeout, local_address,
                                                       socket_options))
        source = None if local_address is None else (local_address, 0)
        try:
            sock = _connect(scope, (host, port), timeout, source)
            for option in socket_options or ():
                sock.setsockopt(*option)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        return _obeying(scope, _SyncStream(sock))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None
                            ) -> httpcore2.NetworkStream:
        scope = current()
        _refuse_if_stopped(scope)
        return _obeying(scope, super().connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        current().wait(seconds)
