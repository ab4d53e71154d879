"""SPEC H2 and H3 over `/v1/ops`: `device_pair_finish` needs no bearer token (the code is
the credential), and `/v1/ops` never accepts a cookie."""

from __future__ import annotations

from starlette.testclient import TestClient

from clankie.api.app import create_app
from tests.world import World


def test_h2_device_pair_finish_takes_the_code_and_no_token(world: World):
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    with TestClient(create_app(world.service)) as client:
        wrong = client.post("/v1/ops/device_pair_finish", json={"code": "nope"})
        assert (wrong.status_code, wrong.json()["code"]) == (401, "unauthenticated")
        paired = client.post("/v1/ops/device_pair_finish", json={"code": code},
                             headers={"Authorization": "Bearer garbage"})
        assert paired.status_code == 200, paired.json()
        again = client.post("/v1/ops/device_pair_finish", json={"code": code})
        assert (again.status_code, again.json()["code"]) == (401, "unauthenticated")
    listed = world.call("credential_list")["credentials"]
    assert [x["name"] for x in listed if x["kind"] == "device"] == ["phone"]


def test_h3_v1_ops_never_accepts_a_cookie(world: World):
    c = world.conversation()
    with TestClient(create_app(world.service)) as client:
        for name in ("clankie_device", "token", "session"):
            client.cookies.set(name, world.operator)
            response = client.post("/v1/ops/conversation_reset", json={"conversation_id": c})
            assert (response.status_code, response.json()["code"]) == (401, "unauthenticated")
            client.cookies.clear()
    assert world.call("conversation_get", {"conversation_id": c})["revision"] == 1


def test_h2_wrong_codes_over_v1_ops_are_limited_per_connection_never_for_everyone(
        world: World):
    """Issue 30: any local user on a `--tcp` port kept pairing locked for everyone."""
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    with TestClient(create_app(world.service), client=("127.0.0.1", 40001)) as guesser:
        codes = [guesser.post("/v1/ops/device_pair_finish", json={"code": "nope"}).json()["code"]
                 for _ in range(6)]
        assert codes == ["unauthenticated"] * 5 + ["forbidden"]
    assert [x for x in world.call("credential_list")["credentials"]
            if x["kind"] == "device"] == []
    with TestClient(create_app(world.service), client=("127.0.0.1", 40002)) as owner:
        paired = owner.post("/v1/ops/device_pair_finish", json={"code": code},
                            headers={"User-Agent": "pair-script/1.0"})
        assert paired.status_code == 200, paired.json()
    listed = world.call("credential_list")["credentials"]
    assert [x["user_agent"] for x in listed if x["kind"] == "device"] == ["pair-script/1.0"]


def test_h3_a_browsers_token_is_no_bearer_token_on_v1_ops(world: World):
    """Red team of issue 30: a server on another port got the cookie (a top-level
    navigation carries a Lax cookie) and used its value as a bearer token on `--tcp`: it
    read the question, took control, answered, sent messages and rotated the credential.
    A credential paired by a code is a browser's: it works on the page (with the page's
    key) and `/v1/ops` refuses it, every op, before reading the body; nothing changes."""
    c = world.conversation()
    world.ask(c)
    code = world.call("device_pair_start", {"name": "phone"})["code"]
    with TestClient(create_app(world.service)) as client:
        token = client.post("/v1/ops/device_pair_finish", json={"code": code}).json()["token"]
        before = world.dump()
        bearer = {"Authorization": f"Bearer {token}"}
        snap = world.snapshot(c)
        for op, payload in [("input_get", {"conversation_id": c}),
                            ("device_take_control", {}), ("credential_rotate", {}),
                            ("conversation_send", {"conversation_id": c, "text": "x"}),
                            ("input_answer", {"conversation_id": c,
                                              "request_id": snap["pending"]["request_id"],
                                              "incarnation": snap["incarnation"],
                                              "revision": snap["revision"],
                                              "option_id": snap["pending"]["options"][0][
                                                  "option_id"]})]:
            refused = client.post(f"/v1/ops/{op}", json=payload, headers=bearer)
            assert (refused.status_code, refused.json()["code"]) == (401, "unauthenticated")
            assert "page" in refused.json()["detail"], refused.json()
    assert world.dump() == before
    assert world.snapshot(c)["pending"] is not None
