"""Issue 20, the store: a read transaction cannot write (mypy says so, and its connection
refuses), a write transaction can; rows are read by column name; the store executes the
core's restart plan (SPEC R3) without a rule of its own."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import clankie
from clankie.core import lifecycle
from clankie.core.lifecycle import RestartPlan
from clankie.core.model import QuestionStatus, RunStatus
from clankie.store import ReadTx, Store, WriteTx
from clankie.store.tx import _restart_all
from tests.world import T0, TEXT, World

SNIPPET = """\
from datetime import UTC, datetime

from clankie.store import Store


def through_a_read(store: Store) -> None:
    with store.read() as tx:
        tx.insert_owner("o", datetime.now(UTC))
        tx.save


def through_a_write(store: Store) -> None:
    with store.write() as tx:
        tx.insert_owner("o", datetime.now(UTC))
        tx.save
"""


def test_mypy_rejects_a_write_through_a_read_transaction(tmp_path: Path):
    """`store.read()` gives a `ReadTx`, which has no writers; `store.write()` a `WriteTx`."""
    (tmp_path / "snippet.py").write_text(SNIPPET)
    src = Path(clankie.__file__).parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--cache-dir", str(tmp_path / "cache"), "snippet.py"],
        cwd=tmp_path, env={**os.environ, "MYPYPATH": str(src)}, capture_output=True,
        text=True, timeout=300)
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert errors == [
        'snippet.py:8: error: "ReadTx" has no attribute "insert_owner"  [attr-defined]',
        'snippet.py:9: error: "ReadTx" has no attribute "save"  [attr-defined]',
    ], done.stdout + done.stderr


def test_a_read_transactions_connection_refuses_writes_even_from_untyped_code(world: World):
    before = world.dump()
    with world.store.read() as tx:
        assert type(tx) is ReadTx and not hasattr(tx, "insert_owner")
        untyped: Any = tx
        with pytest.raises(AttributeError):
            untyped.insert_owner("intruder", T0)
        conn = untyped._conn
        for statement in ("DELETE FROM owners",
                          "INSERT INTO owners (owner_id, created_at) VALUES ('x', 'y')"):
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                conn.execute(statement)
        conn.execute("PRAGMA query_only=OFF")  # nor then: it was opened read-only
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            conn.execute("DELETE FROM owners")
    def write() -> None:
        with world.store.write() as tx:
            assert type(tx) is WriteTx
    world.store.run(write)
    assert world.dump() == before


def test_rows_are_read_by_column_name_whatever_the_order_of_the_columns(world: World):
    """A store whose tables list their columns in another order reads the same values: the
    store never reads a row by position."""
    c = world.conversation()
    world.ask(c)
    with world.store.read() as tx:
        want = (tx.conversation(c), tx.pending_question(c), tx.credentials(), tx.projects())
        assert want[1] is not None
    with world.db() as conn:
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute("PRAGMA legacy_alter_table=ON")  # keep the triggers as they are
        for table in ("conversations", "questions", "credentials"):
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")][::-1]
            conn.execute(f"ALTER TABLE {table} RENAME TO old_{table}")
            conn.execute(f"CREATE TABLE {table} AS SELECT {', '.join(columns)} "
                         f"FROM old_{table}")
            conn.execute(f"DROP TABLE old_{table}")
        conn.commit()
    with world.store.read() as tx:
        assert (tx.conversation(c), tx.pending_question(c), tx.credentials(),
                tx.projects()) == want


# ------------------------------------------------------------------- the restart plan (R3)


def states(world: World) -> None:
    """Conversations in the states a restart meets: idle, a pending question, a queued
    continuation, a running run that asked with turns queued behind it."""
    world.conversation()
    world.ask(world.conversation())
    waiting = world.conversation()
    world.answer(waiting, world.ask(waiting), option=1)
    asking = world.conversation()
    answered = world.answer(asking, world.ask(asking), option=0)
    run = world.service.runs.claim_next_run(asking)
    assert run is not None and run.run_id == answered["receipt"]["run_id"]
    assert world.service.runs.ask_question(run.run_id, TEXT).status == "pending"
    world.call("conversation_send", {"conversation_id": asking, "text": "and?"})


def table_rows(path: str) -> dict[str, list[Any]]:
    """Every row of every table; receipt IDs (random) named by their question, event
    bodies parsed."""
    conn = sqlite3.connect(path)
    try:
        receipts = dict(conn.execute("SELECT receipt_id, request_id FROM questions "
                                     "WHERE receipt_id IS NOT NULL"))
        dump: dict[str, list[Any]] = {}
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            dump[table] = sorted(
                (tuple(json.loads(v) if table == "events" and isinstance(v, str)
                       and v.startswith("{") else f"receipt of {receipts[v]}"
                       if v in receipts else v for v in row)
                 for row in conn.execute(f"SELECT * FROM {table}")), key=repr)
        return dump
    finally:
        conn.close()


def apply_one_by_one(store: Store, plan: RestartPlan, new_id: Any) -> None:
    with sqlite3.connect(store.path) as conn:
        ids = sorted(c for (c,) in conn.execute("SELECT conversation_id FROM conversations"))
    conn.close()

    def apply() -> None:
        with store.write() as tx:
            for conversation_id in ids:
                conversation = tx.conversation(conversation_id)
                assert conversation is not None
                change = plan.apply(conversation, tx.pending_question(conversation_id),
                                    tx.unfinished_runs(conversation_id), new_id)
                if change is not None:
                    tx.save(change, receipt_limit=3, event_retention=100)
    store.run(apply)


@pytest.mark.parametrize("plan", [
    lifecycle.restart_plan(T0 + timedelta(minutes=1)),
    RestartPlan(T0 + timedelta(minutes=2), {QuestionStatus.PENDING: QuestionStatus.EXPIRED},
                "as_planned",
                {RunStatus.RUNNING: RunStatus.CANCELLED}, "stopped_as_planned"),
], ids=["R3", "another plan"])
def test_the_store_executes_the_cores_restart_plan_and_states_no_rule_of_its_own(
        tmp_path: Path, plan: RestartPlan):
    """Issue 20: restart is decided once, in the core. For R3's plan and for any other the
    core could make, the set-based `restart_all` leaves the rows and events that the plan
    applied one conversation at a time leaves."""
    (tmp_path / "w").mkdir()
    world = World.create(tmp_path / "w")
    try:
        states(world)
        reference = str(tmp_path / "reference.db")
        with world.db() as source, sqlite3.connect(reference) as target:
            source.backup(target)
        target.close()
        copy = Store(reference)
        try:
            apply_one_by_one(copy, plan, world.service.ctx.new_id)
        finally:
            copy.close()
        def restart_all() -> tuple[int, int]:
            with world.store.write() as tx:
                return tx.restart_all(plan, receipt_limit=3, event_retention=100)
        ended = world.store.run(restart_all)
        assert ended == ((2, 3) if plan.runs.keys() == {RunStatus.QUEUED, RunStatus.RUNNING}
                         else (2, 1))
        got, want = table_rows(world.store.path), table_rows(reference)
        assert got == want
        with world.db() as db:
            outcomes = db.execute("SELECT status, reason, count(*) FROM questions "
                                  "WHERE receipt_id IS NOT NULL AND reason != 'explicit' "
                                  "GROUP BY 1, 2").fetchall()
        assert outcomes == [(plan.questions[QuestionStatus.PENDING].value, plan.reason, 2)]
    finally:
        world.close()


def test_restart_uses_the_partial_indexes_of_pending_questions_and_unfinished_runs(
        world: World):
    """Set-based and fast (issue 10): no statement of R3's plan scans every question or run
    (SQLite uses a partial index only for the very condition it was made with)."""
    statements, args = _restart_all(lifecycle.restart_plan(T0))
    args.update(retention=10, limit=3)
    with world.db() as conn:
        conn.execute("BEGIN")
        for statement in statements:
            plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + statement, args)]
            scans = [step for step in plan
                     if re.fullmatch(r"SCAN (questions|runs|q|r)( LEFT-JOIN)?", step)]
            assert not scans, (statement, plan)
            conn.execute(statement, args)
        conn.execute("ROLLBACK")
