"""The SQLite store: one file, WAL, `synchronous=FULL`, migrations checked at start-up.

Owns connections and transactions. Writes go through one connection per `Store`,
serialised by a lock and by `BEGIN IMMEDIATE` (so several processes or `Store`s on one
file are serialised by SQLite itself); reads use a connection per thread. It knows
nothing of the rules: `Tx` loads and saves values of `clankie.core.model`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .schema import MIGRATIONS
from .tx import Tx

BUSY_TIMEOUT_MS = 10_000


class SchemaTooNew(Exception):
    """The store was written by a newer clankie than this one."""


class Store:
    def __init__(self, path: Path | str) -> None:
        self.path = str(path)
        # Test-only fault hook: called inside every write transaction just before COMMIT.
        self.before_commit: Callable[[], None] | None = None
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        if self.path != ":memory:" and not os.path.exists(self.path):
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o600))  # private from birth
        self._writer = self._connect()
        self._writer.execute("PRAGMA journal_mode=WAL")
        self._migrate()

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _migrate(self) -> None:
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > len(MIGRATIONS):
                    raise SchemaTooNew(
                        f"the store {self.path} has schema version {version}; this clankie "
                        f"knows up to {len(MIGRATIONS)}")
                for number, script in enumerate(MIGRATIONS[version:], start=version + 1):
                    for statement in _statements(script):
                        conn.execute(statement)
                    conn.execute(f"PRAGMA user_version={number}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    @property
    def schema_version(self) -> int:
        return int(self._writer.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def write(self) -> Iterator[Tx]:
        """One write transaction: `BEGIN IMMEDIATE` ... `COMMIT`, or rolled back on error."""
        with self._write_lock:
            conn = self._writer
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield Tx(conn)
                if self.before_commit is not None:
                    self.before_commit()
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    @contextmanager
    def read(self) -> Iterator[Tx]:
        """One consistent read snapshot on this thread's own connection."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            conn.execute("PRAGMA query_only=ON")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        conn.execute("BEGIN")
        try:
            yield Tx(conn)
        finally:
            conn.execute("COMMIT")

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        with self._write_lock:
            self._writer.close()


def _statements(script: str) -> Iterator[str]:
    """Split a migration into statements (triggers contain `;` inside BEGIN ... END)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                yield buffer.strip()
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete statement in migration: {buffer.strip()[:80]}")
