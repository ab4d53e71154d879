"""The words every part of clankie shares, each declared once: codes, reasons and kinds.

Owns the problem codes of SPEC section 10 with each one's HTTP status and CLI exit code in
one table (`CODES`), the reasons a question ends without an answer (section 6), the reasons
asking is refused (Q3), the errors a run ends with that are not a model's (R3, R7), the
codes a workspace tool's result refuses with (section 11, W1-W10: `WorkspaceCode`), and the
kinds and statuses of section 2's things (a conversation's kind, a question's status, a
credential's kind, ...), which `core.model`'s values and `dto`'s shapes both carry.
`core.errors`, `api.problems` and `cli.common` read their mappings from here.

Standard library only: the CLI imports it on its light paths (`--help`).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum, StrEnum
from typing import Final


class Exit(IntEnum):
    """The CLI's exit codes (SPEC section 10, "CLI")."""

    DONE = 0  # accepted, duplicate, cancelled, read
    OTHER = 1  # anything else
    USAGE = 2  # usage or invalid input
    CONFLICT = 3  # read again (`stale_*`)
    REFUSED = 4  # the question cannot take this any more
    DENIED = 5  # `unauthenticated` / `forbidden`
    MISSING = 6  # `not_found` / `unknown_request`
    UNCERTAIN = 7  # the request may have reached the service but no reply came


class Code(StrEnum):
    """A problem document's `code` (SPEC section 10, "Dispatcher"): every refusal has one."""

    INVALID_REQUEST = "invalid_request"
    PAYLOAD_TOO_LARGE = "payload_too_large"
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"
    NOT_FOUND = "not_found"
    UNKNOWN_REQUEST = "unknown_request"
    STALE_INCARNATION = "stale_incarnation"
    STALE_REVISION = "stale_revision"
    ALREADY_ANSWERED = "already_answered"
    REQUEST_CLOSED = "request_closed"
    REQUEST_EXPIRED = "request_expired"
    NOT_ELIGIBLE = "not_eligible"
    INVALID_ANSWER = "invalid_answer"
    QUESTION_PENDING = "question_pending"  # a conversation whose question waits is not archived
    STORAGE_UNAVAILABLE = "storage_unavailable"
    INTERNAL_ERROR = "internal_error"


# SPEC section 10: each code's HTTP status ("Dispatcher") and exit code ("CLI").
CODES: Final[Mapping[Code, tuple[int, Exit]]] = {
    Code.INVALID_REQUEST: (422, Exit.USAGE),
    Code.PAYLOAD_TOO_LARGE: (413, Exit.USAGE),
    Code.UNAUTHENTICATED: (401, Exit.DENIED),
    Code.FORBIDDEN: (403, Exit.DENIED),
    Code.NOT_FOUND: (404, Exit.MISSING),
    Code.UNKNOWN_REQUEST: (404, Exit.MISSING),
    Code.STALE_INCARNATION: (409, Exit.CONFLICT),
    Code.STALE_REVISION: (409, Exit.CONFLICT),
    Code.ALREADY_ANSWERED: (409, Exit.REFUSED),
    Code.REQUEST_CLOSED: (409, Exit.REFUSED),
    Code.REQUEST_EXPIRED: (409, Exit.REFUSED),
    Code.NOT_ELIGIBLE: (409, Exit.REFUSED),
    Code.QUESTION_PENDING: (409, Exit.REFUSED),
    Code.INVALID_ANSWER: (422, Exit.USAGE),
    Code.STORAGE_UNAVAILABLE: (503, Exit.OTHER),
    Code.INTERNAL_ERROR: (500, Exit.OTHER),
}
STATUS_OF_CODE: Final[Mapping[str, int]] = {code: status for code, (status, _) in CODES.items()}
EXIT_OF_CODE: Final[Mapping[str, Exit]] = {code: exit for code, (_, exit) in CODES.items()}


class Reason(StrEnum):
    """Why a question ended without an answer: a receipt's `reason` (SPEC section 6)."""

    EXPLICIT = "explicit"  # input_cancel
    EXPIRED = "expired"
    RESET = "reset"
    OWNER_REVOKED = "owner_revoked"
    ASKER_REVOKED = "asker_revoked"  # the agent credential that asked was revoked (P2)
    WORKSPACE_REPLACED = "workspace_replaced"
    WORKSPACE_MISSING = "workspace_missing"  # found on use: the saved directory is gone
    NATIVE_TAKEOVER = "native_takeover"
    RESTART = "restart"


class AskRefusal(StrEnum):
    """Why `ask_question` is refused (SPEC Q3): the tool result's `reason`. Not a `Reason`:
    a conversation a native seat owns refuses asking as `native_owned`, while the question
    such a takeover ends is `invalidated` for `native_takeover`."""

    NOT_OWNER_CONVERSATION = "not_owner_conversation"
    OWNER_REVOKED = "owner_revoked"
    WORKSPACE_MISSING = "workspace_missing"
    WORKSPACE_REPLACED = "workspace_replaced"
    NATIVE_OWNED = "native_owned"
    STALE_RUN = "stale_run"
    QUESTION_PENDING = "question_pending"
    TOO_MANY_PENDING = "too_many_pending"  # an agent's, beyond Q3: AGENT_PENDING_MAX


class WorkspaceCode(StrEnum):
    """A workspace tool's refusal (SPEC section 11): the `code` of the result the model
    reads, `{"status": "refused", "code", "reason"}`, and of the `tool_activity` event (W9).
    The last five are not named by SPEC; each says a failure SPEC leaves unnamed."""

    INVALID_ARGUMENT = "invalid_argument"  # W1, W7 (a revision)
    INVALID_PATH = "invalid_path"  # W2
    OUTSIDE_WORKSPACE = "outside_workspace"  # W2
    NOT_REGULAR_FILE = "not_regular_file"  # W3
    IS_DIRECTORY = "is_directory"  # W3
    NOT_FOUND = "not_found"  # W3
    DENIED_PATH = "denied_path"  # W4
    BINARY_FILE = "binary_file"  # W5
    TIME_LIMIT = "time_limit"  # W5
    UNSAFE_REPOSITORY = "unsafe_repository"  # W7
    REPOSITORY_TOO_LARGE = "repository_too_large"  # W7
    NOT_A_REPOSITORY = "not_a_repository"  # W7
    WORKSPACE_REPLACED = "workspace_replaced"  # W8
    BUDGET_EXHAUSTED = "budget_exhausted"  # W10
    PERMISSION_DENIED = "permission_denied"  # the user may not read it
    WORKSPACE_MISSING = "workspace_missing"  # no workspace, or its directory is gone
    INVALID_PATTERN = "invalid_pattern"  # an RE2 pattern too complex to search with
    UNKNOWN_TOOL = "unknown_tool"  # a tool name not in W1
    IO_ERROR = "io_error"  # the file system failed (the result's status is "error")


class Partial(StrEnum):
    """How a message of Clankie's was cut off (SPEC D6-D9); a finished one has none."""

    STOPPED = "stopped"  # the owner stopped the run while it was written (D7)
    FAILED = "failed"  # the model call failed for good (D8)
    INTERRUPTED = "interrupted"  # clankie was killed; its last checkpoint (D9)


class RunError(StrEnum):
    """A run's `error` when the service, not the model, ended it (SPEC R3, R7)."""

    ORPHANED_BY_RESTART = "orphaned_by_restart"
    STOPPED_BY_OWNER = "stopped_by_owner"


# ------------------------------------------------- the kinds and statuses of SPEC section 2


class ConversationKind(StrEnum):
    OWNER = "owner"
    NATIVE_SEAT = "native_seat"
    ROOM = "room"
    GLOBAL = "global"
    SIDE = "side"
    AGENT = "agent"  # an MCP agent's questions, one per (agent credential, workspace): P3


class QuestionKind(StrEnum):
    TEXT = "text"
    CHOICE = "choice"


class QuestionStatus(StrEnum):
    """A question's status (SPEC S2)."""

    PENDING = "pending"
    ANSWERED = "answered"
    CANCELLED = "cancelled"
    EXPIRED = "expired"
    INVALIDATED = "invalidated"




class RunKind(StrEnum):
    TURN = "turn"
    CONTINUATION = "continuation"


class RunStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


class CredentialKind(StrEnum):
    OPERATOR = "operator"
    DEVICE = "device"
    CAPTAIN = "captain"
    AGENT = "agent"  # a coding agent asking through `clankie mcp`: asks, never answers (P2)


class DeviceMode(StrEnum):
    CONTROL = "control"
    READ_ONLY = "read_only"


class Author(StrEnum):
    OWNER = "owner"
    CLANKIE = "clankie"
    ROOM = "room"
