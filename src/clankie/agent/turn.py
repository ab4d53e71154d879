"""One run of Clankie: call the model, say what it says, run the tools it calls, repeat.

Owns the loop and its bound: at most `max_steps` model calls a run (SPEC W10; the setting
of that name). Every tool call, unknown, malformed or refused ones included, becomes a
tool result the model reads (SPEC Q2, W1): only a model that cannot be asked, or that
keeps calling tools past the bound, fails the run (`ModelError`). A run stopped by its
owner (SPEC R7) makes no further step: `stop` is checked before each model call and before
each tool call, and raises `Stopped`.
"""

from __future__ import annotations

import json

from .context import TurnContext, system_prompt, turns
from .stop import NEVER, StopScope
from .tools import MAX_CALLS, TOOL_SPECS, ToolBox
from .transcript import (
    NO_WAITS,
    Model,
    ModelError,
    Text,
    ToolResult,
    Turn,
    Waits,
    reply_words,
)

MAX_STEPS = 24


def too_many(call_id: str) -> ToolResult:
    return ToolResult(call_id, json.dumps({
        "status": "refused", "code": "too_many_calls",
        "reason": f"only the first {MAX_CALLS} tool calls of one reply are run; this one was "
                  "not run: call it again in your next reply if you still need it"}))


def run_turn(model: Model, ctx: TurnContext, tools: ToolBox, max_steps: int = MAX_STEPS,
             waits: Waits = NO_WAITS, *, stop: StopScope = NEVER) -> None:
    """`waits`: how this run waits between tries of a model call (SPEC R6), given to
    every model call it makes; `stop`: the run's stop scope (R7)."""
    system = system_prompt(ctx)
    transcript = turns(ctx)
    for step in range(max_steps):
        stop.check()
        blocks = model.step(system, transcript, TOOL_SPECS, waits)
        stop.check()  # what a stopped call returned anyway is not acted on
        words = reply_words(blocks)  # one message a reply, as it was shown (D2)
        if words.strip():
            tools.say(waits.live.reply_id, words)
        results: list[ToolResult] = []
        for block in blocks:
            if isinstance(block, Text):
                continue
            if len(results) >= MAX_CALLS:  # a reply of thousands of calls (red team, R8)
                results.append(too_many(block.call_id))
            else:
                stop.check()
                results.append(ToolResult(block.call_id, tools.call(step, block)))
        if not results:
            return
        transcript = [*transcript, Turn("assistant", tuple(blocks)), Turn("user", tuple(results))]
    raise ModelError(f"max_steps: the model kept calling tools after {max_steps} model calls")
