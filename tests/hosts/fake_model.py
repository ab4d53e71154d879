"""A scripted model on 127.0.0.1 that speaks each coding host's wire (tests/hosts).

One `FakeModel` serves, on one port, the four wires the hosts use:
- Anthropic Messages (`POST .../v1/messages`, SSE when `stream` is true): Claude Code;
- OpenAI Responses (`POST .../responses`, SSE): Codex;
- OpenAI Chat Completions (`POST .../chat/completions`, SSE): OpenCode's custom provider;
- Gemini (`POST .../models/M:streamGenerateContent?alt=sse`, and `:generateContent`): Gemini CLI.

Every wire is read into the same `Turn` (which tools the host offers; each tool result in
the conversation with the tool's name and exactly what the host put in the request for the
model), and one script decides (`decide`): call the host's `ask_owner` with a choice
question; then `wait_answer {request_id, wait_s: 25}` while the result says pending
(bounded); then a final text that quotes the owner's answer label. A request that offers
no `ask_owner` (a host's side request: a title, a check) gets a plain short text.

Every request is recorded (`requests`), with the action the script took, so a test asserts
what the model actually saw. The same port is given to the hosts as their HTTP(S) proxy
for everything that is not 127.0.0.1: a proxied request or a CONNECT is recorded in `stray`
and refused, so a host that calls out is caught instead of reaching the network.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

ASK_ARGS: dict[str, Any] = {
    "prompt": "Which indentation should the new module use?",
    "kind": "choice",
    "options": [{"label": "tabs", "description": "one tab per level"},
                {"label": "four spaces"}],
}
MAX_WAITS = 4  # wait_answer calls while pending, then the script gives up
FINAL_PREFIX = "The owner chose:"

_REQUEST_ID = re.compile(r'request_id\\*"\s*:\s*\\*"([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-'
                         r'[0-9a-f]{4}-[0-9a-f]{12})')
_STATUS = re.compile(r'status\\*"\s*:\s*\\*"([a-z_]+)')
_DEFERRED = re.compile(r"^(mcp__clankie__\w+)$", re.MULTILINE)  # a deferred tool's line
_LABEL = re.compile(r'answer\\*"\s*:\s*\{[^}]*?label\\*"\s*:\s*\\*"((?:[^"\\]|\\.)*?)\\*"')


@dataclass(frozen=True)
class ToolResult:
    name: str  # the host's name of the tool that gave it
    seen: str  # what the host put in the request for the model, as JSON text


@dataclass(frozen=True)
class Turn:
    tools: tuple[str, ...]
    results: tuple[ToolResult, ...]
    deferred: tuple[str, ...] = ()  # tools named to the model but not loaded (ToolSearch)


@dataclass(frozen=True)
class Call:
    name: str
    args: dict[str, Any]
    call_id: str = field(default_factory=lambda: "call_" + uuid.uuid4().hex[:20])


@dataclass(frozen=True)
class Final:
    text: str


Action = Call | Final


def tool_named(tools: tuple[str, ...], tool: str) -> str | None:
    """The host's name for one of clankie's tools: `ask_owner` as `mcp__clankie__ask_owner`
    (Claude Code, Codex), `mcp_clankie_ask_owner` (Gemini CLI), `clankie_ask_owner`
    (OpenCode), or bare."""
    found = [t for t in tools if t == tool or (t.endswith(tool) and "clankie" in t)]
    return found[0] if found else None


def decide(turn: Turn) -> Action:
    ask, wait = tool_named(turn.tools, "ask_owner"), tool_named(turn.tools, "wait_answer")
    if ask is None or wait is None:
        later = [tool_named(turn.deferred, t) for t in ("ask_owner", "wait_answer")]
        if "ToolSearch" in turn.tools and None not in later and not turn.results:
            # Claude Code defers MCP tools: only their names are listed until the model
            # loads their schemas with ToolSearch, as a real model would.
            return Call("ToolSearch", {"query": "select:" + ",".join(map(str, later))})
        return Final("OK")  # a side request (title, summary, check): no tools of ours
    ours = [r for r in turn.results if r.name in (ask, wait)]
    if not ours:
        return Call(ask, dict(ASK_ARGS))
    found = _REQUEST_ID.search(ours[0].seen)
    if found is None:
        return Final("NO_REQUEST_ID in what the ask returned")
    status = _STATUS.search(ours[-1].seen)
    state = status.group(1) if status else "unknown"
    waits = sum(1 for r in ours if r.name == wait)
    if state == "pending" and waits < MAX_WAITS:
        return Call(wait, {"request_id": found.group(1), "wait_s": 25})
    if state == "answered":
        label = _LABEL.search(ours[-1].seen)
        if label is not None:
            return Final(f"{FINAL_PREFIX} {json.loads(chr(34) + label.group(1) + chr(34))}.")
    return Final(f"NO_ANSWER (status {state})")


@dataclass
class Recorded:
    wire: str
    path: str
    body: Any
    headers: dict[str, str]
    turn: Turn | None = None
    action: Action | None = None
    at: float = field(default_factory=time.monotonic)


# ----------------------------------------------------------------------------- the wires


def _text(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content)


def anthropic_turn(body: dict[str, Any]) -> Turn:
    """Claude Code's request. Its MCP tools are deferred (`defer_loading`, or only named in a
    reminder) until a ToolSearch result references them (`tool_reference`)."""
    offered = body.get("tools") or []
    loaded = [t.get("name", "") for t in offered if not t.get("defer_loading")]
    deferred = {t.get("name", "") for t in offered if t.get("defer_loading")}
    referenced: set[str] = set()
    names: dict[str, str] = {}
    results: list[ToolResult] = []
    for message in body.get("messages") or []:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for block in content:
            if block.get("type") == "text" and message.get("role") == "user":
                deferred.update(_DEFERRED.findall(block.get("text", "")))
            elif block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result":
                inner = block.get("content")
                referenced.update(b.get("tool_name", "") for b in
                                  (inner if isinstance(inner, list) else [])
                                  if b.get("type") == "tool_reference")
                results.append(ToolResult(names.get(block.get("tool_use_id"), "?"),
                                          _text(inner)))
    tools = tuple(loaded + sorted(deferred & referenced))
    return Turn(tools, tuple(results), tuple(sorted(deferred - referenced)))


def responses_turn(body: dict[str, Any]) -> Turn:
    tools: list[str] = []
    for t in body.get("tools") or []:
        if t.get("type") == "namespace":  # tools grouped under a server's namespace
            tools += [t.get("name", "") + "." + n.get("name", "") for n in t.get("tools") or []]
        else:
            tools.append(t.get("name", ""))
    names: dict[str, str] = {}
    results: list[ToolResult] = []
    for item in body.get("input") or []:
        if item.get("type") == "function_call":
            space = item.get("namespace")
            names[item["call_id"]] = f"{space}.{item['name']}" if space else item["name"]
        elif item.get("type") == "function_call_output":
            results.append(ToolResult(names.get(item.get("call_id"), "?"),
                                      _text(item.get("output"))))
    return Turn(tuple(tools), tuple(results))


def chat_turn(body: dict[str, Any]) -> Turn:
    tools = tuple((t.get("function") or {}).get("name", "") for t in body.get("tools") or [])
    names: dict[str, str] = {}
    results: list[ToolResult] = []
    for message in body.get("messages") or []:
        for call in message.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
        if message.get("role") == "tool":
            results.append(ToolResult(names.get(message.get("tool_call_id"), "?"),
                                      _text(message.get("content"))))
    return Turn(tools, tuple(results))


def gemini_turn(body: dict[str, Any]) -> Turn:
    tools = tuple(d.get("name", "") for t in body.get("tools") or []
                  for d in t.get("functionDeclarations") or [])
    results: list[ToolResult] = []
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if "functionResponse" in part:
                response = part["functionResponse"]
                results.append(ToolResult(response.get("name", "?"), json.dumps(response)))
    return Turn(tools, tuple(results))


def _sse(events: list[tuple[str | None, Any]]) -> Iterator[bytes]:
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        yield (head + "data: " + (data if isinstance(data, str) else json.dumps(data))
               + "\n\n").encode()


def anthropic_reply(body: dict[str, Any], action: Action) -> tuple[dict[str, Any] | None,
                                                                  list[tuple[str | None, Any]]]:
    mid = "msg_" + uuid.uuid4().hex[:24]
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    if isinstance(action, Call):
        block: dict[str, Any] = {"type": "tool_use", "id": "toolu_" + action.call_id[5:],
                                 "name": action.name, "input": action.args}
        stop = "tool_use"
    else:
        block = {"type": "text", "text": action.text}
        stop = "end_turn"
    whole = {"id": mid, "type": "message", "role": "assistant", "model": body.get("model"),
             "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage}
    start = {**whole, "content": [], "stop_reason": None}
    if block["type"] == "tool_use":
        opening = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    else:
        opening = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": block["text"]}
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": opening}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return whole, events


def responses_reply(body: dict[str, Any], action: Action) -> tuple[dict[str, Any] | None,
                                                                  list[tuple[str | None, Any]]]:
    rid = "resp_" + uuid.uuid4().hex[:24]
    if isinstance(action, Call):
        item: dict[str, Any] = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:20],
                                "call_id": action.call_id, "name": action.name,
                                "arguments": json.dumps(action.args), "status": "completed"}
        if "." in action.name:  # a tool of a namespace (Codex: `mcp__clankie`.`ask_owner`)
            item["namespace"], item["name"] = action.name.split(".", 1)
    else:
        item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:20], "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": action.text, "annotations": []}]}
    usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": 5, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": 15}
    response = {"id": rid, "object": "response", "created_at": int(time.time()),
                "status": "completed", "model": body.get("model"), "output": [item],
                "usage": usage}
    events: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created",
                              "response": {**response, "status": "in_progress", "output": []}}),
        ("response.output_item.added", {"type": "response.output_item.added",
                                        "output_index": 0, "item": item}),
    ]
    if item["type"] == "message":
        events.append(("response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": item["id"], "output_index": 0,
            "content_index": 0, "delta": action.text if isinstance(action, Final) else ""}))
    events += [
        ("response.output_item.done", {"type": "response.output_item.done",
                                       "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": response}),
    ]
    return response, events


def chat_reply(body: dict[str, Any], action: Action) -> tuple[dict[str, Any] | None,
                                                             list[tuple[str | None, Any]]]:
    cid = "chatcmpl-" + uuid.uuid4().hex[:24]
    base = {"id": cid, "object": "chat.completion.chunk", "created": int(time.time()),
            "model": body.get("model")}
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    if isinstance(action, Call):
        call = {"id": action.call_id, "type": "function",
                "function": {"name": action.name, "arguments": json.dumps(action.args)}}
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        delta: dict[str, Any] = {"role": "assistant", "tool_calls": [{"index": 0, **call}]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": action.text}
        delta = {"role": "assistant", "content": action.text}
        finish = "stop"
    whole = {**base, "object": "chat.completion", "usage": usage,
             "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    events: list[tuple[str | None, Any]] = [
        (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
        (None, {**base, "choices": [], "usage": usage}),
        (None, "[DONE]"),
    ]
    return whole, events


def gemini_reply(body: dict[str, Any], action: Action) -> tuple[dict[str, Any] | None,
                                                               list[tuple[str | None, Any]]]:
    if isinstance(action, Call):
        part: dict[str, Any] = {"functionCall": {"name": action.name, "args": action.args}}
    else:
        part = {"text": action.text}
    whole = {"candidates": [{"content": {"role": "model", "parts": [part]},
                             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                               "totalTokenCount": 15},
             "modelVersion": "fake", "responseId": uuid.uuid4().hex}
    return whole, [(None, whole)]


Reader = Callable[[dict[str, Any]], Turn]
Writer = Callable[[dict[str, Any], Action],
                  tuple[dict[str, Any] | None, list[tuple[str | None, Any]]]]
WIRES: dict[str, tuple[Reader, Writer]] = {
    "anthropic": (anthropic_turn, anthropic_reply),
    "responses": (responses_turn, responses_reply),
    "chat": (chat_turn, chat_reply),
    "gemini": (gemini_turn, gemini_reply),
}


def wire_of(path: str) -> str | None:
    if path.endswith("/messages"):
        return "anthropic"
    if path.endswith("/responses"):
        return "responses"
    if path.endswith("/chat/completions"):
        return "chat"
    if ":streamGenerateContent" in path or ":generateContent" in path:
        return "gemini"
    return None


# ----------------------------------------------------------------------------- the server


class FakeModel:
    """The scripted model, serving on 127.0.0.1 on its own threads until `close`."""

    def __init__(self) -> None:
        self.requests: list[Recorded] = []
        self.stray: list[str] = []  # what a host tried to reach elsewhere (through the proxy)
        self.other: list[str] = []  # requests to paths the fake does not serve
        self.waited = threading.Event()  # set once the script has called wait_answer
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.server.daemon_threads = True
        self._thread = threading.Thread(target=self.server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(10)

    def __enter__(self) -> FakeModel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def scripted(self) -> list[Recorded]:
        """The requests that offered clankie's tools (the agent's own turns)."""
        return [r for r in self.requests if r.turn is not None and
                tool_named(r.turn.tools, "ask_owner") is not None]

    def answer(self, wire: str, path: str, body: Any, headers: dict[str, str]) -> tuple[
            dict[str, Any] | None, list[tuple[str | None, Any]]]:
        reader, writer = WIRES[wire]
        turn = reader(body)
        action = decide(turn)
        with self._lock:
            self.requests.append(Recorded(wire, path, body, headers, turn, action))
        if isinstance(action, Call) and action.name.endswith("wait_answer"):
            self.waited.set()
        return writer(body, action)

    def note(self, wire: str, path: str, body: Any, headers: dict[str, str]) -> None:
        with self._lock:
            self.requests.append(Recorded(wire, path, body, headers))


def _handler(fake: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send_json(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_CONNECT(self) -> None:  # a host's HTTPS call elsewhere, through the "proxy"
            fake.stray.append(f"CONNECT {self.path}")
            self.send_response(403)
            self.send_header("Content-Length", "0")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True

        def _stray(self) -> bool:
            if self.path.startswith(("http://", "https://")):
                fake.stray.append(f"{self.command} {self.path}")
                self._send_json(403, {"error": "no network in this test"})
                return True
            return False

        def do_GET(self) -> None:
            if self._stray():
                return
            path = urlsplit(self.path).path
            if path.endswith("/models"):
                fake.note("models", self.path, None, dict(self.headers))
                self._send_json(200, {"object": "list", "data": [], "models": []})
                return
            fake.other.append(f"GET {self.path}")
            self._send_json(404, {"error": {"message": "not served by the fake"}})

        def do_HEAD(self) -> None:
            if self._stray():
                return
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else self._chunked()
            if self._stray():
                return
            path = urlsplit(self.path).path
            try:
                body = json.loads(raw or b"null")
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = dict(self.headers)
            if path.endswith("/count_tokens") or path.endswith(":countTokens"):
                fake.note("count", self.path, body, headers)
                self._send_json(200, {"input_tokens": 10, "totalTokens": 10})
                return
            wire = wire_of(path)
            if wire is None or not isinstance(body, dict):
                fake.other.append(f"POST {self.path}")
                self._send_json(404, {"error": {"message": "not served by the fake"}})
                return
            whole, events = fake.answer(wire, self.path, body, headers)
            streaming = body.get("stream") is True or ":streamGenerateContent" in path
            if not streaming:
                self._send_json(200, whole)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for chunk in _sse(events):
                self.wfile.write(chunk)
            self.wfile.flush()
            self.close_connection = True

        def _chunked(self) -> bytes:
            if "chunked" not in (self.headers.get("Transfer-Encoding") or ""):
                return b""
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()

    return Handler
