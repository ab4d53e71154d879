"""Clankie's tools as the models see them: `ask_question` (SPEC Q1, Q2) and the read-only
workspace tools (SPEC W1).

Owns each tool's name, description and JSON Schema, generated from the shapes in
`clankie.dto` and `clankie.tool_dto`, so the bounds live in one place. Calling a tool is
the service's business: the turn loop hands each call to a `ToolBox`.
"""

from __future__ import annotations

import inspect
from typing import Protocol

from clankie import dto, tool_dto

from .transcript import ToolCall, ToolSpec

ASK_QUESTION = "ask_question"
MAX_CALLS = 64  # tool calls run of one model reply; the rest are refused, not run or stored


def _parameters() -> dict[str, object]:
    schema = dto.ASK_QUESTION_ARGS.json_schema()
    # Providers want one object schema at the top; the two shapes become one with `kind`.
    defs = schema.get("$defs", {})
    choice, text = defs["ChoiceAsk"], defs["TextAsk"]
    properties = dict(choice["properties"])
    properties["kind"] = {"type": "string", "enum": ["text", "choice"],
                          "description": "text: a free-text question; choice: pick an option"}
    properties["options"] = dict(properties["options"], description=(
        "For a choice question: 2 to 10 options, each with a label and an optional "
        "description."))
    properties["options"]["items"] = defs["OptionIn"]
    properties["allow_text"] = dict(properties["allow_text"], description=(
        "For a choice question: whether the owner may answer in text instead."))
    assert set(text["properties"]) <= set(properties)
    return {"type": "object", "properties": properties, "required": ["kind", "prompt"],
            "additionalProperties": False}


ASK_QUESTION_SPEC = ToolSpec(
    name=ASK_QUESTION,
    description=("Ask the owner one preference question (text, or a choice between options). "
                 "Returns at once with {\"status\": \"pending\", \"request_id\"}: the answer, "
                 "if any, arrives in a later run. Only one question can be pending."),
    parameters=_parameters(),
)

WORKSPACE_TOOL_SPECS = tuple(
    ToolSpec(name=name, description=inspect.getdoc(args) or name,
             parameters=tool_dto.schema(args))
    for name, args in tool_dto.TOOL_ARGS.items())

TOOL_SPECS = [*WORKSPACE_TOOL_SPECS, ASK_QUESTION_SPEC]


class ToolBox(Protocol):
    """What a run can do in the world, given by the service."""

    def call(self, step: int, call: ToolCall) -> str:
        """Run one tool call of model step `step`; the result text the model reads. A
        refusal is a result too, never an exception."""
        ...

    def say(self, reply_id: str | None, text: str) -> None:
        """A reply of the model's: its text, and the ID it was shown under while written
        (D2; None when it was not shown)."""
        ...
