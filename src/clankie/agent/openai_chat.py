"""An OpenAI-compatible chat-completions model with tool calling, via the official SDK.

Owns the call of the chat-completions API and the reading of its reply; the request itself,
valid and within `context_budget`, is made by `wire.openai_request` (SPEC R8). Any
OpenAI-compatible server works (OpenAI, Ollama, vLLM, llama.cpp): the base URL and model
come from settings; the key only from the environment (`OPENAI_API_KEY`), never from the
store or logs. A call streams (`stream: true`, no `stream_options`: SPEC D1), or not, as
`model_stream` says (`streams.model_call`, D18). A streamed reply is shown through
`Waits.live` as it comes (text pieces, and each tool call by its name when it begins), and
is read into blocks only once it has ended (a choice's `finish_reason`, then `[DONE]` or
the end of the body): tool-call fragments are joined by their `index`, never parsed piece
by piece, so the blocks are those the same reply gives whole. A bad chunk fails the call
at once (D12). A call is tried again on a transient failure (`retry.py`, SPEC R6); every
failure that ends it becomes a `ModelError`.
"""

from __future__ import annotations

import json
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

from . import retry, streams, wire
from .sdk import BASE_URL_SETTINGS, DEFAULT_URLS, KEY_VARIABLES, sdk_client
from .transcript import (
    NO_WAITS,
    Live,
    ModelError,
    Text,
    ToolCall,
    ToolSpec,
    Turn,
    Waits,
    reply_text,
)

PROVIDER = "openai"


class OpenAIChatModel:
    name = "openai"

    def __init__(self, model: str, base_url: str | None,
                 policy: retry.Policy = retry.DEFAULT_POLICY,
                 context_budget: int = wire.DEFAULT_BUDGET) -> None:
        openai, self._client = sdk_client("openai", base_url or DEFAULT_URLS["openai"],
                                          policy.timeout)
        self._sdk = retry.Sdk("openai", openai, KEY_VARIABLES["openai"], "openai_model",
                              BASE_URL_SETTINGS["openai"])
        self._policy = policy
        self._streams = streams.Streams()
        self.model = model
        self.context_budget = context_budget

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits = NO_WAITS) -> list[Text | ToolCall]:
        request = wire.openai_request(self.model, system, turns, tools, self.context_budget)
        return streams.model_call(
            self._sdk, self._policy, waits, self._streams,
            lambda: self._streamed(request, waits.live),
            lambda: self._client.chat.completions.create(**request), read_whole)

    def _streamed(self, request: wire.OpenAIRequest, live: Live) -> list[Text | ToolCall]:
        from openai._streaming import SSEDecoder

        stream = streams.opened(self._sdk, lambda: self._client.chat.completions.create(
            **request, stream=True, timeout=self._policy.stream_limit))
        with closing(stream):
            live.streaming(True)
            return read_chunks(SSEDecoder().iter_bytes(stream.response.iter_bytes()), live)


def read_whole(response: Any) -> list[Text | ToolCall]:
    """A reply that did not stream, as blocks."""
    try:
        message = response.choices[0].message
        blocks: list[Text | ToolCall] = []
        if message.content:
            blocks.append(Text(reply_text("openai", message.content, "its content")))
        for call in message.tool_calls or []:
            function = call.function
            arguments = function.arguments or ""
            if isinstance(arguments, dict):  # some compatible servers send the object
                arguments = json.dumps(arguments)
            blocks.append(ToolCall(reply_text("openai", call.id, "a tool call's id"),
                                   reply_text("openai", function.name,
                                              "a tool call's name"),
                                   reply_text("openai", arguments,
                                              "a tool call's arguments")))
    except (AttributeError, IndexError, KeyError, TypeError, ValueError,
            RecursionError) as exc:
        raise ModelError(f"openai: unusable reply: {type(exc).__name__}: "
                         f"{str(exc)[:200]}") from None
    return blocks


@dataclass
class _Call:
    """One tool call's fragments so far, by `index`."""

    call_id: Any = None
    name: Any = None
    arguments: list[str] = field(default_factory=list)


def _object(value: Any, what: str, position: int, size: int) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise streams.malformed(PROVIDER, f"{what} that is not an object", position, size)
    return value


def read_chunks(events: Any, live: Live) -> list[Text | ToolCall]:
    """A streamed reply's chunks (the SDK's server-sent events), shown through `live` as
    they come, as blocks once the stream has ended (see the module's docstring)."""
    text: list[str] = []
    calls: dict[int, _Call] = {}
    finish: str | None = None
    position = 0
    for position, event in streams.numbered(PROVIDER, events):
        data = event.data
        if data.startswith("[DONE]"):
            break
        if not data:
            continue
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            raise streams.malformed(PROVIDER, "a chunk that is not JSON", position,
                                    len(data)) from None
        chunk = _object(chunk, "a chunk", position, len(data))
        error = chunk.get("error")
        if error:
            kind = error.get("type") if isinstance(error, dict) else None
            raise retry.ErrorEvent(kind if isinstance(kind, str) else "error", position)
        choices = chunk.get("choices")
        if choices is None:
            continue
        if not isinstance(choices, list):
            raise streams.malformed(PROVIDER, "a chunk whose choices are not a list",
                                    position, len(data))
        for choice in choices:
            choice = _object(choice, "a choice", position, len(data))
            if choice.get("index", 0) != 0:
                continue  # one choice is asked for (n = 1)
            delta = _object(choice.get("delta") or {}, "a delta", position, len(data))
            _delta(delta, text, calls, live, position, len(data))
            if choice.get("finish_reason"):
                finish = str(choice["finish_reason"])
    if finish is None:
        raise retry.Dropped("the stream ended without a finish_reason")
    if finish == "tool_calls" and not calls:
        raise streams.malformed(
            PROVIDER, 'a stream that ended with finish_reason "tool_calls" and no tool '
            'call (some servers drop tool calls while streaming: set model_stream = "off")',
            position, 0)
    blocks: list[Text | ToolCall] = []
    words = "".join(text)
    if words:
        blocks.append(Text(words))
    for index in sorted(calls):
        call = calls[index]
        for value, what in ((call.call_id, "a tool call's id"),
                            (call.name, "a tool call's name")):
            if not isinstance(value, str):
                raise streams.malformed(PROVIDER, f"{what} is {type(value).__name__}, not "
                                        "text", position, 0)
        blocks.append(ToolCall(streams.clean(call.call_id), streams.clean(call.name),
                               streams.clean("".join(call.arguments))))
    live.end()
    return blocks


def _delta(delta: dict[str, Any], text: list[str], calls: dict[int, _Call], live: Live,
           position: int, size: int) -> None:
    content = delta.get("content")
    if content is not None:
        if not isinstance(content, str):
            raise streams.malformed(PROVIDER, f"its content is {type(content).__name__}, "
                                    "not text", position, size)
        if content:
            piece = streams.clean(content)
            text.append(piece)
            streams.content()
            live.text(piece, 0)
    if delta.get("reasoning_content") or delta.get("reasoning"):  # thinking: never shown
        streams.content()
        live.content()
    fragments = delta.get("tool_calls")
    if fragments is None:
        return
    if not isinstance(fragments, list):
        raise streams.malformed(PROVIDER, "tool calls that are not a list", position, size)
    for fragment in fragments:
        fragment = _object(fragment, "a tool-call fragment", position, size)
        index = fragment.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            raise streams.malformed(PROVIDER, "a tool-call fragment without an index",
                                    position, size)
        function = _object(fragment.get("function") or {}, "a tool call's function",
                           position, size)
        call = calls.get(index)
        if call is None:
            if fragment.get("id") is None and function.get("name") is None:
                raise streams.malformed(PROVIDER, f"a fragment of tool call {index}, which "
                                        "never started", position, size)
            call = calls[index] = _Call()
        if call.call_id is None and fragment.get("id") is not None:
            call.call_id = fragment["id"]
        name = function.get("name")
        if call.name is None and name is not None:
            call.name = name
            if isinstance(name, str):
                live.calling(streams.clean(name))
        arguments = function.get("arguments")
        if isinstance(arguments, dict):  # some compatible servers send the object
            arguments = json.dumps(arguments)
        if arguments is not None and not isinstance(arguments, str):
            raise streams.malformed(PROVIDER, f"a tool call's arguments are "
                                    f"{type(arguments).__name__}, not text", position, size)
        if arguments:
            call.arguments.append(arguments)
        streams.content()
