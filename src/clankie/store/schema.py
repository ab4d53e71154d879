"""The store's schema as numbered migrations, checked and applied at start-up.

Owns the tables and the invariants that must hold even under races or bugs: at most one
pending question per conversation, at most one run per receipt, immutable request,
option and receipt rows, revisions that only grow, runs that start at most once.
A migration is appended, never edited: `PRAGMA user_version` counts the applied ones.
"""

from __future__ import annotations

from typing import Final

_ABORT = "SELECT RAISE(ABORT, '{}');"

MIGRATIONS: Final[tuple[str, ...]] = (
    # 1: the first schema.
    f"""
    CREATE TABLE owners (
        owner_id   TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        revoked_at TEXT
    ) STRICT;

    CREATE TABLE credentials (
        credential_id TEXT PRIMARY KEY,
        owner_id      TEXT NOT NULL REFERENCES owners(owner_id),
        kind          TEXT NOT NULL CHECK (kind IN ('operator', 'device', 'captain')),
        mode          TEXT CHECK (mode IN ('control', 'read_only')),
        name          TEXT NOT NULL,
        token_hash    TEXT NOT NULL UNIQUE,
        created_at    TEXT NOT NULL,
        rotated_at    TEXT,
        CHECK ((kind = 'device') = (mode IS NOT NULL))
    ) STRICT;

    -- At most one Take Control lease per service: the table has one slot.
    CREATE TABLE take_control (
        slot          INTEGER PRIMARY KEY CHECK (slot = 1),
        lease_id      TEXT NOT NULL,
        credential_id TEXT NOT NULL REFERENCES credentials(credential_id),
        acquired_at   TEXT NOT NULL,
        expires_at    TEXT NOT NULL
    ) STRICT;

    CREATE TABLE conversations (
        conversation_id TEXT PRIMARY KEY,
        kind            TEXT NOT NULL
                        CHECK (kind IN ('owner', 'native_seat', 'room', 'global', 'side')),
        owner_id        TEXT NOT NULL REFERENCES owners(owner_id),
        workspace_path  TEXT,
        workspace_dev   INTEGER,
        workspace_ino   INTEGER,
        incarnation     TEXT NOT NULL,
        revision        INTEGER NOT NULL CHECK (revision >= 1),
        native_owner    TEXT,
        created_at      TEXT NOT NULL,
        last_seq        INTEGER NOT NULL DEFAULT 0,
        trimmed_through INTEGER NOT NULL DEFAULT 0,
        CHECK (kind != 'owner' OR workspace_path IS NOT NULL)
    ) STRICT;
    CREATE INDEX conversations_by_owner ON conversations(owner_id);
    CREATE TRIGGER revision_only_grows BEFORE UPDATE OF revision ON conversations
        WHEN NEW.revision <= OLD.revision
        BEGIN {_ABORT.format("a revision only grows")} END;

    CREATE TABLE questions (
        request_id        TEXT PRIMARY KEY,
        conversation_id   TEXT NOT NULL REFERENCES conversations(conversation_id),
        kind              TEXT NOT NULL CHECK (kind IN ('text', 'choice')),
        prompt            TEXT NOT NULL,
        allow_text        INTEGER NOT NULL CHECK (allow_text IN (0, 1)),
        status            TEXT NOT NULL
                          CHECK (status IN ('pending', 'answered', 'cancelled', 'expired',
                                            'invalidated')),
        incarnation       TEXT NOT NULL,
        workspace_path    TEXT NOT NULL,
        workspace_dev     INTEGER NOT NULL,
        workspace_ino     INTEGER NOT NULL,
        asked_at          TEXT NOT NULL,
        expires_at        TEXT NOT NULL,
        asked_by_run      TEXT NOT NULL,
        receipt_id        TEXT UNIQUE,
        reason            TEXT,
        answer_option_id  TEXT,
        answer_text       TEXT,
        answered_by_id    TEXT,
        answered_by_kind  TEXT,
        run_id            TEXT UNIQUE,
        resolved_at       TEXT,
        resolved_revision INTEGER,
        CHECK ((status = 'pending') = (receipt_id IS NULL)),
        CHECK ((status = 'answered') = (run_id IS NOT NULL))
    ) STRICT;
    CREATE UNIQUE INDEX one_pending_question ON questions(conversation_id)
        WHERE status = 'pending';
    CREATE INDEX recent_receipts ON questions(conversation_id, resolved_revision)
        WHERE status != 'pending';
    CREATE TRIGGER question_identity_immutable
        BEFORE UPDATE OF request_id, conversation_id, kind, prompt, allow_text, incarnation,
                         workspace_path, workspace_dev, workspace_ino, asked_at, expires_at,
                         asked_by_run
        ON questions
        BEGIN {_ABORT.format("the identity of a question never changes")} END;
    CREATE TRIGGER receipt_immutable BEFORE UPDATE ON questions
        WHEN OLD.status != 'pending'
        BEGIN {_ABORT.format("a receipt never changes once written")} END;

    CREATE TABLE options (
        option_id   TEXT PRIMARY KEY,
        request_id  TEXT NOT NULL REFERENCES questions(request_id) ON DELETE CASCADE,
        position    INTEGER NOT NULL,
        label       TEXT NOT NULL,
        description TEXT NOT NULL,
        UNIQUE (request_id, position)
    ) STRICT;
    CREATE TRIGGER option_immutable BEFORE UPDATE ON options
        BEGIN {_ABORT.format("an option never changes")} END;

    CREATE TABLE runs (
        run_id          TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations(conversation_id),
        kind            TEXT NOT NULL CHECK (kind IN ('turn', 'continuation')),
        status          TEXT NOT NULL
                        CHECK (status IN ('queued', 'running', 'succeeded', 'failed',
                                          'cancelled')),
        incarnation     TEXT NOT NULL,
        receipt_id      TEXT,
        error           TEXT,
        created_at      TEXT NOT NULL,
        started_at      TEXT,
        finished_at     TEXT,
        CHECK ((kind = 'continuation') = (receipt_id IS NOT NULL))
    ) STRICT;
    CREATE UNIQUE INDEX one_run_per_receipt ON runs(receipt_id) WHERE receipt_id IS NOT NULL;
    CREATE INDEX unfinished_runs ON runs(conversation_id) WHERE status IN ('queued', 'running');
    CREATE TRIGGER finished_run_immutable BEFORE UPDATE ON runs
        WHEN OLD.status IN ('succeeded', 'failed', 'cancelled')
        BEGIN {_ABORT.format("a finished run never changes")} END;
    CREATE TRIGGER run_starts_once BEFORE UPDATE OF status ON runs
        WHEN NEW.status = 'running' AND OLD.status != 'queued'
        BEGIN {_ABORT.format("a run starts at most once")} END;

    CREATE TABLE messages (
        message_id      TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL REFERENCES conversations(conversation_id),
        author          TEXT NOT NULL CHECK (author IN ('owner', 'clankie', 'room')),
        text            TEXT NOT NULL,
        at              TEXT NOT NULL
    ) STRICT;
    CREATE INDEX messages_by_conversation ON messages(conversation_id);

    CREATE TABLE events (
        conversation_id TEXT NOT NULL,
        seq             INTEGER NOT NULL,
        body            TEXT NOT NULL,
        PRIMARY KEY (conversation_id, seq)
    ) STRICT, WITHOUT ROWID;

    CREATE TABLE pane_metadata (
        conversation_id TEXT NOT NULL REFERENCES conversations(conversation_id),
        key             TEXT NOT NULL,
        value           TEXT NOT NULL,
        updated_at      TEXT NOT NULL,
        PRIMARY KEY (conversation_id, key)
    ) STRICT;

    CREATE TABLE projects (
        project_id TEXT PRIMARY KEY,
        name       TEXT NOT NULL,
        root_path  TEXT NOT NULL,
        root_dev   INTEGER NOT NULL,
        root_ino   INTEGER NOT NULL,
        created_at TEXT NOT NULL
    ) STRICT;
    """,
    # 2: the workspace tool calls of runs, so that later runs remember what was looked at.
    # `after_message` is the rowid of the conversation's latest message when the call was
    # made (0: none), which places the call among the messages.
    """
    CREATE TABLE tool_calls (
        conversation_id TEXT NOT NULL REFERENCES conversations(conversation_id),
        run_id          TEXT NOT NULL REFERENCES runs(run_id),
        step            INTEGER NOT NULL,
        call_id         TEXT NOT NULL,
        name            TEXT NOT NULL,
        arguments       TEXT NOT NULL,
        result          TEXT NOT NULL,
        after_message   INTEGER NOT NULL,
        at              TEXT NOT NULL
    ) STRICT;
    CREATE INDEX tool_calls_by_conversation ON tool_calls(conversation_id, after_message);
    """,
    # 3: listing by latest activity, a page at a time; runs found by conversation without
    # scanning every run. `activity` is a store-wide counter, moved by every change, so it
    # orders conversations and is unique.
    """
    CREATE INDEX runs_by_conversation ON runs(conversation_id, started_at);
    ALTER TABLE conversations ADD COLUMN activity INTEGER NOT NULL DEFAULT 0;
    UPDATE conversations SET activity = rowid;
    CREATE UNIQUE INDEX conversations_activity ON conversations(activity);
    CREATE INDEX conversations_by_activity ON conversations(owner_id, activity);
    """,
    # 4: directory identities carry the birth time (SPEC section 2); identities saved
    # before have none (NULL) and keep comparing by path, device and inode.
    """
    ALTER TABLE conversations ADD COLUMN workspace_birth INTEGER;
    ALTER TABLE questions ADD COLUMN workspace_birth INTEGER;
    ALTER TABLE projects ADD COLUMN root_birth INTEGER;
    """,
    # 5: answering from a phone (SPEC section 12): a credential can be revoked on its own
    # and says when it was last used; a pairing code is kept only as a hash, used once.
    """
    ALTER TABLE credentials ADD COLUMN revoked_at TEXT;
    ALTER TABLE credentials ADD COLUMN last_used_at TEXT;
    CREATE TABLE pairings (
        pairing_id  TEXT PRIMARY KEY,
        owner_id    TEXT NOT NULL REFERENCES owners(owner_id),
        code_hash   TEXT NOT NULL UNIQUE,
        name        TEXT NOT NULL,
        mode        TEXT NOT NULL CHECK (mode IN ('control', 'read_only')),
        word        TEXT NOT NULL,
        created_at  TEXT NOT NULL,
        expires_at  TEXT NOT NULL,
        used_at     TEXT
    ) STRICT;
    """,
    # 6: coding agents ask through clankie (SPEC section 13). A credential and a conversation
    # of kind `agent`; an agent conversation names its agent; a question asked by an agent
    # names no run but the agent (and its MCP client), and its answer starts no run; when the
    # agent first read how it ended (`collected_at`, information only). CHECK constraints
    # cannot be altered in SQLite: the three tables are built anew and filled, as SQLite's
    # "other kinds of table schema changes" says, with foreign keys off (`Store._migrate`).
    f"""
    CREATE TABLE credentials_new (
        credential_id TEXT PRIMARY KEY,
        owner_id      TEXT NOT NULL REFERENCES owners(owner_id),
        kind          TEXT NOT NULL CHECK (kind IN ('operator', 'device', 'captain', 'agent')),
        mode          TEXT CHECK (mode IN ('control', 'read_only')),
        name          TEXT NOT NULL,
        token_hash    TEXT NOT NULL UNIQUE,
        created_at    TEXT NOT NULL,
        rotated_at    TEXT,
        revoked_at    TEXT,
        last_used_at  TEXT,
        CHECK ((kind = 'device') = (mode IS NOT NULL))
    ) STRICT;
    INSERT INTO credentials_new (credential_id, owner_id, kind, mode, name, token_hash,
                                 created_at, rotated_at, revoked_at, last_used_at)
        SELECT credential_id, owner_id, kind, mode, name, token_hash, created_at, rotated_at,
               revoked_at, last_used_at FROM credentials;
    DROP TABLE credentials;
    ALTER TABLE credentials_new RENAME TO credentials;

    CREATE TABLE conversations_new (
        conversation_id TEXT PRIMARY KEY,
        kind            TEXT NOT NULL
                        CHECK (kind IN ('owner', 'native_seat', 'room', 'global', 'side',
                                        'agent')),
        owner_id        TEXT NOT NULL REFERENCES owners(owner_id),
        workspace_path  TEXT,
        workspace_dev   INTEGER,
        workspace_ino   INTEGER,
        incarnation     TEXT NOT NULL,
        revision        INTEGER NOT NULL CHECK (revision >= 1),
        native_owner    TEXT,
        created_at      TEXT NOT NULL,
        last_seq        INTEGER NOT NULL DEFAULT 0,
        trimmed_through INTEGER NOT NULL DEFAULT 0,
        activity        INTEGER NOT NULL DEFAULT 0,
        workspace_birth INTEGER,
        agent           TEXT REFERENCES credentials(credential_id),
        agent_client    TEXT,
        CHECK (kind NOT IN ('owner', 'agent') OR workspace_path IS NOT NULL),
        CHECK ((kind = 'agent') = (agent IS NOT NULL))
    ) STRICT;
    INSERT INTO conversations_new (conversation_id, kind, owner_id, workspace_path,
                                   workspace_dev, workspace_ino, incarnation, revision,
                                   native_owner, created_at, last_seq, trimmed_through,
                                   activity, workspace_birth)
        SELECT conversation_id, kind, owner_id, workspace_path, workspace_dev, workspace_ino,
               incarnation, revision, native_owner, created_at, last_seq, trimmed_through,
               activity, workspace_birth FROM conversations;
    DROP TABLE conversations;
    ALTER TABLE conversations_new RENAME TO conversations;
    CREATE INDEX conversations_by_owner ON conversations(owner_id);
    CREATE UNIQUE INDEX conversations_activity ON conversations(activity);
    CREATE INDEX conversations_by_activity ON conversations(owner_id, activity);
    CREATE INDEX agent_conversations ON conversations(agent, workspace_path)
        WHERE kind = 'agent';
    CREATE TRIGGER revision_only_grows BEFORE UPDATE OF revision ON conversations
        WHEN NEW.revision <= OLD.revision
        BEGIN {_ABORT.format("a revision only grows")} END;

    CREATE TABLE questions_new (
        request_id        TEXT PRIMARY KEY,
        conversation_id   TEXT NOT NULL REFERENCES conversations(conversation_id),
        kind              TEXT NOT NULL CHECK (kind IN ('text', 'choice')),
        prompt            TEXT NOT NULL,
        allow_text        INTEGER NOT NULL CHECK (allow_text IN (0, 1)),
        status            TEXT NOT NULL
                          CHECK (status IN ('pending', 'answered', 'cancelled', 'expired',
                                            'invalidated')),
        incarnation       TEXT NOT NULL,
        workspace_path    TEXT NOT NULL,
        workspace_dev     INTEGER NOT NULL,
        workspace_ino     INTEGER NOT NULL,
        asked_at          TEXT NOT NULL,
        expires_at        TEXT NOT NULL,
        asked_by_run      TEXT,
        receipt_id        TEXT UNIQUE,
        reason            TEXT,
        answer_option_id  TEXT,
        answer_text       TEXT,
        answered_by_id    TEXT,
        answered_by_kind  TEXT,
        run_id            TEXT UNIQUE,
        resolved_at       TEXT,
        resolved_revision INTEGER,
        workspace_birth   INTEGER,
        asked_by_agent    TEXT,
        asked_by_client   TEXT,
        CHECK ((status = 'pending') = (receipt_id IS NULL)),
        CHECK ((asked_by_run IS NULL) != (asked_by_agent IS NULL)),
        CHECK (run_id IS NULL OR status = 'answered'),
        CHECK (status != 'answered' OR (run_id IS NULL) = (asked_by_run IS NULL))
    ) STRICT;
    INSERT INTO questions_new (request_id, conversation_id, kind, prompt, allow_text, status,
                               incarnation, workspace_path, workspace_dev, workspace_ino,
                               asked_at, expires_at, asked_by_run, receipt_id, reason,
                               answer_option_id, answer_text, answered_by_id,
                               answered_by_kind, run_id, resolved_at, resolved_revision,
                               workspace_birth)
        SELECT request_id, conversation_id, kind, prompt, allow_text, status, incarnation,
               workspace_path, workspace_dev, workspace_ino, asked_at, expires_at,
               asked_by_run, receipt_id, reason, answer_option_id, answer_text,
               answered_by_id, answered_by_kind, run_id, resolved_at, resolved_revision,
               workspace_birth FROM questions;
    DROP TABLE questions;
    ALTER TABLE questions_new RENAME TO questions;
    CREATE UNIQUE INDEX one_pending_question ON questions(conversation_id)
        WHERE status = 'pending';
    CREATE INDEX recent_receipts ON questions(conversation_id, resolved_revision)
        WHERE status != 'pending';
    CREATE TRIGGER question_identity_immutable
        BEFORE UPDATE OF request_id, conversation_id, kind, prompt, allow_text, incarnation,
                         workspace_path, workspace_dev, workspace_ino, asked_at, expires_at,
                         asked_by_run, asked_by_agent, asked_by_client
        ON questions
        BEGIN {_ABORT.format("the identity of a question never changes")} END;
    CREATE TRIGGER receipt_immutable BEFORE UPDATE ON questions
        WHEN OLD.status != 'pending'
        BEGIN {_ABORT.format("a receipt never changes once written")} END;

    CREATE TABLE collections (
        request_id   TEXT PRIMARY KEY REFERENCES questions(request_id) ON DELETE CASCADE,
        collected_at TEXT NOT NULL
    ) STRICT;
    """,
    # 7: the phone page's key (SPEC H3): one random key, kept, from which the second half of
    # each paired browser's credential is derived, so that a page outlives a restart.
    """
    CREATE TABLE page_key (
        id  INTEGER PRIMARY KEY CHECK (id = 1),
        key BLOB NOT NULL CHECK (length(key) = 32)
    ) STRICT;
    """,
    # 8: what paired a browser (SPEC H2): its User-Agent, cut, so that the terminal that
    # waits for the pairing says what it was. Credentials made otherwise have none.
    """
    ALTER TABLE credentials ADD COLUMN user_agent TEXT
        CHECK (user_agent IS NULL OR length(user_agent) <= 512);
    """,
    # 9: finding what waits (SPEC section 10). `activity_at` is when `activity` last moved
    # (one notion of activity: both move together), filled for older rows from their
    # newest event, else their creation. `archived_activity` is the activity mark at which
    # the owner archived the conversation: it is hidden while that is still its mark, so
    # anything new in it (a message, a question, a run's end) brings it back by itself.
    """
    ALTER TABLE conversations ADD COLUMN activity_at TEXT;
    ALTER TABLE conversations ADD COLUMN archived_activity INTEGER;
    UPDATE conversations SET activity_at = coalesce(
        (SELECT json_extract(e.body, '$.at') FROM events e
         WHERE e.conversation_id = conversations.conversation_id
           AND e.seq = conversations.last_seq), created_at);
    """,
    # 10: replies that stream (SPEC D6-D9). A message of Clankie's that was cut off says
    # how (`partial`); a reply being written is checkpointed, one row per running run,
    # overwritten each time, turned into an `interrupted` message at the next start.
    """
    ALTER TABLE messages ADD COLUMN partial TEXT
        CHECK (partial IS NULL OR partial IN ('stopped', 'failed', 'interrupted'));
    CREATE TABLE reply_checkpoints (
        run_id   TEXT PRIMARY KEY REFERENCES runs(run_id),
        reply_id TEXT NOT NULL,
        text     TEXT NOT NULL,
        at       TEXT NOT NULL
    ) STRICT;
    """,
)
