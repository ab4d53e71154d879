"""How the TUI words things: the question panel, the status line, one line per event.

Owns text only (pure): what a person reads. Option numbers are the ones `/question
answer N` uses; the panel shows when the question was asked and when it expires, and the
incarnation and revision an answer will be bound to. Each log line from an event starts
with the event's local time (`stamp`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from clankie import dto, eventtext, when, wording
from clankie.eventtext import OR_CONTINUE
from clankie.text import continued, visible

# IDs in the panel: a prefix the CLI takes too (SPEC section 10 "CLI": >= 4 hex), so the
# panel stays narrow; what an answer from here binds to is the whole ID in `snapshot`.
SHORT = 8


def shown_request(snapshot: dto.Snapshot | None) -> str | None:
    """The request the panel is about: the pending question, else the ended one the
    snapshot was read with (`request`), else none."""
    if snapshot is None:
        return None
    q = snapshot.pending or snapshot.request
    return q.request_id if q else None


def plain(model: dto.Out | None) -> dict[str, Any] | None:
    """A typed part of a reply as `clankie.wording` reads it (standard library only: a
    mapping, as the service sent it)."""
    return None if model is None else model.model_dump()


# The panel's line of IDs is left out on a window of fewer rows (SPEC section 10 "Operator
# TUI"): the question and how to answer it come first.
ID_LINE_ROWS = 30


def question_panel(snapshot: dto.Snapshot, now: datetime,
                   workspace: str | None = None, rows: int = ID_LINE_ROWS) -> str:
    """The panel: the pending question with its numbered options and what an answer binds
    to; else the question last asked, said to have ended (never with its options). An
    agent's question (SPEC P3) says first who asks: the agent's name, its MCP client and
    `workspace` (the conversation's), and that the agent is told an answer is a preference,
    not an approval. In a window of fewer than `ID_LINE_ROWS` `rows`, no line of IDs."""
    q = snapshot.pending
    ids = rows >= ID_LINE_ROWS
    if q is None:
        return _ended(snapshot.request, now, ids)
    asker = q.asker
    lines = ([f"{wording.asks(plain(asker), workspace)}:", f"  {continued(q.prompt)}"]
             if asker else [f"Clankie asks: {continued(q.prompt)}"])
    lines += [wording.option_line(number, option.model_dump())
              for number, option in enumerate(q.options, start=1)]
    if q.kind == "text":
        lines.append("  Answer with /question text WORDS")
    elif q.allow_text:
        lines.append("  Answer with /question answer N, or in words: /question text WORDS")
    else:
        lines.append("  Answer with /question answer N (text is not allowed)")
    lines.append("  /question cancel cancels it.")
    if asker:
        lines.append(f"  {wording.AGENT_ANSWER}")
    if q.asked_at:  # a line each: together they wrap on 80 columns
        lines.append(f"  Asked {when.shown(q.asked_at, now)}")
    lines.append(f"  Expires {when.shown(q.expires_at, now)}")
    if ids:
        lines.append(f"  request {q.request_id[:SHORT]}, incarnation "
                     f"{snapshot.incarnation[:SHORT]}, revision {snapshot.revision}")
    return "\n".join(lines)


def _ended(q: dto.QuestionOut | None, now: datetime, ids: bool = True) -> str:
    if q is None or q.status == "pending":  # pending: the snapshot says none is now
        return f"{wording.NO_QUESTION}."
    receipt = q.receipt
    said = receipt.outcome if receipt else q.status
    chosen = receipt.answer if receipt else None
    if isinstance(chosen, dto.OptionAnswer):
        label = next((o.label for o in q.options if o.option_id == chosen.option_id),
                     chosen.option_id)
        outcome = f"{said} with {continued(label, '    ')}"
    elif isinstance(chosen, dto.TextAnswer):
        outcome = f"{said} in words"
    else:
        outcome = wording.outcome(plain(receipt) or {}, q.status)
    at = f", {when.shown(receipt.resolved_at, now)}" if receipt and receipt.resolved_at else ""
    lines = [f"{wording.NO_QUESTION}.",
             f"  {asked_by(q.asker)} asked: {continued(q.prompt, '    ')}",
             f"  That question ended: {outcome}{at}."]
    if wording.restarted(plain(receipt)):  # R9: what the restart did, and how to go on
        agent = q.asker is not None  # P5: the agent asks again; no message carries it on
        lines.append(f"  It was {wording.restarted_question(agent)}"
                     f"{'' if agent else f' ({OR_CONTINUE})'}.")
    if ids:
        lines.append(f"  request {q.request_id[:SHORT]}, asked "
                     f"{when.shown(q.asked_at, now)}")
    return "\n".join(lines)


def panel_shown(snapshot: dto.Snapshot | None) -> bool:
    """Whether the panel has a question to show, pending or ended."""
    return shown_request(snapshot) is not None


def asked_by(asker: dto.AskerOut | None) -> str:
    """Who asks, starting a sentence: `Clankie`, or `Agent "coder"` (its name alone: the
    panel says the rest)."""
    return "Clankie" if asker is None else f"Agent {wording.quoted(asker.name)}"


def event_line(event: dto.Event, asker: dto.AskerOut | None = None,
               restarted: eventtext.Restarted = eventtext.NONE_RESTARTED,
               reasons: Mapping[str, str] | None = None) -> str | None:
    """A line for the chat log, or None for events shown only in the status line or by
    another line (`ask_question`'s own activity: the question's event says it, once).
    `asker`: the conversation's, when an agent asks in it (P3), not Clankie. `restarted`:
    the questions a restart cancelled (R9: an `input_resolved` event carries no reason).
    The words are `clankie.eventtext`'s (the TUI's phrasing of the one event formatter),
    but for what section 14 adds (D15): a message cut off ends saying how
    (`partial_end`, with its run's error from `reasons`, `cut_reasons`); a wait before
    the model is asked again says how many characters of the try before were withdrawn."""
    if isinstance(event, dto.RunActivityEvent) and event.withdrawn is not None:
        count = event.withdrawn.length
        said = f"{count:,} character{'' if count == 1 else 's'} withdrawn"
        return f"  {said}: {continued(event.summary, '    ')}"
    line = eventtext.text(event, eventtext.Surface.TUI, restarted=restarted,
                          asked_by=asked_by(asker))
    if isinstance(event, dto.MessageEvent) and event.partial is not None and line:
        return line + ending(event.text, partial_end(
            event.partial, (reasons or {}).get(event.message_id)))
    return line


# How a message of Clankie's that was cut off ends (SPEC D15), and a reply shown while it
# was written whose message never came (its text was not stored: a restart came first).
STOPPED_END: Final = "(stopped by you)"
RESTARTED_END: Final = "(cut off when clankie restarted; what followed was lost)"
NOT_KEPT_END: Final = "(cut off: clankie did not keep this reply)"
FAILED_REASON: Final = "the model call failed"


def partial_end(partial: str, reason: str | None = None) -> str:
    """The words after a partial message: stopped, cut off (`reason`: its run's error, when
    known) or cut off by a restart."""
    if partial == "stopped":
        return STOPPED_END
    if partial == "interrupted":
        return RESTARTED_END
    return f"(cut off: {wording.one_line(reason or FAILED_REASON)})"


def ending(text: str, end: str) -> str:
    """`end` as it follows `text`: after a space, unless the text ends with one."""
    return end if not text or text[-1].isspace() else f" {end}"


def cut_reasons(events: Sequence[dto.Event]) -> dict[str, str]:
    """Why each message in `events` cut off as `failed` was: the error of the run failure
    that follows it (D8 stores them in one transaction, so one page holds both)."""
    reasons: dict[str, str] = {}
    cut: list[str] = []
    for event in events:
        if isinstance(event, dto.MessageEvent) and event.partial == "failed":
            cut.append(event.message_id)
        elif isinstance(event, dto.RunStatusEvent) and event.status == "failed" and cut:
            reasons.update(dict.fromkeys(cut, event.error or FAILED_REASON))
            cut = []
    return reasons


def seconds(count: float) -> str:
    """Seconds counted on a status line: `12 s`, whole ones (`2 min` past a minute)."""
    return f"{int(max(count, 0))} s" if count < 60 else when.span(count)


def live_status(reply: dto.LiveReply, elapsed: float, stall: float | None) -> str | None:
    """What the status line says of the reply being written (SPEC D15), from its `idle_ms`
    and `elapsed` seconds since it was read (counted on from it, never by comparing this
    clock with the service's): `Clankie is writing (12 s)` (since its call began),
    `waiting for the model (4 s)`, or `no text from the model for 14 s; giving up at 60 s`
    (`stall`: the service's `model_stall_timeout`, when known). None once it is complete:
    its message is being stored."""
    idle = reply.idle_ms / 1000 + elapsed
    if reply.state == "waiting":
        return f"waiting for the model ({seconds(idle)})"
    if reply.state == "quiet":
        limit = f"; giving up at {int(stall)} s" if stall else ""
        return f"no text from the model for {int(idle)} s{limit}"
    if reply.state == "writing":
        begun = (when.parse(reply.at) - when.parse(reply.started_at)).total_seconds()
        return f"Clankie is writing ({seconds(begun + elapsed)})"
    return None



def answer_hint(question: dto.QuestionOut | None, text: str) -> str | None:
    """What the TUI says after a chat line that looks like an answer to the `question`
    shown (a number, `yes`, `no`, an option's label; case and spaces aside): it was sent as
    a chat message, not an answer, and the command that answers (SPEC section 10 "Operator
    TUI", A2). None for any other line, or with no question shown."""
    if question is None:
        return None
    number = wording.answer_like([o.label for o in question.options], text)
    if number is None:
        return None
    if number:
        command = f"/question answer {number}"
    elif question.options:
        command = "/question answer N"
    else:
        command = f"/question text {continued(text.strip())}"
    return wording.chat_not_answer(command)


def retry_status(event: dto.RunActivityEvent, now: datetime) -> str:
    """What the status line says while a run waits to ask the model again (R6): "model
    busy, retrying in 7 s", counting down to the event's `retry_at`."""
    left = (when.parse(event.retry_at) - now).total_seconds()
    return f"model busy, retrying in {when.span(left)}" if left > 0 \
        else "model busy, trying again"


def expiry(question: dto.QuestionOut, now: datetime) -> tuple[str, bool]:
    """How long until the pending question expires ("expires in 23 h 58 min", worded by
    `clankie.when`, as in the panel), and whether it is in the last 10% of its time."""
    asked, expires = when.parse(question.asked_at), when.parse(question.expires_at)
    left = (expires - now).total_seconds()
    warning = left <= 0.1 * max((expires - asked).total_seconds(), 1)
    if left <= 0:
        return "expired", True
    return f"expires in {when.span(left)}", warning


def question_state(snapshot: dto.Snapshot | None, now: datetime) -> str:
    """The status line's word on the question, from the same snapshot as the panel."""
    if snapshot is None:
        return "question: ?"
    if snapshot.pending is None:
        return "no question"
    return f"question pending, {expiry(snapshot.pending, now)[0]}"


def header(workspace: str | None, model: dto.ModelOut | None, width: int = 0,
           asker: dto.AskerOut | None = None) -> str:
    """Which model answers and where the conversation works: `model openai/gpt-4o-mini |
    workspace ~/src/app`; `?` for what could not be read. In an agent's conversation (P3)
    no model of Clankie's works: who asks there instead (`agent "coder" through
    "claude-code" | workspace ~/src/app`). Within `width` (if given) a long path loses its
    start, never its last folders, the ones the owner recognises."""
    if workspace is not None:
        home = str(Path.home())
        if workspace == home or workspace.startswith(home.rstrip("/") + "/"):
            workspace = "~" + workspace[len(home):]
    if model is None:
        named = "?"
    elif model.provider == "scripted" or not model.model:
        named = f"{model.provider} (offline)" if model.provider == "scripted" \
            else model.provider
    else:
        named = f"{model.provider}/{model.model}"
    if workspace is not None:
        workspace = wording.one_line(workspace)
    who = wording.who(plain(asker)) if asker else f"model {named}"
    line = visible(f"{who} | workspace {workspace or '(none)'}")
    workspace = visible(workspace) if workspace else workspace  # measured as shown
    room = width - len(line) + len(workspace or "")  # what the path may take
    if workspace and width and len(line) > width and room > 10:
        line = line[:len(line) - len(workspace)] + "…" + workspace[-(room - 1):]
    return line


def status_line(service: str, conversation_id: str, question: str, working: bool,
                connected: bool, doing: str | None = None, refused: bool = False,
                writing: str | None = None) -> str:
    """`question`: `question_state`'s words. `refused`: the listener is not the owner's
    service (T2) and the app stopped following it; nothing is retried, so the line must
    not say it is. `writing`: `live_status`'s words, said as they are. The state comes
    first and the address last: on a narrow screen the line is cut at its end, and
    "disconnected, retrying" must still show."""
    if service.startswith("unix://"):
        service = "unix:" + service.rsplit("/", 1)[-1]
    busy = writing or (f"Clankie: {doing[:60]}" if doing else "Clankie is working...")
    state = ("not yours: stopped" if refused else "disconnected, retrying" if not connected
             else busy if working or writing else "idle")
    return f"{state} | {question} | conversation {conversation_id[:8]} | {service}"
