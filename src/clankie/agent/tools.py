"""Clankie's one tool, `ask_question`, as the models see it (SPEC Q1, Q2).

Owns the tool's name, description and JSON Schema (generated from the `clankie.dto`
shapes, so the bounds live in one place). Calling it is the service's business: the turn
loop hands the arguments to a `ToolBox`.
"""

from __future__ import annotations

from typing import Any, Protocol

from clankie import dto

from .transcript import ToolSpec

ASK_QUESTION = "ask_question"


def _parameters() -> dict[str, Any]:
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


class ToolBox(Protocol):
    """What a run can do in the world, given by the service."""

    def ask_question(self, arguments: Any) -> dict[str, Any]: ...

    def say(self, text: str) -> None: ...
