"""The shapes of the contract: strict, bounded pydantic models of every op's input and output.

Owns every bound of SPEC section 3 and section 10 (and the OpenAPI schema that comes from
them). Inputs forbid unknown fields, take no coercion (strict), accept only canonical
lowercase version-4 UUIDs and only text without NUL or lone surrogates. It also owns the
op table: one constant `Op` per op (its wire name, shapes, the rule of
`clankie.core.authority` that says who may call it, and its flags), read by the
dispatcher, the edge, OpenAPI, the client and the tests. It imports nothing of the service
and does no I/O, so the service, the HTTP layer and the client share it.

Each shape's validator is built when it is first used, not when this module is imported
(`defer_build`), so a command builds only the shapes it reads: `conversations list` builds
two of them (issue 39).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, Final, Generic, Literal, TypeVar

from pydantic import (
    MISSING,
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_validator,
)
from pydantic import Strict as StrictMode

from clankie.core import authority as may
from clankie.core.vocabulary import (
    Author,
    ConversationKind,
    CredentialKind,
    DeviceMode,
    QuestionKind,
    QuestionStatus,
    RunKind,
    RunStatus,
)
from clankie.tool_dto import WHOLE

UUID_PATTERN = r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
NO_NUL_PATTERN = r"^[^\x00]*$"


def _clean(text: str) -> str:
    if "\x00" in text:
        raise ValueError("text must not contain NUL")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid UTF-8 (no lone surrogates)") from None
    return text


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("a message must have some text besides whitespace")
    return text


# Written out alias by alias (no factory) so that mypy sees each as a type alias.
Uuid = Annotated[str, Field(pattern=UUID_PATTERN)]
SQLITE_MAX = 2**63 - 1  # revisions and event cursors are SQLite integers: none is larger
Prompt = Annotated[str, Field(min_length=1, max_length=2_000, pattern=NO_NUL_PATTERN),
                   AfterValidator(_clean)]
Label = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_NUL_PATTERN),
                  AfterValidator(_clean)]
Description = Annotated[str, Field(min_length=0, max_length=1_000, pattern=NO_NUL_PATTERN),
                        AfterValidator(_clean)]
ANSWER_TEXT_MAX = 8_000
AnswerText = Annotated[str, Field(min_length=1, max_length=ANSWER_TEXT_MAX, pattern=NO_NUL_PATTERN),
                       AfterValidator(_clean)]
MessageText = Annotated[str, Field(min_length=1, max_length=8_000, pattern=NO_NUL_PATTERN),
                        AfterValidator(_clean)]
OwnerText = Annotated[MessageText, AfterValidator(_not_blank)]  # SPEC R8: never only whitespace
Name = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_NUL_PATTERN),
                 AfterValidator(_clean)]
PathText = Annotated[str, Field(min_length=1, max_length=4_096, pattern=NO_NUL_PATTERN),
                     AfterValidator(_clean)]
MetadataValue = Annotated[str, Field(min_length=0, max_length=8_000, pattern=NO_NUL_PATTERN),
                          AfterValidator(_clean)]


def _member(kind: type[StrEnum]) -> Callable[[object], object]:
    """Text naming one of `kind`'s values as that member; anything else is left for pydantic
    to refuse. So a strict check of JSON already parsed into dicts (the client's
    `fit_shape`, which has no enum instances) takes the values the wire carries."""
    def member(value: object) -> object:
        return kind(value) if isinstance(value, str) and value in kind._value2member_map_ \
            else value
    return member


# The core's vocabularies on the wire: a StrEnum is a JSON string enum of the same values.
# Lax (`StrictMode(False)`), so the strict inputs take the JSON text of a value and refuse any
# other in the words a Literal used ("Input should be 'owner', 'native_seat', ...").
ConversationKindField = Annotated[ConversationKind, StrictMode(False),
                                  BeforeValidator(_member(ConversationKind))]
DeviceModeField = Annotated[DeviceMode, StrictMode(False), BeforeValidator(_member(DeviceMode))]
CredentialKindField = Annotated[CredentialKind, StrictMode(False),
                                BeforeValidator(_member(CredentialKind))]
QuestionKindField = Annotated[QuestionKind, StrictMode(False),
                              BeforeValidator(_member(QuestionKind))]
QuestionStatusField = Annotated[QuestionStatus, StrictMode(False),
                                BeforeValidator(_member(QuestionStatus))]
RunKindField = Annotated[RunKind, StrictMode(False), BeforeValidator(_member(RunKind))]
RunStatusField = Annotated[RunStatus, StrictMode(False), BeforeValidator(_member(RunStatus))]
AuthorField = Annotated[Author, StrictMode(False), BeforeValidator(_member(Author))]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


# ------------------------------------------------------------------------------- inputs


class InputGet(Strict):
    conversation_id: Uuid
    request_id: Uuid | None = None


class InputAnswer(Strict):
    conversation_id: Uuid
    request_id: Uuid
    incarnation: Uuid
    revision: Annotated[int, Field(ge=1, le=SQLITE_MAX)]
    option_id: Uuid | None = None
    text: AnswerText | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> InputAnswer:
        if (self.option_id is None) == (self.text is None):
            raise ValueError("give exactly one of option_id and text")
        return self


class InputCancel(Strict):
    conversation_id: Uuid
    request_id: Uuid
    incarnation: Uuid
    revision: Annotated[int, Field(ge=1, le=SQLITE_MAX)]


class ConversationCreate(Strict):
    """An agent's conversation is made only by its first ask (P3), never here."""

    workspace: PathText | None = None
    kind: Literal["owner", "native_seat", "room", "global", "side"] = "owner"


class ConversationRef(Strict):
    conversation_id: Uuid


class Nothing(Strict):
    pass


def _a_cursor(after: str) -> str:
    if int(after) >= 2 ** 63:
        raise ValueError("a cursor is a next_after this list gave, below 2**63")
    return after


class ConversationList(Strict):
    """A page of conversations, latest activity first (older clients send `{}`)."""

    limit: Annotated[int, Field(ge=1, le=500)] = 100
    after: Annotated[str, Field(pattern=r"^[0-9]{1,19}$"),  # a `next_after`: a 64-bit integer
                     AfterValidator(_a_cursor)] | None = None
    prefix: Annotated[str, Field(pattern=r"^[0-9a-f-]{1,36}$")] | None = None
    # SPEC section 10 "Finding what waits": archived ones too; only those bound to this
    # directory or one of its parents (as the service stores paths: resolved), nearest
    # first, on one page; only those whose question waits.
    archived: bool = False
    workspace: PathText | None = None
    waiting: bool = False


class ConversationSend(Strict):
    conversation_id: Uuid
    text: OwnerText


class ConversationSetWorkspace(Strict):
    conversation_id: Uuid
    workspace: PathText


MAX_REPLY_CHARS: Final = 16 * 1024 * 1024  # a live reply's offset at most (SPEC D4)


class LiveAt(Strict):
    """What a reader of the live reply last received (SPEC D4): its `reply_id` (null asks
    for a snapshot) and that answer's `length`. Both are required."""

    reply_id: Uuid | None
    offset: Annotated[int, Field(ge=0, le=MAX_REPLY_CHARS)]


class EventsTail(Strict):
    conversation_id: Uuid
    after: Annotated[int, Field(ge=0, le=SQLITE_MAX)] = 0
    limit: Annotated[int, Field(ge=1, le=500)] = 100
    wait_ms: Annotated[int, Field(ge=0, le=30_000)] = 0
    live: LiveAt | None = None  # an addition (SPEC D4): also the reply being written


class RunRef(Strict):
    run_id: Uuid


class DevicePair(Strict):
    name: Name
    mode: DeviceModeField


class DevicePairStart(Strict):
    name: Name
    mode: DeviceModeField = DeviceMode.CONTROL


class DevicePairFinish(Strict):
    code: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[A-Za-z0-9_-]+$")]


class CredentialRevoke(Strict):
    credential_id: Uuid


class DeviceTakeControl(Strict):
    ttl_s: Annotated[int, Field(ge=1, le=7 * 86_400)] | None = None


class CredentialIssue(Strict):
    kind: Literal["operator", "captain", "agent"]
    name: Name


class CredentialRotate(Strict):
    credential_id: Uuid | None = None


class NativeTakeover(Strict):
    conversation_id: Uuid
    seat: Name


class RoomPost(Strict):
    conversation_id: Uuid
    text: MessageText


class PaneMetadataSet(Strict):
    conversation_id: Uuid
    key: Name
    value: MetadataValue


class ProjectRegister(Strict):
    root: PathText
    name: Name


class OptionIn(Strict):
    label: Label
    description: Description = ""


class TextAsk(Strict):
    kind: Literal["text"]
    prompt: Prompt


class ChoiceAsk(Strict):
    kind: Literal["choice"]
    prompt: Prompt
    options: Annotated[list[OptionIn], Field(min_length=2, max_length=10)]
    allow_text: bool = False


AskQuestionArgs = Annotated[TextAsk | ChoiceAsk, Field(discriminator="kind")]
"""`ask_question`'s arguments (SPEC Q1): a text or a choice question."""
ASK_QUESTION_ARGS: TypeAdapter[TextAsk | ChoiceAsk] = TypeAdapter(
    AskQuestionArgs, config=ConfigDict(defer_build=True))


# ------------------------------------------------------------------------------ outputs


class Out(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class OptionOut(Out):
    option_id: str
    label: str
    description: str


class OptionAnswer(Out):
    option_id: str


class TextAnswer(Out):
    text: str


class Answerer(Out):
    credential_id: str
    kind: CredentialKindField


class AskerOut(Out):
    """Who asks in an agent conversation (SPEC P3): the agent credential, its name, and the
    MCP client it last asked through (`clientInfo.name`, when the client said one)."""

    credential_id: str
    name: str
    client: str | None


class ReceiptOut(Out):
    receipt_id: str
    request_id: str
    outcome: Literal["answered", "cancelled", "expired", "invalidated"]
    reason: str | None
    answer: OptionAnswer | TextAnswer | None
    answered_by: Answerer | None
    run_id: str | None
    continuation: RunStatusField | None
    continuation_error: str | None
    resolved_at: str
    revision: int
    collected_at: str | None = None  # an agent's question: when the agent first read it (P3)


class QuestionOut(Out):
    request_id: str
    kind: QuestionKindField
    prompt: str
    options: list[OptionOut]
    allow_text: bool
    status: QuestionStatusField
    incarnation: str
    asked_at: str
    expires_at: str
    receipt: ReceiptOut | None
    asker: AskerOut | None = None  # when an agent asked it (P3), not Clankie


class Snapshot(Out):
    conversation_id: str
    incarnation: str
    revision: int
    pending: QuestionOut | None
    request: QuestionOut | None
    # The ended questions whose receipts R1 keeps, newest first: what a client may name by
    # a prefix (SPEC section 10 "CLI"), read whole with `request_id`. Bounded by R1 (S3).
    ended_requests: list[str] = []


class AnswerReply(Out):
    receipt: ReceiptOut
    duplicate: bool


class WorkspaceOut(Out):
    path: str


class MembershipOut(Out):
    """The read-only project-membership fact (SPEC section 9)."""

    status: Literal["member", "not_member", "unknown"]
    project_id: str | None
    reason: str | None


class RunOut(Out):
    run_id: str
    conversation_id: str
    kind: RunKindField
    status: RunStatusField
    error: str | None
    receipt_id: str | None
    created_at: str
    started_at: str | None
    finished_at: str | None


class ConversationOut(Out):
    conversation_id: str
    kind: ConversationKindField
    workspace: WorkspaceOut | None
    incarnation: str
    revision: int
    native_owner: str | None
    created_at: str
    asker: AskerOut | None = None  # an agent conversation's (P3)
    membership: MembershipOut | None = None
    # `conversation_get` only: the queued and running runs, oldest first (what `clankie
    # conversations stop` and the TUI's `/stop` stop, R7); null where not read.
    unfinished_runs: list[RunOut] | None = None


class PendingOut(Out):
    """The question waiting in a listed conversation (SPEC section 10)."""

    request_id: str
    prompt: str
    expires_at: str


class ListedConversationOut(ConversationOut):
    """A `conversation_list` item: what waits in it (SPEC section 10 "Finding what waits").
    The fields are optional so that an older service's items still read."""

    pending: PendingOut | None = None
    last_activity_at: str | None = None
    run: Literal["running", "queued"] | None = None
    archived: bool = False


class ConversationsOut(Out):
    conversations: list[ListedConversationOut]
    next_after: str | None = None  # the cursor of the next page; null on the last page


# Events (SPEC section 8), each as `clankie.core.model`'s events write them (`body`), in
# their order. V2's two question events keep exactly their fields; V4's may gain fields, so a
# field a newer service adds passes. An event of a type this version does not know (a newer
# service's) is `UnknownEvent`: kept as it came, never "not clankie" (docs/decisions.md).


class InputRequestedEvent(Out):
    type: Literal["input_requested"]
    seq: int
    conversation_id: str
    request_id: str
    prompt: str
    choices: list[str]  # the option labels, empty for a text question
    at: str


class InputResolvedEvent(Out):
    type: Literal["input_resolved"]
    seq: int
    conversation_id: str
    request_id: str
    outcome: QuestionStatusField
    at: str


class GrowingEvent(Out):
    """A V4 event: these fields at least; a newer service may add more."""

    model_config = ConfigDict(extra="allow", frozen=True)


class MessageEvent(GrowingEvent):
    type: Literal["message"]
    seq: int
    conversation_id: str
    message_id: str
    author: AuthorField
    text: str
    at: str
    # SPEC D6: how a reply of Clankie's was cut off; null (or absent, before it) if not
    partial: Literal["stopped", "failed", "interrupted"] | None = None


class RunStatusEvent(GrowingEvent):
    type: Literal["run_status"]
    seq: int
    conversation_id: str
    run_id: str
    kind: RunKindField
    status: RunStatusField
    error: str | None = None  # null unless failed; a reader takes its absence as null
    at: str


class ConversationResetEvent(GrowingEvent):
    type: Literal["conversation_reset"]
    seq: int
    conversation_id: str
    at: str


class ToolActivityEvent(GrowingEvent):
    type: Literal["tool_activity"]
    seq: int
    conversation_id: str
    run_id: str
    tool: str
    status: Literal["ok", "refused", "error"]
    code: str | None = None  # null when ok; a reader takes its absence as null
    summary: str
    at: str


class RunActivityEvent(GrowingEvent):
    type: Literal["run_activity"]
    seq: int
    conversation_id: str
    run_id: str
    activity: Literal["model_retry"]
    summary: str
    retry_at: str
    at: str
    withdrawn: Withdrawn | None = None  # SPEC D8: the try's reply that readers saw


class Withdrawn(Out):
    """A try's live reply, taken back (SPEC D8): never stored, never sent to the model."""

    reply_id: str
    length: int


KNOWN_EVENTS: dict[str, type[Out]] = {
    "input_requested": InputRequestedEvent,
    "input_resolved": InputResolvedEvent,
    "message": MessageEvent,
    "run_status": RunStatusEvent,
    "conversation_reset": ConversationResetEvent,
    "tool_activity": ToolActivityEvent,
    "run_activity": RunActivityEvent,
}


class UnknownEvent(GrowingEvent):
    """An event of a type not in `KNOWN_EVENTS` (V4: other event types exist): its `type`
    and `seq`, and whatever else it carries, as it came."""

    type: Annotated[str, Field(json_schema_extra={"not": {"enum": list(KNOWN_EVENTS)}})]
    seq: int


def _event_tag(value: object) -> str:
    """The union's tag: an event's own `type` where this version knows it, else `unknown`."""
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) and kind in KNOWN_EVENTS else "unknown"


Event = Annotated[
    Annotated[InputRequestedEvent, Tag("input_requested")]
    | Annotated[InputResolvedEvent, Tag("input_resolved")]
    | Annotated[MessageEvent, Tag("message")]
    | Annotated[RunStatusEvent, Tag("run_status")]
    | Annotated[ConversationResetEvent, Tag("conversation_reset")]
    | Annotated[ToolActivityEvent, Tag("tool_activity")]
    | Annotated[RunActivityEvent, Tag("run_activity")]
    | Annotated[UnknownEvent, Tag("unknown")],
    Discriminator(_event_tag)]
"""One event of an `events_tail` page, told apart by its `type`."""


class LiveReply(Out):
    """The reply being written in a conversation (SPEC D2, D4), read by `events_tail` with
    `live`: never an event, never stored. `text` is the reply from `offset` to `length`,
    counted in code points: a delta after what the reader sent, else a snapshot
    (`offset` 0)."""

    type: Literal["reply_delta"]
    conversation_id: str
    run_id: str
    reply_id: str
    attempt: int
    state: Literal["waiting", "writing", "quiet", "complete"]
    offset: int
    text: str
    length: int
    calling: list[str]
    idle_ms: int
    started_at: str
    at: str


class EventsOut(Out):
    events: list[Event]
    next_after: int
    oldest_seq: int
    trimmed: bool
    # Only when asked for (`live`; SPEC D4): a page made without it is exactly as before.
    live: LiveReply | MISSING | None = MISSING
    # Only on a wait the service's stop cut short (V1): it may come back running another
    # model, so a follower reads it again as after any loss.
    service_stopping: bool | MISSING = MISSING


class SendOut(Out):
    message_id: str
    run_id: str | None


class ResetOut(Out):
    incarnation: str
    revision: int


class TokenOut(Out):
    credential_id: str
    token: str


class PairingOut(Out):
    """`device_pair_start`: the one-time code (shown once, stored only as a hash) and, an
    addition, the confirmation `word` the page shows beside "Pair this browser as NAME?".
    The credential that finishing the pairing creates gets `pairing_id` as its id."""

    pairing_id: str
    code: str
    expires_at: str
    word: str


class LeaseOut(Out):
    lease_id: str
    expires_at: str


class CredentialOut(Out):
    credential_id: str
    kind: CredentialKindField
    mode: DeviceModeField | None
    name: str
    created_at: str
    last_used_at: str | None
    revoked: bool
    rotated_at: str | None
    holds_lease: bool
    # H2: a browser paired by a code: the User-Agent it sent (cut to 512 characters);
    # text from others, shown only escaped. None for every other credential.
    user_agent: str | None = None


class CredentialsOut(Out):
    credentials: list[CredentialOut]


class MessageOut(Out):
    message_id: str


class ProjectOut(Out):
    project_id: str


class Empty(Out):
    pass


class ModelOut(Out):
    """The model a service runs with: `model` and `endpoint_host` are null for the scripted
    (offline) model; the endpoint is host[:port] only, never a path, a query or a key.
    `endpoint_digest` (an addition) is a short SHA-256 of the whole base URL, for `clankie
    doctor` to tell whether its settings name the same one. `key_set` (an addition) says
    whether the provider's key variable is set in the service's environment (never the key),
    for `clankie doctor` to ask the endpoint as the service does."""

    provider: str
    model: str | None
    endpoint_host: str | None
    endpoint_digest: str | None = None
    key_set: bool | None = None
    # SPEC D18: whether its calls stream; null until the first call says
    streaming: bool | None = None


class ServiceInfoOut(Out):
    """`service_info`: what this service is and runs with; never a key or a token."""

    version: str
    started_at: str
    model: ModelOut
    settings: dict[str, Any]
    # An addition: where the phone page is reached (SPEC H1), null when not served.
    web_url: str | None = None


class AskResult(Out):
    """The `ask_question` tool's result (SPEC Q2)."""

    status: Literal["pending", "refused"]
    request_id: str | None = None
    reason: str | None = None
    detail: str | None = None


class Problem(BaseModel):
    """An RFC 9457 problem document; `code` is the SPEC error code. Extras may follow."""

    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)
    type: str
    title: str
    status: int
    detail: str
    code: str


# ------------------------------------------------------------- agents (SPEC section 13)


class AskOwner(Strict):
    """An agent's question as its MCP tool `ask_owner` takes it (P4), with Q's bounds: the
    bridge checks a tool call's arguments against this before anything is sent."""

    kind: QuestionKindField
    prompt: Prompt
    options: Annotated[list[OptionIn], Field(max_length=10)] = []
    allow_text: bool = False
    expires_in_s: Annotated[int, Field(ge=1, le=31_536_000), WHOLE] | None = None

    @model_validator(mode="after")
    def _options_fit_the_kind(self) -> AskOwner:
        if self.kind is QuestionKind.TEXT and (self.options or self.allow_text):
            raise ValueError("a text question has no options (and always takes text)")
        if self.kind is QuestionKind.CHOICE and len(self.options) < 2:
            raise ValueError("a choice question has 2 to 10 options")
        return self


class AgentAsk(AskOwner):
    """`agent_ask`: an agent's question, asked in its conversation of this workspace (made
    by the first ask): never waits (P4's `ask_owner`, with where and through which client).
    Q's bounds."""

    workspace: PathText
    client: Name | None = None  # the MCP client's `clientInfo.name`


class AgentRequest(Strict):
    request_id: Uuid


class AgentWait(Strict):
    """`agent_wait`: how the agent's question stands, once it has ended or after `wait_s`
    (at most 30 s, like `events_tail`; 0 reads at once)."""

    request_id: Uuid
    wait_s: Annotated[int, Field(ge=0, le=30), WHOLE] = 25


class AgentList(Strict):
    workspace: PathText


class AgentOption(Out):
    option_id: str
    label: str


class AgentAnswerer(Out):
    kind: CredentialKindField
    name: str


class AgentQuestionOut(Out):
    """An agent's question as the agent reads it (P4): how it stands, and, once it has
    ended, how (the answer's option with its label, or the text; who; when)."""

    request_id: str
    conversation_id: str
    status: QuestionStatusField
    prompt: str
    kind: QuestionKindField
    options: list[AgentOption]
    asked_at: str
    expires_at: str
    reason: str | None = None
    answer: AgentOption | TextAnswer | None = None
    receipt_id: str | None = None
    answered_by: AgentAnswerer | None = None
    resolved_at: str | None = None
    collected_at: str | None = None  # information only: it consumes nothing
    # A wait the service's stop cut short (P4: it returned before `wait_s` and before the
    # question ended, which the restart will then do, R3): the agent is told so.
    service_stopping: bool = False


class AgentAskOut(Out):
    status: Literal["pending", "refused"]
    request_id: str | None = None
    conversation_id: str | None = None
    options: list[AgentOption] = []
    expires_at: str | None = None
    duplicate: bool = False
    reason: str | None = None
    pending_request_id: str | None = None


class AgentQuestionsOut(Out):
    questions: list[AgentQuestionOut]  # the pending one, then the receipts kept, newest first


class AgentCancelOut(Out):
    question: AgentQuestionOut
    duplicate: bool


class WhoAmIOut(Out):
    credential_id: str
    kind: CredentialKindField
    name: str


# --------------------------------------------------------------------------- the op table


InT = TypeVar("InT", bound="Strict")
OutT = TypeVar("OutT", bound="Out")


@dataclass(frozen=True)
class Op(Generic[InT, OutT]):
    """One dispatcher operation, named once: its name on the wire (`POST /v1/ops/{name}`),
    its input and output shapes, who may call it (a rule of `clankie.core.authority`),
    whether it may wait (a long-poll: the edge waits for it on its loop, the client gives
    it its `wait_s`/`wait_ms` more time) and whether its input is its own credential (no
    bearer token: a pairing code, SPEC H2). The dispatcher, the authority check, the
    OpenAPI document, the client (`Client.op(spec, request) -> OutT`) and the tests all
    read this table."""

    name: str
    input: type[InT]
    output: type[OutT]
    who_may: may.Rule
    long_poll: bool = False
    credential_in_body: bool = False


# The ops of SPEC section 10 (their names are fixed), and `credential_list`, which
# `clankie devices list` needs and SPEC does not name (docs/decisions.md).
CONVERSATION_CREATE: Final = Op(
    "conversation_create", ConversationCreate, ConversationOut, may.operator)
CONVERSATION_GET: Final = Op("conversation_get", ConversationRef, ConversationOut, may.reader)
CONVERSATION_LIST: Final = Op("conversation_list", ConversationList, ConversationsOut, may.reader)
CONVERSATION_SEND: Final = Op("conversation_send", ConversationSend, SendOut, may.ANSWERER)
CONVERSATION_RESET: Final = Op("conversation_reset", ConversationRef, ResetOut, may.operator)
CONVERSATION_ARCHIVE: Final = Op("conversation_archive", ConversationRef, Empty, may.operator)
CONVERSATION_SET_WORKSPACE: Final = Op(
    "conversation_set_workspace", ConversationSetWorkspace, ConversationOut, may.operator)
EVENTS_TAIL: Final = Op("events_tail", EventsTail, EventsOut, may.reader, long_poll=True)
RUN_GET: Final = Op("run_get", RunRef, RunOut, may.reader)
RUN_CANCEL: Final = Op("run_cancel", RunRef, RunOut, may.ANSWERER)
DEVICE_PAIR: Final = Op("device_pair", DevicePair, TokenOut, may.operator)
DEVICE_TAKE_CONTROL: Final = Op(
    "device_take_control", DeviceTakeControl, LeaseOut, may.control_device)
DEVICE_RELEASE: Final = Op("device_release", Nothing, Empty, may.device)
CREDENTIAL_ISSUE: Final = Op("credential_issue", CredentialIssue, TokenOut, may.operator)
CREDENTIAL_ROTATE: Final = Op("credential_rotate", CredentialRotate, TokenOut, may.reader)
CREDENTIAL_LIST: Final = Op("credential_list", Nothing, CredentialsOut, may.operator)
CREDENTIAL_REVOKE: Final = Op("credential_revoke", CredentialRevoke, Empty, may.operator)
DEVICE_PAIR_START: Final = Op("device_pair_start", DevicePairStart, PairingOut, may.operator)
DEVICE_PAIR_FINISH: Final = Op(
    "device_pair_finish", DevicePairFinish, TokenOut, may.nobody, credential_in_body=True)
OWNER_REVOKE: Final = Op("owner_revoke", Nothing, Empty, may.operator)
NATIVE_TAKEOVER: Final = Op("native_takeover", NativeTakeover, ConversationOut, may.operator)
ROOM_POST: Final = Op("room_post", RoomPost, MessageOut, may.any_of(may.operator, may.captain))
PANE_METADATA_SET: Final = Op(
    "pane_metadata_set", PaneMetadataSet, Empty, may.any_of(may.operator, may.captain))
PROJECT_REGISTER: Final = Op("project_register", ProjectRegister, ProjectOut, may.operator)
INPUT_GET: Final = Op("input_get", InputGet, Snapshot, may.reader)
INPUT_ANSWER: Final = Op("input_answer", InputAnswer, AnswerReply, may.ANSWERER)
INPUT_CANCEL: Final = Op("input_cancel", InputCancel, AnswerReply, may.ANSWERER)
SERVICE_INFO: Final = Op("service_info", Nothing, ServiceInfoOut, may.reader)
AGENT_ASK: Final = Op("agent_ask", AgentAsk, AgentAskOut, may.agent)
AGENT_WAIT: Final = Op("agent_wait", AgentWait, AgentQuestionOut, may.agent, long_poll=True)
AGENT_LIST: Final = Op("agent_list", AgentList, AgentQuestionsOut, may.agent)
AGENT_CANCEL: Final = Op("agent_cancel", AgentRequest, AgentCancelOut, may.agent)
WHOAMI: Final = Op("whoami", Nothing, WhoAmIOut, may.anyone)

# Every op by its name, as the edge receives it.
OPS: Final[dict[str, Op[Any, Any]]] = {spec.name: spec for spec in (
    CONVERSATION_CREATE, CONVERSATION_GET, CONVERSATION_LIST, CONVERSATION_SEND,
    CONVERSATION_RESET, CONVERSATION_ARCHIVE, CONVERSATION_SET_WORKSPACE, EVENTS_TAIL,
    RUN_GET, RUN_CANCEL, DEVICE_PAIR, DEVICE_TAKE_CONTROL, DEVICE_RELEASE,
    CREDENTIAL_ISSUE, CREDENTIAL_ROTATE, CREDENTIAL_LIST, CREDENTIAL_REVOKE,
    DEVICE_PAIR_START, DEVICE_PAIR_FINISH, OWNER_REVOKE, NATIVE_TAKEOVER, ROOM_POST,
    PANE_METADATA_SET, PROJECT_REGISTER, INPUT_GET, INPUT_ANSWER, INPUT_CANCEL,
    SERVICE_INFO, AGENT_ASK, AGENT_WAIT, AGENT_LIST, AGENT_CANCEL, WHOAMI,
)}
