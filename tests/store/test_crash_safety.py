"""Crash safety: SIGKILL at random moments while accepting answers (DESIGN: store tests).

After every kill and reopen: every answer whose accept returned before the kill is stored
with its continuation run; start-up recovery fails orphaned runs; no run ever starts twice.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from contextlib import closing
from pathlib import Path

from clankie.service import Service
from clankie.store import Store
from tests.e2e.served import LineReader
from tests.world import World

KILLS = 50
ROOT = Path(__file__).resolve().parents[2]


def killed_at_random(child: list[str], after: float) -> list[str]:
    """Run a child module until it says `ready`, SIGKILL it `after` seconds later, and
    return every line it printed."""
    proc = subprocess.Popen([sys.executable, "-m", *child], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    lines = LineReader(proc.stdout)
    try:
        assert lines.until(lambda line: True, 30).strip() == "ready"
        time.sleep(after)  # the random moment of the kill, not a synchronisation
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    out = "".join(lines.all_lines(30)).splitlines()
    assert proc.stdout is not None
    proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return out


def test_sigkill_at_random_moments_loses_no_accepted_answer_and_reruns_nothing(tmp_path: Path):
    world = World.create(tmp_path)
    conversation_id = world.conversation()
    world.close()
    db, log = world.store.path, tmp_path / "executed.log"
    rng = random.Random(20261130)
    accepted: list[tuple[str, str, str]] = []
    for _ in range(KILLS):
        out = killed_at_random(["tests.store.crash_child", db, conversation_id,
                                world.operator, str(log)], rng.uniform(0.0, 0.15))
        accepted += [tuple(line.split()[1:]) for line in out
                     if line.startswith("accepted ")]  # type: ignore[misc]
        with closing(sqlite3.connect(db)) as conn:
            for request_id, receipt_id, run_id in accepted:
                row = conn.execute("SELECT q.status, q.run_id, r.receipt_id FROM questions q "
                                   "JOIN runs r ON r.run_id = q.run_id WHERE q.request_id = ?",
                                   (request_id,)).fetchone()
                assert row == ("answered", run_id, receipt_id), request_id
    assert len(accepted) >= KILLS // 2, "the kills came too early to test anything"

    service = Service(Store(db))
    try:
        service.runs.recover()
        with closing(sqlite3.connect(db)) as conn:
            assert conn.execute("SELECT count(*) FROM runs WHERE status IN ('queued', 'running')"
                                ).fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM questions WHERE status = 'pending'"
                                ).fetchone() == (0,)
            orphaned = conn.execute("SELECT count(*) FROM runs WHERE error = "
                                    "'orphaned_by_restart'").fetchone()[0]
            started = {r for (r,) in conn.execute("SELECT run_id FROM runs "
                                                  "WHERE started_at IS NOT NULL")}
    finally:
        service.store.close()
    executions = Counter(line.split()[1] for line in log.read_text().splitlines())
    assert executions and max(executions.values()) == 1, "a run started twice"
    assert set(executions) <= started
    assert orphaned >= 1
    print(f"{len(accepted)} accepted answers survived {KILLS} kills; {orphaned} runs orphaned")


BATCH_KILLS = 20


def test_sigkill_during_batched_commits_keeps_every_acknowledged_write_whole(tmp_path: Path):
    """Six writers at once share commits (group commit); a SIGKILL lands mid-batch. After
    each: every acknowledged message and answer is there, and nothing is half-written."""
    world = World.create(tmp_path)
    conversations = [world.conversation() for _ in range(6)]
    world.close()
    db = world.store.path
    rng = random.Random(20261201)
    sent: list[tuple[str, str]] = []
    accepted: list[tuple[str, str, str]] = []
    shared = []
    for _ in range(BATCH_KILLS):
        out = killed_at_random(["tests.store.batch_crash_child", db, world.operator,
                                *conversations], rng.uniform(0.05, 0.3))
        sent += [tuple(line.split()[1:]) for line in out if line.startswith("sent ")]  # type: ignore[misc]
        accepted += [tuple(line.split()[1:]) for line in out  # type: ignore[misc]
                     if line.startswith("accepted ")]
        shared += [tuple(map(int, line.split()[1:])) for line in out
                   if line.startswith("batched ")]
        with closing(sqlite3.connect(db)) as conn:
            for conversation_id, message_id in sent:
                assert conn.execute("SELECT conversation_id FROM messages WHERE message_id = ?",
                                    (message_id,)).fetchone() == (conversation_id,)
            for request_id, receipt_id, run_id in accepted:
                row = conn.execute("SELECT q.status, q.run_id, r.receipt_id FROM questions q "
                                   "JOIN runs r ON r.run_id = q.run_id WHERE q.request_id = ?",
                                   (request_id,)).fetchone()
                assert row == ("answered", run_id, receipt_id), request_id
            _assert_whole(conn)
    assert len(accepted) >= BATCH_KILLS, "the kills came too early to test anything"
    operations, commits = max(shared)
    assert operations > commits, "no two operations ever shared a commit"


def _assert_whole(conn: sqlite3.Connection) -> None:
    """Nothing half-written: each answer has its run and each continuation its answer; each
    turn its message; each conversation's event counter matches its events."""
    assert conn.execute("SELECT count(*) FROM questions q LEFT JOIN runs r ON r.run_id = q.run_id "
                        "WHERE q.status = 'answered' AND r.run_id IS NULL").fetchone() == (0,)
    assert conn.execute("SELECT count(*) FROM runs r LEFT JOIN questions q ON q.run_id = r.run_id "
                        "WHERE r.kind = 'continuation' AND q.request_id IS NULL").fetchone() == (0,)
    rows = conn.execute("SELECT c.last_seq, (SELECT max(seq) FROM events e WHERE "
                        "e.conversation_id = c.conversation_id) FROM conversations c "
                        "WHERE c.last_seq > 0").fetchall()
    assert all(last == top for last, top in rows), rows
    assert conn.execute("SELECT (SELECT count(*) FROM runs WHERE kind = 'turn') <= "
                        "(SELECT count(*) FROM messages WHERE author = 'owner')").fetchone() == (1,)
