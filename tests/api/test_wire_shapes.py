"""The contract's shapes speak the core's vocabularies (SPEC section 10, "Dispatcher").

The DTOs reuse the core's StrEnums, so the OpenAPI document lists exactly their values,
and the client's strict check of a reply (F2) still takes the JSON text of each value.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import TypeAdapter

from clankie import dto
from clankie.api.openapi import build_openapi
from clankie.client import NotClankie, fit_shape
from clankie.core import model
from clankie.core.model import (
    ConversationKind,
    CredentialKind,
    DeviceMode,
    QuestionKind,
    QuestionStatus,
    RunKind,
    RunStatus,
)


def test_openapi_lists_the_core_enum_values():
    schemas = build_openapi()["components"]["schemas"]
    for enum in (ConversationKind, CredentialKind, DeviceMode, QuestionKind, QuestionStatus,
                 RunKind, RunStatus):
        assert schemas[enum.__name__]["enum"] == [member.value for member in enum]


RUN = {"run_id": "r", "conversation_id": "c", "kind": "turn", "status": "running",
       "error": None, "receipt_id": None, "created_at": "t", "started_at": None,
       "finished_at": None}


def test_a_reply_in_json_text_fits_strictly_and_a_value_outside_the_enum_does_not():
    assert fit_shape(dto.RUN_GET.name, RUN, "unix:x") == RUN
    with pytest.raises(NotClankie):
        fit_shape(dto.RUN_GET.name, {**RUN, "status": "sleeping"}, "unix:x")
    with pytest.raises(NotClankie):
        fit_shape(dto.RUN_GET.name, {**RUN, "kind": 1}, "unix:x")


def test_an_input_outside_the_enum_is_refused_in_the_words_of_a_choice():
    with pytest.raises(Exception) as refused:
        dto.ConversationCreate.model_validate({"kind": "nobody"})
    assert "Input should be 'owner', 'native_seat', 'room', 'global' or 'side'" \
        in str(refused.value)
    assert dto.DevicePair.model_validate({"name": "n", "mode": "read_only"}).mode \
        is DeviceMode.READ_ONLY


# ------------------------------------------------------------ events (SPEC section 8)

NOW = datetime(2026, 12, 3, 16, 0, tzinfo=UTC)
C, R = "c0ffee00-0000-4000-8000-000000000001", "c0ffee00-0000-4000-8000-000000000002"
EVENTS = [
    model.InputRequested(C, "q1", "Which licence?", ("MIT", "Apache-2.0 é"), NOW),
    model.InputRequested(C, "q2", "Why?", (), NOW),
    model.InputResolved(C, "q1", QuestionStatus.ANSWERED, NOW),
    model.MessagePosted(model.Message("m1", C, model.Author.CLANKIE, "hi \u2603", NOW)),
    model.RunStatusChanged(model.Run(R, C, RunKind.TURN, RunStatus.FAILED, "i", NOW,
                                     error="boom"), NOW),
    model.ConversationResetDone(C, NOW),
    model.ToolActivity(C, R, "read_file", "refused", "outside", "README.md", NOW),
    model.RunActivity(C, R, "model_retry", "429", NOW, NOW),
]


def test_v2_v4_every_event_the_core_writes_is_its_typed_shape_byte_for_byte():
    bodies = [event.body(seq) for seq, event in enumerate(EVENTS, start=1)]
    page = dto.EventsOut(events=bodies, next_after=len(bodies), oldest_seq=1, trimmed=False)
    assert [type(e).__name__ for e in page.events] == [
        "InputRequestedEvent", "InputRequestedEvent", "InputResolvedEvent", "MessageEvent",
        "RunStatusEvent", "ConversationResetEvent", "ToolActivityEvent", "RunActivityEvent"]
    assert set(dto.KNOWN_EVENTS) == {event.type for event in EVENTS}
    untyped = TypeAdapter(list[dict[str, Any]]).dump_json(bodies)
    assert page.model_dump_json().encode() == \
        b'{"events":' + untyped + b',"next_after":8,"oldest_seq":1,"trimmed":false}'
    assert fit_shape(dto.EVENTS_TAIL.name, page.model_dump(mode="json"), "unix:x")


def page_of(*events: dict[str, Any]) -> dict[str, Any]:
    return {"events": list(events), "next_after": 9, "oldest_seq": 1, "trimmed": False}


def test_v4_a_later_event_type_and_a_later_field_are_tolerated_by_the_client():
    later = {"type": "run_thought", "seq": 9, "conversation_id": C, "text": "hmm"}
    grown = {**EVENTS[5].body(8), "by": "captain"}
    assert fit_shape(dto.EVENTS_TAIL.name, page_of(grown, later), "unix:x")
    page = dto.EventsOut.model_validate(page_of(grown, later))
    assert isinstance(page.events[1], dto.UnknownEvent)
    assert page.model_dump(mode="json")["events"] == [grown, later]


@pytest.mark.parametrize("event", [
    {**EVENTS[0].body(1), "incarnation": "i"},  # V2: no additions, ever
    {k: v for k, v in EVENTS[4].body(1).items() if k != "status"},  # a known type, unfit
    {**EVENTS[6].body(1), "status": "maybe"},
    {"type": "run_thought"},  # no seq
    {"seq": 1},  # no type
    ["not", "an", "event"],
])
def test_v2_v4_an_event_unfit_for_its_type_is_not_clankie(event: Any):
    with pytest.raises(NotClankie):
        fit_shape(dto.EVENTS_TAIL.name, page_of(event), "unix:x")


def test_the_openapi_document_tells_events_apart_and_leaves_room_for_later_types():
    schemas = build_openapi()["components"]["schemas"]
    tagged = schemas["EventsOut"]["properties"]["events"]["items"]["oneOf"]
    assert len(tagged) == len(dto.KNOWN_EVENTS) + 1
    assert schemas["InputRequestedEvent"]["additionalProperties"] is False
    assert schemas["UnknownEvent"]["properties"]["type"]["not"]["enum"] == \
        list(dto.KNOWN_EVENTS)


# ------------------------------------------------------------------- the op table


def test_each_op_is_one_constant_named_as_its_wire_name():
    """An op is named once: its constant in `dto` (`dto.RUN_GET`) is the row `dto.OPS`
    finds by its wire name, and `Client.op(dto.RUN_GET, ...)` is typed by that row (mypy
    reads the constant's `Op[RunRef, RunOut]`); no op left out, none twice."""
    constants = {name: value for name, value in vars(dto).items() if isinstance(value, dto.Op)}
    assert {spec.name.upper(): spec for spec in dto.OPS.values()} == constants
    assert len({id(spec.input) for spec in dto.OPS.values()}) > 1  # a real table, not one row


def test_the_op_tables_flags_are_spec_s_stated_apart():
    """Issue 32: the edge waits on its loop for the ops flagged `long_poll` (V1, V5, P4) and
    reads no bearer token for the one flagged `credential_in_body` (H2, T6); these are
    SPEC's, written here apart from the table, so a flag changed in `dto` fails."""
    assert {spec for spec in dto.OPS.values() if spec.long_poll} == {
        dto.EVENTS_TAIL, dto.AGENT_WAIT}
    assert {spec for spec in dto.OPS.values() if spec.credential_in_body} == {
        dto.DEVICE_PAIR_FINISH}


def test_the_openapi_document_has_one_path_per_op_constant_and_its_security():
    """SPEC section 10 "Dispatcher" (the document at /v1/openapi.json) and H2: each op of the
    table is one path, under its constant's name and shapes; an op whose input is its own
    credential asks for no bearer token."""
    paths = build_openapi()["paths"]
    assert set(paths) == {f"/v1/ops/{spec.name}" for spec in dto.OPS.values()}
    for spec in dto.OPS.values():
        post = paths[f"/v1/ops/{spec.name}"]["post"]
        assert post["operationId"] == spec.name
        assert post["requestBody"]["content"]["application/json"]["schema"] == {
            "$ref": f"#/components/schemas/{spec.input.__name__}"}
        assert post["security"] == ([] if spec is dto.DEVICE_PAIR_FINISH
                                    else [{"bearer": []}])
