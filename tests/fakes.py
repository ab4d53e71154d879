"""A fake model endpoint on loopback that speaks the real wire formats the official SDKs use:
OpenAI chat completions (`POST /v1/chat/completions`, `tool_calls`) and Anthropic messages
(`POST /v1/messages`, `tool_use` blocks). It replies from a plan, records every request,
and can fail (with headers such as `Retry-After`), send garbage, drop the connection
without a reply, or hold a reply until a test releases it. `GET /v1/models`
answers with its `models` in the format of whichever SDK asks (the Anthropic one sends
`anthropic-version`), and any other GET path is a 404; with `key` set, a request without
that key gets the provider's 401 (`listed` records the GETs, `requests` only the POSTs).
Given a `check` (see `tests/strict_endpoints.py`), it first answers any request the real
API would reject with that API's own 400, keeping the rejection, and leaves the plan as it
was.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    hold: threading.Event | None = None  # wait for this before replying
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False  # close the connection without a reply


@dataclass
class Endpoint:
    url: str
    plan: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[tuple[dict[str, Any], Any]] = field(default_factory=list)  # (request, 400)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    hung_up: list[float] = field(default_factory=list)  # when a client left a held reply
    models: list[str] = field(default_factory=lambda: ["fake-gpt", "fake-claude"])
    key: str | None = None  # when set, a request must carry it
    models_answer: Reply | None = None  # in place of the models list, when set
    listed: list[dict[str, Any]] = field(default_factory=list)

    def wait_for_requests(self, count: int, timeout: float = 20) -> None:
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.requests) >= count, timeout), \
                f"{len(self.requests)} of {count} requests arrived"


def openai_reply(text: str | None = None, tool_args: dict[str, Any] | str | None = None
                 ) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_args is not None:
        arguments = tool_args if isinstance(tool_args, str) else json.dumps(tool_args)
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": "ask_question", "arguments": arguments}}]
    return Reply(body={"id": "chatcmpl-1", "object": "chat.completion", "created": 0,
                       "model": "fake", "choices": [{
                           "index": 0, "message": message,
                           "finish_reason": "tool_calls" if tool_args is not None else "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1,
                                 "total_tokens": 2}})


def anthropic_reply(text: str | None = None, tool_input: Any = None) -> Reply:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if tool_input is not None:
        content.append({"type": "tool_use", "id": "toolu_1", "name": "ask_question",
                        "input": tool_input})
    return Reply(body={"id": "msg_1", "type": "message", "role": "assistant", "model": "fake",
                       "content": content,
                       "stop_reason": "tool_use" if tool_input is not None else "end_turn",
                       "stop_sequence": None,
                       "usage": {"input_tokens": 1, "output_tokens": 1}})


def openai_calls(*calls: tuple[str, str, Any], text: str | None = None) -> Reply:
    """One assistant message with several tool calls `(id, name, arguments)`; arguments
    that are not a string are sent as their JSON text."""
    reply = openai_reply(text=text)
    message = reply.body["choices"][0]["message"]
    message["tool_calls"] = [{"id": call_id, "type": "function", "function": {
        "name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
        for call_id, name, args in calls]
    reply.body["choices"][0]["finish_reason"] = "tool_calls"
    return reply


def anthropic_calls(*calls: tuple[str, str, Any], text: str | None = None) -> Reply:
    """One assistant message with several `tool_use` blocks `(id, name, input)`."""
    reply = anthropic_reply(text=text)
    reply.body["content"] += [{"type": "tool_use", "id": call_id, "name": name, "input": args}
                              for call_id, name, args in calls]
    reply.body["stop_reason"] = "tool_use"
    return reply


def error_reply(status: int, message: str = "boom", headers: dict[str, str] | None = None
                ) -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "server_error"},
                                      "type": "error"}, headers=headers or {})


def dropped() -> Reply:
    """The connection closed after the request, without a byte of reply."""
    return Reply(drop=True)


def models_reply(models: list[str], anthropic: bool) -> Reply:
    """A models list as each API answers `GET /v1/models`."""
    if anthropic:
        return Reply(body={"data": [{"type": "model", "id": m, "display_name": m,
                                     "created_at": "2025-01-01T00:00:00Z"} for m in models],
                           "has_more": False, "first_id": models[0] if models else None,
                           "last_id": models[-1] if models else None})
    return Reply(body={"object": "list", "data": [
        {"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in models]})


def key_refused(anthropic: bool) -> Reply:
    """The 401 each API answers for a missing or wrong key."""
    if anthropic:
        return Reply(401, {"type": "error", "error": {"type": "authentication_error",
                                                      "message": "invalid x-api-key"}})
    return Reply(401, {"error": {"message": "Incorrect API key provided.", "type":
                                 "invalid_request_error", "param": None,
                                 "code": "invalid_api_key"}})


def _carries(headers: Any, key: str) -> bool:
    return headers.get("Authorization") == f"Bearer {key}" or headers.get("x-api-key") == key


@contextmanager
def model_endpoint(check: Callable[[str, dict[str, Any]], Reply | None] | None = None
                   ) -> Iterator[Endpoint]:
    endpoint = Endpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            anthropic = "anthropic-version" in self.headers
            endpoint.listed.append({"path": self.path, "headers": {
                k.lower(): v for k, v in self.headers.items()}})
            if self.path.split("?")[0] != "/v1/models":
                self._send(Reply(404, {"error": {"message": f"no route {self.path}",
                                                 "type": "not_found_error"},
                                       "type": "error"}))
            elif endpoint.key is not None and not _carries(self.headers, endpoint.key):
                self._send(key_refused(anthropic))
            elif endpoint.models_answer is not None:
                self._send(endpoint.models_answer)
            else:
                self._send(models_reply(endpoint.models, anthropic))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if endpoint.key is not None and not _carries(self.headers, endpoint.key):
                self._send(key_refused("anthropic-version" in self.headers))
                return
            request = {"path": self.path, "body": body,
                       "headers": {k.lower(): v for k, v in self.headers.items()}}
            refusal = check(self.path, body) if check is not None else None
            with endpoint.arrived:
                endpoint.requests.append(request)
                if refusal is not None:
                    endpoint.rejected.append((request, refusal.body))
                    reply = refusal
                else:
                    reply = endpoint.plan.pop(0) if endpoint.plan else error_reply(500,
                                                                                   "no plan")
                endpoint.arrived.notify_all()
            if reply.hold is not None and not self._held(reply.hold):
                return
            if reply.drop:
                self.close_connection = True
                return
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            data = json.dumps(reply.body).encode() if not isinstance(reply.body, bytes) \
                else reply.body
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client went away (a stopped service); nothing to tell

        def _held(self, hold: threading.Event) -> bool:
            """Wait for `hold`; False (noted in `hung_up`) if the client hangs up first."""
            deadline = time.monotonic() + 60
            while not hold.wait(timeout=0.01) and time.monotonic() < deadline:
                readable, _, _ = select.select([self.connection], [], [], 0)
                if readable and not self._peek():
                    with endpoint.arrived:
                        endpoint.hung_up.append(time.monotonic())
                        endpoint.arrived.notify_all()
                    return False
            return True

        def _peek(self) -> bytes:
            try:
                return bytes(self.connection.recv(1, socket.MSG_PEEK))
            except OSError:  # reset by the client: gone as well
                return b""

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    endpoint.url = f"http://127.0.0.1:{server.server_address[1]}"
    # serve_forever looks for shutdown() every poll_interval: 0.5 s by default, each test.
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield endpoint
    finally:
        for reply in endpoint.plan:
            if reply.hold is not None:
                reply.hold.set()
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
