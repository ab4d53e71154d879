"""The ASGI app: `POST /v1/ops/{op}` and `GET /v1/openapi.json`, nothing else.

Owns the HTTP edge: the body limit (64 KiB, enforced while reading, before parsing), JSON
decoding, the bearer token, running the synchronous service off the event loop, turning
every failure into a problem document, and the uvicorn server that wakes long-polls when
it is stopped. It decides nothing the service decides.
"""

from __future__ import annotations

import json
import logging
from functools import partial
from types import FrameType
from typing import Any

import anyio
import uvicorn
from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from clankie import __version__
from clankie.core.errors import ClankieError
from clankie.service import Service

from .openapi import build_openapi
from .problems import problem

log = logging.getLogger("clankie.api")

MAX_BODY_BYTES = 64 * 1024
# Long-polls wait in threads of their own so that they never starve other operations.
_OPS_THREADS = 16
_TAIL_THREADS = 64


class HttpServer(uvicorn.Server):
    """uvicorn's server; a stop wakes the long-polls at once (they would wait `wait_ms`)."""

    def __init__(self, config: uvicorn.Config, service: Service) -> None:
        super().__init__(config)
        self._service = service

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._service.stop_waiting()
        super().handle_exit(sig, frame)


def http_server(service: Service) -> HttpServer:
    config = uvicorn.Config(create_app(service), lifespan="off", access_log=False,
                            log_level="warning", timeout_graceful_shutdown=10)
    return HttpServer(config, service)


def create_app(service: Service) -> FastAPI:
    app = FastAPI(title="clankie dispatcher", version=__version__, openapi_url=None,
                  docs_url=None, redoc_url=None)
    ops_limiter = anyio.CapacityLimiter(_OPS_THREADS)
    tail_limiter = anyio.CapacityLimiter(_TAIL_THREADS)

    @app.post("/v1/ops/{op}")
    async def dispatch(op: str, request: Request) -> Response:
        try:
            body = await _read_body(request)
            payload = _parse_json(body)
            limiter = tail_limiter if op == "events_tail" else ops_limiter
            result = await anyio.to_thread.run_sync(
                partial(service.call, op, _bearer(request), payload), limiter=limiter)
            return JSONResponse(result.model_dump(mode="json"))
        except ClankieError as err:
            return problem(err)
        except Exception:  # the last line of defence: log it, never show it to a client
            log.exception("unexpected error in %s", op)
            return problem(ClankieError("internal_error", "an unexpected error; it was logged"))

    @app.get("/v1/openapi.json")
    async def openapi() -> JSONResponse:
        return JSONResponse(build_openapi())

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = "not_found" if exc.status_code == 404 else "invalid_request"
        return problem(ClankieError(code, str(exc.detail)), status=exc.status_code)

    return app


def _bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


async def _read_body(request: Request) -> bytes:
    too_large = ClankieError("payload_too_large",
                             f"the request body is larger than {MAX_BODY_BYTES} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
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


def _parse_json(body: bytes) -> Any:
    if not body.strip():
        return {}
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise ClankieError("invalid_request", "the request body is not valid UTF-8") from None
    except (ValueError, RecursionError):
        raise ClankieError("invalid_request", "the request body is not valid JSON") from None
