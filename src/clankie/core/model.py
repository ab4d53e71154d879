"""The state clankie decides over, as frozen dataclasses, in the words of SPEC.md section 2.

Owns the shapes of conversations, questions, receipts, runs, messages, principals and
events. Constructors validate what must always hold, so an invalid value cannot exist.
It must not do I/O: the store turns rows into these values and back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypedDict

# The kinds and statuses of these values are vocabulary's words (`core.vocabulary`), so
# that what reads only them (the DTOs, the CLI) loads none of these dataclasses (issue 39);
# named here too for the modules that import them from here.
from .vocabulary import Author as Author
from .vocabulary import ConversationKind as ConversationKind
from .vocabulary import CredentialKind as CredentialKind
from .vocabulary import DeviceMode as DeviceMode
from .vocabulary import Partial as Partial
from .vocabulary import QuestionKind as QuestionKind
from .vocabulary import QuestionStatus as QuestionStatus
from .vocabulary import RunKind as RunKind
from .vocabulary import RunStatus as RunStatus


@dataclass(frozen=True, slots=True)
class WorkspaceIdentity:
    """A directory's canonical identity: `(realpath, st_dev, st_ino, birth)` (SPEC section
    2). `birth` is the creation time in nanoseconds where the platform reports one: a
    directory deleted and made again at the same path (ext4 hands back the same inode at
    once) is a different directory."""

    path: str
    dev: int
    ino: int
    birth: int | None = None

    def same_directory(self, other: WorkspaceIdentity | None) -> bool:
        """Equal path, device and inode, and equal birth times where both have one (so an
        identity saved without a birth time compares as it always did)."""
        return (other is not None
                and (self.path, self.dev, self.ino) == (other.path, other.dev, other.ino)
                and (self.birth is None or other.birth is None or self.birth == other.birth))


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking, as the service found it in the same transaction.

    `holds_lease` is true only for a control device holding the unexpired Take Control
    lease of this service at the moment of the check.
    """

    credential_id: str
    kind: CredentialKind
    owner_id: str
    mode: DeviceMode | None = None
    holds_lease: bool = False

    def __post_init__(self) -> None:
        if (self.kind is CredentialKind.DEVICE) != (self.mode is not None):
            raise ValueError("a device principal has a mode, and only a device has one")
        if self.holds_lease and self.mode is not DeviceMode.CONTROL:
            raise ValueError("only a control device can hold the Take Control lease")


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asked a question that Clankie did not (SPEC P3): the agent credential and the
    MCP client it asked through (`clientInfo.name`, when the client said one)."""

    credential_id: str
    client: str | None = None
    name: str = ""  # the credential's name (what the owner is shown)


@dataclass(frozen=True, slots=True)
class Conversation:
    conversation_id: str
    kind: ConversationKind
    owner_id: str
    workspace: WorkspaceIdentity | None
    incarnation: str
    revision: int
    native_owner: str | None
    created_at: datetime
    agent: Asker | None = None  # whose questions these are (kind agent), and its last client

    def __post_init__(self) -> None:
        if self.revision < 1:
            raise ValueError("a revision starts at 1")
        if self.kind in (ConversationKind.OWNER, ConversationKind.AGENT) \
                and self.workspace is None:
            raise ValueError("an owner or agent conversation is bound to a workspace")
        if (self.kind is ConversationKind.AGENT) != (self.agent is not None):
            raise ValueError("exactly an agent conversation names its agent credential")


@dataclass(frozen=True, slots=True)
class Option:
    option_id: str
    label: str
    description: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    """Exactly one of `option_id` and `text`."""

    option_id: str | None = None
    text: str | None = None

    def __post_init__(self) -> None:
        if (self.option_id is None) == (self.text is None):
            raise ValueError("an answer is exactly one of option_id and text")


@dataclass(frozen=True, slots=True)
class Actor:
    """Who answered or cancelled: SPEC R2 `answered_by`."""

    credential_id: str
    kind: CredentialKind


@dataclass(frozen=True, slots=True)
class Receipt:
    """The immutable record of how a question ended (SPEC R2).

    The continuation's status is not part of it: it is read from the run it names, so
    the receipt itself never changes once written.
    """

    receipt_id: str
    request_id: str
    outcome: QuestionStatus
    reason: str | None
    answer: Answer | None
    answered_by: Actor | None
    run_id: str | None
    resolved_at: datetime
    revision: int

    def __post_init__(self) -> None:
        if self.outcome is QuestionStatus.PENDING:
            raise ValueError("a receipt records an end, never pending")
        if (self.outcome is QuestionStatus.ANSWERED) != (self.answer is not None):
            raise ValueError("a receipt carries an answer exactly when the outcome is answered")
        if self.run_id is not None and self.outcome is not QuestionStatus.ANSWERED:
            raise ValueError("only an answered receipt names a continuation run")


@dataclass(frozen=True, slots=True)
class Question:
    request_id: str
    conversation_id: str
    kind: QuestionKind
    prompt: str
    options: tuple[Option, ...]
    allow_text: bool
    status: QuestionStatus
    incarnation: str
    workspace: WorkspaceIdentity
    asked_at: datetime
    expires_at: datetime
    asked_by_run: str | None  # Clankie's run that asked; None when an agent asked
    receipt: Receipt | None = None
    asker: Asker | None = None  # the agent that asked (P3), when one did

    def __post_init__(self) -> None:
        if (self.status is QuestionStatus.PENDING) != (self.receipt is None):
            raise ValueError("a question has a receipt exactly when it is no longer pending")
        if (self.asked_by_run is None) == (self.asker is None):
            raise ValueError("a question is asked by Clankie's run or by an agent, one of them")
        if self.receipt is not None and self.receipt.outcome is QuestionStatus.ANSWERED and \
                (self.receipt.run_id is None) != (self.asker is not None):
            raise ValueError("an answer to Clankie starts a continuation; one to an agent none")
        if self.receipt is not None and self.receipt.outcome is not self.status:
            raise ValueError("a receipt's outcome is its question's status")
        if self.kind is QuestionKind.TEXT and (self.options or not self.allow_text):
            raise ValueError("a text question has no options and takes text")

    def expired_at(self, now: datetime) -> bool:
        """Whether the question's TTL has run out at `now` (expiry is checked on use)."""
        return now >= self.expires_at

    def option(self, option_id: str) -> Option | None:
        return next((o for o in self.options if o.option_id == option_id), None)


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    conversation_id: str
    kind: RunKind
    status: RunStatus
    incarnation: str
    created_at: datetime
    receipt_id: str | None = None
    error: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def __post_init__(self) -> None:
        if (self.kind is RunKind.CONTINUATION) != (self.receipt_id is not None):
            raise ValueError("exactly a continuation run names the receipt that started it")


@dataclass(frozen=True, slots=True)
class Message:
    message_id: str
    conversation_id: str
    author: Author
    text: str
    at: datetime
    partial: Partial | None = None  # how a reply of Clankie's was cut off (SPEC D6)


# Events. Each knows its own frozen wire shape (SPEC V2, V4); the store assigns `seq`.


def iso(moment: datetime) -> str:
    """The one text form of a moment on the wire: RFC 3339 in UTC, microseconds, `Z`."""
    if moment.tzinfo is None:
        raise ValueError("moments are timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# Each event's body as stored and served (SPEC V1-V4): its JSON object, field by field.


class InputRequestedBody(TypedDict):
    type: str
    seq: int
    conversation_id: str
    request_id: str
    prompt: str
    choices: list[str]
    at: str


class InputResolvedBody(TypedDict):
    type: str
    seq: int
    conversation_id: str
    request_id: str
    outcome: str
    at: str


class MessageBody(TypedDict):
    type: str
    seq: int
    conversation_id: str
    message_id: str
    author: str
    text: str
    at: str
    partial: str | None


class RunStatusBody(TypedDict):
    type: str
    seq: int
    conversation_id: str
    run_id: str
    kind: str
    status: str
    error: str | None
    at: str


class ConversationResetBody(TypedDict):
    type: str
    seq: int
    conversation_id: str
    at: str


class ToolActivityBody(TypedDict):
    type: str
    seq: int
    conversation_id: str
    run_id: str
    tool: str
    status: str
    code: str | None
    summary: str
    at: str


class RunActivityBody(TypedDict):
    type: str
    seq: int
    conversation_id: str
    run_id: str
    activity: str
    summary: str
    retry_at: str
    at: str
    withdrawn: WithdrawnBody | None


class WithdrawnBody(TypedDict):
    reply_id: str
    length: int


EventBody = (InputRequestedBody | InputResolvedBody | MessageBody | RunStatusBody
             | ConversationResetBody | ToolActivityBody | RunActivityBody)


@dataclass(frozen=True, slots=True)
class InputRequested:
    conversation_id: str
    request_id: str
    prompt: str
    choices: tuple[str, ...]
    at: datetime
    type: str = field(default="input_requested", init=False)

    def body(self, seq: int) -> InputRequestedBody:
        return {"type": self.type, "seq": seq, "conversation_id": self.conversation_id,
                "request_id": self.request_id, "prompt": self.prompt,
                "choices": list(self.choices), "at": iso(self.at)}


@dataclass(frozen=True, slots=True)
class InputResolved:
    conversation_id: str
    request_id: str
    outcome: QuestionStatus
    at: datetime
    type: str = field(default="input_resolved", init=False)

    def body(self, seq: int) -> InputResolvedBody:
        return {"type": self.type, "seq": seq, "conversation_id": self.conversation_id,
                "request_id": self.request_id, "outcome": self.outcome.value, "at": iso(self.at)}


@dataclass(frozen=True, slots=True)
class MessagePosted:
    message: Message
    type: str = field(default="message", init=False)

    def body(self, seq: int) -> MessageBody:
        m = self.message
        return {"type": self.type, "seq": seq, "conversation_id": m.conversation_id,
                "message_id": m.message_id, "author": m.author.value, "text": m.text,
                "at": iso(m.at), "partial": m.partial.value if m.partial else None}


@dataclass(frozen=True, slots=True)
class RunStatusChanged:
    run: Run
    at: datetime
    type: str = field(default="run_status", init=False)

    def body(self, seq: int) -> RunStatusBody:
        r = self.run
        return {"type": self.type, "seq": seq, "conversation_id": r.conversation_id,
                "run_id": r.run_id, "kind": r.kind.value, "status": r.status.value,
                "error": r.error, "at": iso(self.at)}


@dataclass(frozen=True, slots=True)
class ConversationResetDone:
    conversation_id: str
    at: datetime
    type: str = field(default="conversation_reset", init=False)

    def body(self, seq: int) -> ConversationResetBody:
        return {"type": self.type, "seq": seq, "conversation_id": self.conversation_id,
                "at": iso(self.at)}


@dataclass(frozen=True, slots=True)
class ToolActivity:
    """One workspace tool call of a run (SPEC V4, W9): what was looked at, never contents."""

    conversation_id: str
    run_id: str
    tool: str
    status: str  # ok, refused, error
    code: str | None
    summary: str
    at: datetime
    type: str = field(default="tool_activity", init=False)

    def __post_init__(self) -> None:
        if self.status not in ("ok", "refused", "error") or len(self.summary) > 200:
            raise ValueError("a tool activity has a known status and a short summary")

    def body(self, seq: int) -> ToolActivityBody:
        return {"type": self.type, "seq": seq, "conversation_id": self.conversation_id,
                "run_id": self.run_id, "tool": self.tool, "status": self.status,
                "code": self.code, "summary": self.summary, "at": iso(self.at)}


@dataclass(frozen=True, slots=True)
class RunActivity:
    """What a running run is doing besides speaking and calling tools (SPEC V4, R6): for
    now only `model_retry`, a wait before the model is asked again; `summary` says what
    failed, `retry_at` when the next try is."""

    conversation_id: str
    run_id: str
    activity: str
    summary: str
    retry_at: datetime
    at: datetime
    # SPEC D8: the live reply of the try that failed, taken back: (reply_id, length)
    withdrawn: tuple[str, int] | None = None
    type: str = field(default="run_activity", init=False)

    def __post_init__(self) -> None:
        if self.activity not in ("model_retry",) or len(self.summary) > 200:
            raise ValueError("a run activity has a known kind and a short summary")

    def body(self, seq: int) -> RunActivityBody:
        return {"type": self.type, "seq": seq, "conversation_id": self.conversation_id,
                "run_id": self.run_id, "activity": self.activity, "summary": self.summary,
                "retry_at": iso(self.retry_at), "at": iso(self.at),
                "withdrawn": None if self.withdrawn is None else {
                    "reply_id": self.withdrawn[0], "length": self.withdrawn[1]}}


Event = (InputRequested | InputResolved | MessagePosted | RunStatusChanged
         | ConversationResetDone | ToolActivity | RunActivity)
