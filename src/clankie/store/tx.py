"""One transaction's reads and writes: rows in, `clankie.core.model` values out, and back.

Owns every SQL statement outside the schema. `save` writes a `Change` and enforces the
bounds when writing: the newest `receipt_limit` receipts per conversation (R1) and the
newest `event_retention` events per conversation (V1); nothing grows without bound there.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from clankie.core.lifecycle import Change, Restarted
from clankie.core.model import (
    Actor,
    Answer,
    Author,
    Conversation,
    ConversationKind,
    CredentialKind,
    DeviceMode,
    Event,
    Message,
    Option,
    Question,
    QuestionKind,
    Receipt,
    Run,
    RunKind,
    RunStatus,
    Status,
    WorkspaceIdentity,
    iso,
)


def _time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text)


@dataclass(frozen=True, slots=True)
class CredentialRow:
    credential_id: str
    owner_id: str
    kind: CredentialKind
    mode: DeviceMode | None
    name: str
    token_hash: str
    created_at: datetime
    rotated_at: datetime | None


@dataclass(frozen=True, slots=True)
class LeaseRow:
    lease_id: str
    credential_id: str
    acquired_at: datetime
    expires_at: datetime

    def held_by(self, credential_id: str, now: datetime) -> bool:
        """Whether this is that credential's unexpired Take Control lease at `now`."""
        return self.credential_id == credential_id and now < self.expires_at


@dataclass(frozen=True, slots=True)
class EventPage:
    events: list[dict[str, Any]]
    last_seq: int
    trimmed_through: int


@dataclass(frozen=True, slots=True)
class ToolCallRow:
    conversation_id: str
    run_id: str
    step: int
    call_id: str
    name: str
    arguments: str
    result: str
    at: datetime


@dataclass(frozen=True, slots=True)
class QuestionEnd:
    """How a question stands now, as much as a later run is told (SPEC R5)."""

    request_id: str
    status: Status
    reason: str | None
    expires_at: datetime
    option_label: str | None  # of the chosen option
    text: str | None  # of a text answer
    answered_by: CredentialKind | None


@dataclass(frozen=True, slots=True)
class ProjectRow:
    project_id: str
    name: str
    root: WorkspaceIdentity
    created_at: datetime


_CONVERSATION_COLUMNS = (
    "conversation_id, kind, owner_id, workspace_path, workspace_dev, workspace_ino, "
    "incarnation, revision, native_owner, created_at, workspace_birth")
_NEXT_ACTIVITY = "(SELECT coalesce(max(activity), 0) + 1 FROM conversations)"
_RUN_COLUMNS = ("run_id, conversation_id, kind, status, incarnation, created_at, receipt_id, "
                "error, started_at, finished_at")


class Tx:
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self.saved: list[Change] = []  # the changes this operation saved
        self.touched: set[str] = set()  # conversations whose events it added

    def _one(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._conn.execute(sql, args).fetchone()
        return row

    def _all(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, args).fetchall()

    def _run(self, sql: str, *args: Any) -> int:
        return self._conn.execute(sql, args).rowcount

    def _returned(self, sql: str, *args: Any) -> tuple[Any, ...] | None:
        """The row a `... RETURNING` statement returned, if any (run to its end)."""
        rows = self._all(sql, *args)
        return rows[0] if rows else None

    # ----------------------------------------------------------------- owners, credentials

    def active_owner(self) -> str | None:
        row = self._one("SELECT owner_id FROM owners WHERE revoked_at IS NULL "
                        "ORDER BY rowid DESC LIMIT 1")
        return None if row is None else str(row[0])

    def owner_revoked(self, owner_id: str) -> bool:
        row = self._one("SELECT revoked_at FROM owners WHERE owner_id = ?", owner_id)
        return row is None or row[0] is not None

    def insert_owner(self, owner_id: str, now: datetime) -> None:
        self._run("INSERT INTO owners (owner_id, created_at) VALUES (?, ?)", owner_id, iso(now))

    def revoke_owner(self, owner_id: str, now: datetime) -> None:
        self._run("UPDATE owners SET revoked_at = ? WHERE owner_id = ? AND revoked_at IS NULL",
                  iso(now), owner_id)

    def insert_credential(self, c: CredentialRow) -> None:
        self._run("INSERT INTO credentials (credential_id, owner_id, kind, mode, name, token_hash, "
                  "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)", c.credential_id, c.owner_id,
                  c.kind.value, c.mode.value if c.mode else None, c.name, c.token_hash,
                  iso(c.created_at))

    _CREDENTIAL = ("SELECT credential_id, owner_id, kind, mode, name, token_hash, created_at, "
                   "rotated_at FROM credentials ")

    def credential_by_hash(self, token_hash: str) -> CredentialRow | None:
        row = self._one(self._CREDENTIAL + "WHERE token_hash = ?", token_hash)
        return None if row is None else _credential(row)

    def credential(self, credential_id: str) -> CredentialRow | None:
        row = self._one(self._CREDENTIAL + "WHERE credential_id = ?", credential_id)
        return None if row is None else _credential(row)

    def credentials(self, kind: CredentialKind | None = None) -> list[CredentialRow]:
        if kind is None:
            return [_credential(r) for r in self._all(self._CREDENTIAL + "ORDER BY rowid")]
        return [_credential(r) for r in
                self._all(self._CREDENTIAL + "WHERE kind = ? ORDER BY rowid", kind.value)]

    def replace_token(self, credential_id: str, token_hash: str, now: datetime) -> None:
        self._run("UPDATE credentials SET token_hash = ?, rotated_at = ? WHERE credential_id = ?",
                  token_hash, iso(now), credential_id)

    def lease(self) -> LeaseRow | None:
        row = self._one("SELECT lease_id, credential_id, acquired_at, expires_at "
                        "FROM take_control WHERE slot = 1")
        return None if row is None else LeaseRow(row[0], row[1], _when(row[2]), _when(row[3]))

    def set_lease(self, lease: LeaseRow) -> None:
        self._run("INSERT INTO take_control (slot, lease_id, credential_id, acquired_at, "
                  "expires_at) VALUES (1, ?, ?, ?, ?) ON CONFLICT (slot) DO UPDATE SET "
                  "lease_id = excluded.lease_id, credential_id = excluded.credential_id, "
                  "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
                  lease.lease_id, lease.credential_id, iso(lease.acquired_at),
                  iso(lease.expires_at))

    def clear_lease(self, credential_id: str) -> None:
        self._run("DELETE FROM take_control WHERE credential_id = ?", credential_id)

    # ------------------------------------------------------------------------ conversations

    def conversation(self, conversation_id: str) -> Conversation | None:
        row = self._one(f"SELECT {_CONVERSATION_COLUMNS} FROM conversations "
                        "WHERE conversation_id = ?", conversation_id)
        return None if row is None else _conversation(row)

    def conversations(self, owner_id: str | None = None) -> list[Conversation]:
        if owner_id is None:
            rows = self._all(f"SELECT {_CONVERSATION_COLUMNS} FROM conversations ORDER BY rowid")
        else:
            rows = self._all(f"SELECT {_CONVERSATION_COLUMNS} FROM conversations "
                             "WHERE owner_id = ? ORDER BY rowid", owner_id)
        return [_conversation(r) for r in rows]

    def conversation_page(self, owner_id: str, limit: int, after: int | None,
                          prefix: str | None) -> list[tuple[int, Conversation]]:
        """Up to `limit` conversations of an owner, latest activity first, each with its
        activity mark; `after` is the mark of the previous page's last one. With a prefix
        the ID index finds the few candidates (`+owner_id` keeps SQLite on it)."""
        where, args = ["+owner_id = ?" if prefix else "owner_id = ?"], [owner_id]
        if after is not None:
            where.append("activity < ?")
            args.append(after)
        if prefix:
            where.append("conversation_id >= ? AND conversation_id < ?")
            args += [prefix, prefix + "\U0010ffff"]
        rows = self._all(f"SELECT activity, {_CONVERSATION_COLUMNS} FROM conversations "
                         f"WHERE {' AND '.join(where)} ORDER BY activity DESC LIMIT ?",
                         *args, limit)
        return [(r[0], _conversation(r[1:])) for r in rows]

    def insert_conversation(self, c: Conversation) -> None:
        ws = c.workspace
        self._run(f"INSERT INTO conversations ({_CONVERSATION_COLUMNS}, activity) "
                  f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {_NEXT_ACTIVITY})",
                  c.conversation_id, c.kind.value, c.owner_id, ws.path if ws else None,
                  ws.dev if ws else None, ws.ino if ws else None, c.incarnation, c.revision,
                  c.native_owner, iso(c.created_at), ws.birth if ws else None)

    # ---------------------------------------------------------------------------- questions

    _QUESTION = ("SELECT request_id, conversation_id, kind, prompt, allow_text, status, "
                 "incarnation, workspace_path, workspace_dev, workspace_ino, asked_at, "
                 "expires_at, asked_by_run, receipt_id, reason, answer_option_id, answer_text, "
                 "answered_by_id, answered_by_kind, run_id, resolved_at, resolved_revision, "
                 "workspace_birth FROM questions ")

    def pending_question(self, conversation_id: str) -> Question | None:
        row = self._one(self._QUESTION + "WHERE conversation_id = ? AND status = 'pending'",
                        conversation_id)
        return None if row is None else self._question(row)

    def question(self, conversation_id: str, request_id: str) -> Question | None:
        """The pending question or one in the recent receipt set; evicted ones are gone."""
        row = self._one(self._QUESTION + "WHERE conversation_id = ? AND request_id = ?",
                        conversation_id, request_id)
        return None if row is None else self._question(row)

    def question_by_receipt(self, receipt_id: str) -> Question | None:
        row = self._one(self._QUESTION + "WHERE receipt_id = ?", receipt_id)
        return None if row is None else self._question(row)

    def latest_ended_question(self, conversation_id: str) -> Question | None:
        row = self._one(self._QUESTION + "WHERE conversation_id = ? AND status != 'pending' "
                        "ORDER BY resolved_revision DESC, rowid DESC LIMIT 1", conversation_id)
        return None if row is None else self._question(row)

    def question_ends(self, conversation_id: str, request_ids: Sequence[str]
                      ) -> dict[str, QuestionEnd]:
        """How each of these questions stands, in one query; evicted ones are absent."""
        if not request_ids:
            return {}
        rows = self._all(
            "SELECT q.request_id, q.status, q.reason, q.expires_at, o.label, q.answer_text, "
            "q.answered_by_kind FROM questions q LEFT JOIN options o "
            "ON o.option_id = q.answer_option_id AND o.request_id = q.request_id "
            "WHERE q.conversation_id = ? AND q.request_id IN (SELECT value FROM json_each(?))",
            conversation_id, json.dumps(list(request_ids)))
        return {r[0]: QuestionEnd(r[0], Status(r[1]), r[2], _when(r[3]), r[4], r[5],
                                  None if r[6] is None else CredentialKind(r[6]))
                for r in rows}

    def _question(self, row: tuple[Any, ...]) -> Question:
        options = tuple(Option(o[0], o[1], o[2]) for o in self._all(
            "SELECT option_id, label, description FROM options WHERE request_id = ? "
            "ORDER BY position", row[0]))
        status = Status(row[5])
        receipt = None
        if status is not Status.PENDING:
            answer = None
            if row[15] is not None or row[16] is not None:
                answer = Answer(option_id=row[15], text=row[16])
            actor = None if row[17] is None else Actor(row[17], CredentialKind(row[18]))
            receipt = Receipt(row[13], row[0], status, row[14], answer, actor, row[19],
                              _when(row[20]), row[21])
        return Question(
            request_id=row[0], conversation_id=row[1], kind=QuestionKind(row[2]), prompt=row[3],
            options=options, allow_text=bool(row[4]), status=status, incarnation=row[6],
            workspace=WorkspaceIdentity(row[7], row[8], row[9], row[22]),
            asked_at=_when(row[10]),
            expires_at=_when(row[11]), asked_by_run=row[12], receipt=receipt)

    # --------------------------------------------------------------------------------- runs

    def run(self, run_id: str) -> Run | None:
        row = self._one(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", run_id)
        return None if row is None else _run(row)

    def unfinished_runs(self, conversation_id: str) -> list[Run]:
        """A conversation's queued and running runs, oldest first."""
        return [_run(r) for r in self._all(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE conversation_id = ? AND {_UNFINISHED} "
            "ORDER BY rowid", conversation_id)]

    def started_before(self, run: Run) -> int:
        """How many runs of the conversation started before this one (runs start in order)."""
        row = self._one("SELECT count(*) FROM runs WHERE conversation_id = ? AND started_at IS "
                        "NOT NULL AND rowid < (SELECT rowid FROM runs WHERE run_id = ?)",
                        run.conversation_id, run.run_id)
        assert row is not None
        return int(row[0])

    # -------------------------------------------------------------------- messages, events

    def messages(self, conversation_id: str, limit: int) -> list[tuple[int, Message]]:
        """The newest `limit` messages, oldest first, each with its position (rowid)."""
        rows = self._all("SELECT rowid, message_id, conversation_id, author, text, at "
                         "FROM messages WHERE conversation_id = ? ORDER BY rowid DESC LIMIT ?",
                         conversation_id, limit)
        return [(r[0], Message(r[1], r[2], Author(r[3]), r[4], _when(r[5])))
                for r in reversed(rows)]

    def insert_tool_call(self, call: ToolCallRow, keep: int) -> None:
        """Record one tool call of a run, placed after the latest message; keep the newest
        `keep` calls of the conversation."""
        self._run("INSERT INTO tool_calls (conversation_id, run_id, step, call_id, name, "
                  "arguments, result, after_message, at) VALUES (?, ?, ?, ?, ?, ?, ?, "
                  "coalesce((SELECT max(rowid) FROM messages WHERE conversation_id = ?), 0), ?)",
                  call.conversation_id, call.run_id, call.step, call.call_id, call.name,
                  call.arguments, call.result, call.conversation_id, iso(call.at))
        self._run("DELETE FROM tool_calls WHERE conversation_id = ? AND rowid <= (SELECT rowid "
                  "FROM tool_calls WHERE conversation_id = ? ORDER BY rowid DESC LIMIT 1 "
                  "OFFSET ?)", call.conversation_id, call.conversation_id, keep)

    def tool_calls_since(self, conversation_id: str, message_position: int
                         ) -> list[tuple[int, ToolCallRow]]:
        """Tool calls placed at or after a message position, oldest first, with it."""
        rows = self._all("SELECT after_message, conversation_id, run_id, step, call_id, name, "
                         "arguments, result, at FROM tool_calls WHERE conversation_id = ? AND "
                         "after_message >= ? ORDER BY rowid", conversation_id, message_position)
        return [(r[0], ToolCallRow(r[1], r[2], r[3], r[4], r[5], r[6], r[7], _when(r[8])))
                for r in rows]

    def append_events(self, conversation_id: str, events: Iterable[Event], retention: int
                      ) -> None:
        """Events that record no change of the conversation (its revision stays)."""
        batch = list(events)
        numbered = self._returned("UPDATE conversations SET last_seq = last_seq + ? "
                                  "WHERE conversation_id = ? RETURNING last_seq, trimmed_through",
                                  len(batch), conversation_id)
        assert numbered is not None
        self._write_events(conversation_id, batch, numbered, retention)

    def events_after(self, conversation_id: str, after: int, limit: int) -> EventPage:
        bounds = self._one("SELECT last_seq, trimmed_through FROM conversations "
                           "WHERE conversation_id = ?", conversation_id)
        assert bounds is not None
        rows = self._all("SELECT body FROM events WHERE conversation_id = ? AND seq > ? "
                         "ORDER BY seq LIMIT ?", conversation_id, after, limit)
        return EventPage([json.loads(r[0]) for r in rows], bounds[0], bounds[1])

    # ----------------------------------------------------------------------- pane, projects

    def set_pane_metadata(self, conversation_id: str, key: str, value: str, now: datetime) -> None:
        self._run("INSERT INTO pane_metadata (conversation_id, key, value, updated_at) "
                  "VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id, key) DO UPDATE SET "
                  "value = excluded.value, updated_at = excluded.updated_at",
                  conversation_id, key, value, iso(now))

    def insert_project(self, p: ProjectRow) -> None:
        self._run("INSERT INTO projects (project_id, name, root_path, root_dev, root_ino, "
                  "created_at, root_birth) VALUES (?, ?, ?, ?, ?, ?, ?)", p.project_id, p.name,
                  p.root.path, p.root.dev, p.root.ino, iso(p.created_at), p.root.birth)

    def projects(self) -> list[ProjectRow]:
        return [ProjectRow(r[0], r[1], WorkspaceIdentity(r[2], r[3], r[4], r[6]), _when(r[5]))
                for r in self._all("SELECT project_id, name, root_path, root_dev, root_ino, "
                                   "created_at, root_birth FROM projects ORDER BY rowid")]

    # ------------------------------------------------------------------------------- saving

    def save(self, change: Change, *, receipt_limit: int, event_retention: int) -> None:
        """Write one conversation's change; the revision check guards against lost updates."""
        self.saved.append(change)
        c = change.conversation
        ws = c.workspace
        numbered = self._returned(  # the events' numbers are taken in the same statement
            "UPDATE conversations SET revision = ?, incarnation = ?, native_owner = ?, "
            "workspace_path = ?, workspace_dev = ?, workspace_ino = ?, workspace_birth = ?, "
            f"activity = {_NEXT_ACTIVITY}, last_seq = last_seq + ? "
            "WHERE conversation_id = ? AND revision = ? RETURNING last_seq, trimmed_through",
            c.revision, c.incarnation, c.native_owner, ws.path if ws else None,
            ws.dev if ws else None, ws.ino if ws else None, ws.birth if ws else None,
            len(change.events), c.conversation_id, c.revision - 1)
        if numbered is None:
            raise sqlite3.IntegrityError(f"conversation {c.conversation_id} moved concurrently")
        for question in change.questions:
            self._save_question(question)
        for run in change.runs:
            self._save_run(run)
        for message in change.messages:
            self._run("INSERT INTO messages (message_id, conversation_id, author, text, at) "
                      "VALUES (?, ?, ?, ?, ?)", message.message_id, message.conversation_id,
                      message.author.value, message.text, iso(message.at))
        self._write_events(c.conversation_id, change.events, numbered, event_retention)
        if any(q.status is not Status.PENDING for q in change.questions):
            self._evict_receipts(c.conversation_id, receipt_limit)

    def _save_question(self, q: Question) -> None:
        r = q.receipt
        if r is None:
            self._run(
                "INSERT INTO questions (request_id, conversation_id, kind, prompt, allow_text, "
                "status, incarnation, workspace_path, workspace_dev, workspace_ino, asked_at, "
                "expires_at, asked_by_run, workspace_birth) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                q.request_id, q.conversation_id, q.kind.value, q.prompt, int(q.allow_text),
                q.status.value, q.incarnation, q.workspace.path, q.workspace.dev,
                q.workspace.ino, iso(q.asked_at), iso(q.expires_at), q.asked_by_run,
                q.workspace.birth)
            self._conn.executemany(
                "INSERT INTO options (option_id, request_id, position, label, description) "
                "VALUES (?, ?, ?, ?, ?)",
                [(o.option_id, q.request_id, i, o.label, o.description)
                 for i, o in enumerate(q.options)])
            return
        answer, actor = r.answer, r.answered_by
        updated = self._run(
            "UPDATE questions SET status = ?, receipt_id = ?, reason = ?, answer_option_id = ?, "
            "answer_text = ?, answered_by_id = ?, answered_by_kind = ?, run_id = ?, "
            "resolved_at = ?, resolved_revision = ? WHERE request_id = ? AND status = 'pending'",
            q.status.value, r.receipt_id, r.reason, answer.option_id if answer else None,
            answer.text if answer else None, actor.credential_id if actor else None,
            actor.kind.value if actor else None, r.run_id, iso(r.resolved_at), r.revision,
            q.request_id)
        if updated != 1:
            raise sqlite3.IntegrityError(f"question {q.request_id} is no longer pending")

    def _save_run(self, r: Run) -> None:
        self._run(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
            "error = excluded.error, started_at = excluded.started_at, "
            "finished_at = excluded.finished_at",
            r.run_id, r.conversation_id, r.kind.value, r.status.value, r.incarnation,
            iso(r.created_at), r.receipt_id, r.error,
            iso(r.started_at) if r.started_at else None,
            iso(r.finished_at) if r.finished_at else None)

    def _write_events(self, conversation_id: str, events: Sequence[Event],
                      numbered: tuple[Any, ...], retention: int) -> None:
        """Events numbered up to `last_seq`, which already counts them; the oldest beyond
        the retention are trimmed (V1)."""
        last, trimmed = int(numbered[0]), int(numbered[1])
        if not events:
            return
        self.touched.add(conversation_id)
        first = last - len(events) + 1
        self._conn.executemany(
            "INSERT INTO events (conversation_id, seq, body) VALUES (?, ?, ?)",
            [(conversation_id, seq, json.dumps(event.body(seq), ensure_ascii=False))
             for seq, event in enumerate(events, start=first)])
        keep_from = last - retention
        if keep_from > trimmed:
            self._run("DELETE FROM events WHERE conversation_id = ? AND seq <= ?",
                      conversation_id, keep_from)
            self._run("UPDATE conversations SET trimmed_through = ? WHERE conversation_id = ?",
                      keep_from, conversation_id)

    def restart_all(self, restarted: Restarted, now: datetime, *, receipt_limit: int,
                    event_retention: int) -> tuple[int, int]:
        """SPEC R3 for every conversation at once, set-based (start-up: 10,000 conversations
        in well under a second): each one with a pending question or an unfinished run gets
        what `lifecycle.restart` gives it one at a time (the tests compare the two row by
        row): one revision, the question's receipt, the runs failed, their events in order,
        its next activity mark (in ID order), the bounds of `save`. Receipt IDs are random
        UUIDs made by SQLite (no call back into Python per row). Returns (questions, runs).
        """
        args = {"question": restarted.question.value, "reason": restarted.reason,
                "run": restarted.run.value, "error": restarted.error, "now": iso(now),
                "retention": event_retention, "limit": receipt_limit}
        for statement in _RESTART_ALL:
            self._conn.execute(statement, args)  # each takes the names it uses
        plan = self._all("SELECT conversation_id, request_id IS NOT NULL, runs "
                         "FROM temp.restart_plan")
        self._conn.execute("DROP TABLE temp.restart_plan")
        self.touched.update(row[0] for row in plan)
        return sum(row[1] for row in plan), sum(row[2] for row in plan)

    def _evict_receipts(self, conversation_id: str, limit: int) -> None:
        self._run(
            "DELETE FROM questions WHERE conversation_id = ? AND status != 'pending' AND "
            "request_id NOT IN (SELECT request_id FROM questions WHERE conversation_id = ? AND "
            "status != 'pending' ORDER BY resolved_revision DESC, rowid DESC LIMIT ?)",
            conversation_id, conversation_id, limit)


_UNFINISHED = "status IN ('queued', 'running')"
# A random (version 4) UUID, as `uuid.uuid4()` writes it, from SQLite's own CSPRNG.
_NEW_UUID = ("lower(printf('%s-%s-4%s-%x%s-%s', hex(randomblob(4)), hex(randomblob(2)), "
             "substr(hex(randomblob(2)), 2), 8 + abs(random() % 4), "
             "substr(hex(randomblob(2)), 2), hex(randomblob(6))))")
# `Tx.restart_all`, in order: the plan (one row per conversation to restart, with its new
# revision and activity mark), the events (after the last, question first, then runs
# oldest first), the event bound, the conversations, the questions, the runs, the receipt
# bound. The event bodies are those of `InputResolved.body` and `RunStatusChanged.body`.
_RESTART_ALL = (
    f"""CREATE TEMP TABLE restart_plan AS
        SELECT c.conversation_id, c.revision + 1 AS revision, c.last_seq, c.trimmed_through,
               q.request_id,
               (SELECT count(*) FROM runs r WHERE r.conversation_id = c.conversation_id
                AND r.{_UNFINISHED}) AS runs,
               (SELECT coalesce(max(activity), 0) FROM conversations)
               + row_number() OVER (ORDER BY c.conversation_id) AS activity
        FROM conversations c
        LEFT JOIN questions q ON q.conversation_id = c.conversation_id AND q.status = 'pending'
        WHERE c.conversation_id IN (SELECT conversation_id FROM questions
                                    WHERE status = 'pending'
                                    UNION SELECT conversation_id FROM runs WHERE {_UNFINISHED})""",
    """INSERT INTO events (conversation_id, seq, body)
        SELECT conversation_id, last_seq + 1,
               json_object('type', 'input_resolved', 'seq', last_seq + 1,
                           'conversation_id', conversation_id, 'request_id', request_id,
                           'outcome', :question, 'at', :now)
        FROM temp.restart_plan WHERE request_id IS NOT NULL""",
    f"""INSERT INTO events (conversation_id, seq, body)
        SELECT conversation_id, seq,
               json_object('type', 'run_status', 'seq', seq, 'conversation_id',
                           conversation_id, 'run_id', run_id, 'kind', kind, 'status', :run,
                           'error', :error, 'at', :now)
        FROM (SELECT r.conversation_id, r.run_id, r.kind,
                     p.last_seq + (p.request_id IS NOT NULL)
                     + row_number() OVER (PARTITION BY r.conversation_id ORDER BY r.rowid) AS seq
              FROM runs r JOIN temp.restart_plan p USING (conversation_id)
              WHERE r.{_UNFINISHED})""",
    """UPDATE temp.restart_plan SET last_seq = last_seq + (request_id IS NOT NULL) + runs""",
    """DELETE FROM events
        WHERE conversation_id IN (SELECT conversation_id FROM temp.restart_plan
                                  WHERE last_seq - :retention > trimmed_through)
          AND seq <= (SELECT p.last_seq - :retention FROM temp.restart_plan p
                      WHERE p.conversation_id = events.conversation_id)""",
    """UPDATE conversations
        SET revision = p.revision, activity = p.activity, last_seq = p.last_seq,
            trimmed_through = max(p.trimmed_through, p.last_seq - :retention)
        FROM temp.restart_plan p WHERE conversations.conversation_id = p.conversation_id""",
    f"""UPDATE questions
        SET status = :question, receipt_id = {_NEW_UUID}, reason = :reason,
            resolved_at = :now, resolved_revision = p.revision
        FROM temp.restart_plan p
        WHERE questions.request_id = p.request_id AND questions.status = 'pending'""",
    f"""UPDATE runs SET status = :run, error = :error, finished_at = :now
        WHERE {_UNFINISHED}""",
    """DELETE FROM questions WHERE rowid IN (
        SELECT id FROM (
            SELECT q.rowid AS id, row_number() OVER (
                PARTITION BY q.conversation_id
                ORDER BY q.resolved_revision DESC, q.rowid DESC) AS newer
            FROM questions q JOIN temp.restart_plan p USING (conversation_id)
            WHERE p.request_id IS NOT NULL AND q.status != 'pending')
        WHERE newer > :limit)""",
)


def _credential(row: tuple[Any, ...]) -> CredentialRow:
    return CredentialRow(row[0], row[1], CredentialKind(row[2]),
                         None if row[3] is None else DeviceMode(row[3]), row[4], row[5],
                         _when(row[6]), _time(row[7]))


def _conversation(row: tuple[Any, ...]) -> Conversation:
    ws = None if row[3] is None else WorkspaceIdentity(row[3], row[4], row[5], row[10])
    return Conversation(row[0], ConversationKind(row[1]), row[2], ws, row[6], row[7], row[8],
                        _when(row[9]))


def _run(row: tuple[Any, ...]) -> Run:
    return Run(run_id=row[0], conversation_id=row[1], kind=RunKind(row[2]),
               status=RunStatus(row[3]), incarnation=row[4], created_at=_when(row[5]),
               receipt_id=row[6], error=row[7], started_at=_time(row[8]),
               finished_at=_time(row[9]))
