"""Hand-built core values for the pure tests: deterministic IDs and moments."""

from __future__ import annotations

import itertools
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from clankie.core.lifecycle import AskArgs, Facts, ask
from clankie.core.model import (
    Conversation,
    ConversationKind,
    CredentialKind,
    DeviceMode,
    Principal,
    Question,
    QuestionKind,
    Run,
    RunKind,
    RunStatus,
    WorkspaceIdentity,
)

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
TTL = timedelta(hours=24)
WS = WorkspaceIdentity("/home/owner/project", 2049, 1234)
OPERATOR = Principal("c0000000-0000-4000-8000-000000000001", CredentialKind.OPERATOR, "owner")


class NewIds:
    """A deterministic source of canonical v4 UUIDs."""

    def __init__(self) -> None:
        self._n = itertools.count(1)

    def __call__(self) -> str:
        return str(uuid.UUID(int=next(self._n) | (4 << 76) | (0b10 << 62)))


def device(mode: DeviceMode, lease: bool = False) -> Principal:
    return Principal("d0000000-0000-4000-8000-000000000002", CredentialKind.DEVICE, "owner",
                     mode, lease)


CAPTAIN = Principal("e0000000-0000-4000-8000-000000000003", CredentialKind.CAPTAIN, "owner")
AGENT = Principal("f0000000-0000-4000-8000-000000000004", CredentialKind.AGENT, "owner")


def conversation(**fields: object) -> Conversation:
    base = Conversation("a0000000-0000-4000-8000-00000000000a", ConversationKind.OWNER, "owner",
                        WS, "b0000000-0000-4000-8000-00000000000b", 7, None, T0)
    return replace(base, **fields)  # type: ignore[arg-type]


def facts(now: datetime = T0, *, owner_revoked: bool = False,
          workspace: WorkspaceIdentity | None = WS) -> Facts:
    return Facts(now, owner_revoked, workspace)


def running_run(c: Conversation, run_id: str = "f0000000-0000-4000-8000-00000000000f") -> Run:
    return Run(run_id, c.conversation_id, RunKind.TURN, RunStatus.RUNNING, c.incarnation, T0)


CHOICE = AskArgs(QuestionKind.CHOICE, "Which runner?", (("pytest", "asserts"), ("unittest", "")))
CHOICE_WITH_TEXT = AskArgs(QuestionKind.CHOICE, "Which runner?", (("a", ""), ("b", "")), True)
TEXT = AskArgs(QuestionKind.TEXT, "Name it?")


def asked(c: Conversation | None = None, args: AskArgs = CHOICE,
          new_id: NewIds | None = None) -> tuple[Conversation, Question]:
    """A conversation with a pending question, as `ask` leaves it."""
    c = c or conversation()
    result = ask(c, None, running_run(c), args, facts(), new_id or NewIds(), TTL)
    assert result.change is not None and result.request_id is not None
    return result.change.conversation, result.change.questions[0]
