"""An Anthropic Messages model with tool use, via the official SDK.

Owns the call of the Messages API and the reading of its reply; the request itself, valid
and within `context_budget`, is made by `wire.anthropic_request` (SPEC R8). The base URL
and model come from settings; the key only from the environment (`ANTHROPIC_API_KEY`). A
call streams (`stream: true`, read as raw events: SPEC D1), or not, as `model_stream` says
(`streams.model_call`, D18). A streamed reply is shown through `Waits.live` as it comes
(text deltas by their block, each `tool_use` block by its name when it starts; thinking
counts as content, never shown), and is read into blocks only after `message_stop`: a
tool's `input_json_delta` pieces are joined by content block and parsed once, at the end,
so the blocks are those the same reply gives whole. Unknown event and delta types are
skipped; an `error` event inside the 200 is classified by its own type; a bad event fails
the call at once (D12), and so does a block started twice or text written to a text block
after a later one started, since the reply is stored in the order it was shown (D2). A
call is tried again on a transient failure (`retry.py`, SPEC R6); every failure that ends
it becomes a `ModelError`.
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

MAX_TOKENS = 2_048
PROVIDER = "anthropic"
THINKING = frozenset({"thinking_delta", "signature_delta", "citations_delta"})


class AnthropicModel:
    name = "anthropic"

    def __init__(self, model: str, base_url: str | None,
                 policy: retry.Policy = retry.DEFAULT_POLICY,
                 context_budget: int = wire.DEFAULT_BUDGET) -> None:
        anthropic, self._client = sdk_client("anthropic", base_url or DEFAULT_URLS["anthropic"],
                                             policy.timeout)
        self._sdk = retry.Sdk("anthropic", anthropic, KEY_VARIABLES["anthropic"],
                              "anthropic_model", BASE_URL_SETTINGS["anthropic"])
        self._policy = policy
        self._streams = streams.Streams()
        self.model = model
        self.context_budget = context_budget

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits = NO_WAITS) -> list[Text | ToolCall]:
        request = wire.anthropic_request(self.model, system, turns, tools,
                                         self.context_budget, MAX_TOKENS)
        return streams.model_call(
            self._sdk, self._policy, waits, self._streams,
            lambda: self._streamed(request, waits.live),
            lambda: self._client.messages.create(**request), read_whole)

    def _streamed(self, request: wire.AnthropicRequest, live: Live) -> list[Text | ToolCall]:
        stream = streams.opened(self._sdk, lambda: self._client.messages.create(
            **request, stream=True, timeout=self._policy.stream_limit))
        with closing(stream):
            live.streaming(True)
            return read_events(self._sdk.module.Stream.raw_events(stream.response), live)


def read_whole(response: Any) -> list[Text | ToolCall]:
    """A reply that did not stream, as blocks."""
    blocks: list[Text | ToolCall] = []
    try:
        for block in response.content:
            kind = getattr(block, "type", None)
            if kind == "text":
                blocks.append(Text(reply_text("anthropic", block.text, "a text block")))
            elif kind == "tool_use":  # a malformed input is refused as a tool result
                blocks.append(ToolCall(
                    reply_text("anthropic", block.id, "a tool_use block's id"),
                    reply_text("anthropic", block.name, "a tool_use block's name"),
                    json.dumps(block.input)))
    except (AttributeError, TypeError, ValueError, RecursionError) as exc:
        raise ModelError(f"anthropic: unusable reply: {type(exc).__name__}: "
                         f"{str(exc)[:200]}") from None
    return blocks


@dataclass
class _Block:
    """One content block so far: its type, its text or input pieces, and for `tool_use`
    its id, name and the input it started with."""

    kind: Any
    number: int = -1  # of a text block, among the reply's text blocks (D2)
    parts: list[str] = field(default_factory=list)
    call_id: Any = None
    name: Any = None
    start_input: Any = None


def _bad(kind: str, position: int, size: int) -> retry.Malformed:
    return streams.malformed(PROVIDER, kind, position, size)


def read_events(events: Any, live: Live) -> list[Text | ToolCall]:
    """A streamed reply's raw events, shown through `live` as they come, as blocks once
    `message_stop` came (see the module's docstring)."""
    blocks: dict[int, _Block] = {}
    texts = 0
    ended = False
    position = 0
    for position, event in streams.numbered(PROVIDER, events):
        data = event.data
        if event.event == "ping" or not data:
            continue  # not content (D11)
        try:
            payload = json.loads(data)
        except (ValueError, RecursionError):
            raise _bad("an event that is not JSON", position, len(data)) from None
        if not isinstance(payload, dict):
            raise _bad("an event that is not an object", position, len(data))
        kind = payload.get("type", event.event)
        if kind == "error" or event.event == "error":
            error = payload.get("error")
            named = error.get("type") if isinstance(error, dict) else None
            raise retry.ErrorEvent(named if isinstance(named, str) else "error", position)
        if kind == "message_stop":
            ended = True
            break
        if kind == "content_block_start":
            index, block = payload.get("index"), payload.get("content_block")
            if not isinstance(index, int) or isinstance(index, bool) or \
                    not isinstance(block, dict):
                raise _bad("a content_block_start not of its documented shape", position,
                           len(data))
            if index in blocks:  # its text was shown already: a restart would hide it (D2)
                raise _bad("a content block that started twice", position, len(data))
            started = blocks[index] = _Block(block.get("type"))
            if started.kind == "text":
                started.number, texts = texts, texts + 1
                _text(started, block.get("text", ""), live, position, len(data))
            elif started.kind == "tool_use":
                started.call_id, started.name = block.get("id"), block.get("name")
                started.start_input = block.get("input", {})
                streams.content()
                live.calling(streams.clean(started.name) if isinstance(started.name, str)
                             else "tool")
            else:  # thinking, and any other content: never shown (D2)
                streams.content()
                live.content()
        elif kind == "content_block_delta":
            index, delta = payload.get("index"), payload.get("delta")
            if not isinstance(delta, dict):
                raise _bad("a content_block_delta not of its documented shape", position,
                           len(data))
            found = blocks.get(index) if isinstance(index, int) else None
            if found is None:
                raise _bad("a delta for a content block that never started", position,
                           len(data))
            if found.kind == "text" and found.number != texts - 1:  # shown after a later one
                raise _bad("a text delta for a text block after a later one started",
                           position, len(data))
            _delta(found, delta, live, position, len(data))
        elif kind == "content_block_stop" and not (
                isinstance(payload.get("index"), int) and payload["index"] in blocks):
            raise _bad("the stop of a content block that never started", position, len(data))
        # message_start, message_delta and types not known here are skipped (D12)
    if not ended:
        raise retry.Dropped("the stream ended without message_stop")
    reply = [_finished(block, position) for block in blocks.values()  # in the order shown
             if block.kind in ("text", "tool_use")]
    live.end()
    return reply


def _text(block: _Block, piece: Any, live: Live, position: int, size: int) -> None:
    if not isinstance(piece, str):
        raise _bad(f"a text block is {type(piece).__name__}, not text", position, size)
    if piece:
        piece = streams.clean(piece)
        block.parts.append(piece)
        streams.content()
        live.text(piece, block.number)


def _delta(block: _Block, delta: dict[str, Any], live: Live, position: int,
           size: int) -> None:
    kind = delta.get("type")
    if kind == "text_delta":
        if block.kind != "text":
            raise _bad("a text_delta for a block that is not text", position, size)
        _text(block, delta.get("text"), live, position, size)
    elif kind == "input_json_delta":
        partial = delta.get("partial_json")
        if block.kind != "tool_use" or not isinstance(partial, str):
            raise _bad("an input_json_delta not of its documented shape", position, size)
        block.parts.append(partial)
        streams.content()
    elif isinstance(kind, str) and kind in THINKING:  # a type of another kind: skipped
        streams.content()
        live.content()
    # a delta type not known here is skipped (D12)


def _finished(block: _Block, position: int) -> Text | ToolCall:
    """A block whose stream ended, as the whole reply would give it."""
    if block.kind == "text":
        return Text("".join(block.parts))
    for value, what in ((block.call_id, "a tool_use block's id"),
                        (block.name, "a tool_use block's name")):
        if not isinstance(value, str):
            raise _bad(f"{what} is {type(value).__name__}, not text", position, 0)
    given = "".join(block.parts)
    if given.strip():
        try:
            value = json.loads(given)
        except (ValueError, RecursionError):
            raise _bad("a tool_use block whose input is not JSON", position,
                       len(given)) from None
    else:
        value = block.start_input
    try:
        arguments = json.dumps(value)
    except (ValueError, RecursionError):
        raise _bad("a tool_use block whose input cannot be read", position, 0) from None
    return ToolCall(streams.clean(block.call_id), streams.clean(block.name), arguments)
