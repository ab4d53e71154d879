"""SPEC section 10 "Finding what waits, as a person would", in the service: what
`conversation_list` says of each conversation (`pending`, `last_activity_at`, `run`), in one
statement; `conversation_archive`; the conversations of a directory (`workspace`), nearest
first. The CLI that shows them: tests/e2e/test_finding.py."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from clankie.core.errors import ClankieError
from clankie.core.model import RunStatus
from clankie.store.tx import ReadTx
from tests.world import CHOICE, World


def listed(world: World, **payload: Any) -> list[dict[str, Any]]:
    return list(world.call("conversation_list", payload)["conversations"])


def item(world: World, c: str, **payload: Any) -> dict[str, Any]:
    return next(x for x in listed(world, **payload) if x["conversation_id"] == c)


def test_finding_list_items_say_the_waiting_question_the_run_and_the_last_activity(
        world: World):
    """`pending` is `{request_id, prompt, expires_at}` while a question waits, else null;
    `run` is `running`, else `queued`, else null; `last_activity_at` is when the list's
    order last moved for it, latest activity first."""
    a, b = world.conversation(), world.conversation()
    first = item(world, a)
    assert (first["pending"], first["run"]) == (None, None)
    assert first["last_activity_at"] == first["created_at"]
    world.clock.advance(60)
    asked = world.ask(a)["pending"]
    got = item(world, a)
    assert got["pending"] == {"request_id": asked["request_id"], "prompt": CHOICE["prompt"],
                              "expires_at": asked["expires_at"]}
    assert got["last_activity_at"] > first["last_activity_at"]
    assert [x["conversation_id"] for x in listed(world)] == [a, b]  # latest activity first
    world.clock.advance(60)
    running = world.running_turn(b)
    world.call("conversation_send", {"conversation_id": b, "text": "and then"})
    assert item(world, b)["run"] == "running"  # a running run is said over a queued one
    world.service.runs.finish_run(running, RunStatus.SUCCEEDED)
    assert item(world, b)["run"] == "queued"
    assert [x["conversation_id"] for x in listed(world)] == [b, a]
    assert item(world, b)["last_activity_at"] == datetime.fromtimestamp(
        world.clock().timestamp(), UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_finding_a_question_past_its_expiry_is_not_said_to_wait(world: World):
    c = world.conversation()
    world.ask(c)
    world.clock.advance(world.service.settings.question_ttl + 1)
    assert item(world, c)["pending"] is None
    assert listed(world, waiting=True) == []


def test_finding_the_list_is_one_statement_whatever_the_page(world: World):
    """No N+1: the page, its waiting questions and its runs come from one statement."""
    for _ in range(12):
        c = world.conversation()
        world.ask(c)
    seen: list[str] = []
    with world.db() as conn:
        conn.set_trace_callback(seen.append)
        owner = str(conn.execute("SELECT owner_id FROM owners").fetchone()[0])
        seen.clear()
        page = ReadTx(conn).conversation_page(owner, 100, None, None, now=world.clock())
    assert len(page) == 12 and all(x.pending is not None for x in page)
    assert len([s for s in seen if s.lstrip().upper().startswith("SELECT")]) == 1, seen


def test_finding_archive_hides_until_something_new_happens(world: World):
    """`conversation_archive` hides a conversation from the list (and so from the page) and
    from a directory's candidates; `archived: true` lists it, marked; a message sent to it
    brings it back (decided, docs/decisions.md)."""
    a, b = world.conversation(), world.conversation()
    assert world.call("conversation_archive", {"conversation_id": a}) == {}
    assert [x["conversation_id"] for x in listed(world)] == [b]
    assert listed(world, workspace=str(world.workspace)) == listed(world)
    every = listed(world, archived=True)
    assert {x["conversation_id"]: x["archived"] for x in every} == {a: True, b: False}
    assert world.call("conversation_archive", {"conversation_id": a}) == {}  # again: the same
    world.call("conversation_send", {"conversation_id": a, "text": "back to it"})
    assert [x["conversation_id"] for x in listed(world)] == [a, b]
    assert item(world, a)["archived"] is False


def test_finding_archive_is_refused_question_pending_while_a_question_waits(world: World):
    c = world.conversation()
    world.ask(c)
    before = world.dump()
    with pytest.raises(ClankieError) as err:
        world.call("conversation_archive", {"conversation_id": c})
    assert err.value.code == "question_pending"
    assert world.dump() == before
    assert item(world, c)["archived"] is False
    world.clock.advance(world.service.settings.question_ttl + 1)  # expired: nothing waits
    assert world.call("conversation_archive", {"conversation_id": c}) == {}
    assert world.snapshot(c)["pending"] is None
    assert listed(world) == []


def test_finding_a_directorys_conversations_are_its_own_then_its_nearest_parents(
        world: World, tmp_path: Path):
    """`workspace`: conversations bound to the directory or a parent, nearest first; none
    bound to a child or a sibling."""
    src = world.workspace / "src"
    deep = src / "widget" / "deep"
    deep.mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    top = world.conversation()
    mid = world.call("conversation_create", {"workspace": str(src)})["conversation_id"]
    world.call("conversation_create", {"workspace": str(tmp_path / "elsewhere")})
    world.call("conversation_create", {"workspace": str(deep)})
    world.call("conversation_send", {"conversation_id": top, "text": "latest activity"})
    found = listed(world, workspace=str(src / "widget"))
    assert [x["conversation_id"] for x in found] == [mid, top]
    assert listed(world, workspace=str(tmp_path)) == []
