"""How the TUI words things: the question panel, the status line, one line per event.

Owns text only (pure): what a person reads. Option numbers are the ones `/question
answer N` uses; the panel shows the incarnation and revision an answer will be bound to.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from clankie.text import continued


def question_panel(snapshot: dict[str, Any]) -> str:
    q = snapshot.get("pending")
    if q is None:
        return "No question is pending."
    lines = [f"Clankie asks: {continued(q['prompt'])}"]
    for number, option in enumerate(q["options"], start=1):
        description = f" - {option['description']}" if option["description"] else ""
        lines.append(f"  {number}. {continued(option['label'] + description, '     ')}")
    if q["kind"] == "text":
        lines.append("  Answer with /question text WORDS")
    elif q["allow_text"]:
        lines.append("  Answer with /question answer N, or in words: /question text WORDS")
    else:
        lines.append("  Answer with /question answer N (text is not allowed)")
    lines.append(f"  /question cancel cancels it.  Expires {q['expires_at']}")
    lines.append(f"  request {q['request_id']}")
    lines.append(f"  incarnation {snapshot['incarnation']}, revision {snapshot['revision']}")
    return "\n".join(lines)


def event_line(event: dict[str, Any]) -> str | None:
    """A line for the chat log, or None for events shown only in the status line."""
    kind = event["type"]
    if kind == "message":
        who = {"owner": "you", "clankie": "clankie", "room": "room"}.get(event["author"],
                                                                          event["author"])
        return f"{who}: {continued(event['text'])}"
    if kind == "input_requested":
        return "Clankie asked a question; /question shows it."
    if kind == "input_resolved":
        return f"The question {event['request_id'][:8]} ended: {event['outcome']}."
    if kind == "conversation_reset":
        return "The conversation was reset."
    if kind == "run_status" and event["status"] == "cancelled" \
            and event.get("error") == "stopped_by_owner":
        return "Clankie's run was stopped."
    if kind == "run_status" and event["status"] == "failed":
        if event.get("error") == "orphaned_by_restart":
            return ("Clankie's run was interrupted by a restart and will not run again; "
                    "anything it said before is not a finished run.")
        return f"Clankie's run failed: {continued(event.get('error') or 'no reason given')}"
    return activity_line(event)


def activity_line(event: dict[str, Any]) -> str | None:
    """A workspace tool call, as the dim one-line entry of the log (W9): what Clankie
    looked at ("read src/app.py lines 1-120 of 120"), never what it read; or a wait before
    the model is asked again (R6): "model busy: openai: 429 rate limited; try 2 of 5 in
    7 s"."""
    if event["type"] == "run_activity":
        return f"  model busy: {continued(event['summary'], '    ')}"
    if event["type"] != "tool_activity":
        return None
    return f"  {continued(event['summary'], '    ')}"


def retry_status(event: dict[str, Any], now: datetime) -> str:
    """What the status line says while a run waits to ask the model again (R6): "model
    busy, retrying in 7 s", counting down to the event's `retry_at`."""
    retry_at = datetime.fromisoformat(event["retry_at"].replace("Z", "+00:00"))
    left = math.ceil((retry_at - now).total_seconds())
    return f"model busy, retrying in {left} s" if left > 0 else "model busy, trying again"


def expiry(question: dict[str, Any] | None, now: datetime) -> tuple[str, bool] | None:
    """How long until the pending question expires, and whether it is in the last 10% of
    its time (a warning)."""
    if question is None:
        return None
    asked = datetime.fromisoformat(question["asked_at"].replace("Z", "+00:00"))
    expires = datetime.fromisoformat(question["expires_at"].replace("Z", "+00:00"))
    left = (expires - now).total_seconds()
    warning = left <= 0.1 * max((expires - asked).total_seconds(), 1)
    if left <= 0:
        return "expired", True
    hours, rest = divmod(int(left), 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {seconds:02d}s"
    return f"expires in {text}", warning


def status_line(service: str, conversation_id: str, pending: bool | None, working: bool,
                connected: bool, doing: str | None = None, expires: str | None = None,
                refused: bool = False) -> str:
    """`refused`: the listener is not the owner's service (T2) and the app stopped
    following it; nothing is retried, so the line must not say it is."""
    question = {None: "question: ?", True: "question pending", False: "no question"}[pending]
    if pending and expires:
        question = f"question pending, {expires}"
    if service.startswith("unix://"):
        service = "unix:" + service.rsplit("/", 1)[-1]
    busy = f"Clankie: {doing[:60]}" if doing else "Clankie is working..."
    state = ("not yours: stopped" if refused else "disconnected, retrying" if not connected
             else busy if working else "idle")
    return f"{service} | conversation {conversation_id[:8]} | {question} | {state}"
