"""Bad input at the service boundary is `invalid_request` and changes nothing (SPEC section 10)."""

from __future__ import annotations

from typing import Any

import pytest

from clankie.core.errors import ClankieError
from tests.world import World

OTHER = "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b"


def answer_payload(c: str, snap: dict[str, Any]) -> dict[str, Any]:
    q = snap["pending"]
    return {"conversation_id": c, "request_id": q["request_id"],
            "incarnation": snap["incarnation"], "revision": snap["revision"],
            "option_id": q["options"][0]["option_id"]}


BAD_ANSWERS = {
    "unknown field": lambda p: p | {"approve": True},
    "both option and text": lambda p: p | {"text": "x"},
    "neither option nor text": lambda p: {k: v for k, v in p.items() if k != "option_id"},
    "revision as string": lambda p: p | {"revision": str(p["revision"])},
    "revision as bool": lambda p: p | {"revision": True},
    "revision as float": lambda p: p | {"revision": float(p["revision"])},
    "revision zero": lambda p: p | {"revision": 0},
    # past SQLite's 64-bit integers: `OverflowError` and a 500 before (red team, issue 21)
    "revision past 2**63": lambda p: p | {"revision": 2**63},
    "upper-case uuid": lambda p: p | {"request_id": p["request_id"].upper()},
    "uuid without dashes": lambda p: p | {"request_id": p["request_id"].replace("-", "")},
    "uuid version 1": lambda p: p | {"option_id": "c232ab00-9414-11ec-b3c8-9e6bdeced846"},
    "braced uuid": lambda p: p | {"incarnation": "{" + p["incarnation"] + "}"},
    "missing conversation": lambda p: {k: v for k, v in p.items() if k != "conversation_id"},
    "empty text": lambda p: {**{k: v for k, v in p.items() if k != "option_id"}, "text": ""},
    "oversize text": lambda p: {**{k: v for k, v in p.items() if k != "option_id"},
                                "text": "x" * 8_001},
    "NUL in text": lambda p: {**{k: v for k, v in p.items() if k != "option_id"},
                              "text": "a\x00b"},
    "lone surrogate": lambda p: {**{k: v for k, v in p.items() if k != "option_id"},
                                 "text": "a\ud800b"},
    "null option": lambda p: p | {"option_id": None},
    "list body": lambda p: [p],
    "string body": lambda p: "yes",
}


@pytest.mark.parametrize("name", sorted(BAD_ANSWERS))
def test_bad_answer_input_is_invalid_request_and_changes_nothing(world: World, name: str):
    c = world.conversation()
    snap = world.ask(c)
    before = world.dump()
    with pytest.raises(ClankieError) as err:
        world.service.call("input_answer", world.operator,
                           BAD_ANSWERS[name](answer_payload(c, snap)))
    assert err.value.code == "invalid_request"
    assert world.dump() == before
    assert world.snapshot(c)["revision"] == snap["revision"]


BAD_CALLS = [
    ("conversation_create", {"workspace": "relative/path"}),
    ("conversation_create", {"workspace": "/does/not/exist"}),
    ("conversation_create", {"kind": "owner"}),
    ("conversation_create", {"workspace": "/tmp", "kind": "team"}),
    ("conversation_send", {"conversation_id": OTHER, "text": ""}),
    ("conversation_send", {"conversation_id": OTHER, "text": "x" * 8_001}),
    ("events_tail", {"conversation_id": OTHER, "limit": 0}),
    ("events_tail", {"conversation_id": OTHER, "limit": 501}),
    ("events_tail", {"conversation_id": OTHER, "wait_ms": 30_001}),
    ("events_tail", {"conversation_id": OTHER, "after": -1}),
    ("events_tail", {"conversation_id": OTHER, "after": 2**63}),
    ("input_cancel", {"conversation_id": OTHER, "request_id": OTHER, "incarnation": OTHER,
                      "revision": 2**63}),
    ("device_pair", {"name": "phone", "mode": "admin"}),
    ("device_pair", {"name": "", "mode": "control"}),
    ("credential_issue", {"kind": "device", "name": "x"}),
    ("conversation_list", {"page": 2}),
    ("owner_revoke", {"really": True}),
    ("input_cancel", {"conversation_id": OTHER, "request_id": OTHER, "incarnation": OTHER,
                      "revision": 1, "text": "why"}),
    ("project_register", {"root": "/does/not/exist", "name": "p"}),
    ("pane_metadata_set", {"conversation_id": OTHER, "key": "k", "value": "\x00"}),
]


@pytest.mark.parametrize(("op", "payload"), BAD_CALLS)
def test_bad_input_to_any_op_changes_nothing(world: World, op: str, payload: dict[str, Any]):
    c = world.conversation()
    world.ask(c)
    before = world.dump()
    with pytest.raises(ClankieError) as err:
        world.service.call(op, world.operator, payload)
    assert err.value.code == "invalid_request"
    assert world.dump() == before


@pytest.mark.parametrize("args", [
    {"kind": "choice", "prompt": "x", "options": [{"label": "only one"}]},
    {"kind": "choice", "prompt": "x", "options": [{"label": str(i)} for i in range(11)]},
    {"kind": "choice", "prompt": "x", "options": [{"label": ""}, {"label": "b"}]},
    {"kind": "choice", "prompt": "x", "options": [{"label": "a" * 201}, {"label": "b"}]},
    {"kind": "choice", "prompt": "x",
     "options": [{"label": "a", "description": "d" * 1_001}, {"label": "b"}]},
    {"kind": "text", "prompt": ""},
    {"kind": "text", "prompt": "p" * 2_001},
    {"kind": "text", "prompt": "nul\x00"},
    {"kind": "text", "prompt": "x", "allow_text": True},
    {"kind": "text", "prompt": "x", "options": [{"label": "a"}, {"label": "b"}]},
    {"kind": "survey", "prompt": "x"},
    {"prompt": "x"},
    "just a string",
])
def test_q1_bounds_refuse_the_tool_call_and_store_nothing(world: World, args: Any):
    c = world.conversation()
    run_id = world.running_turn(c)
    before = world.dump()
    result = world.service.runs.ask_question(run_id, args)
    assert (result.status, result.reason) == ("refused", "invalid_request")
    assert world.dump() == before


def test_bounds_at_their_limits_are_accepted(world: World):
    c = world.conversation()
    args = {"kind": "choice", "prompt": "p" * 2_000, "allow_text": True,
            "options": [{"label": "l" * 200, "description": "d" * 1_000}] +
                       [{"label": str(i)} for i in range(9)]}
    snap = world.ask(c, args)
    assert len(snap["pending"]["options"]) == 10
    assert world.answer(c, snap, text="t" * 8_000)["duplicate"] is False


def test_unknown_op_is_not_found(world: World):
    with pytest.raises(ClankieError) as err:
        world.service.call("input_approve", world.operator, {})
    assert err.value.code == "not_found"
