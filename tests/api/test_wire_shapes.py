"""The contract's shapes speak the core's vocabularies (SPEC section 10, "Dispatcher").

The DTOs reuse the core's StrEnums, so the OpenAPI document lists exactly their values,
and the client's strict check of a reply (F2) still takes the JSON text of each value.
"""

from __future__ import annotations

import pytest

from clankie import dto
from clankie.api.openapi import build_openapi
from clankie.client import NotClankie, fit_shape
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
    assert fit_shape("run_get", RUN, "unix:x") == RUN
    with pytest.raises(NotClankie):
        fit_shape("run_get", {**RUN, "status": "sleeping"}, "unix:x")
    with pytest.raises(NotClankie):
        fit_shape("run_get", {**RUN, "kind": 1}, "unix:x")


def test_an_input_outside_the_enum_is_refused_in_the_words_of_a_choice():
    with pytest.raises(Exception) as refused:
        dto.ConversationCreate.model_validate({"kind": "nobody"})
    assert "Input should be 'owner', 'native_seat', 'room', 'global' or 'side'" \
        in str(refused.value)
    assert dto.DevicePair.model_validate({"name": "n", "mode": "read_only"}).mode \
        is DeviceMode.READ_ONLY
