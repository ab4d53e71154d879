"""What the phone page shows (SPEC H5): read from the service with the browser's own token,
and said in plain words.

Owns the reads behind the view (`read_view`: the device, the conversations with a question
first, one question, what led to it and how a question it showed ended), the last lines
of a conversation (`Lines`, through `events_tail`, with a small cache of where each
browser's last read stopped; a reply cut off or withdrawn said so, SPEC D6-D9, and
Clankie's latest reply whole where its live reply was, D17), what an accepted answer
chose, and every refusal in words the owner can act on (never a bare code). It decides
nothing the service decides: each read is an op of the service, whose checks and whose
`invalid_request` are its own.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, TypedDict, TypeVar

from pydantic import ValidationError

from clankie import dto, when, wording
from clankie.agent.tools import ASK_QUESTION
from clankie.core.errors import ClankieError
from clankie.core.vocabulary import Author, Code, RunStatus
from clankie.service import Service
from clankie.service.devices import DeviceStatus
from clankie.text import visible

# Refusals that mean "the question changed since the page showed it" (an answer that came
# second to another is one too: the page shows the question afresh, ended or not).
CONFLICTS: Final = wording.READ_AGAIN | {Code.ALREADY_ANSWERED}
CONTEXT_LINES: Final = 6  # H5: what led to a question, one line each
CONTEXT_CHARS: Final = 280  # a line's length at most (the rest is on the computer)
CUT_OFF_LINES: Final = 8  # a cut-off reply's lines at most, shown as lines (D17)
# The latest reply of Clankie's is shown whole (D17: where its live reply was, so the
# stored message takes its place without shrinking to a line), up to this many characters.
FULL_CHARS: Final = 16_000
_PAGE: Final = 500  # events_tail's largest page

InT = TypeVar("InT", bound=dto.Strict)
OutT = TypeVar("OutT", bound=dto.Out)


def ask(service: Service, spec: dto.Op[Any, OutT], token: str | None,
        payload: object, **who: str | None) -> OutT:
    """One op of the service for the browser's token, its reply as the op's output shape.
    The payload goes as the page received or built it: the service validates it, so an
    invalid one is its `invalid_request`, in its words, as for any client."""
    reply = service.call(spec.name, token, payload, **who)
    assert isinstance(reply, spec.output)
    return reply


def accepted(spec: dto.Op[InT, Any], payload: object) -> InT | None:
    """The request a payload is, as the op's input shape, once the service has taken or
    judged it (it validated it first); None when it is not one (nothing to read by it)."""
    try:
        return spec.input.model_validate(payload)
    except ValidationError:
        return None


@dataclass(frozen=True, slots=True)
class Line:
    """One line of what led to a question (H5): who said it, what, and its kind (a message,
    a tool's activity, or a note of the page's own); `note`, the page's own words after
    it (how a reply was cut off, D6-D9); `message_id`, a message's, by which the page
    replaces the live reply it showed with its stored message (D17)."""

    who: str
    text: str
    kind: str
    note: str = ""
    message_id: str = ""
    # a reply of Clankie's whole (up to FULL_CHARS), shown when it is last and no answer
    # came after it
    full: str = ""


class Lines:
    """What led to a question (H5): the last lines of a conversation (the owner's
    messages, Clankie's replies, tool activity, one line each), read with the browser's own
    token through `events_tail`, on from where its last read stopped (a page looks every
    second; a conversation keeps up to `event_retention` events)."""

    def __init__(self, service: Service, kept: int = 64) -> None:
        self.service = service
        self.kept = kept
        self.lock = threading.Lock()
        self.seen: OrderedDict[tuple[str, str], tuple[int, deque[Line]]] = OrderedDict()

    def lines(self, token: str | None, conversation_id: str) -> list[Line]:
        key = (token or "", conversation_id)
        with self.lock:
            after, lines = self.seen.pop(key, (0, deque(maxlen=CONTEXT_LINES)))
        while True:
            page = ask(self.service, dto.EVENTS_TAIL, token, {
                "conversation_id": conversation_id, "after": after, "limit": _PAGE})
            for event in page.events:
                line = context_line(event)
                if isinstance(event, dto.RunStatusEvent) and line is not None and lines and (
                        lines[-1].note == CUT_FAILED):
                    # the run that failed for good ends with its cut-off reply (D8, in one
                    # transaction): the reply says why, once
                    lines[-1] = replace(lines[-1], note=f"(cut off: {run_failed(event)})")
                elif line is not None:
                    lines.append(line)
                elif isinstance(event, dto.InputResolvedEvent) and lines and lines[-1].full:
                    # answered since: the reply that asked is no longer the latest news,
                    # and the next one (live, below) is (trial: it was off the screen)
                    lines[-1] = replace(lines[-1], full="")
            after = page.next_after
            if len(page.events) < _PAGE:
                break
        with self.lock:
            self.seen[key] = (after, lines)
            while len(self.seen) > self.kept:
                self.seen.popitem(last=False)
        return list(lines)


def context_line(event: dto.Event) -> Line | None:
    """One event as a line of the context (H5), or None for those the question says."""
    if isinstance(event, dto.MessageEvent):
        who = {Author.OWNER: "You", Author.CLANKIE: "Clankie"}.get(
            event.author, str(event.author).capitalize())
        full = event.text if len(event.text) <= FULL_CHARS else (
            event.text[:FULL_CHARS - 1] + "…")
        mine = event.author == Author.CLANKIE  # the page replaces a live reply by it
        note = cut_off(event)
        return Line(who, _cut(event.text, lines=bool(note)), "message", note,
                    event.message_id if mine else "", full if mine else "")
    if isinstance(event, dto.ToolActivityEvent) and event.tool != ASK_QUESTION:
        return Line("Tool", _cut(event.summary), "tool")  # the question says its own
    if isinstance(event, dto.ConversationResetEvent):
        return Line("", "The conversation was reset.", "note")
    if isinstance(event, dto.RunActivityEvent) and event.withdrawn is not None:
        return Line("", _cut(f"Clankie's reply so far ({event.withdrawn.length} characters) "
                             f"was withdrawn: {event.summary}"), "note")  # D8
    if isinstance(event, dto.RunStatusEvent) and event.status is RunStatus.FAILED:
        return Line("", _cut(f"Clankie's run failed: {run_failed(event)}"), "note")
    return None


def run_failed(event: dto.RunStatusEvent) -> str:
    """Why a run failed, in words."""
    return wording.run_ended(event.error) or str(event.error or "no reason")


CUT_FAILED: Final = "(cut off: the model call failed)"  # until the run's end says why


def cut_off(event: dto.MessageEvent) -> str:
    """How a reply of Clankie's was cut off (D6-D9), in the page's own words after its
    text; "" for a finished one."""
    if event.partial == "stopped":
        return "(stopped by you)"
    if event.partial == "failed":
        return CUT_FAILED
    if event.partial == "interrupted":  # D9: its `at` is the checkpoint's time
        return f"(cut off when clankie restarted; what followed {zoned(event.at)} was lost)"
    return ""


def _cut(text: str, lines: bool = False) -> str:
    """`text` on one line, its line feeds and tabs as escapes; with `lines` (a cut-off
    reply, whose line is `pre-wrap`: it stands where its live box was, D17), its line
    breaks kept as they are, as the live box and the last whole reply show them, up to
    CUT_OFF_LINES of them. Every other control character is the template's to make visible
    (`clankie.text.visible`, which keeps a line feed and a tab), and its markup to escape."""
    if lines:
        rows = text.split("\n")
        line = "\n".join(rows[:CUT_OFF_LINES]) + ("…" if len(rows) > CUT_OFF_LINES else "")
    else:
        line = wording.one_line(text)
    return line if len(line) <= CONTEXT_CHARS else line[:CONTEXT_CHARS - 1] + "…"


class PageView(TypedDict):
    """What the view's template is given (H5)."""

    device: DeviceStatus
    conversations: list[dto.ListedConversationOut]
    pending: set[str]  # the conversations where a question waits
    ttl: int  # how long a lease taken now lasts
    stall: float  # model_stall_timeout: when clankie gives up on a silent model (D11)
    context: list[Line]
    chosen: str | None
    snapshot: dto.Snapshot | None
    ended: str | None
    current: dto.ListedConversationOut | None
    # the question the page watches (pending now, else the one said ended) and the one
    # whose end it says
    watched: str
    noted: str


def read_view(service: Service, token: str | None, lines: Lines | None,
              conversation_id: str | None, shown_request: str | None = None,
              noted_request: str | None = None) -> PageView:
    """What the page shows (H5): the device, conversations with a question first, and one
    question; read from the service with this browser's own token. `shown_request` is the
    question the page showed last, `noted_request` the one whose end it says now: the
    newest of them that has ended is said ended, and how, until another ends after it; the
    page watches the question pending now (trial: it kept watching a cancelled one, and
    said that forever while later questions were answered elsewhere)."""
    device = service.devices.device_status(token)
    listed = ask(service, dto.CONVERSATION_LIST, token, {"limit": 50}).conversations
    pending = {}
    for c in listed:  # archived ones are not listed; the list says where a question waits
        snap = snapshot(service, token, c.conversation_id) if c.pending else None
        if snap is not None and snap.pending is not None:
            pending[c.conversation_id] = snap
    ordered = ([c for c in listed if c.conversation_id in pending]
               + [c for c in listed if c.conversation_id not in pending])
    chosen = conversation_id if conversation_id in {c.conversation_id for c in listed} else (
        ordered[0].conversation_id if pending else None)
    shown = pending.get(chosen) if chosen else None
    if chosen and shown is None:
        shown = snapshot(service, token, chosen)
    live = shown.pending.request_id if shown and shown.pending else ""
    ended, noted = None, ""
    for candidate in (shown_request, noted_request):
        if not chosen or not candidate or candidate == live:
            continue
        with contextlib.suppress(ClankieError):  # an evicted receipt: nothing to say
            question = snapshot(service, token, chosen, candidate).request
            if question is not None and question.status != "pending":
                ended, noted = said_ended(question, device.credential_id), candidate
                break
    return PageView(
        device=device, conversations=ordered, pending=set(pending),
        ttl=service.settings.take_control_ttl, stall=service.settings.model_stall_timeout,
        context=lines.lines(token, chosen) if lines and chosen else [],
        chosen=chosen, snapshot=shown, ended=ended,
        current=next((c for c in listed if c.conversation_id == chosen), None),
        watched=live or noted, noted=noted)


def chosen(service: Service, token: str | None, answer: dto.InputAnswer | None) -> str:
    """What an accepted answer chose, in the owner's words: the option's label in quotes
    and made visible (red team: a label "No. Nothing was sent: ..." or one with U+202E
    passed for the page's own words in its status line), or "your text answer"."""
    if answer is None or not answer.option_id:
        return "your text answer"
    with contextlib.suppress(ClankieError):
        shown = snapshot(service, token, answer.conversation_id, answer.request_id).request
        for option in shown.options if shown is not None else []:
            if option.option_id == answer.option_id:  # others' text, quoted, in the line
                return f"\u201c{visible(wording.one_line(option.label))}\u201d"
    return "the option you chose"


def who(asker: dto.AskerOut | None) -> str:
    """Who asks (SPEC P3), as the CLI and TUI say it."""
    return wording.who(None if asker is None else asker.model_dump())


def asked_by_agent(service: Service, token: str | None, cancel: dto.InputCancel | None) -> bool:
    """Whether the question just cancelled was an agent's (SPEC P3): its receipt, unlike an
    answer's, does not tell."""
    if cancel is None:
        return False
    with contextlib.suppress(ClankieError):
        shown = snapshot(service, token, cancel.conversation_id, cancel.request_id).request
        return shown is not None and shown.asker is not None
    return False


def zoned(stamp: str) -> str:
    """A time with its zone (H5), in the service's local time: `2026-12-01 23:47 CET`,
    or `UTC+05:30` where the zone has no short name."""
    at = when.parse(stamp).astimezone()
    name = at.strftime("%Z")
    if not re.fullmatch(r"[A-Z]{2,5}", name):
        offset = at.strftime("%z")
        name = f"UTC{offset[:3]}:{offset[3:]}" if offset else "UTC"
    return f"{when.local(stamp)} {name}"


def folders(path: str) -> str:
    """A workspace as the owner tells it apart at a glance: its last two folders."""
    return "/".join([part for part in path.split("/") if part][-2:]) or path


def snapshot(service: Service, token: str | None, conversation_id: str,
             request_id: str | None = None) -> dto.Snapshot:
    payload = {"conversation_id": conversation_id}
    if request_id is not None:
        payload["request_id"] = request_id
    return ask(service, dto.INPUT_GET, token, payload)


def said_ended(question: dto.QuestionOut, me: str) -> str:
    """How a question ended, and from where, in words (H5)."""
    receipt = question.receipt
    by = ""
    if receipt is not None and receipt.answered_by is not None:
        answerer = receipt.answered_by
        by = (" from this browser" if answerer.credential_id == me else
              " from the terminal (operator)" if answerer.kind == "operator" else
              # P2: an agent ends only its own question (H5: the real cause, named)
              f" by {visible(who(question.asker))}, which asked it" if answerer.kind == "agent"
              else " from another device")
    if question.status == "answered":
        return f"it was answered{by}"
    if question.status == "cancelled" and wording.restarted(receipt):
        # P5: an agent's is carried on by the agent asking again, not on the computer
        return RESTARTED if question.asker is None else \
            f"it was {wording.RESTARTED_AGENT_QUESTION}"
    if question.status == "cancelled":
        return f"it was cancelled{by}"
    if question.status == "expired":
        return "it expired unanswered"
    reason = receipt.reason if receipt is not None and receipt.reason else "a reset"
    return f"it was invalidated: {wording.BECAUSE[reason]}" if reason in wording.BECAUSE \
        else f"it was invalidated ({reason})"


def refused(service: Service, token: str | None,
            asked: dto.InputAnswer | dto.InputCancel | None,
            err: ClankieError) -> Mapping[str, object]:
    """A refused answer, cancel or take-control in words the owner can act on: a question
    that has ended says it ended and how (and, for a program, its receipt); a want of the
    lease says to take control (and the device's `mode`, for a program)."""
    with contextlib.suppress(ClankieError):
        if err.code in CONFLICTS | {Code.REQUEST_CLOSED} and asked is not None:
            device = service.devices.device_status(token)
            shown = snapshot(service, token, asked.conversation_id, asked.request_id).request
            if shown is not None and shown.status != "pending":
                return {"outcome": "ended", "message": "Nothing was sent: this question had "
                        f"already ended ({said_ended(shown, device.credential_id)}).",
                        "receipt": shown.receipt and shown.receipt.model_dump(mode="json")}
        if err.code == Code.FORBIDDEN and token is not None:
            device = service.devices.device_status(token)
            if device.mode == "control" and device.lease_expires_at is None:
                return {"outcome": "refused", "message": 'Not sent: tap "Take control" '
                        "first, then answer again.", "mode": device.mode}
            if device.mode == "read_only":
                return {"outcome": "refused", "message": "Not sent: this browser can only "
                        "look; it cannot answer or cancel.", "mode": device.mode}
    return refusal(err)


def refusal(err: ClankieError) -> dict[str, str]:
    """A refusal in plain words (H5), never a bare code."""
    if err.code in CONFLICTS:
        return {"outcome": "conflict", "message": "The question changed since this page "
                "showed it, so nothing was sent. It is shown afresh: read it, then answer "
                "again if you still want to."}
    if err.code == Code.REQUEST_CLOSED:
        return {"outcome": "ended", "message": f"Nothing was sent: {err.detail}."}
    if err.code == Code.REQUEST_EXPIRED:
        return {"outcome": "expired", "message": f"Expired: {err.detail}."}
    if err.code == Code.UNAUTHENTICATED:
        return {"outcome": "revoked", "message": session_refused(err)}
    if err.code == Code.FORBIDDEN:
        return {"outcome": "refused", "message": f"Refused: {err.detail}."}
    return {"outcome": "invalid", "message": f"Not sent: {err.detail}."}


# R9: a restart's ending in the words every surface says it in (`clankie.wording`)
RESTARTED: Final = f"it was {wording.RESTARTED_QUESTION} (on the computer)"
NOT_PAIRED: Final = ("This browser is not paired with clankie. On the computer, run clankie "
                     "devices pair --web and open the link it prints.")
PAIR_AGAIN: Final = ("This browser's pairing is not complete for this page: the page's own "
                     "half of it is missing or does not match (the browser's site data was "
                     "cleared or overwritten, it was paired at another address, each of "
                     "which keeps its own, or before clankie's page changed). To pair it "
                     "here, run clankie devices pair --web on the computer.")


def session_refused(err: ClankieError) -> str:
    if err.code == Code.UNAUTHENTICATED:
        if err.detail in (NOT_PAIRED, PAIR_AGAIN):
            return err.detail
        return ("This browser is no longer paired (it was revoked, or its owner was). To "
                "pair it again, run clankie devices pair --web on the computer.")
    return err.detail


def pairing_refused(err: ClankieError) -> str:
    if err.code == Code.UNAUTHENTICATED:
        return ("This pairing link is wrong, used or expired. If this browser was just "
                "paired with it, open clankie's page at / (the address without /pair). For "
                "a new link, run clankie devices pair --web on the computer again.")
    return err.detail
