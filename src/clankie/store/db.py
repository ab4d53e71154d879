"""The SQLite store: one file, WAL, `synchronous=FULL`, migrations checked at start-up.

Owns connections and transactions. Writes go through one connection per `Store`,
serialised by a lock and by `BEGIN IMMEDIATE` (so several processes or `Store`s on one
file are serialised by SQLite itself), and concurrent writes share a commit (group
commit, `write`); reads use a pool of read-only connections, one per concurrent read. It knows
nothing of the rules: `ReadTx` and `WriteTx` load and save values of `clankie.core.model`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from .schema import MIGRATIONS
from .tx import ReadTx, WriteTx

BUSY_TIMEOUT_MS = 10_000


MAX_BATCH = 64  # operations sharing one commit, at most
MAX_BATCH_S = 0.005  # and no operation waits longer than this for others to join


@dataclass
class _Batch:
    """The operations sharing one open transaction, and how its commit went."""

    opened: float = field(default_factory=time.monotonic)
    size: int = 0
    error: BaseException | None = None
    committed: threading.Event = field(default_factory=threading.Event)


MIN_SQLITE = (3, 35, 0)  # RETURNING (events numbered in an UPDATE), UPDATE ... FROM


class StoreUnusable(Exception):
    """This clankie cannot use the store: said to the user as it is."""


class SchemaTooNew(StoreUnusable):
    """The store was written by a newer clankie than this one."""


class Store:
    def __init__(self, path: Path | str) -> None:
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise StoreUnusable(
                f"clankie needs SQLite {'.'.join(map(str, MIN_SQLITE[:2]))} or newer; this "
                f"Python uses SQLite {sqlite3.sqlite_version}")
        self.path = str(path)
        self._read_uri = Path(self.path).absolute().as_uri() + "?mode=ro"
        # Test-only fault hook: called inside every write transaction just before COMMIT.
        self.before_commit: Callable[[], None] | None = None
        self._write_lock = threading.Lock()
        self._state = threading.Lock()  # guards the two below
        self._queued = 0  # operations waiting for the writer
        self._batch: _Batch | None = None  # the open transaction, if any
        self.operations = 0  # write operations done, and the commits they shared
        self.commits = 0
        self._readers: list[sqlite3.Connection] = []  # every read connection, to close
        self._idle: list[sqlite3.Connection] = []  # ... and those not in use now
        self._readers_lock = threading.Lock()
        try:
            if self.path != ":memory:":
                _create_private(self.path)
            self._writer = self._connect()
            self._writer.execute("PRAGMA journal_mode=WAL")
        except (OSError, sqlite3.OperationalError) as exc:  # read-only, gone, not allowed
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise StoreUnusable(f"the store {self.path} cannot be opened ({reason}); "
                                "`clankie doctor` says what is wrong with its home") from None
        self._migrate()

    def _connect(self, read_only: bool = False) -> sqlite3.Connection:
        """The writer, or (`read_only`) a reader: opened read-only, and `query_only` too,
        so that no statement can write through it, whoever runs it."""
        target, uri = self.path, False
        if read_only and self.path != ":memory:":
            target, uri = self._read_uri, True
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False,
                               timeout=BUSY_TIMEOUT_MS / 1000, uri=uri)
        if read_only:
            conn.execute("PRAGMA query_only=ON")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute("PRAGMA foreign_keys=ON")
        return conn

    def _migrate(self) -> None:
        with self._write_lock:
            conn = self._writer
            # Off while a migration builds a table anew (SQLite's documented way: a table
            # dropped with foreign keys on would take its referrers' rows with it), checked
            # before anything is committed, and on again after.
            conn.execute("PRAGMA foreign_keys=OFF")
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
                if conn.execute("PRAGMA foreign_key_check").fetchone() is not None:
                    raise sqlite3.IntegrityError("a migration left a foreign key dangling")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            finally:
                conn.execute("PRAGMA foreign_keys=ON")

    @property
    def schema_version(self) -> int:
        return int(self._writer.execute("PRAGMA user_version").fetchone()[0])

    @contextmanager
    def write(self) -> Iterator[WriteTx]:
        """One write operation, atomic on its own (a SAVEPOINT), durable when this returns.

        Group commit: operations that arrive while another holds the writer share its
        transaction (`BEGIN IMMEDIATE` ... one `COMMIT`). Each runs alone, in turn, in its
        own SAVEPOINT (an error rolls back that operation only); the last of a batch (no
        one waiting, or the batch full or old) commits, and every operation of the batch
        returns only after that commit, or raises if it failed. Nothing is acknowledged
        before it is durable."""
        with self._state:
            self._queued += 1
        self._write_lock.acquire()
        with self._state:
            self._queued -= 1
        conn = self._writer
        error: BaseException | None = None
        batch: _Batch | None = None
        leader = False
        try:
            if self._batch is None:
                conn.execute("BEGIN IMMEDIATE")
                self._batch = _Batch()
            batch = self._batch
            conn.execute("SAVEPOINT operation")
            try:
                yield WriteTx(conn)
            except BaseException as exc:  # this operation's own failure: undo it alone
                error = exc
                conn.execute("ROLLBACK TO operation")
            conn.execute("RELEASE operation")
            batch.size += 1
            self.operations += 1
        finally:
            if batch is not None:
                with self._state:
                    leader = (self._queued == 0 or batch.size >= MAX_BATCH
                              or time.monotonic() - batch.opened > MAX_BATCH_S)
                    if leader:
                        self._batch = None
                if leader:
                    self._commit(batch)
            self._write_lock.release()
        if batch is not None and not leader:
            batch.committed.wait()
        if error is not None:
            raise error
        if batch is not None and batch.error is not None:
            raise sqlite3.OperationalError(f"the commit failed: {batch.error}")

    def _commit(self, batch: _Batch) -> None:
        conn = self._writer
        try:
            if self.before_commit is not None:
                self.before_commit()
            conn.execute("COMMIT")
            self.commits += 1
        except BaseException as exc:  # every operation of the batch is told, none kept
            batch.error = exc
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        finally:
            batch.committed.set()

    @contextmanager
    def read(self) -> Iterator[ReadTx]:
        """One consistent read snapshot: a `ReadTx`, which has no writers, on a read-only
        connection from the pool. The pool is not tied to threads: worker threads come and
        go (anyio retires idle ones), and a connection per thread would leave one open for
        every thread that ever read."""
        with self._readers_lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._connect(read_only=True)
            with self._readers_lock:
                self._readers.append(conn)
        try:
            conn.execute("BEGIN")
            try:
                yield ReadTx(conn)
            finally:
                conn.execute("COMMIT")
        finally:
            with self._readers_lock:
                self._idle.append(conn)

    def close(self) -> None:
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            self._idle.clear()
        with self._write_lock:
            self._writer.close()


def _create_private(path: str) -> None:
    """Create the store file 0600 when it is missing: exclusively, and never through a
    symlink (SQLite follows one, so a dangling link would put the store where it points)."""
    if os.path.islink(path):
        raise StoreUnusable(f"the store {path} is a symbolic link; clankie does not follow one")
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o600))  # private from birth


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
