"""A fake model endpoint on loopback that speaks the real wire formats the official SDKs use:
OpenAI chat completions (`POST /v1/chat/completions`, `tool_calls`) and Anthropic messages
(`POST /v1/messages`, `tool_use` blocks). It replies from a plan, records every request,
and can fail, send garbage, or hold a reply until a test releases it.
"""

from __future__ import annotations

import json
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    hold: threading.Event | None = None  # wait for this before replying


@dataclass
class Endpoint:
    url: str
    plan: list[Reply] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    hung_up: list[float] = field(default_factory=list)  # when a client left a held reply

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


def error_reply(status: int, message: str = "boom") -> Reply:
    return Reply(status=status, body={"error": {"message": message, "type": "server_error"},
                                      "type": "error"})


@contextmanager
def model_endpoint() -> Iterator[Endpoint]:
    endpoint = Endpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with endpoint.arrived:
                endpoint.requests.append({"path": self.path, "body": body,
                                          "headers": {k.lower(): v for k, v in
                                                      self.headers.items()}})
                reply = endpoint.plan.pop(0) if endpoint.plan else error_reply(500, "no plan")
                endpoint.arrived.notify_all()
            if reply.hold is not None and not self._held(reply.hold):
                return
            data = json.dumps(reply.body).encode() if not isinstance(reply.body, bytes) \
                else reply.body
            try:
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
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
    thread = threading.Thread(target=server.serve_forever, daemon=True)
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
