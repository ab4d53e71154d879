"""SPEC A1, S4 and the op table over HTTP: every credential kind against every op, exact codes."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from clankie import dto
from clankie.api.app import create_app
from tests.core.test_authority import EXPECTED
from tests.world import World

KINDS = ["operator", "control_with_lease", "control_without_lease", "control_expired_lease",
         "read_only", "captain", "agent", "rotated", "revoked_owner", "no_token", "garbage"]
UNAUTHENTICATED = {"rotated", "revoked_owner", "no_token", "garbage"}


def allowed(op: dto.Op[Any, Any], kind: str) -> bool:
    core_kind = "control_without_lease" if kind == "control_expired_lease" else kind
    return core_kind in EXPECTED[op]


def setup(world: World, kind: str
          ) -> tuple[str | None, dict[dto.Op[Any, Any], dict[str, Any]]]:
    """The caller's token, and a payload for every op but `device_pair_finish` (its input
    is its credential: tests/api/test_pairing_http.py), one row per op constant."""
    c = world.conversation()
    room = world.conversation("room")
    snap = world.ask(c)
    run_id = world.call("conversation_send", {"conversation_id": c, "text": "x"})["run_id"]
    snap = world.snapshot(c)
    victim = world.call("device_pair", {"name": "victim", "mode": "read_only"})["credential_id"]
    ws = str(world.workspace)
    agent = world.call("credential_issue", {"kind": "agent", "name": "coder"})["token"]
    ask = {"workspace": ws, "kind": "text", "prompt": "Which name?"}
    asked = world.call("agent_ask", ask, agent)["request_id"]
    token: str | None
    if kind == "operator":
        token = world.operator
    elif kind.startswith("control"):
        token = world.call("device_pair", {"name": "phone", "mode": "control"})["token"]
        if kind != "control_without_lease":
            world.call("device_take_control", {"ttl_s": 60}, token)
        if kind == "control_expired_lease":
            world.clock.advance(61)
    elif kind == "read_only":
        token = world.call("device_pair", {"name": "tv", "mode": "read_only"})["token"]
    elif kind == "agent":
        token = agent
    elif kind == "captain":
        token = world.call("credential_issue", {"kind": "captain", "name": "cap"})["token"]
    elif kind == "rotated":
        token = world.call("credential_issue", {"kind": "operator", "name": "old"})["token"]
        world.call("credential_rotate", {}, token)
    elif kind == "revoked_owner":
        token = world.operator
        world.call("owner_revoke")
    elif kind == "no_token":
        token = None
    else:
        token = "clk_" + "A" * 43
    q = snap["pending"]
    ref = {"conversation_id": c, "request_id": q["request_id"],
           "incarnation": snap["incarnation"], "revision": snap["revision"]}
    payloads: dict[dto.Op[Any, Any], dict[str, Any]] = {
        dto.CONVERSATION_CREATE: {"workspace": ws},
        dto.CONVERSATION_GET: {"conversation_id": c},
        dto.CONVERSATION_LIST: {},
        dto.CONVERSATION_SEND: {"conversation_id": c, "text": "hello"},
        dto.CONVERSATION_RESET: {"conversation_id": c},
        dto.CONVERSATION_ARCHIVE: {"conversation_id": room},  # c has a question waiting
        dto.CONVERSATION_SET_WORKSPACE: {"conversation_id": c, "workspace": ws},
        dto.EVENTS_TAIL: {"conversation_id": c},
        dto.RUN_GET: {"run_id": run_id},
        dto.RUN_CANCEL: {"run_id": run_id},
        dto.DEVICE_PAIR: {"name": "another", "mode": "read_only"},
        dto.DEVICE_TAKE_CONTROL: {},
        dto.DEVICE_RELEASE: {},
        dto.CREDENTIAL_ISSUE: {"kind": "captain", "name": "c2"},
        dto.CREDENTIAL_ROTATE: {},
        dto.CREDENTIAL_LIST: {},
        dto.CREDENTIAL_REVOKE: {"credential_id": victim},
        dto.DEVICE_PAIR_START: {"name": "phone"},
        dto.OWNER_REVOKE: {},
        dto.NATIVE_TAKEOVER: {"conversation_id": c, "seat": "seat-1"},
        dto.ROOM_POST: {"conversation_id": room, "text": "hi"},
        dto.PANE_METADATA_SET: {"conversation_id": c, "key": "k", "value": "v"},
        dto.PROJECT_REGISTER: {"root": ws, "name": "p"},
        dto.INPUT_GET: {"conversation_id": c},
        dto.INPUT_ANSWER: ref | {"option_id": q["options"][0]["option_id"]},
        dto.INPUT_CANCEL: ref,
        dto.SERVICE_INFO: {},
        dto.AGENT_ASK: ask,  # the same ask again: the pending request, `duplicate: true` (P4)
        dto.AGENT_WAIT: {"request_id": asked, "wait_s": 0},
        dto.AGENT_LIST: {"workspace": ws},
        dto.AGENT_CANCEL: {"request_id": asked},
        dto.WHOAMI: {},
    }
    return token, payloads


# `device_pair_finish` takes no token at all (H2): tests/api/test_pairing_http.py.
@pytest.mark.parametrize("op", sorted(set(EXPECTED) - {dto.DEVICE_PAIR_FINISH},
                                      key=lambda op: op.name), ids=lambda op: op.name)
@pytest.mark.parametrize("kind", KINDS)
def test_authority_matrix_over_http(world: World, op: dto.Op[Any, Any], kind: str):
    token, payloads = setup(world, kind)
    assert set(payloads) == set(dto.OPS.values()) - {dto.DEVICE_PAIR_FINISH}
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    c = payloads[dto.INPUT_GET]["conversation_id"]
    with TestClient(create_app(world.service)) as client:
        response = client.post(f"/v1/ops/{op.name}", json=payloads[op], headers=headers)
    body = response.json()
    if kind in UNAUTHENTICATED:
        assert (response.status_code, body["code"]) == (401, "unauthenticated")
    elif allowed(op, kind):
        assert response.status_code == 200, body
        op.output.model_validate(body)
    else:
        assert (response.status_code, body["code"]) == (403, "forbidden")
        assert response.headers["content-type"] == "application/problem+json"
    if op is dto.INPUT_ANSWER and response.status_code != 200 and kind != "revoked_owner":
        assert world.snapshot(c)["pending"]["status"] == "pending"
        with world.db() as db:
            assert db.execute("SELECT count(*) FROM runs WHERE kind = 'continuation'"
                              ).fetchone() == (0,)
