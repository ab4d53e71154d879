"""Each provider's request, made from the provider-neutral transcript, valid by that
provider's published rules and within `context_budget` (SPEC R8).

Owns the one way a transcript goes on the wire, whatever was stored before:
- `normalise` makes any transcript one both providers accept: tool names match
  `^[a-zA-Z0-9_-]{1,64}$` (another becomes `invalid_tool_name`), arguments are a JSON
  object (other text becomes `{}`), no text block is empty or only whitespace (an
  assistant turn left empty says `(no reply)`), call IDs match `^[a-zA-Z0-9_-]{1,40}$`
  and are unique in the request, every call's result comes in the next user turn (a
  missing one is said to be missing, a result without its call is left out), turns
  alternate and start and end with the user. Where a call's name or arguments were
  replaced, the result the model reads next to it says what the model originally sent.
- `estimate` counts a request body's tokens on the safe side (docs/decisions.md, R8):
  the length of its JSON text with every non-ASCII character escaped, divided by 3,
  plus 4 a message.
- `openai_request` and `anthropic_request` give the keyword arguments of each SDK's
  create call within the budget (`fit`): the owner message that started the run is never
  left out or cut; the oldest history is left out first, whole turns at a time, and the
  first user turn then says how much was left out; then the run's older tool results are
  shortened, each saying how much.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypedDict

from .transcript import Block, ModelError, Text, ToolCall, ToolResult, ToolSpec, Turn

if TYPE_CHECKING:  # the SDKs' own shapes of their wire params; never imported to run
    from anthropic.types import ContentBlockParam, MessageParam, ToolParam
    from openai.types.chat import (
        ChatCompletionAssistantMessageParam,
        ChatCompletionFunctionToolParam,
        ChatCompletionMessageParam,
    )

NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
CALL_ID = re.compile(r"[a-zA-Z0-9_-]{1,40}")  # 40: the shortest published bound (OpenAI)
INVALID_NAME = "invalid_tool_name"
NO_REPLY = "(no reply)"
CONTINUE = "(Continue.)"
MISSING = json.dumps({"status": "missing", "reason": "no result of this call is on record"})
EMPTY_RESULT = json.dumps({"status": "empty"})
PER_MESSAGE = 4  # tokens of a message's own framing, over its JSON text
BYTES_PER_TOKEN = 3
DEFAULT_BUDGET = 100_000  # tokens: the setting context_budget
SHORTEST = 200  # characters a block is never cut below to fit the budget


class BudgetError(ModelError):
    """Even the newest turn, cut down, does not fit `context_budget`: the run fails."""


class OpenAIRequest(TypedDict):
    """The keyword arguments of the OpenAI SDK's `chat.completions.create`."""

    model: str
    messages: list[ChatCompletionMessageParam]
    tools: list[ChatCompletionFunctionToolParam]


class AnthropicRequest(TypedDict):
    """The keyword arguments of the Anthropic SDK's `messages.create`."""

    model: str
    max_tokens: int
    system: str
    messages: list[MessageParam]
    tools: list[ToolParam]


# Turns as one provider's messages (what `fit` measures them by)
Render = Callable[[list[Turn]], Sequence[object]]


# ------------------------------------------------------------------ provider-neutral


def normalise(turns: list[Turn]) -> list[Turn]:
    """The transcript as both providers accept it (see the module docstring)."""
    merged = _merged([Turn(t.role, tuple(_clean(b) for b in t.blocks)) for t in turns])
    if merged and merged[0].role == "assistant":
        merged.insert(0, Turn("user", (Text(CONTINUE),)))
    used: set[str] = set()
    out: list[Turn] = []
    pending: list[tuple[str, ToolCall, str | None]] = []  # (sent ID, call as replayed, note)
    for turn in merged:
        if turn.role == "assistant":
            blocks: list[Block] = []
            pending = []
            for block in turn.blocks:
                if isinstance(block, Text):
                    if block.text.strip():
                        blocks.append(block)
                elif isinstance(block, ToolCall):
                    call, note = _valid_call(block, used)
                    pending.append((block.call_id, call, note))
                    blocks.append(call)
            out.append(Turn("assistant", tuple(blocks) or (Text(NO_REPLY),)))
        else:
            out.append(_answering(turn, pending))
            pending = []
    if pending:
        out.append(_answering(Turn("user", ()), pending))
    if not out or out[-1].role != "user":
        out.append(Turn("user", (Text(CONTINUE),)))
    return out


def _clean(block: Block) -> Block:
    """Text any JSON encoder and server takes: a lone surrogate becomes `?`."""
    if isinstance(block, Text):
        return Text(_utf8(block.text))
    if isinstance(block, ToolResult):
        return ToolResult(block.call_id, _utf8(block.content))
    return block


def _utf8(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8")


def _merged(turns: list[Turn]) -> list[Turn]:
    """Consecutive turns of one role as one turn."""
    out: list[Turn] = []
    for turn in turns:
        if out and out[-1].role == turn.role:
            out[-1] = Turn(turn.role, (*out[-1].blocks, *turn.blocks))
        else:
            out.append(turn)
    return out


def _valid_call(call: ToolCall, used: set[str]) -> tuple[ToolCall, str | None]:
    """The call as it can be replayed, and what to tell the model if it was changed."""
    name = call.name if NAME.fullmatch(call.name) else INVALID_NAME
    arguments = call.arguments if _json_object(call.arguments) is not None else "{}"
    call_id = call.call_id
    if not CALL_ID.fullmatch(call_id) or call_id in used:
        stem = re.sub(r"[^a-zA-Z0-9_-]", "", call_id)[:24] or "call"
        number = len(used)
        while (call_id := f"{stem}_r{number}") in used:
            number += 1
    used.add(call_id)
    note = None
    if name != call.name or arguments != call.arguments:
        note = _utf8(f"This call is replayed here as {name!r} with arguments {arguments}, "
                     "because what you sent cannot be sent back to the model API as it was. "
                     f"You sent the name {json.dumps(call.name, ensure_ascii=False)} and the "
                     f"arguments text {json.dumps(call.arguments, ensure_ascii=False)}.")
    return ToolCall(call_id, name, arguments), note


def _json_object(text: str) -> dict[str, object] | None:
    """The JSON object `text` holds, in strict JSON (no NaN), else None."""
    def no_constant(name: str) -> object:
        raise ValueError(name)
    try:
        value = json.loads(text, parse_constant=no_constant)
        json.dumps(value, ensure_ascii=False).encode("utf-8")  # no lone surrogate
    except (ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        return None
    return value if isinstance(value, dict) else None


def _answering(turn: Turn, pending: list[tuple[str, ToolCall, str | None]]) -> Turn:
    """A user turn that begins with one result for each call of the turn before it, in
    their order, and then its texts that are not blank."""
    offered = [b for b in turn.blocks if isinstance(b, ToolResult)]
    results: list[Block] = []
    for sent_id, call, note in pending:
        match = next((r for r in offered if r.call_id == sent_id), None)
        if match is not None:
            offered.remove(match)
        content = match.content if match is not None else MISSING
        if not content.strip():
            content = EMPTY_RESULT
        if note is not None:
            content = json.dumps({"replayed": note, "result": _json_or_text(content)},
                                 ensure_ascii=False)
        results.append(ToolResult(call.call_id, content))
    texts = [b for b in turn.blocks if isinstance(b, Text) and b.text.strip()]
    blocks = (*results, *texts)
    return Turn("user", blocks or (Text(CONTINUE),))


def _json_or_text(content: str) -> object:
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        return content


# ------------------------------------------------------------------ estimate and budget


def estimate(body: OpenAIRequest | AnthropicRequest) -> int:
    """A request body's tokens on the safe side: its JSON text with every non-ASCII
    character escaped (6 or 12 bytes each), a token per 3 bytes, and 4 a message."""
    return (math.ceil(len(_json(body)) / BYTES_PER_TOKEN)
            + PER_MESSAGE * len(body.get("messages", ())))


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def _cost(messages: Sequence[object]) -> int:
    """At least what `messages` add to a body's estimate (a comma each included)."""
    return sum(math.ceil((len(_json(m)) + 1) / BYTES_PER_TOKEN) + PER_MESSAGE
               for m in messages)


def left_out_note(turns: int, budget: int) -> str:
    return (f"({turns} earlier turns of this conversation, the owner's messages, your replies "
            f"and tool calls, are left out here to fit the context budget of {budget:,} "
            "tokens; the conversation continues from here.)")


def owner_turn(turns: list[Turn]) -> int:
    """The index of the user turn with the owner message that started the run: the newest
    one with a text other than `CONTINUE` (a run's own steps add only tool results), or
    the newest turn if none has."""
    return next((i for i in range(len(turns) - 1, -1, -1) if turns[i].role == "user"
                 and any(isinstance(b, Text) and b.text != CONTINUE for b in turns[i].blocks)),
                len(turns) - 1)


def fit(turns: list[Turn], base: int, budget: int,
        render: Render) -> list[Turn]:
    """The normalised `turns` within `budget` tokens, given `base` for the rest of the
    body. The owner message that started the run (`owner_turn`) is never left out or cut
    (SPEC R8). The oldest turns before it leave first, a user turn and the assistant turn
    after it at a time, and the new first user turn says how many were left out; the calls
    whose results the owner's turn holds stay if they can. If what stays is still too big,
    the run's older tool results are shortened, oldest first, each saying how much was
    left out; then its longest texts, tool results and call arguments are cut, saying so.
    Calls whose results the owner's turn holds that cannot fit even cut (a stored step of
    thousands of calls) leave too, so that one bad step never fails a later run (R8); so
    do the run's own oldest steps, saying so, if even cut they cannot fit (a reply of
    thousands of calls). Only an owner message that cannot fit whole fails its run."""
    costs = [_cost(render([t])) for t in turns]
    if base + sum(costs) <= budget:
        return turns
    owner = owner_turn(turns)
    if owner >= 1 and any(isinstance(b, ToolResult) for b in turns[owner].blocks):
        try:  # the calls the owner's turn answers, if they can stay
            return _fit_from(turns, costs, owner - 1, owner, base, budget, render)
        except BudgetError:
            pass
    try:
        return _fit_from(turns, costs, owner, owner, base, budget, render)
    except BudgetError as exc:
        failed = exc
    for steps in range(1, (len(turns) - owner + 1) // 2):  # the run's own, oldest first
        fewer = _without_steps(turns, owner, steps, budget)
        try:
            return _fit_from(fewer, [_cost(render([t])) for t in fewer], owner, owner, base,
                             budget, render)
        except BudgetError as exc:
            failed = exc
    raise failed


def run_steps_note(steps: int, budget: int) -> str:
    return (f"({steps} earlier steps of this run, your tool calls and their results, are "
            f"left out here to fit the context budget of {budget:,} tokens.)")


def _without_steps(turns: list[Turn], owner: int, steps: int, budget: int) -> list[Turn]:
    """`turns` without the run's `steps` oldest steps (an assistant turn after the owner's
    and the user turn of its results each), the owner's turn saying so."""
    said = Turn("user", (*turns[owner].blocks, Text(run_steps_note(steps, budget))))
    return [*turns[:owner], said, *turns[owner + 1 + 2 * steps:]]


def _fit_from(turns: list[Turn], costs: list[int], keep_from: int, owner: int, base: int,
              budget: int, render: Render
              ) -> list[Turn]:
    total = base + sum(costs)
    start = 0
    note_cost = _cost(render([Turn("user", (Text(left_out_note(len(turns), budget)),))]))
    while start + 2 <= keep_from and total + note_cost > budget:
        total -= costs[start] + costs[start + 1]
        start += 2
    kept = turns[start:]
    if start:
        first = kept[0]
        rest = tuple(b for b in first.blocks if not isinstance(b, ToolResult))
        rest = tuple(b for b in rest if not (isinstance(b, Text) and b.text == CONTINUE))
        kept = [Turn("user", (Text(left_out_note(start, budget)), *rest)), *kept[1:]]
    kept = _shorten_older_results(kept, owner - start, base, budget, render)
    return _cut(kept, owner - start, base, budget, render)


def left_out_arguments(size: int) -> str:
    """What a call's arguments too long for the budget are replaced by (a JSON object)."""
    return json.dumps({"left_out": f"{size:,} characters of these arguments are left out "
                       "here to fit the context budget"})


def _left_out(text: str, keep: int) -> str:
    return (f"{text[:keep]} [... {len(text) - keep:,} characters left out here to fit the "
            "context budget]")


def _with_block(turns: list[Turn], i: int, j: int, block: Block) -> list[Turn]:
    blocks = turns[i].blocks
    return [*turns[:i], Turn(turns[i].role, (*blocks[:j], block, *blocks[j + 1:])),
            *turns[i + 1:]]


def _shorten_older_results(turns: list[Turn], owner: int, base: int, budget: int,
                           render: Render
                           ) -> list[Turn]:
    """The run's tool results before its newest ones (those after the owner's turn),
    oldest first, each shortened to what the budget needs, but not below `SHORTEST`."""
    over = base + _cost(render(turns)) - budget
    older = [(i, j) for i in range(owner + 1, len(turns) - 1)
             for j, b in enumerate(turns[i].blocks) if isinstance(b, ToolResult)]
    for i, j in older:
        if over <= 0:
            break
        block = turns[i].blocks[j]
        assert isinstance(block, ToolResult)
        keep = max(SHORTEST, len(block.content) - over * BYTES_PER_TOKEN - SHORTEST)
        if keep >= len(block.content):
            continue
        before = _cost(render([turns[i]]))
        turns = _with_block(turns, i, j, ToolResult(block.call_id,
                                                    _left_out(block.content, keep)))
        over += _cost(render([turns[i]])) - before
    return turns


def _cut(turns: list[Turn], owner: int, base: int, budget: int,
         render: Render) -> list[Turn]:
    """Cut the longest text or tool result by half, or replace the longest call
    arguments by a note, until the turns fit; never a text of the owner's turn."""
    while (over := base + _cost(render(turns)) - budget) > 0:
        spots = [(len(_body(b)), i, j) for i, t in enumerate(turns)
                 for j, b in enumerate(t.blocks) if not (i == owner and isinstance(b, Text))]
        size, i, j = max(spots, default=(0, 0, 0))
        if size <= 2 * SHORTEST:
            raise BudgetError(f"context_budget: the request is {over:,} tokens over it even "
                              "with the history left out and its longest parts cut; the "
                              "owner's message that started the run is never cut: send a "
                              "shorter one or raise context_budget")
        block = turns[i].blocks[j]
        new: Block
        if isinstance(block, ToolCall):
            new = ToolCall(block.call_id, block.name, left_out_arguments(size))
        elif isinstance(block, Text):
            new = Text(_left_out(block.text, size // 2))
        else:
            new = ToolResult(block.call_id, _left_out(block.content, size // 2))
        turns = _with_block(turns, i, j, new)
    return turns


def _body(block: Block) -> str:
    if isinstance(block, ToolCall):
        return block.arguments
    return block.text if isinstance(block, Text) else block.content


# ------------------------------------------------------------------ OpenAI chat completions


def openai_messages(system: str, turns: list[Turn]) -> list[ChatCompletionMessageParam]:
    """Normalised turns as chat-completions messages (a system message first if given):
    an assistant turn is one message with `tool_calls`, a user turn its `tool` messages
    and then one user message with its texts."""
    messages: list[ChatCompletionMessageParam] = (
        [{"role": "system", "content": system}] if system else [])
    for turn in turns:
        texts = [b.text for b in turn.blocks if isinstance(b, Text)]
        calls = [b for b in turn.blocks if isinstance(b, ToolCall)]
        results = [b for b in turn.blocks if isinstance(b, ToolResult)]
        if turn.role == "assistant":
            message: ChatCompletionAssistantMessageParam = {
                "role": "assistant", "content": "\n\n".join(texts) or None}
            if calls:
                message["tool_calls"] = [{"id": c.call_id, "type": "function", "function": {
                    "name": c.name, "arguments": c.arguments}} for c in calls]
            messages.append(message)
            continue
        for r in results:
            messages.append({"role": "tool", "tool_call_id": r.call_id, "content": r.content})
        if texts:
            messages.append({"role": "user", "content": "\n\n".join(texts)})
    return messages


def openai_request(model: str, system: str, turns: list[Turn], tools: list[ToolSpec],
                   budget: int) -> OpenAIRequest:
    """The keyword arguments of `chat.completions.create`, valid and within `budget`."""
    body: OpenAIRequest = {
        "model": model, "messages": [{"role": "system", "content": _utf8(system)}],
        "tools": [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]}
    kept = fit(normalise(turns), estimate(body), budget, lambda ts: openai_messages("", ts))
    body["messages"] += openai_messages("", kept)
    return body


# ------------------------------------------------------------------ Anthropic messages


def anthropic_messages(turns: list[Turn]) -> list[MessageParam]:
    """Normalised turns as Messages API messages of content blocks."""
    messages: list[MessageParam] = []
    for turn in turns:
        content: list[ContentBlockParam] = []
        for b in turn.blocks:
            if isinstance(b, Text):
                content.append({"type": "text", "text": b.text})
            elif isinstance(b, ToolCall):
                content.append({"type": "tool_use", "id": b.call_id, "name": b.name,
                                "input": _json_object(b.arguments) or {}})
            elif isinstance(b, ToolResult):
                content.append({"type": "tool_result", "tool_use_id": b.call_id,
                                "content": b.content})
        if turn.role == "user":
            messages.append({"role": "user", "content": content})
        else:
            messages.append({"role": "assistant", "content": content})
    return messages


def anthropic_request(model: str, system: str, turns: list[Turn], tools: list[ToolSpec],
                      budget: int, max_tokens: int) -> AnthropicRequest:
    """The keyword arguments of `messages.create`, valid and within `budget`."""
    body: AnthropicRequest = {
        "model": model, "max_tokens": max_tokens, "system": _utf8(system), "messages": [],
        "tools": [{"name": t.name, "description": t.description,
                   "input_schema": t.parameters} for t in tools]}
    kept = fit(normalise(turns), estimate(body), budget, anthropic_messages)
    body["messages"] = anthropic_messages(kept)
    return body
