"""SPEC section 12 H2 and the ops of section 10 it names, through the service on a real
store: `device_pair_start`, `device_pair_finish`, `credential_list`, `credential_revoke`."""

from __future__ import annotations

import base64

import pytest

from clankie.core.errors import ClankieError
from tests.world import World


def refused(world: World, op: str, payload: dict, token: str | None = None) -> str:
    with pytest.raises(ClankieError) as err:
        world.call(op, payload, token)
    return err.value.code


def devices(world: World) -> list[dict]:
    return [x for x in world.call("credential_list")["credentials"] if x["kind"] == "device"]


def test_h2_a_code_of_at_least_128_bits_pairs_once_as_the_named_device(world: World):
    started = world.call("device_pair_start", {"name": "phone", "mode": "read_only"})
    assert len(base64.urlsafe_b64decode(started["code"] + "==")) * 8 >= 128
    assert started["word"].isalpha()
    with world.db() as db:  # the code is stored only as its hash
        assert started["code"] not in str(db.execute("SELECT * FROM pairings").fetchall())
    assert devices(world) == []
    paired = world.service.call("device_pair_finish", None, {"code": started["code"]})
    assert paired.credential_id == started["pairing_id"]
    [device] = devices(world)
    assert (device["name"], device["mode"], device["revoked"]) == ("phone", "read_only", False)
    assert world.call("conversation_list", {}, paired.token)["conversations"] == []
    assert refused(world, "device_pair_finish", {"code": started["code"]}) == "unauthenticated"
    assert len(devices(world)) == 1  # used once: the second attempt made nothing


def test_h2_the_default_mode_is_control(world: World):
    started = world.call("device_pair_start", {"name": "phone"})
    world.service.call("device_pair_finish", None, {"code": started["code"]})
    assert devices(world)[0]["mode"] == "control"


def test_h2_wrong_used_and_expired_codes_are_refused_alike(world: World):
    used = world.call("device_pair_start", {"name": "a"})
    world.service.call("device_pair_finish", None, {"code": used["code"]})
    expired = world.call("device_pair_start", {"name": "b"})
    world.clock.advance(600)
    details = set()
    for code in (used["code"], expired["code"], "A" * 32):
        with pytest.raises(ClankieError) as err:
            world.service.call("device_pair_finish", None, {"code": code})
        details.add((err.value.code, err.value.detail))
    assert details == {("unauthenticated", "this pairing code is wrong, used or expired")}
    assert [d["name"] for d in devices(world)] == ["a"]


def test_h2_a_code_is_good_until_just_before_ten_minutes(world: World):
    started = world.call("device_pair_start", {"name": "phone"})
    world.clock.advance(599)
    world.service.call("device_pair_finish", None, {"code": started["code"]})


def wrong(world: World, peer: str, code: str = "wrong") -> tuple[str, str]:
    with pytest.raises(ClankieError) as err:
        world.service.call("device_pair_finish", None, {"code": code}, peer=peer)
    return err.value.code, err.value.detail


def test_h2_nobodys_failed_attempts_delay_or_refuse_a_valid_code(world: World):
    """Issue 30: any local user on a `--tcp` port kept pairing locked for everyone."""
    first = world.call("device_pair_start", {"name": "phone"})
    second = world.call("device_pair_start", {"name": "tablet"})
    for _ in range(20):
        wrong(world, "tcp 127.0.0.1:5000")
    for _ in range(20):
        wrong(world, "web 127.0.0.1:5001")
    # another connection's valid code pairs, and so does the failing connection's own
    world.service.call("device_pair_finish", None, {"code": first["code"]},
                       peer="tcp 127.0.0.1:6000")
    assert world.service.devices.pairing_preview(second["code"]).name == "tablet"
    world.service.call("device_pair_finish", None, {"code": second["code"]},
                       peer="tcp 127.0.0.1:5000")
    assert [d["name"] for d in devices(world)] == ["phone", "tablet"]


def test_h2_wrong_codes_are_rate_limited_per_connection(world: World):
    for _ in range(5):
        assert wrong(world, "tcp a")[0] == "unauthenticated"
    code, detail = wrong(world, "tcp a")
    assert code == "forbidden" and "from this connection" in detail
    assert wrong(world, "tcp b")[0] == "unauthenticated"  # another connection is not limited
    world.clock.advance(60)
    assert wrong(world, "tcp a")[0] == "unauthenticated"  # a minute later, again
    assert devices(world) == []
    with world.db() as db:  # and a refusal changed nothing
        assert db.execute("SELECT count(*) FROM pairings").fetchone() == (0,)


def test_h2_the_per_connection_limit_keeps_a_bounded_memory(world: World):
    from clankie.service.credentials import ATTEMPT_PEERS_MAX

    for n in range(ATTEMPT_PEERS_MAX + 50):
        wrong(world, f"tcp 10.0.0.1:{n}")
    assert world.service.devices.attempts.tracked <= ATTEMPT_PEERS_MAX


def test_h2_a_pairing_records_the_user_agent_that_paired(world: World):
    started = world.call("device_pair_start", {"name": "phone"})
    ua = "Mozilla/5.0 (Linux; Android 14) Chrome/156.0.0.0 Mobile Safari/537.36" + "x" * 900
    world.service.call("device_pair_finish", None, {"code": started["code"]},
                       peer="web 127.0.0.1:1", user_agent=ua)
    [device] = devices(world)
    assert device["user_agent"] == ua[:512]
    other = world.call("device_pair", {"name": "cli", "mode": "control"})
    assert [d["user_agent"] for d in devices(world)
            if d["credential_id"] == other["credential_id"]] == [None]


def test_h2_a_preview_shows_name_and_word_without_using_the_code(world: World):
    started = world.call("device_pair_start", {"name": "phone"})
    preview = world.service.devices.pairing_preview(started["code"])
    assert (preview.name, preview.word) == ("phone", started["word"])
    world.service.call("device_pair_finish", None, {"code": started["code"]})
    with pytest.raises(ClankieError) as err:
        world.service.devices.pairing_preview(started["code"])
    assert err.value.code == "unauthenticated"


def test_h2_only_an_operator_starts_a_pairing(world: World):
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})["token"]
    assert refused(world, "device_pair_start", {"name": "x"}, phone) == "forbidden"
    with world.db() as db:
        assert db.execute("SELECT count(*) FROM pairings").fetchone() == (0,)


def test_h2_revoked_devices_are_refused_from_their_next_request_and_lose_the_lease(
        world: World):
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})
    world.call("device_take_control", {}, phone["token"])
    world.call("credential_revoke", {"credential_id": phone["credential_id"]})
    assert refused(world, "conversation_list", {}, phone["token"]) == "unauthenticated"
    [listed] = devices(world)
    assert (listed["revoked"], listed["holds_lease"]) == (True, False)
    world.call("credential_revoke", {"credential_id": phone["credential_id"]})  # idempotent


def test_h2_revoke_refuses_oneself_strangers_and_non_operators(world: World):
    me = world.call("credential_list")["credentials"][0]["credential_id"]
    assert refused(world, "credential_revoke", {"credential_id": me}) == "not_eligible"
    assert refused(world, "credential_revoke",
                   {"credential_id": "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b"}) == "not_found"
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})
    assert refused(world, "credential_revoke", {"credential_id": me},
                   phone["token"]) == "forbidden"
    assert not any(x["revoked"] for x in world.call("credential_list")["credentials"])


def test_section_10_credential_list_has_the_spec_fields_and_last_use(world: World):
    phone = world.call("device_pair", {"name": "phone", "mode": "read_only"})
    [listed] = devices(world)
    assert listed["last_used_at"] is None
    assert {"credential_id", "kind", "name", "mode", "created_at", "last_used_at",
            "revoked"} <= listed.keys()
    world.clock.advance(5)
    world.call("conversation_list", {}, phone["token"])
    assert devices(world)[0]["last_used_at"] is not None
