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

A request with `"stream": true` (SPEC D1) is answered in server-sent events, in each
provider's own shapes, whenever its reply is a 200: a `Reply` made for a whole answer
(`openai_reply`, `anthropic_reply`, ...) is turned into the events that say the same
(`stream_events`): chat-completions chunks with text pieces and `tool_calls` fragments by
`index`, a `finish_reason` and `data: [DONE]`; Anthropic's `message_start`,
`content_block_start`/`_delta`/`_stop` (`text_delta`, `input_json_delta`), a `ping`,
`message_delta` and `message_stop`. A reply whose body is bytes is sent as one `data:` line
of them. A reply with `events` sends exactly those, on its schedule (a number is a pause in
seconds), then ends as its `ending` says: `"end"`, `"drop"` (closed mid-body, without the
last chunk), or `"stall"` (comments and pings until the client hangs up). The helpers below
make the common bad streams (`stream_dropped`, `stream_stalled`, `not_json_at`,
`tool_calls_without_call`, `paced`, `stream_error`).
"""

from __future__ import annotations

import json
import re
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
    # Sent to a streaming request as they are: raw SSE events (bytes, each flushed on its
    # own), or pauses (seconds); None turns the reply into events (`stream_events`).
    events: list[bytes | float] | None = None
    ending: str = "end"  # after `events`: "end", "drop" (mid-body) or "stall" (pings only)
    content_type: str = "text/event-stream"  # of a streamed reply
    # A 4xx/501 to a streaming request refuses the request itself, so the same request made
    # again whole (SPEC D18's `auto`) gets it again, taking nothing from the plan; unless
    # it refuses only streaming (`stream_refused`): then the whole request takes the next.
    streams_only: bool = False


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
    refused: dict[str, Reply] = field(default_factory=dict)  # a refusal, for its whole retry

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


REFUSING = frozenset({400, 404, 405, 415, 422, 501})  # SPEC D18


def stream_refused(status: int = 400, message: str = "stream is not supported") -> Reply:
    """A refusal of `"stream": true` only: the same request whole is answered by the plan."""
    reply = error_reply(status, message)
    reply.streams_only = True
    return reply


def _unstreamed(body: dict[str, Any]) -> str:
    return json.dumps({k: v for k, v in body.items() if k != "stream"}, sort_keys=True)


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


# ------------------------------------------------------------------ streams (SPEC D1)


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event: `data` as JSON (bytes and str as they are)."""
    text = data.decode() if isinstance(data, bytes) else (
        data if isinstance(data, str) else json.dumps(data))
    head = f"event: {event}\n" if event is not None else ""
    return (head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n").encode()


DONE = b"data: [DONE]\n\n"
PING = sse({"type": "ping"}, "ping")
COMMENT = b": keep-alive\n\n"


def pieces(text: Any, size: int = 0) -> list[Any]:
    """`text` in the pieces a model would send it in: words with their spaces after them
    (or `size` characters each); anything that is not text, in one piece."""
    if not isinstance(text, str) or not text:
        return [text]
    if size:
        return [text[i:i + size] for i in range(0, len(text), size)]
    return re.findall(r"\s*\S+\s*|\s+", text) or [text]


def openai_events(body: Any) -> list[bytes | float]:
    """A chat-completions reply as the chunks of its stream, ending with `[DONE]`."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or \
            not body["choices"] or not isinstance(body["choices"][0], dict):
        return [sse(body), DONE]
    choice = body["choices"][0]
    message = choice.get("message") or {}
    head = {"id": body.get("id", "chatcmpl-1"), "object": "chat.completion.chunk",
            "created": body.get("created", 0), "model": body.get("model", "fake")}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse({**head, "choices": [{"index": 0, "delta": delta,
                                          "finish_reason": finish}]})

    events: list[bytes | float] = [chunk({"role": "assistant", "content": ""})]
    content = message.get("content")
    if content is not None:
        events += [chunk({"content": piece}) for piece in pieces(content)]
    for index, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        parts = pieces(arguments, max(1, len(arguments) // 3)) if isinstance(arguments, str) \
            and arguments else [arguments]
        events.append(chunk({"tool_calls": [{"index": index, "id": call.get("id"),
                                             "type": "function", "function": {
                                                 "name": function.get("name"),
                                                 "arguments": parts[0]}}]}))
        events += [chunk({"tool_calls": [{"index": index, "function": {"arguments": part}}]})
                   for part in parts[1:]]
    events.append(chunk({}, choice.get("finish_reason") or "stop"))
    return [*events, DONE]


def anthropic_events(body: Any) -> list[bytes | float]:
    """A Messages reply as the events of its stream, from `message_start` to
    `message_stop`, with a `ping` after the start as the API sends one."""
    if not isinstance(body, dict) or not isinstance(body.get("content"), list):
        return [sse(body, "message_start")]
    start = {**{k: v for k, v in body.items() if k not in ("content", "stop_reason")},
             "content": [], "stop_reason": None}
    events: list[bytes | float] = [sse({"type": "message_start", "message": start},
                                       "message_start"), PING]
    for index, block in enumerate(body["content"]):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            events.append(sse({"type": "content_block_start", "index": index,
                               "content_block": {"type": "text", "text": ""}},
                              "content_block_start"))
            events += [sse({"type": "content_block_delta", "index": index,
                            "delta": {"type": "text_delta", "text": piece}},
                           "content_block_delta") for piece in pieces(block.get("text"))]
        elif kind == "tool_use":
            events.append(sse({"type": "content_block_start", "index": index,
                               "content_block": {"type": "tool_use", "id": block.get("id"),
                                                 "name": block.get("name"), "input": {}}},
                              "content_block_start"))
            text = json.dumps(block.get("input"))
            events += [sse({"type": "content_block_delta", "index": index,
                            "delta": {"type": "input_json_delta", "partial_json": part}},
                           "content_block_delta")
                       for part in pieces(text, max(1, len(text) // 3))]
        else:
            events.append(sse({"type": "content_block_start", "index": index,
                               "content_block": block}, "content_block_start"))
        events.append(sse({"type": "content_block_stop", "index": index},
                          "content_block_stop"))
    events.append(sse({"type": "message_delta", "delta": {
        "stop_reason": body.get("stop_reason"), "stop_sequence": None},
        "usage": {"output_tokens": 1}}, "message_delta"))
    events.append(sse({"type": "message_stop"}, "message_stop"))
    return events


def stream_events(reply: Reply, anthropic: bool) -> list[bytes | float]:
    """What `reply` says, as the events of a stream of the provider's API."""
    if reply.events is not None:
        return reply.events
    if isinstance(reply.body, bytes):
        return [b"data: " + reply.body + b"\n\n"]
    return anthropic_events(reply.body) if anthropic else openai_events(reply.body)


def streamed(reply: Reply, anthropic: bool, **changes: Any) -> Reply:
    """`reply` with its events made now, to be cut or changed by a test."""
    events = stream_events(reply, anthropic)
    return Reply(status=reply.status, body=reply.body, hold=reply.hold,
                 headers=reply.headers, events=list(events), **changes)


def stream_dropped(reply: Reply, anthropic: bool, after: int) -> Reply:
    """The first `after` events of `reply`'s stream, then the connection closes mid-body."""
    events = [e for e in stream_events(reply, anthropic) if isinstance(e, bytes)]
    return Reply(events=events[:after], ending="drop")


def stream_stalled(reply: Reply, anthropic: bool, after: int) -> Reply:
    """The first `after` events of `reply`'s stream, then only comments and pings."""
    events = [e for e in stream_events(reply, anthropic) if isinstance(e, bytes)]
    return Reply(events=events[:after], ending="stall")


def paced(reply: Reply, anthropic: bool, seconds: float) -> Reply:
    """`reply`'s stream with a pause of `seconds` before each event."""
    events: list[bytes | float] = []
    for event in stream_events(reply, anthropic):
        events += [seconds, event]
    return Reply(events=events)


def not_json_at(reply: Reply, anthropic: bool, position: int,
                line: bytes = b"data: {not json at all\n\n") -> Reply:
    """`reply`'s stream with its event number `position` (from 1) replaced by `line`."""
    events = [e for e in stream_events(reply, anthropic) if isinstance(e, bytes)]
    events[position - 1] = line
    return Reply(events=events)


def tool_calls_without_call(text: str = "Let me look.") -> Reply:
    """A chat-completions stream that ends with `finish_reason: "tool_calls"` and no call
    (as some servers drop calls while streaming)."""
    reply = openai_reply(text)
    reply.body["choices"][0]["finish_reason"] = "tool_calls"
    return Reply(events=openai_events(reply.body))


def stream_error(kind: str, anthropic: bool, after: Reply | None = None,
                 count: int = 0) -> Reply:
    """An `error` event (Anthropic) or chunk (chat completions) of type `kind` inside an
    HTTP 200, after the first `count` events of `after`'s stream."""
    events = [e for e in stream_events(after, anthropic) if isinstance(e, bytes)][:count] \
        if after is not None else []
    error = {"type": kind, "message": "Overloaded" if kind == "overloaded_error" else "boom"}
    if anthropic:
        events.append(sse({"type": "error", "error": error}, "error"))
    else:
        events.append(sse({"error": {**error, "code": None, "param": None}}))
    return Reply(events=events)


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
                elif body.get("stream") is not True and _unstreamed(body) in endpoint.refused:
                    reply = endpoint.refused.pop(_unstreamed(body))
                else:
                    reply = endpoint.plan.pop(0) if endpoint.plan else error_reply(500,
                                                                                   "no plan")
                    if body.get("stream") is True and reply.status in REFUSING and \
                            not reply.streams_only:
                        endpoint.refused[_unstreamed(body)] = reply
                endpoint.arrived.notify_all()
            if reply.hold is not None and not self._held(reply.hold):
                return
            if reply.drop:
                self.close_connection = True
                return
            if body.get("stream") is True and reply.status == 200:
                self._stream(reply, "anthropic-version" in self.headers)
                return
            self._send(reply)

        def _stream(self, reply: Reply, anthropic: bool) -> None:
            """`reply` as a stream: each event one HTTP chunk, flushed (see the module's
            docstring for its `ending`)."""
            self.protocol_version = "HTTP/1.1"  # chunked; the connection closes after it
            self.close_connection = True
            try:
                self.send_response(200)
                self.send_header("Content-Type", reply.content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                for event in stream_events(reply, anthropic):
                    if isinstance(event, bytes):
                        self._chunk(event)
                    else:
                        time.sleep(event)
                if reply.ending == "drop":
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                deadline = time.monotonic() + 60
                while reply.ending == "stall" and time.monotonic() < deadline:
                    self._chunk(PING if anthropic else COMMENT)
                    time.sleep(0.05)
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
            except OSError:
                with endpoint.arrived:
                    endpoint.hung_up.append(time.monotonic())
                    endpoint.arrived.notify_all()

        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

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
