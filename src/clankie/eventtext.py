"""One event as text, for each surface that shows events (issue 32).

Owns how an `events_tail` event reads, once, as one `match` over the typed event union
(`clankie.dto.Event`), in each surface's phrasing (`Surface`):

- `Surface.CLI`: `clankie conversations events` and `send --wait`: `#seq local-time ...`,
  every event on a line of its own (`cli_line` continues text from others on lines led by
  a bar, so that none can pose as an event of its own);
- `Surface.TUI`: the chat log of `clankie chat`: a sentence, or nothing for an event the
  log does not show (the status line does, or another line already said it); the time is
  the log's own column (`stamp`). `tui.render.event_line` says these; `activity` picks the
  log's dim entries (W9, R6).

Owns too which questions of a page a restart cancelled (`to_read`, `restarted`: an
`input_resolved` event carries no reason, V2, so each cancelled one's receipt is read by the
surface and judged here, R9). The words a restart's ending says (`wording.restarted_question`,
`wording.RUN_INTERRUPTED`) are `clankie.wording`'s, shared with the phone page.

Pure: no I/O; times are formatted by `clankie.when` (the CLI's in the local zone, the TUI's
against the `now` it is given).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from enum import Enum
from types import MappingProxyType
from typing import Final

from clankie import dto, when, wording
from clankie.core.vocabulary import RunError
from clankie.text import continued

ASK_QUESTION: Final = "ask_question"  # Clankie's tool that asks (SPEC Q1), as activity names it
# After a restart's ending, the TUI's own way to carry on besides any message (R9).
OR_CONTINUE: Final = "or type /continue"
# How the TUI's log names each author; an author a newer service adds is said as it came.
TUI_AUTHOR: Final = {"owner": "you", "clankie": "clankie", "room": "room"}
# The questions of a page a restart cancelled, each with whether an agent asked it (R9, P5).
Restarted = Mapping[str, bool]
NONE_RESTARTED: Final[Restarted] = MappingProxyType({})


class Surface(Enum):
    """Who shows the event: each phrases it its own way."""

    CLI = "cli"
    TUI = "tui"


def _at(event: dto.Event) -> str | None:
    """When it happened; an event of a type this version does not know may carry none."""
    if isinstance(event, dto.UnknownEvent):
        at = (event.model_extra or {}).get("at")
        return at if isinstance(at, str) else None
    return event.at


def text(event: dto.Event, surface: Surface, *, restarted: Restarted = NONE_RESTARTED,
         asked_by: str = wording.CLANKIE) -> str | None:
    """`event` as `surface` words it: for the CLI always a line (its `#seq` and local time
    first); for the TUI the log's sentence, or None when the log shows nothing for it.
    `restarted`: the questions a restart cancelled (R9, `restarted`), said with how to carry
    on (an agent's: the agent asks again, P5). `asked_by`: who asks in the conversation,
    starting a sentence (`Clankie`, or an agent, SPEC P3), for the TUI's "asked a
    question"."""
    cli = surface is Surface.CLI
    at = _at(event)
    head = f"#{event.seq} {when.local(at)}" if at is not None else f"#{event.seq}"
    match event:
        case dto.MessageEvent(author=author, text=said):
            if cli:
                return f"{head} {author}: {said}"
            return f"{TUI_AUTHOR.get(author, author)}: {continued(said)}"
        case dto.RunStatusEvent(run_id=run_id, kind=kind, status=status, error=error):
            interrupted = error == RunError.ORPHANED_BY_RESTART
            if cli:
                why = f": {wording.RUN_INTERRUPTED}" if interrupted else ""
                return f"{head} run {run_id} ({kind}) {status}{f' ({error})' if error else ''}" \
                       f"{why}"
            if status == "cancelled" and error == RunError.STOPPED_BY_OWNER:
                return "Clankie's run was stopped."
            if status == "failed" and interrupted:
                return f"Clankie's run was {wording.RUN_INTERRUPTED} ({OR_CONTINUE})."
            if status == "failed":
                return f"Clankie's run failed: {continued(error or 'no reason given')}"
            return None  # queued, running, succeeded: the status line says them
        case dto.InputRequestedEvent(request_id=request_id, prompt=prompt, choices=choices):
            if cli:
                listed = f" [{' | '.join(choices)}]" if choices else ""
                return f"{head} question {request_id} asked: {prompt}{listed}"
            return f"{asked_by} asked a question."
        case dto.InputResolvedEvent(request_id=request_id, outcome=outcome):
            if request_id in restarted:
                agent = restarted[request_id]
                said = wording.restarted_question(agent)
                return (f"{head} question {request_id} {said}" if cli else
                        f"The question {request_id[:8]} was {said}"
                        f"{'' if agent else f' ({OR_CONTINUE})'}.")
            return (f"{head} question {request_id} {outcome}" if cli
                    else f"The question {request_id[:8]} ended: {outcome}.")
        case dto.ConversationResetEvent():
            return f"{head} conversation reset" if cli else "The conversation was reset."
        case dto.ToolActivityEvent(tool=tool, status=status, code=code, summary=summary):
            if cli:
                return f"{head} tool {tool} {status}{f' {code}' if code else ''}: {summary}"
            if tool == ASK_QUESTION and status == "ok":
                return None  # the question's own event says it was asked
            return f"  {continued(summary, '    ')}"
        case dto.RunActivityEvent(run_id=run_id, activity=activity, summary=summary,
                                  retry_at=retry_at):
            if cli:
                return (f"{head} run {run_id} {activity}: {summary} (next try "
                        f"{when.shown_now(retry_at)})")
            return f"  model busy: {continued(summary, '    ')}"
        case dto.UnknownEvent(type=kind):
            return f"{head} {kind}" if cli else None
    raise AssertionError(f"an event of no known shape: {type(event).__name__}")


def cli_line(event: dto.Event, restarted: Restarted = NONE_RESTARTED) -> str:
    """The CLI's line for `event`; text from others that runs over several lines continues
    on lines led by a bar, so that none can pose as an event of its own."""
    said = text(event, Surface.CLI, restarted=restarted)
    assert said is not None  # the CLI says every event
    return continued(said, "    ")


def activity(event: dto.Event) -> bool:
    """Whether the TUI shows `event` as a dim activity entry of its log (a tool call, W9;
    a wait before the model is asked again, R6)."""
    return isinstance(event, dto.ToolActivityEvent | dto.RunActivityEvent)


def stamp(event: dto.Event, now: datetime) -> str:
    """The local time an event happened, as a TUI log line starts: `14:05`, or with the
    date when it was not today (`clankie.when.brief`); empty for an event without one."""
    at = _at(event)
    return when.brief(at, now) if at else ""


# ------------------------------------------------------------------------ R9: a restart


def to_read(events: Sequence[dto.Event]) -> list[str]:
    """The questions among `events` that were cancelled: only a read of each says whether
    a restart cancelled it (an `input_resolved` event carries no reason, V2)."""
    return [e.request_id for e in events
            if isinstance(e, dto.InputResolvedEvent) and e.outcome == "cancelled"]


def restarted(read: Iterable[dto.QuestionOut | None]) -> dict[str, bool]:
    """Of the questions `to_read` named, as read (None: its receipt was evicted since, so
    it is only said cancelled), the ones a restart cancelled (R9, `wording.restarted`), each
    with whether an agent asked it: each surface says them with how to go on (a message;
    for an agent's, the agent asking again, P5). The CLI (`conversations events`) and the
    TUI both decide here."""
    return {q.request_id: q.asker is not None for q in read
            if q is not None and wording.restarted(q.receipt)}
