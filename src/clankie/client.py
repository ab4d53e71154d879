"""The one client of the dispatcher (httpx, Unix socket or TCP, sync and async).

Owns how a surface talks to the service: the URL and token rules of `clankie.home`,
requests as `POST /v1/ops/{op}`, results parsed into the `clankie.dto` output shapes, and
three kinds of failure that a surface must tell apart:

- `ApiError`: the service answered with a problem document (`code`, `status`, `problem`).
- `ServiceUnreachable`: nothing was sent (no socket, connection refused).
- `Uncertain`: the request may have reached the service but no reply came. The caller
  must not resend it; it should read the current state instead.

It never retries a request by itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from clankie import dto
from clankie.home import Home, operator_token, service_url

__all__ = ["ApiError", "AsyncClient", "Client", "ServiceUnreachable", "Uncertain"]

DEFAULT_TIMEOUT = 30.0
# A long-poll that comes back empty at once found no free slot (V5: 8 a credential):
# a follower pauses this long before asking again, rather than asking in a tight loop.
EMPTY_AT_ONCE_S = 0.25
PAUSE_AFTER_EMPTY_S = 1.0
Model = TypeVar("Model", bound=BaseModel)


class ClientError(Exception):
    """Base of the client's errors."""


class ApiError(ClientError):
    def __init__(self, problem: dict[str, Any]) -> None:
        self.problem = problem
        self.code = str(problem.get("code", "internal_error"))
        self.status = int(problem.get("status", 500))
        self.detail = str(problem.get("detail", ""))
        super().__init__(f"{self.code}: {self.detail}")


class ServiceUnreachable(ClientError):
    """The service could not be reached; the request was not sent."""


class Uncertain(ClientError):
    """The request may have reached the service, but no reply came."""


def _transport_args(url: str) -> tuple[str, dict[str, Any]]:
    if url.startswith("unix://"):
        return "http://clankie", {"uds": url.removeprefix("unix://")}
    if url.startswith(("http://", "https://")):
        return url.rstrip("/"), {}
    raise ValueError(f"CLANKIE_URL must be http://HOST:PORT or unix:///path, not {url!r}")


def _timeout(op: str, payload: Mapping[str, Any], base: float) -> httpx.Timeout:
    wait = payload.get("wait_ms", 0) if op == "events_tail" else 0
    wait_s = wait / 1000 if isinstance(wait, int) else 0.0
    return httpx.Timeout(base + wait_s, connect=min(base, 5.0))


def _result(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code == 200 and isinstance(body, dict):
        return body
    if isinstance(body, dict) and "code" in body:
        raise ApiError(body)
    raise ApiError({"code": "internal_error", "status": response.status_code,
                    "detail": f"unexpected HTTP {response.status_code} from the service"})


def _failure(exc: httpx.TransportError, url: str) -> ClientError:
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.UnsupportedProtocol):
        return ServiceUnreachable(f"cannot reach clankie at {url}: {exc}; is `clankie serve` "
                                  "running?")
    return Uncertain(f"no reply from clankie at {url} ({type(exc).__name__}); the request may "
                     "or may not have been carried out")


class _Target:
    """Where a client sends, and with which token (the rules of `clankie.home`)."""

    def __init__(self, url: str | None, token: str | None, home: Home | None,
                 timeout: float) -> None:
        home = home or Home.from_env()
        self.url = url or service_url(home)
        self.token = token if token is not None else operator_token(home)
        self._base_timeout = timeout
        self._base_url, self._transport = _transport_args(self.url)

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}


class Client(_Target):
    def __init__(self, url: str | None = None, token: str | None = None, *,
                 home: Home | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(url, token, home, timeout)
        self._http = httpx.Client(base_url=self._base_url,
                                  transport=httpx.HTTPTransport(retries=0, **self._transport))

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
            raise _failure(exc, self.url) from None
        return _result(response)

    def op(self, op: str, **payload: Any) -> Any:
        """One operation; its result as the op's output shape (`clankie.dto.OPS`)."""
        return dto.OPS[op].output.model_validate(self.call(op, payload))

    def openapi(self) -> dict[str, Any]:
        try:
            response = self._http.get("/v1/openapi.json", timeout=self._base_timeout)
        except httpx.TransportError as exc:
            raise _failure(exc, self.url) from None
        return _result(response)

    # The question contract, typed.

    def input_get(self, conversation_id: str, request_id: str | None = None) -> dto.Snapshot:
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
        return dto.AnswerReply.model_validate(self.call("input_answer", payload))

    def input_cancel(self, conversation_id: str, request_id: str, *, incarnation: str,
                     revision: int) -> dto.AnswerReply:
        return dto.AnswerReply.model_validate(self.call("input_cancel", {
            "conversation_id": conversation_id, "request_id": request_id,
            "incarnation": incarnation, "revision": revision}))


class AsyncClient(_Target):
    """The same client for asyncio callers (the TUI's workers)."""

    def __init__(self, url: str | None = None, token: str | None = None, *,
                 home: Home | None = None, timeout: float = DEFAULT_TIMEOUT) -> None:
        super().__init__(url, token, home, timeout)
        self._http = httpx.AsyncClient(
            base_url=self._base_url,
            transport=httpx.AsyncHTTPTransport(retries=0, **self._transport))

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
            raise _failure(exc, self.url) from None
        return _result(response)

    async def op(self, op: str, **payload: Any) -> Any:
        return dto.OPS[op].output.model_validate(await self.call(op, payload))
