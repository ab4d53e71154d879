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


def test_h2_more_than_five_failures_a_minute_lock_pairing_for_a_minute(world: World):
    good = world.call("device_pair_start", {"name": "phone"})
    for _ in range(6):
        assert refused(world, "device_pair_finish", {"code": "wrong"}) == "unauthenticated"
    # locked: even the right code is refused, and pairs nothing
    assert refused(world, "device_pair_finish", {"code": good["code"]}) == "forbidden"
    with pytest.raises(ClankieError):
        world.service.pairing_preview(good["code"])
    assert devices(world) == []
    world.clock.advance(60)
    world.service.call("device_pair_finish", None, {"code": good["code"]})
    assert len(devices(world)) == 1


def test_h2_five_failures_do_not_lock_and_old_ones_age_out(world: World):
    for _ in range(5):
        refused(world, "device_pair_finish", {"code": "wrong"})
    world.clock.advance(61)
    for _ in range(5):
        refused(world, "device_pair_finish", {"code": "wrong"})
    good = world.call("device_pair_start", {"name": "phone"})
    world.service.call("device_pair_finish", None, {"code": good["code"]})


def test_h2_a_preview_shows_name_and_word_without_using_the_code(world: World):
    started = world.call("device_pair_start", {"name": "phone"})
    preview = world.service.pairing_preview(started["code"])
    assert (preview.name, preview.word) == ("phone", started["word"])
    world.service.call("device_pair_finish", None, {"code": started["code"]})
    with pytest.raises(ClankieError) as err:
        world.service.pairing_preview(started["code"])
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
