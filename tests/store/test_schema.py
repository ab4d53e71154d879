"""The schema enforces the invariants by itself, whatever the code above it does (DESIGN: store)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from clankie.store import Store
from clankie.store.db import SchemaTooNew, StoreUnusable
from clankie.store.schema import MIGRATIONS
from tests.world import World


def raw(world: World) -> sqlite3.Connection:
    conn = sqlite3.connect(world.store.path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys=ON")
    _OPEN.append(conn)
    return conn


_OPEN: list[sqlite3.Connection] = []


@pytest.fixture(autouse=True)
def _close_raw_connections() -> Iterator[None]:
    yield
    while _OPEN:
        _OPEN.pop().close()


def test_q4_the_store_refuses_a_second_pending_question(world: World):
    c = world.conversation()
    world.ask(c)
    conn = raw(world)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO questions (request_id, conversation_id, kind, prompt, "
                     "allow_text, status, incarnation, workspace_path, workspace_dev, "
                     "workspace_ino, asked_at, expires_at, asked_by_run) SELECT 'other', "
                     "conversation_id, kind, prompt, allow_text, status, incarnation, "
                     "workspace_path, workspace_dev, workspace_ino, asked_at, expires_at, "
                     "asked_by_run FROM questions")


def test_a9_the_store_refuses_a_second_run_for_one_receipt(world: World):
    c = world.conversation()
    world.answer(c, world.ask(c), option=0)
    conn = raw(world)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO runs (run_id, conversation_id, kind, status, incarnation, "
                     "receipt_id, created_at) SELECT 'second', conversation_id, kind, 'queued', "
                     "incarnation, receipt_id, created_at FROM runs WHERE kind = 'continuation'")


@pytest.mark.parametrize("statement", [
    "UPDATE questions SET request_id = 'changed'",
    "UPDATE questions SET prompt = 'changed'",
    "UPDATE options SET option_id = 'changed'",
    "UPDATE options SET label = 'changed'",
])
def test_s2_request_and_option_ids_are_immutable(world: World, statement: str):
    c = world.conversation()
    world.ask(c)
    with pytest.raises(sqlite3.IntegrityError):
        raw(world).execute(statement)


def test_receipts_never_change_once_written(world: World):
    c = world.conversation()
    world.answer(c, world.ask(c), option=0)
    conn = raw(world)
    for statement in ("UPDATE questions SET reason = 'rewritten'",
                      "UPDATE questions SET status = 'pending', receipt_id = NULL",
                      "UPDATE questions SET answer_option_id = 'other'"):
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute(statement)


def test_r4_a_finished_run_never_changes_and_a_run_starts_once(world: World):
    c = world.conversation()
    world.ask(c)  # its turn run succeeded
    conn = raw(world)
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE runs SET status = 'running'")
    with pytest.raises(sqlite3.IntegrityError):
        conn.execute("UPDATE runs SET status = 'queued'")


def test_revision_never_decreases(world: World):
    c = world.conversation()
    world.ask(c)
    with pytest.raises(sqlite3.IntegrityError):
        raw(world).execute("UPDATE conversations SET revision = revision - 1")


def test_migrations_are_applied_once_and_counted(tmp_path: Path):
    path = tmp_path / "s.db"
    store = Store(path)
    assert store.schema_version == len(MIGRATIONS)
    store.close()
    again = Store(path)  # reopening applies nothing twice
    assert again.schema_version == len(MIGRATIONS)
    again.close()


def test_p3_migration_6_keeps_every_row_of_a_busy_version_5_store(world: World,
                                                                  tmp_path: Path):
    """Migration 6 builds credentials, conversations and questions anew (SQLite cannot
    alter a CHECK): every row of a store made before section 13 survives, with its
    options, runs and Take Control lease still pointing at it."""
    c = world.conversation()
    world.answer(c, world.ask(c), option=1)
    world.ask(c)
    world.conversation("room")
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})["token"]
    world.call("device_take_control", {"ttl_s": 60}, phone)
    before = world.dump()
    old = tmp_path / "old.db"
    with closing(sqlite3.connect(old, isolation_level=None)) as conn:
        for script in MIGRATIONS[:5]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 5")
        conn.execute("ATTACH ? AS now", (str(world.store.path),))
        for table, _ in before:
            columns = [r[1] for r in conn.execute(f"PRAGMA main.table_info({table})")]
            if columns:
                names = ", ".join(columns)
                conn.execute(f"INSERT INTO main.{table} ({names}) "
                             f"SELECT {names} FROM now.{table}")
    migrated = Store(old)
    try:
        assert migrated.schema_version == len(MIGRATIONS)
    finally:
        migrated.close()
    with closing(sqlite3.connect(old)) as conn:
        after = [(t, conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
                 for t, _ in before]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        shape = sorted(conn.execute("SELECT type, name, tbl_name FROM sqlite_master "
                                    "WHERE name NOT LIKE 'sqlite_%'"))
    with closing(sqlite3.connect(world.store.path)) as conn:
        assert shape == sorted(conn.execute("SELECT type, name, tbl_name FROM sqlite_master "
                                            "WHERE name NOT LIKE 'sqlite_%'"))
    assert after == before
    assert sum(len(rows) for _, rows in before) > 20


def test_a_store_from_a_newer_clankie_is_refused(tmp_path: Path):
    path = tmp_path / "s.db"
    Store(path).close()
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(SchemaTooNew):
        Store(path)


def test_the_store_is_wal_with_full_sync(world: World):
    writer = world.store._writer
    assert writer.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert writer.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    assert writer.execute("PRAGMA foreign_keys").fetchone() == (1,)


def test_reads_from_short_lived_threads_open_no_new_descriptors(tmp_path: Path):
    """Worker threads come and go (anyio retires idle ones); reading from each must not
    leave a connection, and its descriptors, behind (found by the soak)."""
    store = Store(tmp_path / "s.db")
    try:
        def read() -> None:
            with store.read() as tx:
                tx.active_owner()

        read()
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(200):
            thread = threading.Thread(target=read)
            thread.start()
            thread.join()
        assert len(os.listdir("/proc/self/fd")) <= before
    finally:
        store.close()


def test_an_sqlite_too_old_for_the_store_is_refused_before_anything_is_made(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The store's SQL needs SQLite 3.35 (`RETURNING`, `UPDATE ... FROM`); an older library
    is said plainly and touches nothing, instead of failing every write later."""
    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 34, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.34.1")
    with pytest.raises(StoreUnusable, match=r"SQLite 3\.35 or newer.*3\.34\.1"):
        Store(tmp_path / "s.db")
    assert not (tmp_path / "s.db").exists()


def test_h2_migration_8_keeps_credentials_and_bounds_the_user_agent(tmp_path: Path):
    """Migration 8 adds what paired a browser (its User-Agent, H2) to `credentials`: a
    version-7 store keeps its credentials, with none; a User-Agent is at most 512
    characters, whatever the code above does."""
    old = tmp_path / "old.db"
    with closing(sqlite3.connect(old, isolation_level=None)) as conn:
        for script in MIGRATIONS[:7]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 7")
        conn.execute("INSERT INTO owners (owner_id, created_at) VALUES ('o', "
                     "'2026-12-01T00:00:00.000000Z')")
        conn.execute("INSERT INTO credentials (credential_id, owner_id, kind, mode, name, "
                     "token_hash, created_at) VALUES ('c', 'o', 'device', 'control', "
                     "'phone', 'h', '2026-12-01T00:00:00.000000Z')")
    migrated = Store(old)
    try:
        assert migrated.schema_version == len(MIGRATIONS) >= 8
        with migrated.read() as tx:
            [row] = tx.credentials()
        assert (row.name, row.user_agent) == ("phone", None)
    finally:
        migrated.close()
    with closing(sqlite3.connect(old, isolation_level=None)) as conn:
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE credentials SET user_agent = ?", ("x" * 513,))
        assert conn.execute("SELECT user_agent FROM credentials").fetchall() == [(None,)]


def test_finding_migration_9_dates_each_conversations_activity_and_archives_none(
        world: World, tmp_path: Path):
    """Migration 9 (SPEC section 10 "Finding what waits"): a version-8 store's
    conversations get `activity_at` from their newest event (else their creation) and
    are not archived; the list reads them with what waits in each."""
    busy, quiet = world.conversation(), world.conversation("room")
    world.clock.advance(90)
    world.ask(busy)
    before = world.dump()
    old = tmp_path / "old.db"
    with closing(sqlite3.connect(old, isolation_level=None)) as conn:
        for script in MIGRATIONS[:8]:
            conn.executescript(script)
        conn.execute("PRAGMA user_version = 8")
        conn.execute("ATTACH ? AS now", (str(world.store.path),))
        for table, _ in before:
            columns = [r[1] for r in conn.execute(f"PRAGMA main.table_info({table})")]
            if not columns:  # a table of a later migration
                continue
            names = ", ".join(columns)
            conn.execute(f"INSERT INTO main.{table} ({names}) SELECT {names} FROM now.{table}")
    migrated = Store(old)
    try:
        assert migrated.schema_version == len(MIGRATIONS) >= 9
    finally:
        migrated.close()
    with closing(sqlite3.connect(old)) as conn:
        rows = dict(conn.execute("SELECT conversation_id, activity_at FROM conversations "
                                 "WHERE archived_activity IS NULL"))
        newest = conn.execute("SELECT json_extract(body, '$.at') FROM events WHERE "
                              "conversation_id = ? ORDER BY seq DESC LIMIT 1", (busy,)).fetchone()
        created = conn.execute("SELECT created_at FROM conversations WHERE conversation_id = ?",
                               (quiet,)).fetchone()
    assert rows == {busy: newest[0], quiet: created[0]}
    assert rows[busy] > rows[quiet]
