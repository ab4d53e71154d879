"""SPEC R3 at scale: start-up recovery ends every conversation's pending question and fails
every unfinished run in one set-based pass (issue 10: ready within 1 s after a kill with
10,000 of each). Its oracle is the core's per-conversation rule, `lifecycle.restart`,
saved one conversation at a time as the service did before: both must leave the same
rows and the same events, receipts IDs aside."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from clankie.core import lifecycle
from clankie.service import Recovery, Service
from clankie.service.notify import Notifier
from clankie.settings import Settings
from clankie.store import Store

from ..world import TEXT, World


def recover_one_by_one(world: World, store: Store) -> tuple[int, int]:
    """The reference: the core's `restart` for each conversation, saved on its own."""
    settings = world.service.settings
    with sqlite3.connect(store.path) as conn:
        ids = sorted(c for (c,) in conn.execute("SELECT conversation_id FROM conversations"))
    conn.close()

    def recover() -> tuple[int, int]:
        questions, runs = 0, 0
        with store.write() as tx:
            for conversation_id in ids:
                conversation = tx.conversation(conversation_id)
                assert conversation is not None
                pending = tx.pending_question(conversation_id)
                unfinished = tx.unfinished_runs(conversation_id)
                change = lifecycle.restart(conversation, pending, unfinished, world.clock(),
                                           world.service.ctx.new_id)
                if change is None:
                    continue
                tx.save(change, receipt_limit=settings.receipt_limit,
                        event_retention=settings.event_retention)
                questions += pending is not None
                runs += len(unfinished)
        return questions, runs
    return store.run(recover)


def rows(path: Path) -> dict[str, list[Any]]:
    """Every row of every table; receipt IDs (new random IDs) replaced by their question's,
    event bodies parsed (JSON spacing is not a difference)."""
    conn = sqlite3.connect(path)
    try:
        receipts = dict(conn.execute("SELECT receipt_id, request_id FROM questions "
                                     "WHERE receipt_id IS NOT NULL"))
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        dump: dict[str, list[Any]] = {}
        for table in tables:
            names = [d[0] for d in conn.execute(f"SELECT * FROM {table}").description]
            dump[table] = sorted(
                (tuple(f"receipt of {receipts[v]}" if v in receipts else v for v in row)
                 for row in conn.execute(f"SELECT * FROM {table}")), key=repr)
            if table == "events":
                body = names.index("body")
                dump[table] = [(*r[:body], json.loads(r[body])) for r in dump[table]]
        return dump
    finally:
        conn.close()


def busy_world(world: World) -> list[str]:
    """Conversations in every state recovery meets, receipts at their limit, events at
    their retention."""
    idle, pending, waiting, asking, queued, old, chatty = (world.conversation()
                                                           for _ in range(7))
    world.ask(pending)
    world.answer(waiting, world.ask(waiting), option=1)  # continuation queued, no question
    answered = world.answer(asking, world.ask(asking), option=0)
    run = world.service.runs.claim_next_run(asking)  # running, and asked again ...
    assert run is not None and run.run_id == answered["receipt"]["run_id"]
    assert world.service.runs.ask_question(run.run_id, TEXT).status == "pending"
    for _ in range(2):  # ... with two turns queued behind it
        world.call("conversation_send", {"conversation_id": asking, "text": "and?"})
    for _ in range(2):
        world.call("conversation_send", {"conversation_id": queued, "text": "hi"})
    for _ in range(3):  # more receipts than the limit, then one more pending
        world.cancel(old, world.ask(old))
    world.ask(old)
    for _ in range(6):  # more events than the retention keeps
        world.call("conversation_send", {"conversation_id": chatty, "text": "hi"})
    world.ask(chatty)
    return [idle, pending, waiting, asking, queued, old, chatty]


def test_r3_recovery_at_once_equals_the_rule_one_conversation_at_a_time(tmp_path: Path):
    (tmp_path / "a").mkdir()
    world = World.create(tmp_path / "a", Settings(receipt_limit=2, event_retention=12))
    try:
        busy_world(world)
        world.clock.advance(60)
        copy = tmp_path / "reference.db"
        with world.db() as source, sqlite3.connect(copy) as target:
            source.backup(target)
        target.close()
        reference = Store(copy)
        try:
            expected = recover_one_by_one(world, reference)
        finally:
            reference.close()
        report = world.service.runs.recover()
        assert (report.cancelled_questions, report.failed_runs) == expected == (4, 6)
        got, want = rows(Path(world.store.path)), rows(copy)
        assert got.keys() == want.keys()
        for table in want:
            assert got[table] == want[table], table
        assert world.service.runs.recover() == type(report)(0, 0)
        with world.db() as db:
            receipts = [r for (r,) in db.execute("SELECT receipt_id FROM questions "
                                                 "WHERE reason = 'restart'")]
        assert len(set(receipts)) == len(receipts) == 4
        assert all(str(uuid.UUID(r)) == r and uuid.UUID(r).version == 4 for r in receipts)
    finally:
        world.close()


def test_r3_recovery_wakes_the_conversations_it_changed(world: World):
    c, quiet = world.conversation(), world.conversation()
    world.ask(c)
    before = world.service.ctx.generation(c), world.service.ctx.generation(quiet)
    world.service.runs.recover()
    assert (world.service.ctx.generation(c), world.service.ctx.generation(quiet)) == (
        before[0] + 1, before[1])


class Told(Notifier):
    """A notifier that keeps what it is given instead of running a hook."""

    def __init__(self) -> None:
        super().__init__(["true"])
        self.told: list[tuple[str, dict[str, Any]]] = []

    def submit(self, conversation_id: str, document: dict[str, Any]) -> None:
        self.told.append((conversation_id, document))


def test_r9_recovery_tells_the_notifier_each_ending_once_in_order_with_notify_on_resolved(
        tmp_path: Path):
    for resolved in (True, False):
        (tmp_path / str(resolved)).mkdir()
        world = World.create(tmp_path / str(resolved), Settings(notify_on_resolved=resolved))
        told = Told()
        world.service = Service(world.store, world.service.settings, clock=world.clock,
                                notifier=told)
        try:
            c = world.conversation()
            first = world.ask(c)
            world.answer(c, first, option=0)
            continuation = world.service.runs.claim_next_run(c)
            assert continuation is not None  # running, and it asks again
            asked = world.service.runs.ask_question(continuation.run_id, TEXT).request_id
            told.told.clear()
            assert world.service.runs.recover() == Recovery(1, 1)
            assert world.service.runs.recover() == Recovery(0, 0)  # nothing is told twice
        finally:
            world.close()
        if not resolved:
            assert told.told == []
            continue
        (c1, question), (c2, run) = told.told
        assert c1 == c2 == c
        assert (question["event"], question["request_id"], question["outcome"],
                question["reason"]) == ("input_resolved", asked, "cancelled", "restart")
        assert (run["event"], run["request_id"], run["run_id"], run["reason"],
                run["error"]) == ("continuation_failed", first["pending"]["request_id"],
                                  continuation.run_id, "restart", "orphaned_by_restart")
