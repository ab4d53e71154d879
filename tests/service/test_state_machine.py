"""Random sequences of ask, answer, cancel, reset, takeover, revoke, workspace replacement,
expiry, restart, workspace tool calls and stopping runs (`run_cancel`) never break an
invariant (SPEC Q4, A4, A9, R2, R3, R4, R7, V2, W9, revision).

Driven through the service on a real store, so the store's constraints are exercised too.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from clankie.agent.transcript import ToolCall
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import IllegalTransition
from clankie.core.model import RunStatus
from clankie.service import Service
from clankie.service.tooling import RunTools
from clankie.settings import Settings
from tests.world import CHOICE, TEXT, World

ANSWER_CODES = {"unknown_request", "stale_incarnation", "stale_revision", "already_answered",
                "request_closed", "request_expired", "unauthenticated", "not_found"}
REQUESTED = {"type", "seq", "conversation_id", "request_id", "prompt", "choices", "at"}
RESOLVED = {"type", "seq", "conversation_id", "request_id", "outcome", "at"}


class QuestionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="clankie-sm-"))
        self.world = World.create(self.tmp, Settings(receipt_limit=3, event_retention=40,
                                                     question_ttl=100))
        self.conversations = [self.world.conversation(), self.world.conversation()]
        self.snapshots: list[tuple[str, dict[str, Any]]] = []
        self.receipts: dict[str, tuple[Any, ...]] = {}
        self.revisions: dict[str, tuple[int, int]] = {}
        self.executed: Counter[str] = Counter()
        self.stopped: set[str] = set()  # runs that run_cancel stopped
        self.alternate = self.tmp / "alternate"
        self.alternate.mkdir()

    def teardown(self) -> None:
        self.world.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # ----------------------------------------------------------------------------- rules

    @rule(i=st.integers(0, 1), text=st.booleans())
    def ask(self, i: int, text: bool) -> None:
        c = self.conversations[i]
        sent = self.world.call("conversation_send", {"conversation_id": c, "text": "go"})
        if sent["run_id"] is None:  # natively owned: no turn starts
            return
        run = self._execute_until(c, sent["run_id"])
        if run is None:
            return
        result = self.world.service.runs.ask_question(run, TEXT if text else CHOICE)
        assert result.status in ("pending", "refused")
        event(f"ask: {result.reason or result.status}")
        if result.status == "refused":
            assert result.reason in {"question_pending", "owner_revoked", "workspace_missing",
                                     "workspace_replaced", "native_owned"}, result.reason
        self.world.service.runs.finish_run(run, RunStatus.SUCCEEDED)
        self.read(i)

    @rule(i=st.integers(0, 1), step=st.integers(0, 3))
    def use_tools(self, i: int, step: int) -> None:
        """A run looks at its workspace (W9): questions and the revision stay as they were."""
        c = self.conversations[i]
        sent = self.world.call("conversation_send", {"conversation_id": c, "text": "look"})
        if sent["run_id"] is None:
            return
        run = self._execute_until(c, sent["run_id"])
        if run is None:
            return
        before = self._question_state(c)
        tools = RunTools(self.world.service.runs, run)
        for call in (ToolCall("a", "list_files", "{}"), ToolCall("b", "git_status", "{}"),
                     ToolCall("c", "read_file", '{"path": "../x"}')):
            json.loads(tools.call(step, call))  # a result the model could read, never a crash
        assert self._question_state(c) == before
        self.world.service.runs.finish_run(run, RunStatus.SUCCEEDED)

    def _question_state(self, c: str) -> tuple[Any, ...]:
        with self.world.db() as db:
            return (db.execute("SELECT revision FROM conversations WHERE conversation_id = ?",
                               (c,)).fetchone(),
                    db.execute("SELECT * FROM questions WHERE conversation_id = ? ORDER BY "
                               "request_id", (c,)).fetchall())

    @rule(i=st.integers(0, 1))
    def read(self, i: int) -> None:
        snap = self.world.snapshot(self.conversations[i])
        if snap["pending"] is not None:
            self.snapshots.append((self.conversations[i], snap))

    @precondition(lambda self: self.snapshots)
    @rule(pick=st.integers(0, 1_000), option=st.integers(0, 1), fresh=st.booleans())
    def answer(self, pick: int, option: int, fresh: bool) -> None:
        c, snap = self.snapshots[pick % len(self.snapshots)]
        q = snap["pending"]
        text = "same words" if q["kind"] == "text" and option == 0 else None
        try:
            if fresh:
                now = self.world.snapshot(c)
                snap = snap | {"incarnation": now["incarnation"], "revision": now["revision"]}
            if q["kind"] == "text":
                reply = self.world.answer(c, snap, text=text or "other words")
            else:
                reply = self.world.answer(c, snap, option=option)
        except ClankieError as err:
            assert err.code in ANSWER_CODES, err
            event(f"answer: {err.code}")
            return
        event("answer: duplicate" if reply["duplicate"] else "answer: accepted")
        receipt = reply["receipt"]
        assert receipt["outcome"] == "answered" and receipt["run_id"]

    @precondition(lambda self: self.snapshots)
    @rule(pick=st.integers(0, 1_000))
    def cancel(self, pick: int) -> None:
        c, snap = self.snapshots[pick % len(self.snapshots)]
        try:
            self.world.cancel(c, snap)
        except ClankieError as err:
            assert err.code in ANSWER_CODES, err

    @rule(i=st.integers(0, 1))
    def reset(self, i: int) -> None:
        self.world.call("conversation_reset", {"conversation_id": self.conversations[i]})

    @rule(i=st.integers(0, 1))
    def native_takeover(self, i: int) -> None:
        self.world.call("native_takeover", {"conversation_id": self.conversations[i],
                                            "seat": "seat"})
        self.conversations[i] = self.world.conversation()

    @rule()
    def owner_revoke(self) -> None:
        self.world.call("owner_revoke")
        token = self.world.service.devices.init_owner()  # a new owner enrolls again
        assert token is not None
        self.world.operator = token
        self.conversations = [self.world.conversation(), self.world.conversation()]

    @rule(i=st.integers(0, 1))
    def replace_workspace(self, i: int) -> None:
        c = self.conversations[i]
        current = self.world.call("conversation_get", {"conversation_id": c})["workspace"]["path"]
        target = self.world.workspace if current != str(self.world.workspace) else self.alternate
        self.world.call("conversation_set_workspace", {"conversation_id": c,
                                                       "workspace": str(target)})

    @rule(seconds=st.integers(0, 150))
    def clock_moves(self, seconds: int) -> None:
        self.world.clock.advance(seconds)

    @rule()
    def restart(self) -> None:
        self.world.service = Service(self.world.store, self.world.service.settings,
                                     clock=self.world.clock)
        self.world.service.runs.recover()

    @rule(i=st.integers(0, 1))
    def send_only(self, i: int) -> None:
        """A message whose turn stays queued until a later rule executes (or stops) it."""
        self.world.call("conversation_send", {"conversation_id": self.conversations[i],
                                              "text": "later"})

    @rule(pick=st.integers(0, 1_000))
    def stop_a_run(self, pick: int) -> None:
        """R7: `run_cancel` of any run: a queued one is stopped before it starts, an ended
        one is returned unchanged (a duplicate included)."""
        with self.world.db() as db:
            runs = [r for (r,) in db.execute("SELECT run_id FROM runs ORDER BY rowid")]
        if not runs:
            return
        run_id = runs[pick % len(runs)]
        try:
            before = self.world.call("run_get", {"run_id": run_id})
            after = self.world.call("run_cancel", {"run_id": run_id})
        except ClankieError as err:  # a revoked owner's run is another owner's now
            assert err.code == "not_found", err
            return
        if before["status"] in ("queued", "running"):
            assert (after["status"], after["error"]) == ("cancelled", "stopped_by_owner")
            assert after["started_at"] == before["started_at"]
            self.stopped.add(run_id)
            event("stop: queued")
        else:
            assert after == before
            event("stop: ended, unchanged")

    @rule(i=st.integers(0, 1), asks=st.booleans())
    def stop_a_running_run(self, i: int, asks: bool) -> None:
        """R7: a run stopped while running stores nothing more; a question it asked stays."""
        c = self.conversations[i]
        sent = self.world.call("conversation_send", {"conversation_id": c, "text": "go on"})
        if sent["run_id"] is None:
            return
        run = self._execute_until(c, sent["run_id"])
        if run is None:
            return
        if asks:
            self.world.service.runs.ask_question(run, TEXT)
        self.world.call("run_cancel", {"run_id": run})
        self.stopped.add(run)
        before = self._question_state(c)
        service = self.world.service
        tools = RunTools(service.runs, run)
        for late in (lambda: service.runs.post_replies(run, ["late"]),
                     lambda: service.runs.ask_question(run, CHOICE, said=["late"]),
                     lambda: tools.call(0, ToolCall("z", "list_files", "{}")),
                     lambda: service.runs.finish_run(run, RunStatus.SUCCEEDED, said=["bye"])):
            try:
                late()
            except (ClankieError, IllegalTransition):
                continue
            raise AssertionError("a stopped run wrote")
        assert self._question_state(c) == before
        # asking alone is refused as a tool result (Q3), like any run that is not running
        assert service.runs.ask_question(run, CHOICE).reason == "stale_run"

    @rule(i=st.integers(0, 1))
    def execute_runs(self, i: int) -> None:
        self._execute_until(self.conversations[i], None)

    def _execute_until(self, c: str, run_id: str | None) -> str | None:
        """Execute queued runs in order; stop (running) at `run_id`, or when none are left."""
        for _ in range(50):
            run = self.world.service.runs.claim_next_run(c)
            if run is None:
                return None
            self.executed[run.run_id] += 1
            if run.run_id == run_id:
                return run_id
            self.world.service.runs.finish_run(run.run_id, RunStatus.SUCCEEDED)
        raise AssertionError("unbounded queue")

    # ------------------------------------------------------------------------ invariants

    @invariant()
    def at_most_one_pending_question_per_conversation(self) -> None:
        with self.world.db() as db:
            assert db.execute("SELECT max(n) FROM (SELECT count(*) AS n FROM questions "
                              "WHERE status = 'pending' GROUP BY conversation_id)"
                              ).fetchone()[0] in (None, 1)

    @invariant()
    def every_accepted_answer_has_exactly_one_run(self) -> None:
        with self.world.db() as db:
            rows = db.execute("SELECT q.receipt_id, count(r.run_id), min(r.run_id) = q.run_id "
                              "FROM questions q LEFT JOIN runs r ON r.receipt_id = q.receipt_id "
                              "WHERE q.status = 'answered' GROUP BY q.receipt_id").fetchall()
        assert all(n == 1 and same for _, n, same in rows), rows

    @invariant()
    def a_receipt_never_changes_once_written(self) -> None:
        with self.world.db() as db:
            rows = db.execute("SELECT request_id, status, receipt_id, reason, answer_option_id, "
                              "answer_text, answered_by_id, run_id, resolved_at, "
                              "resolved_revision FROM questions WHERE status != 'pending'"
                              ).fetchall()
        for row in rows:
            assert self.receipts.setdefault(row[0], row) == row

    @invariant()
    def revision_strictly_increases_with_every_change(self) -> None:
        with self.world.db() as db:
            rows = db.execute("SELECT conversation_id, revision, last_seq FROM conversations"
                              ).fetchall()
        for c, revision, seq in rows:
            old_revision, old_seq = self.revisions.get(c, (1, 0))
            assert revision >= old_revision
            if seq > old_seq:
                assert revision > old_revision
            self.revisions[c] = (revision, seq)

    @invariant()
    def no_run_is_executed_twice(self) -> None:
        assert all(n == 1 for n in self.executed.values())
        with self.world.db() as db:
            never_started = {r for (r,) in db.execute(
                "SELECT run_id FROM runs WHERE started_at IS NULL")}
        assert not never_started & set(self.executed)

    @invariant()
    def a_stopped_run_stays_stopped_with_one_stop_event(self) -> None:
        """R7: cancelled/stopped_by_owner for good; at most one `cancelled` event a run
        (older ones may have been trimmed)."""
        with self.world.db() as db:
            rows = {r: (status, error, finished) for r, status, error, finished in db.execute(
                "SELECT run_id, status, error, finished_at FROM runs")}
            bodies = [json.loads(b) for (b,) in db.execute("SELECT body FROM events")]
        for run_id in self.stopped:
            status, error, finished = rows[run_id]
            assert (status, error) == ("cancelled", "stopped_by_owner") and finished
        ends = Counter(e["run_id"] for e in bodies if e["type"] == "run_status"
                       and e["status"] in ("succeeded", "failed", "cancelled"))
        assert all(n == 1 for n in ends.values()), ends

    @invariant()
    def the_question_events_keep_their_frozen_shape(self) -> None:
        with self.world.db() as db:
            bodies = [json.loads(b) for (b,) in db.execute("SELECT body FROM events")]
        for e in bodies:
            if e["type"] == "input_requested":
                assert set(e) == REQUESTED and isinstance(e["choices"], list)
            elif e["type"] == "input_resolved":
                assert set(e) == RESOLVED
                assert e["outcome"] in {"answered", "cancelled", "expired", "invalidated"}


QuestionMachine.TestCase.settings = settings(
    max_examples=100, stateful_step_count=40, deadline=None,
    suppress_health_check=[HealthCheck.too_slow])
test_question_lifecycle_invariants = QuestionMachine.TestCase
