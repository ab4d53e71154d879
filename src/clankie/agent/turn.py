"""One run of Clankie: call the model, say what it says, run the tools it calls, repeat.

Owns the loop and its bounds: at most `MAX_STEPS` model calls a run; a tool call with
unparseable arguments or an unknown tool fails the run (`ModelError`); a refused
`ask_question` is a tool result the model reads, never a crash (SPEC Q2).
"""

from __future__ import annotations

import json

from .context import TurnContext, system_prompt, turns
from .tools import ASK_QUESTION, ASK_QUESTION_SPEC, ToolBox
from .transcript import Model, ModelError, Text, ToolCall, ToolResult, Turn

MAX_STEPS = 4


def run_turn(model: Model, ctx: TurnContext, tools: ToolBox) -> None:
    system = system_prompt(ctx)
    transcript = turns(ctx)
    for _ in range(MAX_STEPS):
        blocks = model.step(system, transcript, [ASK_QUESTION_SPEC])
        results: list[ToolResult] = []
        for block in blocks:
            if isinstance(block, Text):
                if block.text.strip():
                    tools.say(block.text)
            else:
                results.append(ToolResult(block.call_id, json.dumps(_call(block, tools))))
        if not results:
            return
        transcript = [*transcript, Turn("assistant", tuple(blocks)), Turn("user", tuple(results))]
    raise ModelError(f"the model kept calling tools after {MAX_STEPS} steps")


def _call(call: ToolCall, tools: ToolBox) -> dict[str, object]:
    if call.name != ASK_QUESTION:
        raise ModelError(f"the model called an unknown tool {call.name!r}")
    try:
        arguments = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError:
        raise ModelError(f"malformed tool call: {ASK_QUESTION} arguments are not JSON") from None
    return tools.ask_question(arguments)
