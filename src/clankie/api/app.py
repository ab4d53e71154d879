"""The ASGI app: `POST /v1/ops/{op}` and `GET /v1/openapi.json`, nothing else.

Owns the HTTP edge: the bearer token checked before the body is read (T6: in memory on the
event loop when the service knows it, else in a thread), the body limit (64 KiB, enforced
while reading, before parsing), JSON decoding, running the synchronous service off the
event loop, turning every failure into a problem document, and the uvicorn server that
wakes long-polls when it is stopped. It decides nothing the service decides.

An op that writes is queued to the store's writer thread and awaited here (no thread of
the edge waits for it); an op that reads runs on the ops threads. Fair waiting (SPEC V5):
a long-poll waits on this event loop, not on a worker thread, so however many wait, they
take no thread from anything else; only its reads run on threads of their own
(`_TAIL_READ_THREADS`). A call with `wait_ms` 0 and every other read run on the ops
threads. Which long-polls may wait (a slot of their credential) the service
decides; connections (a whole request in time, a bound per listener) are `connections.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable
from functools import partial
from types import FrameType
from typing import Any

import anyio
import uvicorn
from fastapi import FastAPI, Request
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import Response

from clankie import __version__
from clankie.core.errors import ClankieError
from clankie.core.vocabulary import Code
from clankie.dto import Op
from clankie.service import Service

from .connections import bounded_protocol
from .openapi import build_openapi
from .problems import problem

log = logging.getLogger("clankie.api")

MAX_BODY_BYTES = 64 * 1024
_OPS_THREADS = 16
# One credential's operations (or those of one token, valid or not) run at most this many
# at once; the rest wait in their own line, so no credential fills the ops threads.
_LANE = 4
# The ops threads that calls over TCP may take in all: the rest stay the Unix socket's.
_TCP_SHARE = 8
# A long-poll's reads (its first, and one after each wake-up) run apart from the ops, so
# many long-polls woken by one commit never keep an operation waiting for a thread.
_TAIL_READ_THREADS = 8


class HttpServer(uvicorn.Server):
    """uvicorn's server; a stop wakes the long-polls at once (they would wait `wait_ms`)."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self._service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._service.stop_waiting()
        super().handle_exit(sig, frame)


def http_server(service: Service, web: tuple[tuple[str, int], Any] | None = None
                ) -> HttpServer:
    """The server of every listener. With `web` (the `--web` listener's address and the
    page's app, SPEC H1), requests to that listener go to the page and nothing else, and
    requests to the others never reach the page."""
    app: Any = create_app(service)
    if web is not None:
        app = _by_listener(app, *web)
    # log_config=None: uvicorn's messages go through the service's own log (T5: visible,
    # repeats counted), not a handler of uvicorn's.
    config = uvicorn.Config(app, lifespan="off", access_log=False,
                            log_config=None,
                            log_level="warning", timeout_graceful_shutdown=10,
                            http=bounded_protocol(service.settings.max_connections),
                            ws="none")
    return HttpServer(config, service)


def _by_listener(api: Any, web_address: tuple[str, int], web: Any) -> Any:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        server = scope.get("server")
        on_web = server is not None and tuple(server)[:2] == web_address
        await (web if on_web else api)(scope, receive, send)
    return app


def create_app(service: Service) -> FastAPI:
    app = FastAPI(title="clankie dispatcher", version=__version__, openapi_url=None,
                  docs_url=None, redoc_url=None)
    ops_limiter = anyio.CapacityLimiter(_OPS_THREADS)
    tail_read_limiter = anyio.CapacityLimiter(_TAIL_READ_THREADS)
    tcp_share = anyio.CapacityLimiter(_TCP_SHARE)
    lanes = _Lanes()

    async def in_thread(request: Request, token: str | None, limiter: anyio.CapacityLimiter,
                        work: Callable[[], BaseModel | None]) -> bytes | None:
        """Run `work` in a worker thread within the token's lane, and encode its result
        there too: a large page is never serialized on the event loop, which every other
        connection shares. Calls that came over TCP take at most `_TCP_SHARE` threads in
        all, so the owner's Unix socket always finds threads free (V5)."""
        def run() -> bytes | None:
            result = work()
            return None if result is None else result.model_dump_json().encode()
        async with lanes.held(token):
            if not _over_tcp(request):
                return await anyio.to_thread.run_sync(run, limiter=limiter)
            async with tcp_share:
                return await anyio.to_thread.run_sync(run, limiter=limiter)

    async def written(token: str | None, op: str, payload: Any, who: dict[str, Any]
                      ) -> bytes | None:
        """An op that writes, queued to the store's writer within the token's lane and
        answered once committed; None (nothing done) for an op that reads."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future[BaseModel] = loop.create_future()

        def done(result: Any, error: BaseException | None) -> None:  # on the writer
            # A loop that has closed (the server stopped) has nobody left to answer.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, ended, result, error)

        async with lanes.held(token):
            if not service.call_soon(op, token, payload, done, **who):
                return None
            result = await ended
        return result.model_dump_json().encode()

    async def long_poll(request: Request, op: str, payload: Any) -> bytes:
        """V1, V5 and P4: read; while the service says to wait, wait here without a
        thread."""
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:  # on a commit thread
            # A loop that has closed (the server stopped) has nobody left to wake.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(woken.set)

        token = _bearer(request)
        with service.open_poll(op, token, payload, wake) as tail:
            limiter = tail_read_limiter if tail.waits else ops_limiter
            while True:
                woken.clear()
                quick = tail.read_quickly()  # a live reply published: from memory (D4)
                if quick is not None:
                    return quick.model_dump_json().encode()
                page = await in_thread(request, token, limiter, tail.read)
                if page is not None:
                    return page
                await _until_woken(woken, request, tail.remaining())

    @app.post("/v1/ops/{op}")
    async def dispatch(op: str, request: Request) -> Response:
        spec = service.ops.get(op)  # None: no such op, which the service says once asked
        # An op whose input is its own credential takes no bearer token (H2: a pairing
        # code, which the service checks); a long-poll waits here, on the loop (V5).
        credential_in_body = spec is not None and spec.credential_in_body
        waits = spec is not None and spec.long_poll
        try:
            # T6: who asks, before anything they sent is read.
            token = None if credential_in_body else _bearer(request)
            if not credential_in_body:
                if token is None:  # no thread, no store: a stranger's bare request is cheap
                    raise ClankieError(Code.UNAUTHENTICATED, "a bearer token is required")
                if not service.known_token(token):  # the store says why, or knows it anew
                    await in_thread(request, token, ops_limiter,
                                    partial(service.authenticate, token))
            body = await read_body(request)
            payload = parse_json(body)
            encoded: bytes | None  # None only from work that returns None, never service.call
            if waits:
                encoded = await long_poll(request, op, payload)
            else:
                who = ({"peer": _peer(request), "user_agent": request.headers.get("user-agent")}
                       if credential_in_body else {})
                encoded = await written(token, op, payload, who)
                if encoded is None:
                    encoded = await in_thread(request, token, ops_limiter,
                                              partial(service.call, op, token, payload, **who))
            return Response(encoded, media_type="application/json")
        except ClientDisconnect:
            # The client hung up (or sent too slowly and was cut off): nobody to answer.
            return Response(status_code=400)
        except ClankieError as err:
            return problem(err)
        except Exception:  # the last line of defence: log it, never show it to a client
            log.exception("unexpected error in %s", op)
            return problem(ClankieError(Code.INTERNAL_ERROR, "an unexpected error; it was logged"))

    @app.get("/v1/openapi.json")
    async def openapi() -> Response:
        return Response(_openapi_bytes(tuple(service.ops.values())),
                        media_type="application/json")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = Code.NOT_FOUND if exc.status_code == 404 else Code.INVALID_REQUEST
        return problem(ClankieError(code, str(exc.detail)), status=exc.status_code)

    return app


@functools.cache
def _openapi_bytes(ops: tuple[Op[Any, Any], ...]) -> bytes:
    """The OpenAPI document of the op table `ops`, encoded once: anyone may ask for it, in
    a loop."""
    return json.dumps(build_openapi(ops), separators=(",", ":")).encode()


class _Lanes:
    """A line per token: at most `_LANE` of its operations at once. Lines exist only while
    they are in use, so tokens a client makes up cost nothing once answered."""

    def __init__(self) -> None:
        self._lines: dict[str | None, tuple[asyncio.Semaphore, int]] = {}

    @contextlib.asynccontextmanager
    async def held(self, token: str | None) -> AsyncIterator[None]:
        line, users = self._lines.get(token) or (asyncio.Semaphore(_LANE), 0)
        self._lines[token] = (line, users + 1)
        try:
            async with line:
                yield
        finally:
            line, users = self._lines[token]
            if users == 1:
                del self._lines[token]
            else:
                self._lines[token] = (line, users - 1)


async def _until_woken(woken: asyncio.Event, request: Request, seconds: float) -> None:
    """Wait until `woken` is set or `seconds` have passed. A client that hangs up meanwhile
    raises `ClientDisconnect`, so that its long-poll's slot is free at once."""
    gone = False
    with anyio.move_on_after(seconds):
        async with anyio.create_task_group() as group:

            async def watch_client() -> None:
                nonlocal gone
                # The body was read whole: the next message is the client hanging up.
                if (await request.receive())["type"] == "http.disconnect":
                    gone = True
                    group.cancel_scope.cancel()

            group.start_soon(watch_client)
            await woken.wait()
            group.cancel_scope.cancel()
    if gone:
        raise ClientDisconnect


def _settle(ended: asyncio.Future[BaseModel], result: Any, error: BaseException | None
            ) -> None:
    if ended.done():  # its request was cancelled meanwhile
        return
    if error is not None:
        ended.set_exception(error)
    else:
        ended.set_result(result)


def _over_tcp(request: Request) -> bool:
    """Whether the request came over a TCP listener (not the owner's Unix socket)."""
    server = request.scope.get("server")
    return isinstance(server, tuple | list) and len(server) == 2 and server[1] is not None


def _peer(request: Request) -> str:
    """Who is trying a pairing code (H2): a TCP client's address and port (one connection),
    or the owner's Unix socket. Wrong codes are limited per peer; this authenticates
    nobody."""
    client = request.client
    if not _over_tcp(request) or client is None or not client.host:
        return "local socket"
    return f"tcp {client.host}:{client.port}"


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def read_body(request: Request) -> bytes:
    """A request's body, at most MAX_BODY_BYTES (else `payload_too_large`); the page's
    edge reads its bodies with it too."""
    too_large = ClankieError(Code.PAYLOAD_TOO_LARGE,
                             f"the request body is larger than {MAX_BODY_BYTES} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and (not (declared.isascii() and declared.isdigit())
                                 or int(declared) > MAX_BODY_BYTES):
        raise too_large
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise too_large
        chunks.append(chunk)
    return b"".join(chunks)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(body: bytes) -> Any:
    """A body as JSON (empty: `{}`); not UTF-8, not JSON, NaN or too nested:
    `invalid_request`."""
    if not body.strip():
        return {}
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise ClankieError(Code.INVALID_REQUEST, "the request body is not valid UTF-8") from None
    except (ValueError, RecursionError):
        raise ClankieError(Code.INVALID_REQUEST, "the request body is not valid JSON") from None
