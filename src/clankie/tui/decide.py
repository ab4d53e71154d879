"""What the TUI decides, apart from the screen: pure (no Textual, no I/O, no clock).

Owns two decisions `ChatApp` used to make inline, so that they are tested in the fast loop:

- What a submitted line means (`line`, with `bind_answer` for the `/question` commands),
  given the latest snapshot and what the panel showed when the line was begun (`Shown`):
  an answer or a cancel bound to the shown request, its incarnation and revision
  (`Resolve`, SPEC section 10 "Operator TUI"), a chat message with the hint that it was
  not an answer (`SendChat`, A2), or words said in the log with nothing sent (`Say`);
  then what the log says of the reply (`answered`, `refused`: whether the question is
  shown again, `unsent`).
- The follow loop's step (V1, V3): after a page of `events_tail`, whether to pause before
  the next long poll, the line about trimmed events, whether to read the snapshot again and
  with which request, whether a new question is announced (`after_page`); after a failure,
  what to say and how long to wait before trying again (`lost`); on coming back, whether
  the header is read again (`reconnected`); and the words when the app stops following
  (`stopped`). The loop keeps its cursor and its failures in `Follow`.

The app does the I/O each outcome names and nothing else; it never resubmits an answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from clankie import dto, wording
from clankie.client import EMPTY_AT_ONCE_S, PAUSE_AFTER_EMPTY_S, ApiError, NotClankie, NotYours

from . import render
from .commands import (
    AGENT_USAGE,
    USAGE,
    AnswerOption,
    AnswerText,
    CancelQuestion,
    Chat,
    Command,
    Continue,
    Help,
    ShowQuestion,
    Stop,
    Usage,
)

# Between tries to reach a lost service: short, so that the TUI is connected again within
# 1 s of the service coming back (SPEC section 10 "Operator TUI"); a try on the home's
# socket costs the service nothing while it is down.
RETRY_S = (0.2, 0.5, 0.8)

# ------------------------------------------------------------------ a line typed


@dataclass(frozen=True)
class Shown:
    """What the panel showed when the input line was begun: the pending question's
    request ID ("" for none) and the revision; an answer typed for one question is never
    sent to another that replaced it meanwhile."""

    request_id: str
    revision: int


def shown(snapshot: dto.Snapshot | None) -> Shown:
    """What the panel shows now, as the line begun now is bound to."""
    q = snapshot.pending if snapshot else None
    return Shown(q.request_id, snapshot.revision) if q and snapshot else Shown("", 0)


@dataclass(frozen=True)
class Say:
    """Words for the log; nothing is sent. `keep`: the line stays in the input, selected
    whole, for the owner to turn into a command (Home) or to replace by typing."""

    words: str
    keep: bool = False


@dataclass(frozen=True)
class SendChat:
    """A chat message (never an answer, A2); `hint`, said on the line after it once the
    log shows it: that it was chat, and the command that answers."""

    text: str
    hint: str | None = None


@dataclass(frozen=True)
class Resolve:
    """One `input_answer` (an option or words) or `input_cancel`, bound to the request,
    incarnation and revision shown (SPEC section 10 "Operator TUI"). `agent`: an agent
    asked it (P3): no run of Clankie follows, the agent reads the answer."""

    request_id: str
    incarnation: str
    revision: int
    option_id: str | None = None
    text: str | None = None
    cancel: bool = False
    agent: bool = False

    @property
    def op(self) -> dto.Op[Any, dto.AnswerReply]:
        return dto.INPUT_CANCEL if self.cancel else dto.INPUT_ANSWER

    def payload(self, conversation_id: str) -> dict[str, str | int]:
        """The request as sent: the service validates it (a line a person typed is the
        service's to refuse, `invalid_request`, as from any client)."""
        sent: dict[str, str | int] = {
            "conversation_id": conversation_id, "request_id": self.request_id,
            "incarnation": self.incarnation, "revision": self.revision}
        if self.option_id is not None:
            sent["option_id"] = self.option_id
        if self.text is not None:
            sent["text"] = self.text
        return sent


Act = Say | SendChat | Resolve | ShowQuestion | Stop


def line(command: Command | None, snapshot: dto.Snapshot | None, against: Shown | None,
         agent: bool) -> Act | None:
    """What a submitted line (`command`, parsed) does, given the latest `snapshot`, what
    the panel showed when the line was begun (`against`) and whether an agent asks in
    this conversation (`agent`, P3: it reads only answers); None for an empty line."""
    if isinstance(command, Chat) and agent:
        return Say("Not sent: the agent reads only your answer to its question, never a "
                   "message. Answer with /question answer N (or /question text WORDS); "
                   "/question shows it.", keep=True)
    if command is None:
        return None
    if isinstance(command, Help):
        return Say(AGENT_USAGE if agent else USAGE)
    if isinstance(command, Usage):
        return Say(command.message)
    if isinstance(command, Continue) and agent:
        return Say("Not sent: no run of Clankie works in an agent's conversation; the agent "
                   "reads only your answer.")
    if isinstance(command, Continue):
        return SendChat(wording.CONTINUE_MESSAGE)  # an ordinary message, never a replay (R9)
    if isinstance(command, Stop) and agent:
        return Say("No run of Clankie works in an agent's conversation: there is nothing to "
                   "stop. /question cancel cancels the agent's question.")
    if isinstance(command, Chat):
        pending = snapshot.pending if snapshot else None
        return SendChat(command.text, render.answer_hint(pending, command.text))
    if isinstance(command, ShowQuestion | Stop):
        return command
    return bind_answer(snapshot, against, command)


def bind_answer(snapshot: dto.Snapshot | None, against: Shown | None,
                command: AnswerOption | AnswerText | CancelQuestion) -> Say | Resolve:
    """`/question answer N`, `/question text WORDS` or `/question cancel`, bound to what
    the panel shows (`snapshot`): the N-th option it shows, at its incarnation and
    revision; or the words that say why nothing is sent (not read yet, no question, the
    question or the revision changed since the line was begun, `against`, no such option,
    the kind of answer the question does not take)."""
    if snapshot is None:
        return Say("The question is not read yet (the service has not answered); "
                   "nothing was sent.")
    q = snapshot.pending
    if q is None:
        return Say(f"{wording.NO_QUESTION}; nothing was sent.")
    if against is not None and against.request_id != q.request_id:
        return Say("The question changed while you typed: read the one shown now and "
                   "answer again; nothing was sent.")
    if against is not None and against.revision != snapshot.revision:
        return Say(f"The conversation moved on while you typed (revision {against.revision} "
                   f"is now {snapshot.revision}): read the panel and the log, and answer "
                   "again; nothing was sent.")
    bound = Resolve(q.request_id, snapshot.incarnation, snapshot.revision,
                    agent=q.asker is not None)
    if isinstance(command, AnswerOption):
        if not q.options:
            return Say("This question takes words, not an option: /question text WORDS.")
        if command.number > len(q.options):
            return Say(f"There is no option {command.number}; the question shows "
                       f"{len(q.options)}.")
        return replace(bound, option_id=q.options[command.number - 1].option_id)
    if isinstance(command, AnswerText):
        if not q.allow_text:
            return Say("This question takes one of its options, not text: "
                       "/question answer N.")
        return replace(bound, text=command.text)
    return replace(bound, cancel=True)


def answered(bound: Resolve, reply: dto.AnswerReply) -> str:
    """What the log says of the service's reply to an answer or a cancel (A4: a duplicate
    is said as one); an agent reads its answer itself, P3, and no run of Clankie follows."""
    receipt = reply.receipt
    if receipt.outcome == "cancelled":
        return "Cancelled the question." if not reply.duplicate else "Already cancelled."
    then = (f". {wording.accepted(receipt.model_dump())}" if bound.agent else
            ": Clankie continues with it.")
    return (("Already accepted" if reply.duplicate else "Accepted") +
            f" (receipt {receipt.receipt_id[:8]}){then}")


def refused(code: str, detail: str, receipt: Mapping[str, Any] | None) -> tuple[str, bool]:
    """What the log says of a refused answer or cancel, and whether the question is read
    and shown again: a conflict (the state moved on) and an ended question (with its
    `receipt`) are; it is never sent again by the app (section 10 "Operator TUI")."""
    if code in wording.READ_AGAIN:
        return ("The question changed since it was shown (the conversation moved on). "
                "Here it is now; decide again."), True
    if code in wording.ENDED:
        return (f"That question has ended: {wording.outcome(receipt or {}, code)}. "
                "Here is the current state."), True
    return f"Refused: {wording.problem(code, detail)}", False


def unsent(bound: Resolve, why: str) -> str:
    """What the log says when the service could not be reached (`why`): nothing was sent;
    an answer's question will end if clankie is restarting (R9, issue 31)."""
    if bound.cancel:
        return f"Not sent: {why}"
    said = why if why.endswith("?") else f"{why}."
    return f"Your answer was not sent: {said} {wording.ANSWER_NOT_SENT}"


def newer(kept: dto.Snapshot | None, read: dto.Snapshot) -> bool:
    """Whether a snapshot just read replaces the one kept: not older (revisions only grow,
    S1, so a read that raced a newer one is dropped)."""
    return kept is None or read.revision >= kept.revision


def expired(snapshot: dto.Snapshot | None, now: datetime) -> bool:
    """Whether the question shown is past its expiry, and so is read again (S5 commits
    the expiry on use) rather than shown live."""
    q = snapshot.pending if snapshot else None
    return q is not None and render.expiry(q, now)[0] == "expired"


# ------------------------------------------------------------- the follow loop

# The events after which the snapshot is read again (V3; a reset ends the question too).
QUESTION_EVENTS = ("input_requested", "input_resolved", "conversation_reset")


@dataclass(frozen=True)
class Follow:
    """The follow loop between two long polls (V1): the cursor (`after`), the failures
    in a row, and whether the snapshot must be read before the next long poll (`stale`:
    on start and after a failure)."""

    after: int = 0
    failures: int = 0
    stale: bool = True


def reconnected(state: Follow) -> tuple[Follow, bool]:
    """The snapshot was read again: the loop is connected; the bool says whether it had
    lost the service (then the header's model is read again: a restarted service may run
    another)."""
    return replace(state, failures=0, stale=False), state.failures > 0


@dataclass(frozen=True)
class Lost:
    """The service could not be reached (or gave no reply): `notice`, the warning said on
    the first failure in a row only; `wait_s` before trying again."""

    notice: str | None
    wait_s: float


def lost(state: Follow, why: str) -> tuple[Follow, Lost]:
    """After a failure to reach the service (`why`, the client's words): say it once, try
    again soon (within 1 s of the service coming back), read the snapshot on return."""
    said = Lost(f"Lost the service: {why}" if state.failures == 0 else None,
                RETRY_S[min(state.failures, len(RETRY_S) - 1)])
    return replace(state, failures=state.failures + 1, stale=True), said


def pause_after(page: dto.EventsOut, waited_s: float, live: bool = False) -> float:
    """How long to pause before the next long poll: an empty page that came back at once
    (a service that does not wait) is not asked again in a tight loop; one that brought
    news of the live reply (`live`: what the tail sends back moved, SPEC D4) is not
    empty."""
    return PAUSE_AFTER_EMPTY_S if not page.events and not live and \
        waited_s < EMPTY_AT_ONCE_S else 0.0


@dataclass(frozen=True)
class Step:
    """What to do after a page's events are shown: `read`, read the snapshot again (with
    `about`, the newest request an event named, if any); `announce`, say a new question
    (bell and toast) if the snapshot read has one pending."""

    read: bool
    about: str | None
    announce: bool


def trimmed(page: dto.EventsOut) -> str | None:
    """The log's line for a page whose earlier events were dropped (V1 retention)."""
    return f"(events before #{page.oldest_seq} were trimmed)" if page.trimmed else None


def after_page(state: Follow, page: dto.EventsOut, pending: bool) -> tuple[Follow, Step]:
    """After a page is shown: the cursor moves to its `next_after`; the snapshot is read
    again when a question started or ended, on a reset, after a trimmed tail (V3), and
    while a question is `pending`, on any event (any change moves the revision its answer
    binds to, so the panel never shows a stale one); never otherwise."""
    moved = [e for e in page.events if e.type in QUESTION_EVENTS]
    named = [e.request_id for e in moved
             if isinstance(e, dto.InputRequestedEvent | dto.InputResolvedEvent)]
    read = bool(moved) or page.trimmed or (pending and bool(page.events))
    announce = any(e.type == "input_requested" for e in moved)
    return (replace(state, after=page.next_after),
            Step(read, named[-1] if named else None, announce))


@dataclass(frozen=True)
class Stopped:
    """The loop stops following: `say`, the log's line (if any); `notice`, the toast (an
    error), with its `title`; `disconnected`: the status line no longer says connected
    (a refusal by the service itself leaves it connected)."""

    say: str | None
    notice: str
    title: str = ""
    disconnected: bool = True


def stopped(exc: NotClankie | ApiError | NotYours) -> Stopped:
    """Why the loop stops rather than knocking again: a listener that is not clankie, a
    refusal from the service, or a service that is not the owner's (T2)."""
    if isinstance(exc, NotClankie):
        return Stopped(f"Stopped following: {exc} (fix: {exc.fix})", str(exc), "Not clankie")
    if isinstance(exc, NotYours):
        return Stopped(f"Stopped following: {exc}. Fix: {exc.fix}; then start `clankie "
                       "chat` again.", str(exc), "Not your service")
    return Stopped(None, wording.problem(exc.code, exc.detail), disconnected=False)
