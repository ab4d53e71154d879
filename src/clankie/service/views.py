"""Core values as the contract's output shapes (`clankie.dto`); the only place that renders them.

Owns the mapping from `clankie.core.model` to `clankie.dto` output models, including the
receipt's `continuation`, which is read from the run it names rather than stored twice.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from clankie import dto
from clankie.core.errors import ClankieError
from clankie.core.model import (
    Asker,
    Conversation,
    ConversationKind,
    Question,
    Receipt,
    Run,
    iso,
)
from clankie.store import ReadTx
from clankie.store.tx import CredentialRow, ListedConversation
from clankie.workspace.membership import Membership


def receipt(tx: ReadTx, r: Receipt) -> dto.ReceiptOut:
    run = tx.run(r.run_id) if r.run_id else None
    answer: dto.OptionAnswer | dto.TextAnswer | None = None
    if r.answer is not None and r.answer.option_id is not None:
        answer = dto.OptionAnswer(option_id=r.answer.option_id)
    elif r.answer is not None and r.answer.text is not None:
        answer = dto.TextAnswer(text=r.answer.text)
    return dto.ReceiptOut(
        receipt_id=r.receipt_id,
        request_id=r.request_id,
        outcome=r.outcome.value,
        reason=r.reason,
        answer=answer,
        answered_by=None if r.answered_by is None else dto.Answerer(
            credential_id=r.answered_by.credential_id,
            kind=r.answered_by.kind),
        run_id=r.run_id,
        continuation=None if run is None else run.status,
        continuation_error=None if run is None else run.error,
        resolved_at=iso(r.resolved_at),
        revision=r.revision,
        collected_at=_when(tx.collected_at(r.request_id)),
    )


def _when(moment: datetime | None) -> str | None:
    return None if moment is None else iso(moment)


def asker(a: Asker | None) -> dto.AskerOut | None:
    return None if a is None else dto.AskerOut(credential_id=a.credential_id, name=a.name,
                                               client=a.client)


def agent_question(tx: ReadTx, q: Question) -> dto.AgentQuestionOut:
    """An agent's question as the agent reads it (P4)."""
    r = q.receipt
    answer: dto.AgentOption | dto.TextAnswer | None = None
    if r is not None and r.answer is not None:
        chosen = q.option(r.answer.option_id) if r.answer.option_id else None
        answer = dto.TextAnswer(text=r.answer.text) if r.answer.text is not None else \
            dto.AgentOption(option_id=r.answer.option_id or "",
                            label=chosen.label if chosen else "")
    answerer = None  # who answered: none for a cancel, which must never read like an answer
    if r is not None and r.answer is not None and r.answered_by is not None:
        row = tx.credential(r.answered_by.credential_id)
        answerer = dto.AgentAnswerer(kind=r.answered_by.kind, name=row.name if row else "")
    return dto.AgentQuestionOut(
        request_id=q.request_id, conversation_id=q.conversation_id, status=q.status,
        prompt=q.prompt, kind=q.kind,
        options=[dto.AgentOption(option_id=o.option_id, label=o.label) for o in q.options],
        asked_at=iso(q.asked_at), expires_at=iso(q.expires_at),
        reason=r.reason if r else None, answer=answer,
        receipt_id=r.receipt_id if r else None, answered_by=answerer,
        resolved_at=iso(r.resolved_at) if r else None,
        collected_at=_when(tx.collected_at(q.request_id)))


def question(tx: ReadTx, q: Question) -> dto.QuestionOut:
    return dto.QuestionOut(
        request_id=q.request_id,
        kind=q.kind,
        prompt=q.prompt,
        options=[dto.OptionOut(option_id=o.option_id, label=o.label, description=o.description)
                 for o in q.options],
        allow_text=q.allow_text,
        status=q.status,
        incarnation=q.incarnation,
        asked_at=iso(q.asked_at),
        expires_at=iso(q.expires_at),
        receipt=None if q.receipt is None else receipt(tx, q.receipt),
        asker=asker(q.asker),
    )


def conversation(c: Conversation, fact: Membership | None = None,
                 unfinished: list[Run] | None = None) -> dto.ConversationOut:
    return dto.ConversationOut(
        unfinished_runs=None if unfinished is None else [run(r) for r in unfinished],
        membership=None if fact is None else dto.MembershipOut(
            status=fact.status, project_id=fact.project_id, reason=fact.reason),
        **_conversation(c))


class _ConversationFields(TypedDict):
    """The fields every conversation object has (`ConversationOut`, `ListedConversationOut`)."""

    asker: dto.AskerOut | None
    conversation_id: str
    kind: ConversationKind
    workspace: dto.WorkspaceOut | None
    incarnation: str
    revision: int
    native_owner: str | None
    created_at: str


def _conversation(c: Conversation) -> _ConversationFields:
    """The fields every conversation object has."""
    return {"asker": asker(c.agent), "conversation_id": c.conversation_id, "kind": c.kind,
            "workspace": None if c.workspace is None else dto.WorkspaceOut(
                path=c.workspace.path),
            "incarnation": c.incarnation, "revision": c.revision,
            "native_owner": c.native_owner, "created_at": iso(c.created_at)}


def listed(x: ListedConversation) -> dto.ListedConversationOut:
    """A `conversation_list` item (SPEC section 10 "Finding what waits")."""
    pending = None if x.pending is None else dto.PendingOut(
        request_id=x.pending[0], prompt=x.pending[1], expires_at=iso(x.pending[2]))
    return dto.ListedConversationOut(
        **_conversation(x.conversation), pending=pending,
        last_activity_at=iso(x.activity_at), archived=x.archived,
        run=None if x.run is None else x.run.value)


def run(r: Run) -> dto.RunOut:
    return dto.RunOut(
        run_id=r.run_id,
        conversation_id=r.conversation_id,
        kind=r.kind,
        status=r.status,
        error=r.error,
        receipt_id=r.receipt_id,
        created_at=iso(r.created_at),
        started_at=iso(r.started_at) if r.started_at else None,
        finished_at=iso(r.finished_at) if r.finished_at else None,
    )


def credential(row: CredentialRow, holds_lease: bool,
               used: datetime | None = None) -> dto.CredentialOut:
    """A credential as listed: never its token (the store has only the hash). `used` is
    a later use the service noted in memory (a read), if any."""
    last_used = max((t for t in (row.last_used_at, used) if t is not None), default=None)
    return dto.CredentialOut(
        credential_id=row.credential_id,
        kind=row.kind,
        mode=row.mode,
        name=row.name,
        created_at=iso(row.created_at),
        last_used_at=iso(last_used) if last_used else None,
        revoked=row.revoked_at is not None,
        rotated_at=iso(row.rotated_at) if row.rotated_at else None,
        holds_lease=holds_lease,
        user_agent=row.user_agent)


def error(tx: ReadTx, err: ClankieError) -> ClankieError:
    """The error with its extras rendered for the wire (a core `Receipt` becomes JSON)."""
    extra: dict[str, Any] = {}
    for key, value in err.extra.items():
        extra[key] = receipt(tx, value).model_dump(mode="json") if isinstance(value, Receipt) \
            else value
    return ClankieError(err.code, err.detail, **extra)
