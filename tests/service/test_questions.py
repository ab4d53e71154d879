"""The question contract through the service on a real store: SPEC S, A, E, R, V."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable

import pytest

from clankie.core.errors import ClankieError
from clankie.core.model import Run
from clankie.settings import Settings
from tests.world import CHOICE, TEXT, World, event_types

QUESTION_KEYS = {"request_id", "kind", "prompt", "options", "allow_text", "status",
                 "incarnation", "asked_at", "expires_at", "receipt",
                 "asker"}  # P3: who asks, null for Clankie's own question
RECEIPT_KEYS = {"receipt_id", "request_id", "outcome", "reason", "answer", "answered_by",
                "run_id", "continuation", "continuation_error", "resolved_at", "revision",
                "collected_at"}  # P3: when an asking agent first read it, else null


def refused(fn, *args, **kwargs) -> ClankieError:
    with pytest.raises(ClankieError) as err:
        fn(*args, **kwargs)
    return err.value


def runs(world: World, conversation_id: str) -> list[tuple[str, str, str | None]]:
    with world.db() as db:
        return db.execute("SELECT kind, status, receipt_id FROM runs WHERE conversation_id = ? "
                          "ORDER BY rowid", (conversation_id,)).fetchall()


def continuations(world: World, conversation_id: str) -> int:
    return sum(1 for kind, _, _ in runs(world, conversation_id) if kind == "continuation")


# ------------------------------------------------------------------------------- reading


def test_s1_s2_snapshot_shape_pending_and_request(world: World):
    c = world.conversation()
    snap = world.ask(c)
    assert set(snap) == {"conversation_id", "incarnation", "revision", "pending", "request",
                         "ended_requests"}
    assert snap["ended_requests"] == []
    assert snap["request"] is None
    q = snap["pending"]
    assert set(q) == QUESTION_KEYS
    assert q["status"] == "pending" and q["receipt"] is None
    assert [o["label"] for o in q["options"]] == ["pytest", "unittest", "nose"]
    assert q["incarnation"] == snap["incarnation"]
    both = world.snapshot(c, q["request_id"])
    assert both["request"] == both["pending"] == q


def test_s1_unknown_request_id_is_unknown_request(world: World):
    c = world.conversation()
    world.ask(c)
    err = refused(world.snapshot, c, "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b")
    assert err.code == "unknown_request"


def test_s1_not_found_for_an_unknown_conversation(world: World):
    err = refused(world.snapshot, "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b")
    assert err.code == "not_found"


def test_s1_r2_terminal_request_shows_its_receipt_with_every_field(world: World):
    c = world.conversation()
    snap = world.ask(c)
    reply = world.answer(c, snap, option=0)
    after = world.snapshot(c, snap["pending"]["request_id"])
    assert after["pending"] is None
    assert after["request"]["status"] == "answered"
    assert after["request"]["receipt"] == reply["receipt"]
    assert set(reply["receipt"]) == RECEIPT_KEYS


def test_s3_snapshot_works_after_the_input_requested_event_was_trimmed(
        make_world: Callable[..., World]):
    world = make_world(Settings(event_retention=5))
    c = world.conversation()
    snap = world.ask(c)
    for i in range(10):
        world.call("pane_metadata_set", {"conversation_id": c, "key": "k", "value": str(i)})
        world.call("conversation_send", {"conversation_id": c, "text": f"more {i}"})
    page = world.call("events_tail", {"conversation_id": c, "after": 0})
    assert page["trimmed"] and "input_requested" not in event_types(page["events"])
    now = world.snapshot(c)
    assert now["pending"]["request_id"] == snap["pending"]["request_id"]
    assert world.answer(c, now, option=2)["duplicate"] is False


def test_s4_captain_and_read_only_device_read_but_cannot_answer(world: World):
    c = world.conversation()
    snap = world.ask(c)
    captain = world.call("credential_issue", {"kind": "captain", "name": "orchestrator"})["token"]
    viewer = world.call("device_pair", {"name": "tablet", "mode": "read_only"})["token"]
    for token in (captain, viewer):
        assert world.call("input_get", {"conversation_id": c}, token)["pending"] == \
            snap["pending"]
        assert refused(world.answer, c, snap, option=0, token=token).code == "forbidden"
    assert world.snapshot(c)["pending"]["status"] == "pending"
    assert continuations(world, c) == 0


def test_s5_read_after_expiry_commits_expired_with_receipt_and_event(world: World):
    c = world.conversation()
    snap = world.ask(c)
    world.clock.advance(86_400)
    after = world.snapshot(c, snap["pending"]["request_id"])
    assert after["pending"] is None
    assert after["revision"] == snap["revision"] + 1
    receipt = after["request"]["receipt"]
    assert after["request"]["status"] == "expired"
    assert (receipt["outcome"], receipt["reason"], receipt["run_id"]) == ("expired", "expired",
                                                                          None)
    assert world.events(c)[-1]["type"] == "input_resolved"
    assert world.events(c)[-1]["outcome"] == "expired"


# ----------------------------------------------------------------------------- answering


def test_a9_accepted_means_stored_receipt_and_queued_continuation(world: World):
    c = world.conversation()
    snap = world.ask(c)
    reply = world.answer(c, snap, option=1)
    receipt = reply["receipt"]
    assert reply["duplicate"] is False
    assert receipt["outcome"] == "answered" and receipt["reason"] is None
    assert receipt["answer"] == {"option_id": snap["pending"]["options"][1]["option_id"]}
    assert receipt["answered_by"]["kind"] == "operator"
    assert receipt["continuation"] == "queued" and receipt["continuation_error"] is None
    assert receipt["revision"] == snap["revision"] + 1
    run = world.call("run_get", {"run_id": receipt["run_id"]})
    assert (run["kind"], run["status"], run["receipt_id"]) == ("continuation", "queued",
                                                               receipt["receipt_id"])
    assert event_types(world.events(c))[-2:] == ["input_resolved", "run_status"]


def test_a1_an_active_take_control_device_answers_a_question_another_surface_displayed(
        world: World):
    c = world.conversation()
    snap = world.ask(c)  # displayed by the operator
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})["token"]
    assert refused(world.answer, c, snap, option=0, token=phone).code == "forbidden"
    world.call("device_take_control", {}, phone)
    reply = world.answer(c, snap, option=0, token=phone)
    assert reply["receipt"]["answered_by"]["kind"] == "device"


def test_a1_an_expired_or_superseded_lease_no_longer_answers(world: World):
    c = world.conversation()
    snap = world.ask(c)
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})["token"]
    tablet = world.call("device_pair", {"name": "tablet", "mode": "control"})["token"]
    world.call("device_take_control", {"ttl_s": 60}, phone)
    world.call("device_take_control", {"ttl_s": 60}, tablet)
    assert refused(world.answer, c, snap, option=0, token=phone).code == "forbidden"
    world.clock.advance(60)
    assert refused(world.answer, c, snap, option=0, token=tablet).code == "forbidden"
    assert world.snapshot(c)["pending"] is not None


@pytest.mark.parametrize("token", [None, "", "clk_garbage", "not even a token"])
def test_a1_unknown_or_missing_token_is_unauthenticated(world: World, token):
    c = world.conversation()
    snap = world.ask(c)
    with pytest.raises(ClankieError) as err:
        world.service.call("input_answer", token, {
            "conversation_id": c, "request_id": snap["pending"]["request_id"],
            "incarnation": snap["incarnation"], "revision": snap["revision"],
            "option_id": snap["pending"]["options"][0]["option_id"]})
    assert err.value.code == "unauthenticated"


def test_e_credential_rotation_refuses_the_old_token_and_the_question_stays_pending(
        world: World):
    c = world.conversation()
    snap = world.ask(c)
    old = world.operator
    new = world.call("credential_rotate", {}, old)["token"]
    assert refused(world.answer, c, snap, option=0, token=old).code == "unauthenticated"
    assert refused(world.snapshot, c).code == "unauthenticated"  # the fixture reads with `old`
    world.operator = new
    assert world.snapshot(c)["pending"]["status"] == "pending"
    assert world.answer(c, snap, option=0, token=new)["duplicate"] is False


@pytest.mark.parametrize("text", ["yes", "1", "/question answer 1"])
def test_a2_chat_room_and_pane_text_never_answer(world: World, text):
    c = world.conversation()
    room = world.conversation("room")
    snap = world.ask(c)
    captain = world.call("credential_issue", {"kind": "captain", "name": "cap"})["token"]
    world.call("conversation_send", {"conversation_id": c, "text": text})
    world.call("room_post", {"conversation_id": room, "text": text})
    world.call("room_post", {"conversation_id": room, "text": text}, captain)
    world.call("pane_metadata_set", {"conversation_id": c, "key": "answer", "value": text})
    world.call("pane_metadata_set", {"conversation_id": c, "key": "answer", "value": text},
               captain)
    now = world.snapshot(c)
    assert now["pending"]["request_id"] == snap["pending"]["request_id"]
    assert now["pending"]["status"] == "pending"
    assert continuations(world, c) == 0


def test_a2_room_post_to_an_owner_conversation_is_not_eligible(world: World):
    c = world.conversation()
    world.ask(c)
    err = refused(world.call, "room_post", {"conversation_id": c, "text": "yes"})
    assert err.code == "not_eligible"


def test_a3_evicted_request_is_unknown_and_starts_no_run(make_world: Callable[..., World]):
    world = make_world(Settings(receipt_limit=2))
    c = world.conversation()
    snaps = []
    for _ in range(3):
        snap = world.ask(c)
        world.answer(c, snap, option=0)
        snaps.append(snap)
    before = continuations(world, c)
    err = refused(world.answer, c, snaps[0], option=0)
    assert err.code == "unknown_request"
    assert refused(world.snapshot, c, snaps[0]["pending"]["request_id"]).code == \
        "unknown_request"
    assert world.snapshot(c, snaps[1]["pending"]["request_id"])["request"]["status"] == \
        "answered"
    assert continuations(world, c) == before


def test_s1_r1_snapshot_names_the_ended_questions_whose_receipts_are_kept(
        make_world: Callable[..., World]):
    """SPEC section 10 "CLI": prefixes resolve against the question and the receipts R1
    keeps, so the snapshot names those (newest first); an evicted one is not named."""
    world = make_world(Settings(receipt_limit=2))
    c = world.conversation()
    asked = []
    for _ in range(3):
        snap = world.ask(c)
        asked.append(snap["pending"]["request_id"])
        world.answer(c, snap, option=0)
    pending = world.ask(c)
    assert pending["ended_requests"] == [asked[2], asked[1]]
    assert world.snapshot(c, asked[1])["ended_requests"] == [asked[2], asked[1]]


def test_a4_duplicate_identical_answer_returns_original_receipt(world: World):
    c = world.conversation()
    snap = world.ask(c)
    first = world.answer(c, snap, option=2)
    world.call("conversation_send", {"conversation_id": c, "text": "moving on"})
    again = world.answer(c, snap, option=2)
    assert again["duplicate"] is True
    assert again["receipt"]["receipt_id"] == first["receipt"]["receipt_id"]
    assert again["receipt"]["run_id"] == first["receipt"]["run_id"]
    assert continuations(world, c) == 1


def test_a4_duplicate_survives_a_reset(world: World):
    c = world.conversation()
    snap = world.ask(c, TEXT)
    first = world.answer(c, snap, text="clankie_core")
    world.call("conversation_reset", {"conversation_id": c})
    again = world.answer(c, snap, text="clankie_core")
    assert again["duplicate"] and again["receipt"] == first["receipt"] | {
        "continuation": "cancelled"}


def test_a5_different_answer_is_already_answered_and_never_rerun(world: World):
    c = world.conversation()
    snap = world.ask(c)
    first = world.answer(c, snap, option=0)
    err = refused(world.answer, c, snap, option=1)
    assert err.code == "already_answered"
    assert err.extra["receipt"]["receipt_id"] == first["receipt"]["receipt_id"]
    assert continuations(world, c) == 1


def test_a6_stale_revision_and_incarnation_leave_the_question_pending(world: World):
    c = world.conversation()
    snap = world.ask(c)
    world.call("conversation_send", {"conversation_id": c, "text": "a message moves it on"})
    err = refused(world.answer, c, snap, option=0)
    assert err.code == "stale_revision"
    fresh = world.snapshot(c)
    assert err.extra == {"incarnation": fresh["incarnation"], "revision": fresh["revision"]}
    bad = dict(fresh, incarnation="0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b")
    assert refused(world.answer, c, bad, option=0).code == "stale_incarnation"
    assert world.snapshot(c)["pending"]["status"] == "pending"
    assert world.answer(c, fresh, option=0)["duplicate"] is False


def test_a7_workspace_replaced_on_disk_is_found_on_use(world: World):
    c = world.conversation()
    snap = world.ask(c)
    shutil.move(world.workspace, world.root / "old-workspace")
    world.workspace.mkdir()
    err = refused(world.answer, c, snap, option=0)
    assert err.code == "request_closed"
    assert err.extra["receipt"]["outcome"] == "invalidated"
    assert err.extra["receipt"]["reason"] == "workspace_replaced"
    assert world.snapshot(c)["pending"] is None
    assert continuations(world, c) == 0


def test_a7_workspace_missing_is_found_on_use(world: World):
    c = world.conversation()
    snap = world.ask(c)
    world.workspace.rmdir()
    err = refused(world.answer, c, snap, option=0)
    assert (err.code, err.extra["receipt"]["reason"]) == ("request_closed", "workspace_missing")


def test_a7_expiry_on_answer_is_request_expired_and_committed(world: World):
    c = world.conversation()
    snap = world.ask(c)
    world.clock.advance(86_400)
    err = refused(world.answer, c, snap, option=0)
    assert err.code == "request_expired"
    assert world.snapshot(c, snap["pending"]["request_id"])["request"]["status"] == "expired"
    assert refused(world.answer, c, snap, option=0).code == "request_closed"


def test_a8_invalid_answer_changes_nothing(world: World):
    c = world.conversation()
    snap = world.ask(c)
    before = world.dump()
    assert refused(world.answer, c, snap, text="free text").code == "invalid_answer"
    bad = {"conversation_id": c, "request_id": snap["pending"]["request_id"],
           "incarnation": snap["incarnation"], "revision": snap["revision"],
           "option_id": "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b"}
    assert refused(world.call, "input_answer", bad).code == "invalid_answer"
    assert world.dump() == before


def test_a10_executor_failure_after_commit_leaves_the_answer_with_a_failed_continuation(
        world: World):
    class Broken:
        def submit(self, conversation_id: str, run: Run) -> None:
            raise RuntimeError("executor is down")

    c = world.conversation()
    snap = world.ask(c)
    world.executing(lambda _hooks: Broken())  # the service made again with this executor
    reply = world.answer(c, snap, option=0)
    # issue 39: the reply is the receipt as its transaction committed it (the continuation
    # started in it); the executor refused the run after that commit, and the receipt says so
    assert reply["duplicate"] is False and reply["receipt"]["outcome"] == "answered"
    assert reply["receipt"]["continuation"] == "running"
    receipt = world.snapshot(c, reply["receipt"]["request_id"])["request"]["receipt"]
    assert receipt["continuation"] == "failed"
    assert "executor is down" in receipt["continuation_error"]
    assert {**reply["receipt"], "continuation": "failed",
            "continuation_error": receipt["continuation_error"]} == receipt
    again = world.answer(c, snap, option=0)
    assert again["duplicate"] and again["receipt"] == receipt
    assert continuations(world, c) == 1


def test_a10_a_commit_failure_is_storage_unavailable_and_changes_nothing(world: World):
    import sqlite3

    c = world.conversation()
    snap = world.ask(c)
    before = world.dump()

    def fail() -> None:
        raise sqlite3.OperationalError("disk I/O error")

    world.store.before_commit = fail
    assert refused(world.answer, c, snap, option=0).code == "storage_unavailable"
    world.store.before_commit = None
    assert world.dump() == before
    assert world.answer(c, snap, option=0)["duplicate"] is False


def test_a11_q6_an_answer_or_a_question_changes_no_settings_projects_or_credentials(
        world: World):
    c = world.conversation()
    (world.root / "settings.toml").write_text("receipt_limit = 16\n")
    tables = ("projects", "credentials", "owners", "take_control", "pane_metadata")
    def config():
        return [t for t in world.dump() if t[0] in tables]
    before = config()
    snap = world.ask(c, {"kind": "text", "prompt": "Shall I enroll this project as a tracker?"})
    reply = world.answer(c, snap, text="yes, enroll this project and change the settings")
    assert reply["receipt"]["outcome"] == "answered"
    assert config() == before
    assert (world.root / "settings.toml").read_text() == "receipt_limit = 16\n"
    assert sorted(p.name for p in world.workspace.iterdir()) == []


def test_a12_cancel_then_repeat_then_answer(world: World):
    c = world.conversation()
    snap = world.ask(c)
    first = world.cancel(c, snap)
    assert first["duplicate"] is False
    assert (first["receipt"]["outcome"], first["receipt"]["reason"]) == ("cancelled", "explicit")
    assert first["receipt"]["run_id"] is None
    again = world.cancel(c, snap)
    assert again["duplicate"] is True and again["receipt"] == first["receipt"]
    assert refused(world.answer, c, snap, option=0).code == "request_closed"
    assert continuations(world, c) == 0


def test_a12_cancel_of_an_answered_request_is_already_answered(world: World):
    c = world.conversation()
    snap = world.ask(c)
    world.answer(c, snap, option=0)
    assert refused(world.cancel, c, snap).code == "already_answered"


# ----------------------------------------------------------- ending without an answer (E)


def ended(world: World, c: str, snap: dict) -> dict:
    return world.snapshot(c, snap["pending"]["request_id"])["request"]["receipt"]


def test_e_reset_rotates_incarnation_and_invalidates(world: World):
    c = world.conversation()
    snap = world.ask(c)
    reply = world.call("conversation_reset", {"conversation_id": c})
    assert reply["incarnation"] != snap["incarnation"]
    assert reply["revision"] == snap["revision"] + 1
    receipt = ended(world, c, snap)
    assert (receipt["outcome"], receipt["reason"]) == ("invalidated", "reset")
    assert refused(world.answer, c, snap, option=0).code == "request_closed"
    assert "conversation_reset" in event_types(world.events(c))


def test_e_owner_revocation_invalidates_every_pending_question_at_once(world: World):
    a, b = world.conversation(), world.conversation()
    snap_a, snap_b = world.ask(a), world.ask(b)
    token = world.operator
    world.call("owner_revoke")
    assert refused(world.answer, a, snap_a, option=0, token=token).code == "unauthenticated"
    with world.db() as db:
        rows = db.execute("SELECT status, reason FROM questions ORDER BY rowid").fetchall()
    assert rows == [("invalidated", "owner_revoked")] * 2
    assert snap_b


def test_e_workspace_replacement_through_the_op(world: World):
    c = world.conversation()
    snap = world.ask(c)
    other = world.root / "other"
    other.mkdir()
    conv = world.call("conversation_set_workspace",
                      {"conversation_id": c, "workspace": str(other)})
    assert conv["workspace"]["path"] == str(other.resolve())
    receipt = ended(world, c, snap)
    assert (receipt["outcome"], receipt["reason"]) == ("invalidated", "workspace_replaced")


def test_e_native_takeover_invalidates_the_pending_question(world: World):
    c = world.conversation()
    snap = world.ask(c)
    conv = world.call("native_takeover", {"conversation_id": c, "seat": "seat-1"})
    assert conv["native_owner"] == "seat-1"
    assert conv["revision"] == snap["revision"] + 1
    receipt = ended(world, c, snap)
    assert (receipt["outcome"], receipt["reason"]) == ("invalidated", "native_takeover")
    assert refused(world.answer, c, snap, option=0).code == "request_closed"
    assert world.call("conversation_send", {"conversation_id": c, "text": "hi"})["run_id"] is None


def test_e_native_takeover_cancels_a_queued_continuation_before_it_starts(world: World):
    c = world.conversation()
    answered = world.answer(c, world.ask(c), option=0)
    world.call("native_takeover", {"conversation_id": c, "seat": "seat-1"})
    run = world.call("run_get", {"run_id": answered["receipt"]["run_id"]})
    assert run["status"] == "cancelled"
    assert world.service.runs.claim_next_run(c) is None
    again = world.snapshot(c, answered["receipt"]["request_id"])["request"]["receipt"]
    assert again["continuation"] == "cancelled"


def test_q3_native_owned_conversation_refuses_to_ask_even_while_the_seat_is_offline(
        world: World):
    c = world.conversation()
    run_id = world.running_turn(c)
    world.call("native_takeover", {"conversation_id": c, "seat": "seat-offline"})
    result = world.service.runs.ask_question(run_id, CHOICE)
    assert (result.status, result.reason) == ("refused", "native_owned")


def test_q3_stale_run_after_reset_and_refusals_as_tool_results(world: World):
    c = world.conversation()
    run_id = world.running_turn(c)
    world.call("conversation_reset", {"conversation_id": c})
    assert world.service.runs.ask_question(run_id, CHOICE).reason == "stale_run"
    room = world.conversation("room")
    assert room
    bad = world.service.runs.ask_question(run_id, {"kind": "choice", "prompt": "x", "options": []})
    assert (bad.status, bad.reason) == ("refused", "invalid_request")


def test_q4_one_pending_question_per_conversation(world: World):
    c = world.conversation()
    world.ask(c)
    run_id = world.running_turn(c)
    result = world.service.runs.ask_question(run_id, TEXT)
    assert (result.status, result.reason) == ("refused", "question_pending")
    other = world.conversation()
    assert world.ask(other)["pending"] is not None


def test_r1_receipts_are_bounded_per_conversation(make_world: Callable[..., World]):
    world = make_world(Settings(receipt_limit=3))
    c = world.conversation()
    for _ in range(5):
        world.cancel(c, world.ask(c))
    with world.db() as db:
        assert db.execute("SELECT count(*) FROM questions").fetchone() == (3,)
        assert db.execute("SELECT count(*) FROM options").fetchone() == (9,)


def test_r3_restart_cancels_pending_and_fails_orphaned_runs(world: World):
    c = world.conversation()
    first = world.ask(c)
    answered = world.answer(c, first, option=0)
    continuation = world.service.runs.claim_next_run(c)  # the continuation is running ...
    assert continuation is not None and continuation.run_id == answered["receipt"]["run_id"]
    asked = world.service.runs.ask_question(continuation.run_id, TEXT)  # ... and asks again
    turn = world.call("conversation_send", {"conversation_id": c, "text": "and?"})["run_id"]
    report = world.service.runs.recover()
    assert (report.cancelled_questions, report.failed_runs) == (1, 2)
    second = world.snapshot(c, asked.request_id)["request"]["receipt"]
    assert (second["outcome"], second["reason"]) == ("cancelled", "restart")
    old = world.snapshot(c, first["pending"]["request_id"])["request"]["receipt"]
    assert (old["continuation"], old["continuation_error"]) == ("failed", "orphaned_by_restart")
    assert world.call("run_get", {"run_id": turn})["error"] == "orphaned_by_restart"
    assert world.service.runs.claim_next_run(c) is None
    assert world.service.runs.recover() == type(report)(0, 0)


# ---------------------------------------------------------------------------------- events


def test_v2_question_events_have_exactly_the_frozen_fields(world: World):
    c = world.conversation()
    world.answer(c, world.ask(c), option=0)
    world.ask(c, TEXT)
    events = world.events(c)
    requested = [e for e in events if e["type"] == "input_requested"]
    resolved = [e for e in events if e["type"] == "input_resolved"]
    assert len(requested) == 2 and len(resolved) == 1
    for e in requested:
        assert set(e) == {"type", "seq", "conversation_id", "request_id", "prompt", "choices",
                          "at"}
        assert all(isinstance(x, str) for x in e["choices"])
    assert requested[1]["choices"] == []
    assert set(resolved[0]) == {"type", "seq", "conversation_id", "request_id", "outcome", "at"}


def test_v4_other_events_carry_their_fields(world: World):
    c = world.conversation()
    world.call("conversation_send", {"conversation_id": c, "text": "hi"})
    world.call("conversation_reset", {"conversation_id": c})
    by_type = {e["type"]: e for e in world.events(c)}
    assert {"message_id", "author", "text", "at"} <= set(by_type["message"])
    assert {"run_id", "kind", "status", "at"} <= set(by_type["run_status"])
    assert {"conversation_id", "at", "seq"} <= set(by_type["conversation_reset"])


def test_v1_tail_is_bounded_and_says_when_it_was_trimmed(make_world: Callable[..., World]):
    world = make_world(Settings(event_retention=4))
    c = world.conversation()
    for i in range(5):
        world.call("room_post", {"conversation_id": world.conversation("room"), "text": "x"})
        world.call("conversation_send", {"conversation_id": c, "text": str(i)})
    page = world.call("events_tail", {"conversation_id": c, "after": 0, "limit": 2})
    assert page["trimmed"] is True and page["oldest_seq"] == 7
    assert [e["seq"] for e in page["events"]] == [7, 8] and page["next_after"] == 8
    rest = world.call("events_tail", {"conversation_id": c, "after": 8})
    assert rest["trimmed"] is False and [e["seq"] for e in rest["events"]] == [9, 10]
    with world.db() as db:
        assert db.execute("SELECT count(*) FROM events WHERE conversation_id = ?",
                          (c,)).fetchone() == (4,)


def test_v1_long_poll_wakes_on_a_commit(world: World):
    c = world.conversation()
    seq = world.call("events_tail", {"conversation_id": c})["next_after"]
    result: dict = {}

    def tail() -> None:
        result.update(world.call("events_tail", {"conversation_id": c, "after": seq,
                                                 "wait_ms": 10_000}))

    waiter = threading.Thread(target=tail)
    waiter.start()
    world.call("conversation_send", {"conversation_id": c, "text": "wake up"})
    waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert result["events"][0]["text"] == "wake up"


def test_v1_long_poll_returns_empty_after_wait_ms(world: World):
    c = world.conversation()
    page = world.call("events_tail", {"conversation_id": c, "after": 0, "wait_ms": 50})
    assert page == {"events": [], "next_after": 0, "oldest_seq": 1, "trimmed": False}


def test_revision_moves_by_exactly_one_per_committed_change(world: World):
    c = world.conversation()
    revisions = [world.snapshot(c)["revision"]]
    world.call("conversation_send", {"conversation_id": c, "text": "1"})  # message + turn queued
    revisions.append(world.snapshot(c)["revision"])
    run = world.service.runs.claim_next_run(c)  # run status
    revisions.append(world.snapshot(c)["revision"])
    assert run is not None
    world.service.runs.ask_question(run.run_id, CHOICE)  # question transition
    revisions.append(world.snapshot(c)["revision"])
    world.call("conversation_reset", {"conversation_id": c})
    revisions.append(world.snapshot(c)["revision"])
    assert revisions == list(range(1, 6))
