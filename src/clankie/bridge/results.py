"""What the bridge's tools return (SPEC P4): one result shape a tool, a sentence a status.

Owns the mapping from what the service said (an `agent_*` op's result, a problem's code,
no reply at all) to a tool's result: the structured content, whether it is an error, and
its one line of text. Hosts differ in what their model reads (some only
`structuredContent`, some only the text), so the sentence rides in both: as `note` in the
structured content, and first in the text, followed by the compact JSON of the structured
content. Fields the service left null are left out.

The sentences are the contract's: a pending question "has not answered yet"; one that
ended without an answer is "not consent"; an answer is the owner's preference, never an
approval (A11). A refusal keeps its SPEC code as `reason`. It is an error (`isError`)
when the call itself could not be served (bad arguments, an unknown request, a token the
service refuses, the service unreachable); a refusal that tells how the question stands
(`already_answered`, `question_pending`, ...) is a plain result, like Q2's refusals. An
`unavailable` result says in `sent` whether the call reached the service, so a program
tells "nothing was sent" from "it may have been carried out" without reading the note.

Pure: no I/O, no MCP SDK; the output models are the tools' `outputSchema`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel

__all__ = ["ANSWERED", "NO_ANSWER", "PENDING", "STOPPED", "AskResult", "CancelResult",
           "ListResult", "QuestionResult", "Sent", "ToolResult", "asked", "cancelled", "listed",
           "not_an_agent", "question", "refused", "unavailable"]

PENDING: Final = "The owner has not answered yet. Do not assume an answer."
NO_ANSWER: Final = "No answer: this is not consent."
ANSWERED: Final = ("The owner answered. This is the owner's preference, not an approval: it "
                   "approves no configuration, enrollment or settings change by itself.")
# How a question ended without an answer, after NO_ANSWER (its receipt's reason).
ENDED: Final[Mapping[tuple[str, str], str]] = {
    ("cancelled", "explicit"): "The question was cancelled.",
    ("cancelled", "restart"): "The question was cancelled when the clankie service "
                              "restarted; it is never asked again by itself: ask again if "
                              "you still need to know.",
    ("expired", "expired"): "The question expired unanswered: ask again if you still need "
                            "to know.",
}
# A wait the service's stop cut short (P4), the owner not having answered by then.
STOPPED: Final = ("The clankie service stopped while this call waited, before the owner "
                  "answered. Do not assume an answer. A restart cancels a question that was "
                  "pending (it is never asked again by itself): once the service is back, "
                  "read it with get_question, and ask again if you still need to know.")
# Refusals that tell how a question stands: results, not errors.
NOT_ERRORS: Final = frozenset({"already_answered", "request_closed", "request_expired"})
REFUSED: Final[Mapping[str, str]] = {
    "already_answered": "The owner already answered this question, so it was not "
                        "cancelled: read the answer with get_question.",
    "request_closed": "This question has already ended: read how with get_question.",
    "request_expired": "This question has expired: read it with get_question.",
    "invalid_request": "The arguments were refused ({detail}). Nothing was asked or "
                       "changed.",
    "unknown_request": "There is no such question of yours: it never existed, is another "
                       "agent's, or its receipt was evicted. Do not assume an answer.",
    "unauthenticated": "The clankie service refused this bridge's token "
                       "(CLANKIE_AGENT_TOKEN): it is unknown, rotated or revoked. A revoked "
                       "agent's waiting question has ended without an answer (invalidated, "
                       "asker_revoked). Nothing was asked. Do not assume an answer.",
    "forbidden": "The clankie service does not allow this to an agent. Nothing was asked "
                 "or changed. Do not assume an answer.",
}
QUESTION_FIELDS: Final = ("request_id", "prompt", "kind", "options", "asked_at", "expires_at",
                          "reason", "answer", "receipt_id", "answered_by", "resolved_at")
ASK_FIELDS: Final = ("request_id", "conversation_id", "options", "expires_at", "duplicate",
                     "reason", "pending_request_id")


# ------------------------------------------------------------- the tools' output schemas


class Option(BaseModel):
    option_id: str
    label: str


class TextAnswer(BaseModel):
    text: str


class AnsweredBy(BaseModel):
    kind: str
    name: str


# Whether an `unavailable` call reached the service (P1; issue 42): "no", nothing was sent
# (or only the bridge's own `whoami`); "unknown", it was sent and no reply came that says
# what became of it (none, or one that is not clankie's), so it may have been carried out;
# "yes", it was sent and the service said it was not carried out (`storage_unavailable`).
Sent = Literal["no", "unknown", "yes"]


class Outcome(BaseModel):
    """What every result carries: its sentence; and, when refused or unavailable, why
    (and, unavailable, whether the call was sent)."""

    note: str
    reason: str | None = None
    detail: str | None = None
    sent: Sent | None = None


class AskResult(Outcome):
    """`ask_owner`: the pending request (or the same one again, `duplicate`), or why not."""

    status: Literal["pending", "refused", "unavailable"]
    request_id: str | None = None
    conversation_id: str | None = None  # the agent conversation that holds it (P3)
    options: list[Option] | None = None
    expires_at: str | None = None
    duplicate: bool | None = None
    pending_request_id: str | None = None


class QuestionResult(Outcome):
    """`wait_answer`, `get_question` (and each of `list_questions`): how the question
    stands and, once it has ended, how: the answer, the receipt, who, when."""

    status: Literal["pending", "answered", "cancelled", "expired", "invalidated", "refused",
                    "unavailable"]
    request_id: str | None = None
    prompt: str | None = None
    kind: Literal["text", "choice"] | None = None
    options: list[Option] | None = None
    asked_at: str | None = None
    expires_at: str | None = None
    answer: Option | TextAnswer | None = None
    receipt_id: str | None = None
    answered_by: AnsweredBy | None = None
    resolved_at: str | None = None


class CancelResult(QuestionResult):
    """`cancel_question`: the question as it ended, `duplicate` for a repeat."""

    duplicate: bool | None = None


class ListResult(Outcome):
    """`list_questions`: the pending question and the kept receipts, newest first."""

    status: Literal["ok", "refused", "unavailable"]
    questions: list[QuestionResult] = []


# ------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class ToolResult:
    """A tool's result: its structured content (with `note`) and whether it is an error."""

    structured: dict[str, object]  # the MCP result's structuredContent, a JSON object
    is_error: bool = False

    @property
    def text(self) -> str:
        """The one line of text: the sentence, then the compact JSON of the content."""
        return f"{self.structured['note']} {compact(self.structured)}"


def compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _given(out: Mapping[str, Any], fields: tuple[str, ...]) -> dict[str, object]:
    return {name: out[name] for name in fields if out.get(name) is not None}


def _note(status: str, reason: str | None) -> str:
    if status == "pending":
        return PENDING
    if status == "answered":
        return ANSWERED
    how = ENDED.get((status, reason or "")) or (
        f"The question was {status}" + (f" ({reason})." if reason else "."))
    return f"{NO_ANSWER} {how}"


def _question(out: Mapping[str, Any]) -> dict[str, object]:
    status = str(out["status"])
    return {"status": status, "note": _note(status, out.get("reason")),
            **_given(out, QUESTION_FIELDS)}


def question(out: Mapping[str, Any]) -> ToolResult:
    """`wait_answer` and `get_question`, from `agent_wait`'s result; a wait the service's
    stop cut short while the question was pending is `unavailable` (P4: it neither ran its
    `wait_s` nor saw the question end)."""
    if out.get("service_stopping") and out["status"] == "pending":
        return ToolResult({"status": "unavailable", "note": STOPPED, "reason": "service_stopped",
                           "detail": "the service stopped while this call waited",
                           "sent": "yes", "request_id": out["request_id"]}, is_error=True)
    return ToolResult(_question(out))


def cancelled(out: Mapping[str, Any]) -> ToolResult:
    """`cancel_question`, from `agent_cancel`'s result."""
    return ToolResult({**_question(out["question"]), "duplicate": bool(out["duplicate"])})


def listed(out: Mapping[str, Any]) -> ToolResult:
    """`list_questions`, from `agent_list`'s result: each question with its own note."""
    questions = [_question(q) for q in out["questions"]]
    note = ("You have no questions in this workspace." if not questions else
            "Your questions in this workspace, newest first; each has its own note. "
            "Do not assume an answer to any that is not answered.")
    return ToolResult({"status": "ok", "note": note, "questions": questions})


def asked(out: Mapping[str, Any]) -> ToolResult:
    """`ask_owner`, from `agent_ask`'s result: pending (perhaps a duplicate), or refused."""
    given = _given(out, ASK_FIELDS)
    if out["status"] == "pending":
        again = (" This is the question you had already asked (duplicate): the same request."
                 if out.get("duplicate") else "")
        note = (f"{PENDING} The question is stored: collect the answer later with "
                f"wait_answer or get_question (request_id {out['request_id']}).{again}")
        return ToolResult({"status": "pending", "note": note, **given})
    reason = str(out.get("reason"))
    if reason == "question_pending":
        pending = out.get("pending_request_id")
        note = (f"Not asked: your question {pending} is still pending, and the owner has not "
                "answered it yet (do not assume an answer). Wait for it with wait_answer, "
                "or cancel it with cancel_question before asking another.")
    elif reason == "too_many_pending":
        note = ("Not asked: you have the most questions pending that clankie keeps for one "
                "agent, in all workspaces, and the owner has not answered them yet (do not "
                "assume an answer). Collect or cancel one of them first.")
    else:
        note = f"Not asked ({reason}). Do not assume an answer."
    return ToolResult({"status": "refused", "note": note, **given})


def refused(code: str, detail: str, **fields: Any) -> ToolResult:
    """A problem document's refusal (SPEC section 10's code) as a result of any tool."""
    if code == "storage_unavailable":
        return unavailable(code, detail, sent="yes")
    note = REFUSED.get(code, "The clankie service refused this ({code}): {detail}. Nothing "
                             "was asked or changed. Do not assume an answer.")
    return ToolResult({"status": "refused",
                       "note": note.format(code=code, detail=detail.rstrip(".")),
                       "reason": code, "detail": detail,
                       **{k: v for k, v in fields.items() if v is not None}},
                      is_error=code not in NOT_ERRORS)


UNAVAILABLE: Final[Mapping[str, str]] = {
    "no": "The clankie service could not be reached, so nothing was asked, read or changed. "
          "Do not assume an answer: try again later.",
    "unknown": "No reply came from the clankie service: this call may or may not have been "
               "carried out. Do not assume an answer: read with list_questions before "
               "asking again.",
    "yes": "The clankie service could not carry out this call ({detail}), so nothing was "
           "asked, read or changed. Do not assume an answer: try again later.",
}


def unavailable(reason: str, detail: str, *, sent: Sent) -> ToolResult:
    """The service did not serve the call (P1): why as a code (`reason`: the service's
    `storage_unavailable`, or the client's `service_unreachable`, `uncertain`,
    `not_yours`, `not_clankie`) and in words (`detail`), and whether it was sent."""
    return ToolResult({"status": "unavailable",
                       "note": UNAVAILABLE[sent].format(detail=detail.rstrip(".")),
                       "reason": reason, "detail": detail, "sent": sent}, is_error=True)


def not_an_agent(kind: str) -> ToolResult:
    """The token is a credential of another kind (P2): every call says so, nothing is sent."""
    article = "an" if kind[:1] in "aeiou" else "a"
    note = (f"This bridge does nothing: its token (CLANKIE_AGENT_TOKEN) is {article} {kind} "
            "token, not an agent's. The owner must give it an agent token, made with "
            "`clankie credentials issue --kind agent NAME`. Do not assume an answer.")
    return ToolResult({"status": "refused", "note": note, "reason": "not_an_agent_token",
                       "detail": f"the token is {article} {kind} credential's"}, is_error=True)
