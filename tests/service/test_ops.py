"""The other dispatcher operations of SPEC section 10, through the service on a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from clankie.core.errors import ClankieError
from tests.world import World

UNKNOWN = "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b"


def refused(world: World, op: str, payload: dict, token: str | None = None) -> str:
    with pytest.raises(ClankieError) as err:
        world.call(op, payload, token)
    return err.value.code


def test_init_is_idempotent_and_enrolls_a_new_owner_only_after_revocation(world: World):
    assert world.service.devices.init_owner() is None
    old = world.conversation()
    world.call("owner_revoke")
    fresh = world.service.devices.init_owner()
    assert fresh is not None and fresh != world.operator
    assert refused(world, "conversation_list", {}) == "unauthenticated"
    assert world.call("conversation_list", {}, fresh) == {"conversations": [], "next_after": None}
    assert refused(world, "conversation_get", {"conversation_id": old}, fresh) == "not_found"
    assert refused(world, "input_get", {"conversation_id": old}, fresh) == "not_found"


def test_conversation_create_get_list(world: World):
    c = world.conversation()
    room = world.conversation("room")
    got = world.call("conversation_get", {"conversation_id": c})
    assert set(got) == {"conversation_id", "kind", "workspace", "incarnation", "revision",
                        "native_owner", "created_at", "membership", "unfinished_runs", "asker"}
    assert got["unfinished_runs"] == []
    assert got["membership"] == {"status": "not_member", "project_id": None, "reason": None}
    world.call("project_register", {"root": str(world.workspace), "name": "p"})
    fact = world.call("conversation_get", {"conversation_id": c})["membership"]
    assert fact["status"] == "member" and fact["project_id"]
    assert (got["kind"], got["revision"], got["native_owner"]) == ("owner", 1, None)
    assert got["workspace"] == {"path": str(world.workspace.resolve())}
    listed = world.call("conversation_list")["conversations"]
    assert [x["conversation_id"] for x in listed] == [room, c]  # latest activity first
    assert listed[0]["workspace"] is None
    assert refused(world, "conversation_get", {"conversation_id": UNKNOWN}) == "not_found"


def test_conversation_create_resolves_symlinks_to_the_canonical_path(world: World):
    link = world.root / "link"
    link.symlink_to(world.workspace)
    got = world.call("conversation_create", {"workspace": str(link)})
    assert got["workspace"]["path"] == str(world.workspace.resolve())


def test_run_get_and_not_found(world: World):
    c = world.conversation()
    run_id = world.call("conversation_send", {"conversation_id": c, "text": "hi"})["run_id"]
    run = world.call("run_get", {"run_id": run_id})
    assert (run["kind"], run["status"], run["receipt_id"]) == ("turn", "queued", None)
    assert refused(world, "run_get", {"run_id": UNKNOWN}) == "not_found"


def test_credential_issue_and_rotate(world: World):
    captain = world.call("credential_issue", {"kind": "captain", "name": "cap"})
    operator2 = world.call("credential_issue", {"kind": "operator", "name": "laptop"})
    assert captain["token"] != operator2["token"]
    assert refused(world, "credential_rotate", {"credential_id": operator2["credential_id"]},
                   captain["token"]) == "forbidden"
    rotated = world.call("credential_rotate", {"credential_id": captain["credential_id"]})
    assert rotated["credential_id"] == captain["credential_id"]
    assert refused(world, "conversation_list", {}, captain["token"]) == "unauthenticated"
    assert world.call("conversation_list", {}, rotated["token"]) == {
        "conversations": [], "next_after": None}
    own = world.call("credential_rotate", {}, rotated["token"])
    assert own["credential_id"] == captain["credential_id"]
    assert refused(world, "credential_rotate", {"credential_id": UNKNOWN}) == "not_found"


def test_tokens_are_stored_only_as_hashes(world: World):
    issued = world.call("credential_issue", {"kind": "captain", "name": "cap"})["token"]
    raw = Path(world.store.path).read_bytes()
    for token in (issued, world.operator):
        assert token.encode() not in raw


def test_take_control_lease_supersedes_and_release(world: World):
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})["token"]
    viewer = world.call("device_pair", {"name": "viewer", "mode": "read_only"})["token"]
    c = world.conversation()
    assert refused(world, "device_take_control", {}, viewer) == "forbidden"
    assert refused(world, "device_take_control", {}) == "forbidden"  # an operator is no device
    lease = world.call("device_take_control", {}, phone)
    assert lease["expires_at"] == "2026-11-30T13:00:00.000000Z"  # take_control_ttl: 1 h
    assert world.call("conversation_send", {"conversation_id": c, "text": "hi"}, phone)
    world.call("device_release", {}, phone)
    assert refused(world, "conversation_send", {"conversation_id": c, "text": "x"},
                   phone) == "forbidden"


def test_project_register(world: World):
    got = world.call("project_register", {"root": str(world.workspace), "name": "clankie"})
    assert len(got["project_id"]) == 36
    assert refused(world, "project_register", {"root": str(world.workspace), "name": "x"},
                   world.call("credential_issue", {"kind": "captain", "name": "c"})["token"]
                   ) == "forbidden"


def test_set_workspace_to_the_same_directory_changes_nothing(world: World):
    c = world.conversation()
    snap = world.ask(c)
    same = world.call("conversation_set_workspace",
                      {"conversation_id": c, "workspace": str(world.workspace)})
    assert same["revision"] == snap["revision"]
    assert world.snapshot(c)["pending"]["status"] == "pending"


def test_pane_metadata_is_stored_and_answers_nothing(world: World):
    c = world.conversation()
    world.call("pane_metadata_set", {"conversation_id": c, "key": "title", "value": "yes"})
    with world.db() as db:
        assert db.execute("SELECT key, value FROM pane_metadata").fetchall() == [("title", "yes")]
    assert refused(world, "pane_metadata_set",
                   {"conversation_id": UNKNOWN, "key": "k", "value": "v"}) == "not_found"


def test_credential_list_shows_kinds_modes_and_the_lease_never_tokens(world: World):
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})
    world.call("device_pair", {"name": "tv", "mode": "read_only"})
    world.call("device_take_control", {}, phone["token"])
    listed = world.call("credential_list")["credentials"]
    assert [(x["kind"], x["mode"], x["name"], x["holds_lease"]) for x in listed] == [
        ("operator", None, "operator", False), ("device", "control", "phone", True),
        ("device", "read_only", "tv", False)]
    assert all("token" not in x for x in listed)
    world.clock.advance(3_600)
    assert not any(x["holds_lease"] for x in world.call("credential_list")["credentials"])


def test_conversation_list_pages_by_latest_activity_with_a_cursor_and_a_prefix(world):
    made = [world.conversation() for _ in range(7)]
    world.call("conversation_send", {"conversation_id": made[0], "text": "I am active"})
    expected = [made[0], *reversed(made[1:])]
    seen, after, pages = [], None, 0
    while True:
        page = world.call("conversation_list", {"limit": 3, **({"after": after} if after
                                                                else {})})
        seen += [x["conversation_id"] for x in page["conversations"]]
        pages += 1
        after = page["next_after"]
        if after is None:
            break
    assert seen == expected and pages == 3
    one = made[3]
    found = world.call("conversation_list", {"prefix": one[:8]})
    assert [x["conversation_id"] for x in found["conversations"]] == [one]
    assert found["next_after"] is None
    assert world.call("conversation_list", {"prefix": "f" * 36})["conversations"] == []
    everything = world.call("conversation_list", {"limit": 500})
    assert len(everything["conversations"]) == 7 and everything["next_after"] is None
    for bad in ({"limit": 0}, {"limit": 501}, {"after": "x"}, {"prefix": "XYZ"},
                {"after": 3}, {"after": "9223372036854775808"},  # past SQLite's integers
                {"after": "9999999999999999999"}):
        assert refused(world, "conversation_list", bad) == "invalid_request"
