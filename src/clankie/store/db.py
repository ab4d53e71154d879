"""The SQLite store: one file, WAL, `synchronous=FULL`, migrations checked at start-up.

Owns connections and transactions. Every write happens on the store's own thread (the
writer), which owns the one write connection: callers hand it jobs (`run` waits for the
job's result, `submit` is called back), and it runs them back to back, requests' jobs
before runs' (`urgent`). Inside a job each write operation is its own SAVEPOINT (`write`,
usable only there, so that an error undoes that operation alone), and the jobs taken
while the queue had any share one transaction (`BEGIN IMMEDIATE` ... one `COMMIT`: group
commit). A job is answered only after that commit, once what its writes asked to be done
after it (`WriteTx.on_commit`) is done: nothing is acknowledged before it is durable, and
no thread but the writer ever waits for SQLite's write lock. Several processes or
`Store`s on one file are still serialised by SQLite itself.

Reads use a pool of read-only connections on the caller's thread, one per concurrent read:
they never wait behind the writer. A read inside a job sees what the job's batch wrote.
It knows nothing of the rules: `ReadTx` and `WriteTx` load and save values of
`clankie.core.model`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from .schema import MIGRATIONS
from .tx import ReadTx, WriteTx

log = logging.getLogger("clankie.store")

BUSY_TIMEOUT_MS = 10_000
MAX_BATCH = 64  # jobs sharing one commit, at most

T = TypeVar("T")
# How a job ended, for its caller: its result, or the exception it (or its commit) raised.
Done = Callable[[Any, BaseException | None], None]

MIN_SQLITE = (3, 35, 0)  # RETURNING (events numbered in an UPDATE), UPDATE ... FROM


class StoreUnusable(Exception):
    """This clankie cannot use the store: said to the user as it is."""


class SchemaTooNew(StoreUnusable):
    """The store was written by a newer clankie than this one."""


@dataclass
class _Job:
    """One caller's work for the writer, and what it left to do after the commit."""

    work: Callable[[], Any]
    done: Done
    urgent: bool
    after_commit: list[Callable[[], None]] = field(default_factory=list)
    result: Any = None
    error: BaseException | None = None


class _Waiter(Generic[T]):
    """A caller of `run`, waiting on its own thread for its job's end."""

    def __init__(self) -> None:
        self._ended = threading.Event()
        self._result: Any = None
        self._error: BaseException | None = None

    def done(self, result: Any, error: BaseException | None) -> None:
        self._result, self._error = result, error
        self._ended.set()

    def wait(self) -> T:
        self._ended.wait()
        if self._error is not None:
            raise self._error
        result: T = self._result
        return result


class Store:
    def __init__(self, path: Path | str) -> None:
        if sqlite3.sqlite_version_info < MIN_SQLITE:
            raise StoreUnusable(
                f"clankie needs SQLite {'.'.join(map(str, MIN_SQLITE[:2]))} or newer; this "
                f"Python uses SQLite {sqlite3.sqlite_version}")
        self.path = str(path)
        # Test-only fault hook: called on the writer just before each COMMIT.
        self.before_commit: Callable[[], None] | None = None
        self.operations = 0  # write operations done, and the commits they shared
        self.commits = 0
        # Bumped when a write changes a credential or an owner, at once and again after
        # its commit: what a cache of credentials compares (the edge's token check).
        self.credential_generation = 0
        self._readers = Readers(self.path)
        # The writer's queues (requests' jobs, then runs'), and what only it touches.
        self._queued: dict[bool, deque[_Job]] = {True: deque(), False: deque()}
        self._ready = threading.Condition()
        self._closing = False
        self._job: _Job | None = None  # the job the writer runs now
        self._open: list[WriteTx] = []  # its write operations open now, innermost last
        try:
            if self.path != ":memory:":
                _create_private(self.path)
            self._writer = _connect(self.path)
            self._writer.execute("PRAGMA journal_mode=WAL")
        except (OSError, sqlite3.OperationalError) as exc:  # read-only, gone, not allowed
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise StoreUnusable(f"the store {self.path} cannot be opened ({reason}); "
                                "`clankie doctor` says what is wrong with its home") from None
        self._migrate()
        self._thread = threading.Thread(target=self._work, name="clankie-store", daemon=True)
        self._thread.start()

    def _migrate(self) -> None:
        """Bring the schema up to date, before the writer thread starts."""
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
        return int(self.run(lambda: self._writer.execute("PRAGMA user_version").fetchone()[0]))

    # ------------------------------------------------------------------- the writer

    def run(self, work: Callable[[], T], *, urgent: bool = True) -> T:
        """Run `work` on the writer, where `write` may be used, and return what it returned
        (or raise what it raised) once the transaction it ran in has committed; a failed
        commit raises `sqlite3.OperationalError`. `urgent`: a request's work, run before
        any run's. Called on the writer itself (work inside a job, or after a commit), it
        runs at once, in that job or in a transaction of its own."""
        if threading.current_thread() is self._thread:
            if self._job is not None:
                return work()
            waiter: _Waiter[T] = _Waiter()
            self._batch(_Job(work, waiter.done, urgent), drain=False)
            return waiter.wait()
        waiter = _Waiter()
        self.submit(work, waiter.done, urgent=urgent)
        return waiter.wait()

    def submit(self, work: Callable[[], Any], done: Done, *, urgent: bool = True) -> None:
        """Queue `work` for the writer and return at once: `done(result, error)` is called
        on the writer once its transaction has committed (or failed). `done` must be quick
        and must not raise."""
        with self._ready:
            if self._closing:
                raise sqlite3.ProgrammingError("the store is closed")
            self._queued[urgent].append(_Job(work, done, urgent))
            self._ready.notify()

    @contextmanager
    def write(self) -> Iterator[WriteTx]:
        """One write operation, atomic on its own (a SAVEPOINT): only inside a job on the
        writer (`run`, `submit`). An error inside undoes this operation alone and is
        raised; the job's batch commits the rest."""
        job = self._job
        if job is None or threading.current_thread() is not self._thread:
            raise RuntimeError("Store.write is for work on the store's writer (Store.run)")
        conn = self._writer
        conn.execute("SAVEPOINT operation")
        tx = WriteTx(conn)
        self._open.append(tx)
        try:
            yield tx
        except BaseException:
            conn.execute("ROLLBACK TO operation")
            raise
        else:
            if tx.credentials_changed:
                self.credential_generation += 1
                tx.on_commit.append(self._credentials_committed)
            # Done after the commit, unless an enclosing operation is undone first.
            (self._open[-2].on_commit if len(self._open) > 1 else job.after_commit
             ).extend(tx.on_commit)
        finally:
            self._open.pop()
            conn.execute("RELEASE operation")
            self.operations += 1

    def _credentials_committed(self) -> None:
        self.credential_generation += 1

    def _take(self, block: bool, runs: bool = True) -> _Job | None:
        """The next job, requests' first (and, unless `runs`, only theirs); None once
        closing (or, not blocking, none)."""
        with self._ready:
            while True:
                for urgent in (True, False) if runs else (True,):
                    if self._queued[urgent]:
                        return self._queued[urgent].popleft()
                if not block or self._closing:
                    return None
                self._ready.wait()

    def _work(self) -> None:
        while (job := self._take(block=True)) is not None:
            self._batch(job)

    def _batch(self, first: _Job, drain: bool = True) -> None:
        """Run `first` and (with `drain`) the jobs queued meanwhile, in one transaction;
        commit it; then, job by job, do what each left for after the commit and answer it.
        Once a request's job is in the batch, only requests' join it: no run's step comes
        between a request and its commit."""
        conn = self._writer
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:  # the file is locked beyond the busy timeout, or gone
            _answer(first.done, None, exc)
            return
        batch = [first]
        self._execute(first)
        while drain and len(batch) < MAX_BATCH and (job := self._take(
                block=False, runs=not any(j.urgent for j in batch))):
            self._execute(job)
            batch.append(job)
        failed = self._commit()
        for job in batch:
            if failed is not None:  # every job of the batch is told, none kept
                _answer(job.done, None, sqlite3.OperationalError(f"the commit failed: {failed}"))
                continue
            for action in job.after_commit:
                try:
                    action()
                except Exception:
                    log.exception("an action after a commit failed")
            _answer(job.done, job.result, job.error)

    def _execute(self, job: _Job) -> None:
        self._job = job
        try:
            job.result = job.work()
        except BaseException as exc:  # the job's own failure, for its caller
            job.error = exc
        finally:
            self._job = None

    def _commit(self) -> BaseException | None:
        conn = self._writer
        try:
            if self.before_commit is not None:
                self.before_commit()
            conn.execute("COMMIT")
            self.commits += 1
            return None
        except BaseException as exc:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):  # the writer goes on, whatever
                    conn.execute("ROLLBACK")
            return exc

    # -------------------------------------------------------------------- the readers

    @contextmanager
    def read(self) -> Iterator[ReadTx]:
        """One consistent read snapshot (`Readers.read`); inside a job on the writer, on the
        writer's own connection, seeing what the batch wrote."""
        if self._job is not None and threading.current_thread() is self._thread:
            yield ReadTx(self._writer)
            return
        with self._readers.read() as tx:
            yield tx

    def close(self) -> None:
        """Finish the jobs queued so far, then close every connection."""
        with self._ready:
            self._closing = True
            self._ready.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        self._readers.close()
        self._writer.close()


class Readers:
    """Read-only connections to a store's file, one per concurrent read, for any thread or
    process (the run process reads through its own). The pool is not tied to threads:
    worker threads come and go (anyio retires idle ones), and a connection per thread
    would leave one open for every thread that ever read."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._all: list[sqlite3.Connection] = []  # every read connection, to close
        self._idle: list[sqlite3.Connection] = []  # ... and those not in use now
        self._lock = threading.Lock()

    @contextmanager
    def read(self) -> Iterator[ReadTx]:
        """One consistent read snapshot: a `ReadTx`, which has no writers."""
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = _connect(self.path, read_only=True)
            with self._lock:
                self._all.append(conn)
        try:
            conn.execute("BEGIN")
            try:
                yield ReadTx(conn)
            finally:
                conn.execute("COMMIT")
        finally:
            with self._lock:
                self._idle.append(conn)

    def close(self) -> None:
        with self._lock:
            for conn in self._all:
                conn.close()
            self._all.clear()
            self._idle.clear()


def _connect(path: str, read_only: bool = False) -> sqlite3.Connection:
    """The writer, or (`read_only`) a reader: opened read-only, and `query_only` too, so
    that no statement can write through it, whoever runs it. Temporary tables and each
    savepoint's journal stay in memory (not a file made and removed per write)."""
    target, uri = path, False
    if read_only and path != ":memory:":
        target, uri = Path(path).absolute().as_uri() + "?mode=ro", True
    conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False,
                           timeout=BUSY_TIMEOUT_MS / 1000, uri=uri)
    if read_only:
        conn.execute("PRAGMA query_only=ON")
    conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA temp_store=MEMORY")
    return conn


def _answer(done: Done, result: Any, error: BaseException | None) -> None:
    try:
        done(result, error)
    except Exception:
        log.exception("a job's caller could not be answered")


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
