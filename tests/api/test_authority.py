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


def allowed(op: str, kind: str) -> bool:
    core_kind = "control_without_lease" if kind == "control_expired_lease" else kind
    return core_kind in EXPECTED[op]


def setup(world: World, kind: str) -> tuple[str | None, dict[str, Any]]:
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
    payloads = {
        "conversation_create": {"workspace": ws},
        "conversation_get": {"conversation_id": c},
        "conversation_list": {},
        "conversation_send": {"conversation_id": c, "text": "hello"},
        "conversation_reset": {"conversation_id": c},
        "conversation_archive": {"conversation_id": room},  # c has a question waiting
        "conversation_set_workspace": {"conversation_id": c, "workspace": ws},
        "events_tail": {"conversation_id": c},
        "run_get": {"run_id": run_id},
        "run_cancel": {"run_id": run_id},
        "device_pair": {"name": "another", "mode": "read_only"},
        "device_take_control": {},
        "device_release": {},
        "credential_issue": {"kind": "captain", "name": "c2"},
        "credential_rotate": {},
        "credential_list": {},
        "credential_revoke": {"credential_id": victim},
        "device_pair_start": {"name": "phone"},
        "owner_revoke": {},
        "native_takeover": {"conversation_id": c, "seat": "seat-1"},
        "room_post": {"conversation_id": room, "text": "hi"},
        "pane_metadata_set": {"conversation_id": c, "key": "k", "value": "v"},
        "project_register": {"root": ws, "name": "p"},
        "input_get": {"conversation_id": c},
        "input_answer": ref | {"option_id": q["options"][0]["option_id"]},
        "input_cancel": ref,
        "service_info": {},
        "agent_ask": ask,  # the same ask again: the pending request, `duplicate: true` (P4)
        "agent_wait": {"request_id": asked, "wait_s": 0},
        "agent_list": {"workspace": ws},
        "agent_cancel": {"request_id": asked},
        "whoami": {},
    }
    return token, payloads


# `device_pair_finish` takes no token at all (H2): tests/api/test_pairing_http.py.
@pytest.mark.parametrize("op", sorted(set(EXPECTED) - {"device_pair_finish"}))
@pytest.mark.parametrize("kind", KINDS)
def test_authority_matrix_over_http(world: World, op: str, kind: str):
    token, payloads = setup(world, kind)
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    c = payloads["input_get"]["conversation_id"]
    with TestClient(create_app(world.service)) as client:
        response = client.post(f"/v1/ops/{op}", json=payloads[op], headers=headers)
    body = response.json()
    if kind in UNAUTHENTICATED:
        assert (response.status_code, body["code"]) == (401, "unauthenticated")
    elif allowed(op, kind):
        assert response.status_code == 200, body
        dto.OPS[op].output.model_validate(body)
    else:
        assert (response.status_code, body["code"]) == (403, "forbidden")
        assert response.headers["content-type"] == "application/problem+json"
    if op == "input_answer" and response.status_code != 200 and kind != "revoked_owner":
        assert world.snapshot(c)["pending"]["status"] == "pending"
        with world.db() as db:
            assert db.execute("SELECT count(*) FROM runs WHERE kind = 'continuation'"
                              ).fetchone() == (0,)
