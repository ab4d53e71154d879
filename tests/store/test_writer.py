"""Issue 39, the store's one writer thread: every write runs there, requests' jobs before
runs', one commit per drained batch, and nobody is answered before that commit (DESIGN's
write path: "nothing is acknowledged before it is durable").

Each test holds the writer with a job of its own (an event it releases), queues what it
needs behind it, and reads what happened from the jobs' own records: no timing.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from clankie.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    made = Store(tmp_path / "clankie.db")
    yield made
    made.close()


class Held:
    """The writer, busy with a job of the test's until `release`."""

    def __init__(self, store: Store) -> None:
        self.inside = threading.Event()
        self._go = threading.Event()
        store.submit(self._hold, lambda *_: None)
        assert self.inside.wait(10), "the writer never took the holding job"

    def _hold(self) -> None:
        self.inside.set()
        assert self._go.wait(10)

    def release(self) -> None:
        self._go.set()


class Journal:
    """What happened, in order, from every thread."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self.all_answered = threading.Event()
        self.expected = 0

    def note(self, line: str) -> None:
        with self._lock:
            self.lines.append(line)

    def job(self, store: Store, name: str, write: bool = True) -> Callable[[], str]:
        def work() -> str:
            self.note(f"run {name}")
            if write:
                with store.write() as tx:
                    tx.insert_owner(name, datetime.now(UTC))
            return name
        return work

    def done(self, name: str) -> Callable[[Any, BaseException | None], None]:
        self.expected += 1

        def answered(result: Any, error: BaseException | None) -> None:
            self.note(f"answer {name}" + (f" {type(error).__name__}" if error else ""))
            if sum(line.startswith("answer") for line in self.lines) == self.expected:
                self.all_answered.set()
        return answered


def owners(store: Store) -> list[str]:
    with store.read() as tx:
        rows = tx._all("SELECT owner_id FROM owners ORDER BY rowid")
    return [row[0] for row in rows]


def test_issue39_requests_jobs_run_before_runs_jobs_queued_earlier(store: Store):
    journal = Journal()
    held = Held(store)
    store.submit(journal.job(store, "run-step"), journal.done("run-step"), urgent=False)
    store.submit(journal.job(store, "request"), journal.done("request"))
    held.release()
    assert journal.all_answered.wait(10)
    assert journal.lines.index("run request") < journal.lines.index("run run-step")


def test_issue39_no_runs_step_comes_between_a_request_and_its_commit(store: Store):
    """A request's job is answered (committed) before a run's step queued with it runs."""
    journal = Journal()
    store.before_commit = lambda: journal.note("commit")
    held = Held(store)
    store.submit(journal.job(store, "step"), journal.done("step"), urgent=False)
    store.submit(journal.job(store, "request"), journal.done("request"))
    held.release()
    assert journal.all_answered.wait(10)
    # the request joins the holding job's batch; the step waits for a batch of its own
    assert journal.lines == ["run request", "commit", "answer request",
                             "run step", "commit", "answer step"]


def test_issue39_jobs_queued_together_share_one_commit_and_none_is_answered_before_it(
        store: Store):
    journal = Journal()
    store.before_commit = lambda: journal.note("commit")
    held = Held(store)
    for name in ("a", "b", "c"):
        store.submit(journal.job(store, name), journal.done(name))
    held.release()
    assert journal.all_answered.wait(10)
    assert journal.lines == ["run a", "run b", "run c", "commit",  # with the holding job
                             "answer a", "answer b", "answer c"]
    assert owners(store) == ["a", "b", "c"]


def test_issue39_a_failed_commit_fails_every_job_of_its_batch_and_keeps_none(store: Store):
    journal = Journal()
    failing = threading.Event()

    def commit() -> None:
        if failing.is_set():
            raise sqlite3.OperationalError("disk I/O error")

    store.before_commit = commit
    held = Held(store)
    failing.set()
    for name in ("a", "b"):
        store.submit(journal.job(store, name), journal.done(name))
    held.release()
    assert journal.all_answered.wait(10)
    assert journal.lines[-2:] == ["answer a OperationalError", "answer b OperationalError"]
    failing.clear()
    assert owners(store) == []
    with pytest.raises(sqlite3.OperationalError, match="the commit failed: disk I/O error"):
        failing.set()
        store.run(journal.job(store, "c"))


def test_issue39_one_failed_write_is_undone_alone(store: Store):
    def failing() -> None:
        with store.write() as tx:
            tx.insert_owner("undone", datetime.now(UTC))
            raise ValueError("this operation's own failure")

    journal = Journal()
    held = Held(store)
    store.submit(journal.job(store, "kept"), journal.done("kept"))
    store.submit(failing, journal.done("failing"))
    held.release()
    assert journal.all_answered.wait(10)
    assert "answer failing ValueError" in journal.lines
    assert owners(store) == ["kept"]


def test_issue39_what_a_write_leaves_for_after_its_commit_is_done_before_its_answer(
        store: Store):
    journal = Journal()
    store.before_commit = lambda: journal.note("commit")

    def work() -> None:
        with store.write() as tx:
            tx.on_commit.append(lambda: journal.note("after kept"))
        try:
            with store.write() as tx:
                tx.on_commit.append(lambda: journal.note("after undone"))
                raise ValueError("undone")
        except ValueError:
            pass

    store.run(work)
    assert journal.lines == ["commit", "after kept"]


def test_issue39_a_write_is_only_for_work_on_the_writer(store: Store):
    with pytest.raises(RuntimeError, match=r"Store\.write is for work on the store's writer"), \
            store.write():
        pass


def test_issue39_a_read_inside_a_job_sees_its_batch_and_one_outside_only_what_is_committed(
        store: Store):
    seen: list[list[str]] = []
    inside = threading.Event()
    go = threading.Event()

    def work() -> None:
        with store.write() as tx:
            tx.insert_owner("written", datetime.now(UTC))
        seen.append(owners(store))  # the writer's own connection: the batch's writes
        inside.set()
        assert go.wait(10)

    thread = threading.Thread(target=store.run, args=(work,))
    thread.start()
    assert inside.wait(10)
    seen.append(owners(store))  # another thread: nothing committed yet
    go.set()
    thread.join(10)
    assert seen == [["written"], []]
    assert owners(store) == ["written"]


def test_issue39_credential_writes_move_the_generation_as_made_and_once_committed(
        store: Store):
    moments: list[int] = []

    def work() -> None:
        with store.write() as tx:
            tx.insert_owner("o", datetime.now(UTC))
        moments.append(store.credential_generation)

    before = store.credential_generation
    store.run(work)
    assert (moments[0], store.credential_generation) == (before + 1, before + 2)
    store.run(lambda: None)  # nothing about credentials: nothing moves
    assert store.credential_generation == before + 2
