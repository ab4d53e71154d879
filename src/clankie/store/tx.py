"""One transaction's reads and writes: rows in, `clankie.core.model` values out, and back.

Owns every SQL statement outside the schema. Two types: `ReadTx` has only readers (what
`Store.read` gives: mypy rejects a write through it, and its connection refuses one), and
`WriteTx` adds the writers (`Store.write`). Rows are read by column name. `save` writes a
`Change` and enforces the bounds when writing: the newest `receipt_limit` receipts per
conversation (R1) and the newest `event_retention` events per conversation (V1); nothing
grows without bound there. `restart_all` executes the core's `RestartPlan` set-based.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from clankie.core.lifecycle import RUN_TRANSITIONS, Change, RestartPlan
from clankie.core.model import (
    Actor,
    Answer,
    Asker,
    Author,
    Conversation,
    ConversationKind,
    CredentialKind,
    DeviceMode,
    Event,
    EventBody,
    Message,
    MessagePosted,
    Option,
    Partial,
    Question,
    QuestionKind,
    QuestionStatus,
    Receipt,
    Run,
    RunKind,
    RunStatus,
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
    revoked_at: datetime | None = None
    last_used_at: datetime | None = None
    user_agent: str | None = None  # a browser paired by a code: its User-Agent (H2)


@dataclass(frozen=True, slots=True)
class PairingRow:
    """A pending (or used) pairing of SPEC H2: the code itself is never stored."""

    pairing_id: str
    owner_id: str
    code_hash: str
    name: str
    mode: DeviceMode
    word: str
    created_at: datetime
    expires_at: datetime
    used_at: datetime | None = None


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
    events: list[EventBody]  # as `Event.body` wrote them
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
    status: QuestionStatus
    reason: str | None
    expires_at: datetime
    option_label: str | None  # of the chosen option
    text: str | None  # of a text answer
    answered_by: CredentialKind | None
    continuation: tuple[str, str | None] | None = None  # (status, error) when it did not finish


@dataclass(frozen=True, slots=True)
class ListedConversation:
    """A conversation as the list shows it (SPEC section 10 "Finding what waits")."""

    activity: int  # its activity mark: the list's order and cursor
    conversation: Conversation
    activity_at: datetime  # when the mark last moved
    archived: bool
    pending: tuple[str, str, datetime] | None  # the waiting question: ID, prompt, expiry
    run: RunStatus | None  # running, else queued, else none


@dataclass(frozen=True, slots=True)
class ProjectRow:
    project_id: str
    name: str
    root: WorkspaceIdentity
    created_at: datetime


_CONVERSATION_COLUMNS = (
    "conversation_id, kind, owner_id, workspace_path, workspace_dev, workspace_ino, "
    "incarnation, revision, native_owner, created_at, workspace_birth, agent, agent_client")
_CONVERSATION_READ = (f"{_CONVERSATION_COLUMNS}, (SELECT name FROM credentials "
                      "WHERE credential_id = agent) AS agent_name")
_CONVERSATION = f"SELECT {_CONVERSATION_READ} FROM conversations "
_LISTED_READ = (", ".join(f"c.{name}" for name in _CONVERSATION_COLUMNS.split(", ")) +
                ", (SELECT name FROM credentials WHERE credential_id = c.agent) AS agent_name")
# Archived: the owner archived it, and nothing has happened in it since (migration 9).
_ARCHIVED = "(c.archived_activity IS c.activity)"
_NEXT_ACTIVITY = "(SELECT coalesce(max(activity), 0) + 1 FROM conversations)"
_RUN_COLUMNS = ("run_id, conversation_id, kind, status, incarnation, created_at, receipt_id, "
                "error, started_at, finished_at")
_CREDENTIAL = ("SELECT credential_id, owner_id, kind, mode, name, token_hash, created_at, "
               "rotated_at, revoked_at, last_used_at, user_agent FROM credentials ")
_QUESTION = ("SELECT request_id, conversation_id, kind, prompt, allow_text, status, "
             "incarnation, workspace_path, workspace_dev, workspace_ino, asked_at, "
             "expires_at, asked_by_run, receipt_id, reason, answer_option_id, answer_text, "
             "answered_by_id, answered_by_kind, run_id, resolved_at, resolved_revision, "
             "workspace_birth, asked_by_agent, asked_by_client, (SELECT name FROM credentials "
             "WHERE credential_id = asked_by_agent) AS asker_name FROM questions ")


class ReadTx:
    """One consistent read snapshot: readers only. Its connection is `query_only`, so a
    write through it fails even from code that mypy does not check."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def _query(self, sql: str, args: tuple[Any, ...]) -> sqlite3.Cursor:
        """A statement's cursor, its rows read by column name."""
        cursor = self._conn.cursor()
        cursor.row_factory = sqlite3.Row
        return cursor.execute(sql, args)

    def _one(self, sql: str, *args: Any) -> sqlite3.Row | None:
        row: sqlite3.Row | None = self._query(sql, args).fetchone()
        return row

    def _all(self, sql: str, *args: Any) -> list[sqlite3.Row]:
        rows: list[sqlite3.Row] = self._query(sql, args).fetchall()
        return rows

    # ----------------------------------------------------------------- owners, credentials

    def active_owner(self) -> str | None:
        row = self._one("SELECT owner_id FROM owners WHERE revoked_at IS NULL "
                        "ORDER BY rowid DESC LIMIT 1")
        return None if row is None else str(row["owner_id"])

    def owner_revoked(self, owner_id: str) -> bool:
        row = self._one("SELECT revoked_at FROM owners WHERE owner_id = ?", owner_id)
        return row is None or row["revoked_at"] is not None

    def credential_by_hash(self, token_hash: str) -> CredentialRow | None:
        row = self._one(_CREDENTIAL + "WHERE token_hash = ?", token_hash)
        return None if row is None else _as_credential(row)

    def credential(self, credential_id: str) -> CredentialRow | None:
        row = self._one(_CREDENTIAL + "WHERE credential_id = ?", credential_id)
        return None if row is None else _as_credential(row)

    def credentials(self) -> list[CredentialRow]:
        return [_as_credential(r) for r in self._all(_CREDENTIAL + "ORDER BY rowid")]

    def live_tokens(self) -> dict[str, bool]:
        """The hash of every live token (not revoked, its owner not revoked), each with
        whether it is a browser's (paired by a code, H3)."""
        return {row[0]: bool(row[1]) for row in self._all(
            "SELECT c.token_hash, EXISTS (SELECT 1 FROM pairings p WHERE p.pairing_id = "
            "c.credential_id AND p.used_at IS NOT NULL) FROM credentials c JOIN owners o "
            "ON o.owner_id = c.owner_id WHERE c.revoked_at IS NULL AND o.revoked_at IS NULL")}

    def paired_by_code(self, credential_id: str) -> bool:
        """Whether this credential was made by a pairing code: a browser's (H3)."""
        return self._one("SELECT 1 FROM pairings WHERE pairing_id = ? AND used_at IS NOT NULL",
                         credential_id) is not None

    def pairing_by_hash(self, code_hash: str) -> PairingRow | None:
        row = self._one("SELECT pairing_id, owner_id, code_hash, name, mode, word, created_at, "
                        "expires_at, used_at FROM pairings WHERE code_hash = ?", code_hash)
        return None if row is None else PairingRow(
            row["pairing_id"], row["owner_id"], row["code_hash"], row["name"],
            DeviceMode(row["mode"]), row["word"], _when(row["created_at"]),
            _when(row["expires_at"]), _time(row["used_at"]))

    def lease(self) -> LeaseRow | None:
        row = self._one("SELECT lease_id, credential_id, acquired_at, expires_at "
                        "FROM take_control WHERE slot = 1")
        return None if row is None else LeaseRow(row["lease_id"], row["credential_id"],
                                                 _when(row["acquired_at"]),
                                                 _when(row["expires_at"]))

    # ------------------------------------------------------------------------ conversations

    def conversation(self, conversation_id: str) -> Conversation | None:
        row = self._one(_CONVERSATION + "WHERE conversation_id = ?", conversation_id)
        return None if row is None else _as_conversation(row)

    def conversations(self, owner_id: str) -> list[Conversation]:
        return [_as_conversation(r) for r in self._all(
            _CONVERSATION + "WHERE owner_id = ? ORDER BY rowid", owner_id)]

    def conversation_page(self, owner_id: str, limit: int, after: int | None,
                          prefix: str | None, *, now: datetime, archived: bool = False,
                          within: Sequence[str] | None = None, waiting: bool = False
                          ) -> list[ListedConversation]:
        """Up to `limit` conversations of an owner, latest activity first, each with its
        activity mark, its question still waiting and its run; `after` is the mark of the
        previous page's last one. One statement, whatever the page: the pending question
        and the unfinished runs are found through their partial indexes. With a prefix
        the ID index finds the few candidates (`+owner_id` keeps SQLite on it). Archived
        ones only with `archived`; `within`: only those bound to one of these paths, the
        longest (nearest) first; `waiting`: only those with a question waiting."""
        where = ["+c.owner_id = ?" if prefix else "c.owner_id = ?"]
        args: list[str | int] = [iso(now), owner_id]
        if after is not None:
            where.append("c.activity < ?")
            args.append(after)
        if prefix:
            where.append("c.conversation_id >= ? AND c.conversation_id < ?")
            args += [prefix, prefix + "\U0010ffff"]
        if not archived:
            where.append(f"NOT {_ARCHIVED}")
        if within is not None:
            where.append(f"c.workspace_path IN ({', '.join('?' * len(within))})")
            args += within
        if waiting:
            where.append("q.request_id IS NOT NULL")
        order = "length(c.workspace_path) DESC, " if within is not None else ""
        rows = self._all(
            f"SELECT c.activity, c.activity_at, {_ARCHIVED} AS archived, {_LISTED_READ}, "
            "q.request_id AS pending_id, q.prompt AS pending_prompt, "
            "q.expires_at AS pending_expires_at, "
            # 'running' sorts after 'queued': a running run is said over one queued behind it
            f"(SELECT max(r.status) FROM runs r WHERE r.conversation_id = c.conversation_id "
            f"AND r.{_UNFINISHED}) AS run "
            "FROM conversations c LEFT JOIN questions q ON q.conversation_id = "
            "c.conversation_id AND q.status = 'pending' AND q.expires_at > ? "
            f"WHERE {' AND '.join(where)} ORDER BY {order}c.activity DESC LIMIT ?",
            *args, limit)
        return [ListedConversation(
            r["activity"], _as_conversation(r), _when(r["activity_at"]), bool(r["archived"]),
            None if r["pending_id"] is None else (
                r["pending_id"], r["pending_prompt"], _when(r["pending_expires_at"])),
            None if r["run"] is None else RunStatus(r["run"])) for r in rows]

    def archived(self, conversation_id: str) -> bool:
        row = self._one(f"SELECT {_ARCHIVED} FROM conversations c "
                        "WHERE conversation_id = ?", conversation_id)
        return bool(row and row[0])

    # ---------------------------------------------------------------------------- questions

    def pending_question(self, conversation_id: str) -> Question | None:
        row = self._one(_QUESTION + "WHERE conversation_id = ? AND status = 'pending'",
                        conversation_id)
        return None if row is None else self._question(row)

    def question(self, conversation_id: str, request_id: str) -> Question | None:
        """The pending question or one in the recent receipt set; evicted ones are gone."""
        row = self._one(_QUESTION + "WHERE conversation_id = ? AND request_id = ?",
                        conversation_id, request_id)
        return None if row is None else self._question(row)

    def question_by_receipt(self, receipt_id: str) -> Question | None:
        row = self._one(_QUESTION + "WHERE receipt_id = ?", receipt_id)
        return None if row is None else self._question(row)

    def agent_conversation(self, agent: str, workspace: WorkspaceIdentity
                           ) -> Conversation | None:
        """The agent conversation of this agent credential and workspace identity (P3)."""
        rows = self._all(_CONVERSATION + "WHERE kind = 'agent' AND agent = ? "
                         "AND workspace_path = ? AND workspace_dev = ? AND workspace_ino = ?",
                         agent, workspace.path, workspace.dev, workspace.ino)
        return next((c for c in map(_as_conversation, rows)
                     if c.workspace is not None and c.workspace.same_directory(workspace)), None)

    def agent_pending_count(self, agent: str) -> int:
        """How many questions this agent credential has pending, in all its conversations."""
        row = self._one("SELECT count(*) FROM questions WHERE asked_by_agent = ? "
                        "AND status = 'pending'", agent)
        return int(row[0]) if row else 0

    def question_by_id(self, request_id: str) -> Question | None:
        """A question by its ID alone (an agent names only that, P4)."""
        row = self._one(_QUESTION + "WHERE request_id = ?", request_id)
        return None if row is None else self._question(row)

    def ended_questions(self, conversation_id: str) -> list[Question]:
        """The receipts a conversation keeps (R1), newest first."""
        return [self._question(r) for r in self._all(
            _QUESTION + "WHERE conversation_id = ? AND status != 'pending' "
            "ORDER BY resolved_revision DESC, rowid DESC", conversation_id)]

    def ended_request_ids(self, conversation_id: str) -> list[str]:
        """The IDs of the ended questions whose receipts a conversation keeps (R1), newest
        first, without reading the questions."""
        return [r["request_id"] for r in self._all(
            "SELECT request_id FROM questions WHERE conversation_id = ? AND status != "
            "'pending' ORDER BY resolved_revision DESC, rowid DESC", conversation_id)]

    def collected_at(self, request_id: str) -> datetime | None:
        row = self._one("SELECT collected_at FROM collections WHERE request_id = ?", request_id)
        return None if row is None else _when(row["collected_at"])

    def latest_ended_question(self, conversation_id: str) -> Question | None:
        row = self._one(_QUESTION + "WHERE conversation_id = ? AND status != 'pending' "
                        "ORDER BY resolved_revision DESC, rowid DESC LIMIT 1", conversation_id)
        return None if row is None else self._question(row)

    def question_ends(self, conversation_id: str, request_ids: Sequence[str]
                      ) -> dict[str, QuestionEnd]:
        """How each of these questions stands, in one query; evicted ones are absent."""
        if not request_ids:
            return {}
        rows = self._all(
            "SELECT q.request_id, q.status, q.reason, q.expires_at, o.label, q.answer_text, "
            "q.answered_by_kind, u.status AS run_status, u.error AS run_error "
            "FROM questions q LEFT JOIN options o "
            "ON o.option_id = q.answer_option_id AND o.request_id = q.request_id "
            "LEFT JOIN runs u ON u.receipt_id = q.receipt_id "
            "AND u.status IN ('failed', 'cancelled') "
            "WHERE q.conversation_id = ? AND q.request_id IN (SELECT value FROM json_each(?))",
            conversation_id, json.dumps(list(request_ids)))
        return {r["request_id"]: QuestionEnd(
                    r["request_id"], QuestionStatus(r["status"]), r["reason"],
                    _when(r["expires_at"]),
                    r["label"], r["answer_text"], _kind(r["answered_by_kind"]),
                    (r["run_status"], r["run_error"]) if r["run_status"] else None)
                for r in rows}

    def _question(self, row: sqlite3.Row) -> Question:
        options = tuple(Option(o["option_id"], o["label"], o["description"]) for o in self._all(
            "SELECT option_id, label, description FROM options WHERE request_id = ? "
            "ORDER BY position", row["request_id"]))
        status = QuestionStatus(row["status"])
        receipt = None
        if status is not QuestionStatus.PENDING:
            answer = None
            if row["answer_option_id"] is not None or row["answer_text"] is not None:
                answer = Answer(option_id=row["answer_option_id"], text=row["answer_text"])
            kind = _kind(row["answered_by_kind"])
            actor = None if kind is None else Actor(row["answered_by_id"], kind)
            receipt = Receipt(row["receipt_id"], row["request_id"], status, row["reason"],
                              answer, actor, row["run_id"], _when(row["resolved_at"]),
                              row["resolved_revision"])
        return Question(
            request_id=row["request_id"], conversation_id=row["conversation_id"],
            kind=QuestionKind(row["kind"]), prompt=row["prompt"], options=options,
            allow_text=bool(row["allow_text"]), status=status, incarnation=row["incarnation"],
            workspace=WorkspaceIdentity(row["workspace_path"], row["workspace_dev"],
                                        row["workspace_ino"], row["workspace_birth"]),
            asked_at=_when(row["asked_at"]), expires_at=_when(row["expires_at"]),
            asked_by_run=row["asked_by_run"], receipt=receipt,
            asker=None if row["asked_by_agent"] is None else Asker(
                row["asked_by_agent"], row["asked_by_client"], row["asker_name"] or ""))

    # --------------------------------------------------------------------------------- runs

    def run(self, run_id: str) -> Run | None:
        row = self._one(f"SELECT {_RUN_COLUMNS} FROM runs WHERE run_id = ?", run_id)
        return None if row is None else _as_run(row)

    def unfinished_runs(self, conversation_id: str) -> list[Run]:
        """A conversation's queued and running runs, oldest first."""
        return [_as_run(r) for r in self._all(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE conversation_id = ? AND {_UNFINISHED} "
            "ORDER BY rowid", conversation_id)]

    def reply_checkpoint(self, run_id: str) -> tuple[str, str, datetime] | None:
        """A running run's last checkpoint of the reply it was writing (D9): `(reply_id,
        text, at)`."""
        row = self._one("SELECT reply_id, text, at FROM reply_checkpoints WHERE run_id = ?",
                        run_id)
        return None if row is None else (row["reply_id"], row["text"], _when(row["at"]))

    def running_runs(self) -> list[Run]:
        """Every running run, oldest first."""
        return [_as_run(r) for r in self._all(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE status = 'running' ORDER BY rowid")]

    def restart_ends(self) -> list[tuple[str, str | None, str | None]]:
        """What a restart would end now (R3), everywhere: `(conversation_id, request_id,
        None)` for each pending question and `(conversation_id, None, run_id)` for each
        unfinished continuation, in the order `restart_all` writes their events (by
        conversation, its question first, then its runs oldest first)."""
        rows = self._all(
            "SELECT conversation_id, request_id, NULL AS run_id, 0 AS rank FROM questions "
            "WHERE status = 'pending' UNION ALL "
            "SELECT conversation_id, NULL, run_id, rowid FROM runs "
            f"WHERE kind = 'continuation' AND {_UNFINISHED} "
            "ORDER BY conversation_id, rank")
        return [(r["conversation_id"], r["request_id"], r["run_id"]) for r in rows]

    def turn_runs_since(self, conversation_id: str, since: datetime) -> list[Run]:
        """The conversation's turn runs created at or after `since`, oldest first: each
        queued by the owner message written with it, at the same time (SPEC R9)."""
        return [_as_run(r) for r in self._all(
            f"SELECT {_RUN_COLUMNS} FROM runs WHERE conversation_id = ? AND kind = 'turn' "
            "AND created_at >= ? ORDER BY rowid", conversation_id, iso(since))]

    def started_before(self, run: Run) -> int:
        """How many runs of the conversation started before this one (runs start in order)."""
        row = self._one("SELECT count(*) AS started FROM runs WHERE conversation_id = ? AND "
                        "started_at IS NOT NULL AND rowid < (SELECT rowid FROM runs "
                        "WHERE run_id = ?)", run.conversation_id, run.run_id)
        assert row is not None
        return int(row["started"])

    # -------------------------------------------------------------------- messages, events

    def messages(self, conversation_id: str, limit: int) -> list[tuple[int, Message]]:
        """The newest `limit` messages, oldest first, each with its position (rowid)."""
        rows = self._all("SELECT rowid AS position, message_id, conversation_id, author, text, "
                         "at, partial FROM messages WHERE conversation_id = ? ORDER BY rowid "
                         "DESC LIMIT ?", conversation_id, limit)
        return [(r["position"], Message(r["message_id"], r["conversation_id"],
                                        Author(r["author"]), r["text"], _when(r["at"]),
                                        Partial(r["partial"]) if r["partial"] else None))
                for r in reversed(rows)]

    def tool_calls_since(self, conversation_id: str, message_position: int
                         ) -> list[tuple[int, ToolCallRow]]:
        """Tool calls placed at or after a message position, oldest first, with it."""
        rows = self._all("SELECT after_message, conversation_id, run_id, step, call_id, name, "
                         "arguments, result, at FROM tool_calls WHERE conversation_id = ? AND "
                         "after_message >= ? ORDER BY rowid", conversation_id, message_position)
        return [(r["after_message"], ToolCallRow(
                    r["conversation_id"], r["run_id"], r["step"], r["call_id"], r["name"],
                    r["arguments"], r["result"], _when(r["at"])))
                for r in rows]

    def events_after(self, conversation_id: str, after: int, limit: int) -> EventPage:
        bounds = self._one("SELECT last_seq, trimmed_through FROM conversations "
                           "WHERE conversation_id = ?", conversation_id)
        assert bounds is not None
        rows = self._all("SELECT body FROM events WHERE conversation_id = ? AND seq > ? "
                         "ORDER BY seq LIMIT ?", conversation_id, after, limit)
        return EventPage([json.loads(r["body"]) for r in rows], bounds["last_seq"],
                         bounds["trimmed_through"])

    # ------------------------------------------------------------------------------ projects

    def projects(self) -> list[ProjectRow]:
        return [ProjectRow(r["project_id"], r["name"],
                           WorkspaceIdentity(r["root_path"], r["root_dev"], r["root_ino"],
                                             r["root_birth"]), _when(r["created_at"]))
                for r in self._all("SELECT project_id, name, root_path, root_dev, root_ino, "
                                   "created_at, root_birth FROM projects ORDER BY rowid")]


class WriteTx(ReadTx):
    """One write operation: the readers and the writers. It records what it saved, which
    conversations got events and whether a credential or an owner changed, and holds what
    is to be done once it has committed (`on_commit`, done by the store's writer)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        super().__init__(conn)
        self.saved: list[Change] = []  # the changes this operation saved
        self.touched: set[str] = set()  # conversations whose events it added
        self.credentials_changed = False
        self.on_commit: list[Callable[[], None]] = []

    def _execute(self, sql: str, *args: Any) -> int:
        return self._conn.execute(sql, args).rowcount

    def _returned(self, sql: str, *args: Any) -> sqlite3.Row | None:
        """The row a `... RETURNING` statement returned, if any (run to its end)."""
        rows = self._all(sql, *args)
        return rows[0] if rows else None

    # ----------------------------------------------------------- a reply's checkpoint (D9)

    def checkpoint_reply(self, run_id: str, reply_id: str, text: str, at: datetime) -> None:
        """The reply a running run is writing, as published now: one row per run, kept
        only while the run is running (a run that ended leaves none)."""
        self._execute("INSERT INTO reply_checkpoints (run_id, reply_id, text, at) "
                      "SELECT run_id, ?, ?, ? FROM runs WHERE run_id = ? AND status = "
                      "'running' AND NOT EXISTS (SELECT 1 FROM messages WHERE message_id = ?) "
                      "ON CONFLICT (run_id) DO UPDATE SET reply_id = excluded.reply_id, "
                      "text = excluded.text, at = excluded.at",
                      reply_id, text, iso(at), run_id, reply_id)

    def drop_checkpoint(self, run_id: str) -> None:
        self._execute("DELETE FROM reply_checkpoints WHERE run_id = ?", run_id)

    def drop_checkpoints(self) -> None:
        """Every checkpoint: at start-up, once recovery has kept what they held (R3)."""
        self._execute("DELETE FROM reply_checkpoints")

    # ----------------------------------------------------------------- owners, credentials

    def insert_owner(self, owner_id: str, now: datetime) -> None:
        self.credentials_changed = True
        self._execute("INSERT INTO owners (owner_id, created_at) VALUES (?, ?)", owner_id,
                      iso(now))

    def revoke_owner(self, owner_id: str, now: datetime) -> None:
        self.credentials_changed = True
        self._execute("UPDATE owners SET revoked_at = ? WHERE owner_id = ? "
                      "AND revoked_at IS NULL", iso(now), owner_id)

    def insert_credential(self, c: CredentialRow) -> None:
        self.credentials_changed = True
        self._execute("INSERT INTO credentials (credential_id, owner_id, kind, mode, name, "
                      "token_hash, created_at, user_agent) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      c.credential_id, c.owner_id, c.kind.value,
                      c.mode.value if c.mode else None, c.name, c.token_hash,
                      iso(c.created_at), c.user_agent)

    def replace_token(self, credential_id: str, token_hash: str, now: datetime) -> None:
        self.credentials_changed = True
        self._execute("UPDATE credentials SET token_hash = ?, rotated_at = ? "
                      "WHERE credential_id = ?", token_hash, iso(now), credential_id)

    def revoke_credential(self, credential_id: str, now: datetime) -> None:
        self.credentials_changed = True
        self._execute("UPDATE credentials SET revoked_at = ? WHERE credential_id = ? "
                      "AND revoked_at IS NULL", iso(now), credential_id)

    def credential_used(self, credential_id: str, now: datetime) -> None:
        self._execute("UPDATE credentials SET last_used_at = ? WHERE credential_id = ?",
                      iso(now), credential_id)

    def insert_pairing(self, p: PairingRow) -> None:
        self._execute("INSERT INTO pairings (pairing_id, owner_id, code_hash, name, mode, word, "
                      "created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", p.pairing_id,
                      p.owner_id, p.code_hash, p.name, p.mode.value, p.word, iso(p.created_at),
                      iso(p.expires_at))

    def use_pairing(self, pairing_id: str, now: datetime) -> bool:
        """Mark the pairing used; False if it already was (a code is used at most once)."""
        return self._execute("UPDATE pairings SET used_at = ? WHERE pairing_id = ? "
                             "AND used_at IS NULL", iso(now), pairing_id) == 1

    def set_lease(self, lease: LeaseRow) -> None:
        self._execute("INSERT INTO take_control (slot, lease_id, credential_id, acquired_at, "
                      "expires_at) VALUES (1, ?, ?, ?, ?) ON CONFLICT (slot) DO UPDATE SET "
                      "lease_id = excluded.lease_id, credential_id = excluded.credential_id, "
                      "acquired_at = excluded.acquired_at, expires_at = excluded.expires_at",
                      lease.lease_id, lease.credential_id, iso(lease.acquired_at),
                      iso(lease.expires_at))

    def clear_lease(self, credential_id: str) -> None:
        self._execute("DELETE FROM take_control WHERE credential_id = ?", credential_id)

    # ---------------------------------------------------- conversations, tool calls, events

    def insert_conversation(self, c: Conversation) -> None:
        ws = c.workspace
        self._execute(f"INSERT INTO conversations ({_CONVERSATION_COLUMNS}, activity, "
                      f"activity_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                      f"{_NEXT_ACTIVITY}, ?)",
                      c.conversation_id, c.kind.value, c.owner_id, ws.path if ws else None,
                      ws.dev if ws else None, ws.ino if ws else None, c.incarnation,
                      c.revision, c.native_owner, iso(c.created_at), ws.birth if ws else None,
                      c.agent.credential_id if c.agent else None,
                      c.agent.client if c.agent else None, iso(c.created_at))

    def page_key(self, new: bytes) -> bytes:
        """The phone page's key (H3): `new` the first time, the kept one ever after."""
        self._execute("INSERT OR IGNORE INTO page_key (id, key) VALUES (1, ?)", new)
        row = self._returned("SELECT key FROM page_key WHERE id = 1")
        assert row is not None
        return bytes(row[0])

    def archive(self, conversation_id: str) -> None:
        """Hide the conversation from lists until anything new happens in it."""
        self._execute("UPDATE conversations SET archived_activity = activity "
                      "WHERE conversation_id = ?", conversation_id)

    def set_agent_client(self, conversation_id: str, client: str | None) -> None:
        """The MCP client an agent conversation was last asked through (who asks, P3)."""
        self._execute("UPDATE conversations SET agent_client = ? WHERE conversation_id = ?",
                      client, conversation_id)

    def collect(self, request_id: str, now: datetime) -> None:
        """The asking agent has read how its question ended: the first time is kept."""
        self._execute("INSERT INTO collections (request_id, collected_at) VALUES (?, ?) "
                      "ON CONFLICT (request_id) DO NOTHING", request_id, iso(now))

    def insert_tool_call(self, call: ToolCallRow, keep: int) -> None:
        """Record one tool call of a run, placed after the latest message; keep the newest
        `keep` calls of the conversation."""
        self._execute("INSERT INTO tool_calls (conversation_id, run_id, step, call_id, name, "
                      "arguments, result, after_message, at) VALUES (?, ?, ?, ?, ?, ?, ?, "
                      "coalesce((SELECT max(rowid) FROM messages WHERE conversation_id = ?), "
                      "0), ?)", call.conversation_id, call.run_id, call.step, call.call_id,
                      call.name, call.arguments, call.result, call.conversation_id,
                      iso(call.at))
        self._execute("DELETE FROM tool_calls WHERE conversation_id = ? AND rowid <= (SELECT "
                      "rowid FROM tool_calls WHERE conversation_id = ? ORDER BY rowid DESC "
                      "LIMIT 1 OFFSET ?)", call.conversation_id, call.conversation_id, keep)

    def append_events(self, conversation_id: str, events: Iterable[Event], retention: int
                      ) -> None:
        """Events that record no change of the conversation (its revision stays)."""
        batch = list(events)
        numbered = self._returned("UPDATE conversations SET last_seq = last_seq + ? "
                                  "WHERE conversation_id = ? RETURNING last_seq, trimmed_through",
                                  len(batch), conversation_id)
        assert numbered is not None
        self._write_events(conversation_id, batch, numbered, retention)

    # ----------------------------------------------------------------------- pane, projects

    def set_pane_metadata(self, conversation_id: str, key: str, value: str, now: datetime) -> None:
        self._execute("INSERT INTO pane_metadata (conversation_id, key, value, updated_at) "
                      "VALUES (?, ?, ?, ?) ON CONFLICT (conversation_id, key) DO UPDATE SET "
                      "value = excluded.value, updated_at = excluded.updated_at",
                      conversation_id, key, value, iso(now))

    def insert_project(self, p: ProjectRow) -> None:
        self._execute("INSERT INTO projects (project_id, name, root_path, root_dev, root_ino, "
                      "created_at, root_birth) VALUES (?, ?, ?, ?, ?, ?, ?)", p.project_id,
                      p.name, p.root.path, p.root.dev, p.root.ino, iso(p.created_at),
                      p.root.birth)

    # ------------------------------------------------------------------------------- saving

    def save(self, change: Change, *, receipt_limit: int, event_retention: int) -> None:
        """Write one conversation's change; the revision check guards against lost updates."""
        self.saved.append(change)
        c = change.conversation
        ws = c.workspace
        moments = [m.at for m in change.messages] + [
            e.message.at if isinstance(e, MessagePosted) else e.at for e in change.events]
        numbered = self._returned(  # the events' numbers are taken in the same statement
            "UPDATE conversations SET revision = ?, incarnation = ?, native_owner = ?, "
            "workspace_path = ?, workspace_dev = ?, workspace_ino = ?, workspace_birth = ?, "
            f"activity = {_NEXT_ACTIVITY}, activity_at = coalesce(?, activity_at), "
            "last_seq = last_seq + ? "
            "WHERE conversation_id = ? AND revision = ? RETURNING last_seq, trimmed_through",
            c.revision, c.incarnation, c.native_owner, ws.path if ws else None,
            ws.dev if ws else None, ws.ino if ws else None, ws.birth if ws else None,
            iso(max(moments)) if moments else None,
            len(change.events), c.conversation_id, c.revision - 1)
        if numbered is None:
            raise sqlite3.IntegrityError(f"conversation {c.conversation_id} moved concurrently")
        for question in change.questions:
            self._save_question(question)
        for run in change.runs:
            self._save_run(run)
        for message in change.messages:
            self._execute("INSERT INTO messages (message_id, conversation_id, author, text, "
                          "at, partial) VALUES (?, ?, ?, ?, ?, ?)", message.message_id,
                          message.conversation_id, message.author.value, message.text,
                          iso(message.at), message.partial.value if message.partial else None)
            if message.author is Author.CLANKIE:  # the reply it stores needs no checkpoint
                self._execute("DELETE FROM reply_checkpoints WHERE reply_id = ?",
                              message.message_id)
        self._write_events(c.conversation_id, change.events, numbered, event_retention)
        if any(q.status is not QuestionStatus.PENDING for q in change.questions):
            self._evict_receipts(c.conversation_id, receipt_limit)

    def _save_question(self, q: Question) -> None:
        r = q.receipt
        if r is None:
            self._execute(
                "INSERT INTO questions (request_id, conversation_id, kind, prompt, allow_text, "
                "status, incarnation, workspace_path, workspace_dev, workspace_ino, asked_at, "
                "expires_at, asked_by_run, workspace_birth, asked_by_agent, asked_by_client) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                q.request_id, q.conversation_id, q.kind.value, q.prompt, int(q.allow_text),
                q.status.value, q.incarnation, q.workspace.path, q.workspace.dev,
                q.workspace.ino, iso(q.asked_at), iso(q.expires_at), q.asked_by_run,
                q.workspace.birth, q.asker.credential_id if q.asker else None,
                q.asker.client if q.asker else None)
            self._conn.executemany(
                "INSERT INTO options (option_id, request_id, position, label, description) "
                "VALUES (?, ?, ?, ?, ?)",
                [(o.option_id, q.request_id, i, o.label, o.description)
                 for i, o in enumerate(q.options)])
            return
        answer, actor = r.answer, r.answered_by
        updated = self._execute(
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
        self._execute(
            f"INSERT INTO runs ({_RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, "
            "error = excluded.error, started_at = excluded.started_at, "
            "finished_at = excluded.finished_at",
            r.run_id, r.conversation_id, r.kind.value, r.status.value, r.incarnation,
            iso(r.created_at), r.receipt_id, r.error,
            iso(r.started_at) if r.started_at else None,
            iso(r.finished_at) if r.finished_at else None)
        if r.status is not RunStatus.RUNNING:  # its reply is stored, or lost with it (D9)
            self.drop_checkpoint(r.run_id)

    def _write_events(self, conversation_id: str, events: Sequence[Event],
                      numbered: sqlite3.Row, retention: int) -> None:
        """Events numbered up to `last_seq`, which already counts them; the oldest beyond
        the retention are trimmed (V1)."""
        last, trimmed = int(numbered["last_seq"]), int(numbered["trimmed_through"])
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
            self._execute("DELETE FROM events WHERE conversation_id = ? AND seq <= ?",
                          conversation_id, keep_from)
            self._execute("UPDATE conversations SET trimmed_through = ? "
                          "WHERE conversation_id = ?", keep_from, conversation_id)

    def _evict_receipts(self, conversation_id: str, limit: int) -> None:
        self._execute(
            "DELETE FROM questions WHERE conversation_id = ? AND status != 'pending' AND "
            "request_id NOT IN (SELECT request_id FROM questions WHERE conversation_id = ? AND "
            "status != 'pending' ORDER BY resolved_revision DESC, rowid DESC LIMIT ?)",
            conversation_id, conversation_id, limit)

    # ----------------------------------------------------------------------------- restart

    def restart_all(self, plan: RestartPlan, *, receipt_limit: int, event_retention: int
                    ) -> tuple[int, int]:
        """The core's restart plan (SPEC R3) for every conversation at once, set-based
        (start-up: 10,000 conversations in well under a second). Each conversation with a
        question or a run in a status the plan ends gets what `plan.apply` gives it one at
        a time (the tests compare the two row by row): one revision, the question's
        receipt, the runs ended, their events in order, its next activity mark (in ID
        order), the bounds of `save`. Every status, reason, error and event body written
        comes from the plan; this adds only the rows' own IDs and numbers. Receipt IDs are
        random UUIDs made by SQLite (no call back into Python per row). Returns (questions,
        runs)."""
        statements, args = _restart_all(plan)
        args.update(retention=event_retention, limit=receipt_limit)
        for statement in statements:
            self._conn.execute(statement, args)  # each takes the names it uses
        ended = self._all("SELECT conversation_id, request_id IS NOT NULL AS question, runs "
                          "FROM temp.restart_plan")
        self._conn.execute("DROP TABLE temp.restart_plan")
        self.touched.update(row["conversation_id"] for row in ended)
        return sum(row["question"] for row in ended), sum(row["runs"] for row in ended)


# A random (version 4) UUID, as `uuid.uuid4()` writes it, from SQLite's own CSPRNG.
_NEW_UUID = ("lower(printf('%s-%s-4%s-%x%s-%s', hex(randomblob(4)), hex(randomblob(2)), "
             "substr(hex(randomblob(2)), 2), 8 + abs(random() % 4), "
             "substr(hex(randomblob(2)), 2), hex(randomblob(6))))")


# The named parameters of SQL statements: what sqlite3 binds
SqlArgs = dict[str, str | int | None]


def _restart_all(plan: RestartPlan) -> tuple[list[str], SqlArgs]:
    """`WriteTx.restart_all`'s statements, in order, and their arguments: the plan (one row
    per conversation to restart, with its new revision and activity mark), the events
    (after the last, the question's first, then the runs' oldest first), the event bound,
    the conversations, the questions, the runs, the receipt bound.

    The statuses the plan ends are SQL literals (so the partial indexes on them serve);
    the event bodies are the core's own (`RestartPlan.resolved`, `.run_event`) for each
    status, with the row's IDs and number put in (`json_replace` sets only fields the
    body has)."""
    args: SqlArgs = {"reason": plan.reason, "error": plan.error, "now": iso(plan.now)}
    question_event = _case("p.question_status", {
        before: plan.resolved("", "", before).body(0) for before in plan.questions}, args)
    run_event = _case("ended.status", {  # a run of that status, its IDs and kind put in
        before: plan.run_event(plan.end_run(Run("", "", RunKind.TURN, before, "", plan.now)))
        .body(0) for before in plan.runs}, args)

    def questions(alias: str) -> str:
        return _in(f"{alias}status", plan.questions)

    def runs(alias: str) -> str:
        return _in(f"{alias}status", plan.runs)

    return [
        f"""CREATE TEMP TABLE restart_plan AS
            SELECT c.conversation_id, c.revision + 1 AS revision, c.last_seq,
                   c.trimmed_through, q.request_id, q.status AS question_status,
                   (SELECT count(*) FROM runs r WHERE r.conversation_id = c.conversation_id
                    AND {runs("r.")}) AS runs,
                   (SELECT coalesce(max(activity), 0) FROM conversations)
                   + row_number() OVER (ORDER BY c.conversation_id) AS activity
            FROM conversations c
            LEFT JOIN questions q ON q.conversation_id = c.conversation_id
                                 AND {questions("q.")}
            WHERE c.conversation_id IN (SELECT conversation_id FROM questions
                                        WHERE {questions("")}
                                        UNION SELECT conversation_id FROM runs
                                        WHERE {runs("")})""",
        f"""INSERT INTO events (conversation_id, seq, body)
            SELECT conversation_id, last_seq + 1,
                   json_replace({question_event}, '$.seq', last_seq + 1,
                                '$.conversation_id', conversation_id,
                                '$.request_id', request_id)
            FROM temp.restart_plan p WHERE request_id IS NOT NULL""",
        f"""INSERT INTO events (conversation_id, seq, body)
            SELECT conversation_id, seq,
                   json_replace({run_event}, '$.seq', seq, '$.conversation_id',
                                conversation_id, '$.run_id', run_id, '$.kind', kind)
            FROM (SELECT r.conversation_id, r.run_id, r.kind, r.status,
                         p.last_seq + (p.request_id IS NOT NULL)
                         + row_number() OVER (PARTITION BY r.conversation_id
                                              ORDER BY r.rowid) AS seq
                  FROM runs r JOIN temp.restart_plan p USING (conversation_id)
                  WHERE {runs("r.")}) ended""",
        """UPDATE temp.restart_plan SET last_seq = last_seq + (request_id IS NOT NULL) + runs""",
        """DELETE FROM events
            WHERE conversation_id IN (SELECT conversation_id FROM temp.restart_plan
                                      WHERE last_seq - :retention > trimmed_through)
              AND seq <= (SELECT p.last_seq - :retention FROM temp.restart_plan p
                          WHERE p.conversation_id = events.conversation_id)""",
        """UPDATE conversations
            SET revision = p.revision, activity = p.activity, activity_at = :now,
                last_seq = p.last_seq,
                trimmed_through = max(p.trimmed_through, p.last_seq - :retention)
            FROM temp.restart_plan p WHERE conversations.conversation_id = p.conversation_id""",
        f"""UPDATE questions
            SET status = {_case("questions.status", plan.questions, args)},
                receipt_id = {_NEW_UUID}, reason = :reason, resolved_at = :now,
                resolved_revision = p.revision
            FROM temp.restart_plan p
            WHERE questions.request_id = p.request_id AND {questions("questions.")}""",
        f"""UPDATE runs SET status = {_case("status", plan.runs, args)}, error = :error,
                            finished_at = :now
            WHERE {runs("")}""",
        """DELETE FROM questions WHERE rowid IN (
            SELECT id FROM (
                SELECT q.rowid AS id, row_number() OVER (
                    PARTITION BY q.conversation_id
                    ORDER BY q.resolved_revision DESC, q.rowid DESC) AS newer
                FROM questions q JOIN temp.restart_plan p USING (conversation_id)
                WHERE p.request_id IS NOT NULL AND q.status != 'pending')
            WHERE newer > :limit)""",
    ], args


_Status = TypeVar("_Status", bound=StrEnum)


def _in(column: str, statuses: Iterable[StrEnum]) -> str:
    """`column` is one of these statuses, in SQL: `= 'a'` for one (as a partial index's
    WHERE says it, so that SQLite uses the index), `IN ('a', 'b')` for several."""
    literals = [_literal(s) for s in statuses]
    if len(literals) == 1:
        return f"{column} = {literals[0]}"
    return f"{column} IN ({', '.join(literals)})"


def _literal(status: StrEnum) -> str:
    return "'" + status.value.replace("'", "''") + "'"


_UNFINISHED = _in("status", (s for s, moves in RUN_TRANSITIONS.items() if moves))


def _case(column: str, values: Mapping[_Status, StrEnum | EventBody], args: SqlArgs) -> str:
    """`CASE column WHEN status THEN value ... END`, each value a new argument (an event body
    as its JSON text)."""
    whens = []
    for status, value in values.items():
        name = f"v{len(args)}"
        args[name] = (value.value if isinstance(value, StrEnum)
                      else json.dumps(value, ensure_ascii=False))
        whens.append(f"WHEN {_literal(status)} THEN :{name}")
    return f"CASE {column} {' '.join(whens)} END"


def _kind(text: str | None) -> CredentialKind | None:
    return None if text is None else CredentialKind(text)


def _as_credential(row: sqlite3.Row) -> CredentialRow:
    return CredentialRow(row["credential_id"], row["owner_id"], CredentialKind(row["kind"]),
                         None if row["mode"] is None else DeviceMode(row["mode"]), row["name"],
                         row["token_hash"], _when(row["created_at"]), _time(row["rotated_at"]),
                         _time(row["revoked_at"]), _time(row["last_used_at"]),
                         row["user_agent"])


def _as_conversation(row: sqlite3.Row) -> Conversation:
    ws = None if row["workspace_path"] is None else WorkspaceIdentity(
        row["workspace_path"], row["workspace_dev"], row["workspace_ino"],
        row["workspace_birth"])
    return Conversation(row["conversation_id"], ConversationKind(row["kind"]), row["owner_id"],
                        ws, row["incarnation"], row["revision"], row["native_owner"],
                        _when(row["created_at"]), None if row["agent"] is None else Asker(
                            row["agent"], row["agent_client"], row["agent_name"] or ""))


def _as_run(row: sqlite3.Row) -> Run:
    return Run(run_id=row["run_id"], conversation_id=row["conversation_id"],
               kind=RunKind(row["kind"]), status=RunStatus(row["status"]),
               incarnation=row["incarnation"], created_at=_when(row["created_at"]),
               receipt_id=row["receipt_id"], error=row["error"],
               started_at=_time(row["started_at"]), finished_at=_time(row["finished_at"]))
