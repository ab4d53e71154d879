"""Issue 42: every integer of a tool's arguments takes a whole number written as a float.

The tools' schemas say `"type": "integer"`, which JSON Schema defines as any number without
a fractional part, so `25.0` is one; models write whole numbers that way. Each advertised
schema (the bridge's five tools, SPEC P4; Clankie's own, Q1 and W1) stays a valid JSON
Schema, and for every integer property the shape agrees with its schema: a whole float is
taken as that integer, a fraction (or a boolean) is refused in words that say why.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from clankie import dto, tool_dto
from clankie.agent.tools import TOOL_SPECS
from clankie.bridge.server import input_schema

BRIDGE: dict[str, type[BaseModel]] = {
    "ask_owner": dto.AskOwner, "wait_answer": dto.AgentWait, "get_question": dto.AgentRequest,
    "list_questions": dto.Nothing, "cancel_question": dto.AgentRequest}
REQUEST = "0b7e4a4e-8f5b-4d7e-9c3a-2f1d5e6a7b8c"
# What each shape needs besides the integer under test.
BASE: dict[type[BaseModel], dict[str, Any]] = {
    dto.AskOwner: {"kind": "text", "prompt": "May I?"},
    dto.AgentWait: {"request_id": REQUEST},
    tool_dto.ReadFileArgs: {"path": "a.py"},
    tool_dto.SearchTextArgs: {"pattern": "x"},
}


def integers(schema: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Each integer property of a schema and its bounds."""
    found = {}
    for name, prop in schema.get("properties", {}).items():
        kinds = [prop, *prop.get("anyOf", [])]
        whole = next((k for k in kinds if k.get("type") == "integer"), None)
        if whole is not None:
            # only JSON Schema's own keywords (a validator placed before the bounds once
            # turned them into `ge` and `le`, which no validator of the schema reads)
            assert set(whole) <= {"type", "minimum", "maximum", "default", "description"}, prop
            found[name] = (whole.get("minimum", -(2**31)), whole.get("maximum", 2**31))
    return found


SHAPES: list[tuple[str, type[BaseModel], dict[str, Any]]] = [
    *[(f"bridge {name}", model, input_schema(model)) for name, model in BRIDGE.items()],
    *[(f"clankie {name}", model, tool_dto.schema(model))
      for name, model in tool_dto.TOOL_ARGS.items()],
]
INTEGERS = [(label, model, schema, name, bounds) for label, model, schema in SHAPES
            for name, bounds in integers(schema).items()]


def test_the_integers_found_are_every_tools_integers():
    assert {(label, name) for label, _, _, name, _ in INTEGERS} == {
        ("bridge ask_owner", "expires_in_s"), ("bridge wait_answer", "wait_s"),
        ("clankie list_files", "depth"), ("clankie read_file", "offset"),
        ("clankie read_file", "limit"), ("clankie search_text", "max_results"),
        ("clankie git_log", "limit")}


@pytest.mark.parametrize("spec", TOOL_SPECS, ids=lambda s: s.name)
def test_clankies_tool_schemas_are_valid_json_schema(spec: Any):
    jsonschema.Draft202012Validator.check_schema(spec.parameters)


@pytest.mark.parametrize(("label", "schema"), [(label, schema) for label, _, schema in SHAPES])
def test_the_bridges_and_clankies_argument_schemas_are_valid_json_schema(
        label: str, schema: dict[str, Any]):
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(("label", "model", "schema", "name", "bounds"), INTEGERS,
                         ids=[f"{label}.{name}" for label, _, _, name, _ in INTEGERS])
@settings(max_examples=50)
@given(data=st.data())
def test_a_whole_float_is_that_integer_a_fraction_is_refused_as_its_schema_says(
        label: str, model: type[BaseModel], schema: dict[str, Any], name: str,
        bounds: tuple[int, int], data: st.DataObject):
    low, high = bounds
    whole = data.draw(st.integers(low, high))
    arguments = {**BASE.get(model, {}), name: float(whole)}
    jsonschema.validate(arguments, schema)  # the schema takes it ...
    assert getattr(model.model_validate(arguments), name) == whole  # ... and so does the shape
    assert type(getattr(model.model_validate(arguments), name)) is int
    fraction = data.draw(st.floats(low, high, allow_nan=False).filter(
        lambda x: not x.is_integer()))
    for refused in (fraction, True):
        bad = {**BASE.get(model, {}), name: refused}
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)
        with pytest.raises(ValidationError) as caught:
            model.model_validate(bad)
        said = caught.value.errors()[0]["msg"]
        assert "Value error" not in said
        if refused is fraction:
            assert said == f"Input should be a whole number, not {fraction!r}"
