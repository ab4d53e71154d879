"""Issue 32: one event formatter (`clankie.eventtext`) for the CLI and the TUI.

Each event type of SPEC section 8 is worded by one `match` over the typed event union, in the
CLI's phrasing (`#seq local-time ...`, `clankie conversations events`) and the TUI's (the chat
log). The expected lines below are the ones both surfaces printed before the formatter was
shared, byte for byte. A restart's ending (R9) is decided once, from the receipts read
(an `input_resolved` event carries no reason, V2), for both surfaces.
"""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from clankie import dto, eventtext, when, wording
from clankie.eventtext import Surface
from clankie.tui import render

C = "abcd1234-0000-4000-8000-000000000001"
R = "0123abcd-0000-4000-8000-000000000002"
AT = "2026-12-01T09:05:00.000000Z"
HEAD = f"#7 {when.local(AT)}"


def event(type_: str, /, **fields: Any) -> dto.Event:
    """An event as `events_tail` carries it, read into the union as the CLI reads a page."""
    page = dto.EventsOut.model_validate({"events": [{"type": type_, "seq": 7,
                                                     "conversation_id": C, "at": AT,
                                                     **fields}],
                                         "next_after": 7, "oldest_seq": 1, "trimmed": False})
    return page.events[0]


ORPHANED = "orphaned_by_restart"
CASES: list[tuple[dto.Event, str, str | None]] = [
    (event("message", message_id="m", author="owner", text="hi"),
     f"{HEAD} owner: hi", "you: hi"),
    (event("message", message_id="m", author="clankie", text="two\nlines"),
     f"{HEAD} clankie: two\n    | lines", "clankie: two\n  | lines"),
    (event("message", message_id="m", author="room", text="x"), f"{HEAD} room: x", "room: x"),
    (event("run_status", run_id="r", kind="turn", status="running"),
     f"{HEAD} run r (turn) running", None),
    (event("run_status", run_id="r", kind="turn", status="succeeded", error=None),
     f"{HEAD} run r (turn) succeeded", None),
    (event("run_status", run_id="r", kind="continuation", status="failed", error=ORPHANED),
     f"{HEAD} run r (continuation) failed ({ORPHANED}): {wording.RUN_INTERRUPTED}",
     f"Clankie's run was {wording.RUN_INTERRUPTED} (or type /continue)."),
    (event("run_status", run_id="r", kind="turn", status="failed", error="model_error"),
     f"{HEAD} run r (turn) failed (model_error)", "Clankie's run failed: model_error"),
    (event("run_status", run_id="r", kind="turn", status="failed"),
     f"{HEAD} run r (turn) failed", "Clankie's run failed: no reason given"),
    (event("run_status", run_id="r", kind="turn", status="cancelled",
           error="stopped_by_owner"),
     f"{HEAD} run r (turn) cancelled (stopped_by_owner)", "Clankie's run was stopped."),
    (event("input_requested", request_id=R, prompt="Tabs?", choices=["tabs", "spaces"]),
     f"{HEAD} question {R} asked: Tabs? [tabs | spaces]", "Clankie asked a question."),
    (event("input_requested", request_id=R, prompt="Why?", choices=[]),
     f"{HEAD} question {R} asked: Why?", "Clankie asked a question."),
    (event("input_resolved", request_id=R, outcome="answered"),
     f"{HEAD} question {R} answered", "The question 0123abcd ended: answered."),
    (event("conversation_reset"), f"{HEAD} conversation reset", "The conversation was reset."),
    (event("tool_activity", run_id="r", tool="read_file", status="ok", summary="read a.py"),
     f"{HEAD} tool read_file ok: read a.py", "  read a.py"),
    (event("tool_activity", run_id="r", tool="read_file", status="refused",
           code="denied_path", summary="read .env\nrefused"),
     f"{HEAD} tool read_file refused denied_path: read .env\n    | refused",
     "  read .env\n    | refused"),
    (event("tool_activity", run_id="r", tool="ask_question", status="ok", summary="asked"),
     f"{HEAD} tool ask_question ok: asked", None),
    (event("run_activity", run_id="r", activity="model_retry", summary="429; try 2 of 5",
           retry_at=AT),
     f"{HEAD} run r model_retry: 429; try 2 of 5 (next try {when.shown_now(AT)})",
     "  model busy: 429; try 2 of 5"),
    (event("a_newer_kind", extra=1), f"{HEAD} a_newer_kind", None),
]


@pytest.mark.parametrize(("e", "cli", "tui"), CASES,
                         ids=[f"{i}-{c[0].type}" for i, c in enumerate(CASES)])
def test_one_formatter_says_each_event_as_each_surface_did(e: dto.Event, cli: str,
                                                           tui: str | None):
    """Issue 32: the CLI's line (text from others continued under a bar, section 10) and
    the TUI's log line (None: the log shows nothing for it) from the one `match`."""
    assert eventtext.cli_line(e) == cli
    assert render.event_line(e) == tui


def test_the_tui_says_who_asks_and_its_activity_entries():
    """P3: an agent's question is said as the agent's; W9/R6: a tool call and a model
    retry are the log's dim activity entries (`eventtext.activity`), nothing else is."""
    asked = event("input_requested", request_id=R, prompt="Push?", choices=[])
    coder = dto.AskerOut(credential_id="a" * 32, name="coder", client=None)
    assert render.event_line(asked, coder) == \
        'Agent "coder" asked a question.'
    entries = [c[0] for c in CASES if eventtext.activity(c[0])]
    assert {e.type for e in entries} == {"tool_activity", "run_activity"}
    assert all(eventtext.text(e, eventtext.Surface.TUI) == render.event_line(e)
               for e in entries)


def test_an_event_of_a_newer_type_without_a_time_is_said_by_its_seq():
    e = dto.EventsOut.model_validate({"events": [{"type": "later", "seq": 3}],
                                      "next_after": 3, "oldest_seq": 1,
                                      "trimmed": False}).events[0]
    assert eventtext.cli_line(e) == "#3 later"
    assert eventtext.stamp(e, datetime.now(UTC)) == ""


AGENT = {"credential_id": "9" * 32, "name": "coder", "client": "claude-code"}


def question(reason: str | None, outcome: str = "cancelled",
             asker: dict[str, Any] | None = None) -> dto.QuestionOut:
    receipt = {"receipt_id": "3" * 32, "request_id": R, "outcome": outcome,
               "reason": reason, "answer": None, "answered_by": None, "run_id": None,
               "continuation": None, "continuation_error": None, "resolved_at": AT,
               "revision": 4}
    return dto.QuestionOut.model_validate({
        "request_id": R, "kind": "text", "prompt": "p", "options": [], "allow_text": True,
        "status": outcome, "incarnation": C, "asked_at": AT, "expires_at": AT,
        "receipt": receipt, "asker": asker})


def test_r9_v2_a_restarts_cancel_is_decided_once_from_the_receipts_read():
    """V2: `input_resolved` says no reason, so only the cancelled ones are read (`to_read`);
    R9: of those read, the ones a restart cancelled (reason `restart`) are said so, by the
    CLI and the TUI alike; one evicted since (None) or cancelled by the owner is not."""
    page = [event("input_resolved", request_id=R, outcome="cancelled"),
            event("input_resolved", request_id=C, outcome="answered"),
            event("message", message_id="m", author="owner", text="hi")]
    assert eventtext.to_read(page) == [R]
    assert eventtext.restarted([question("restart")]) == {R: False}
    assert eventtext.restarted([question("explicit"), None]) == {}
    restarted = eventtext.restarted([question("restart")])
    assert eventtext.cli_line(page[0], restarted) == \
        f"{HEAD} question {R} {wording.RESTARTED_QUESTION}"
    assert render.event_line(page[0], None, restarted) == \
        f"The question 0123abcd was {wording.RESTARTED_QUESTION} (or type /continue)."
    assert eventtext.text(page[0], Surface.CLI) == f"{HEAD} question {R} cancelled"


SRC = Path(__file__).resolve().parents[1] / "src" / "clankie"


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, at its top or inside a function, as absolute names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package clankie.cli
                base = "clankie.cli" + (f".{base}" if base else "")
            names |= {base} | {f"{base}.{a.name}" for a in node.names}
    return names


def test_cli_imports_run_one_way_entry_to_main():
    """Issue 32: `cli/entry.py` and `cli/main.py` imported each other; now `entry` imports
    `main` (lazily, for every command but `--version`) and nothing of the CLI imports
    `entry`."""
    assert "clankie.cli.main" in imports_of(SRC / "cli" / "entry.py")
    for module in (SRC / "cli").glob("*.py"):
        if module.name != "entry.py":
            assert "clankie.cli.entry" not in imports_of(module), module.name


def test_r9_p5_a_restarts_cancel_of_an_agents_question_says_the_agent_may_ask_again():
    """Issue 42: an agent's question a restart cancelled was said with "send a message to
    carry on" (and the TUI's "/continue"), yet a message to an agent's conversation is
    refused `not_eligible`; P5's way on is that the agent asks again."""
    page = [event("input_resolved", request_id=R, outcome="cancelled")]
    restarted = eventtext.restarted([question("restart", asker=AGENT)])
    assert restarted == {R: True}
    assert eventtext.cli_line(page[0], restarted) == \
        f"{HEAD} question {R} {wording.RESTARTED_AGENT_QUESTION}"
    tui = render.event_line(page[0], dto.AskerOut.model_validate(AGENT), restarted)
    assert tui == f"The question 0123abcd was {wording.RESTARTED_AGENT_QUESTION}."
    for said in (eventtext.cli_line(page[0], restarted), tui):
        assert "send a message" not in said and "/continue" not in said
        assert "clankie restarted" in said and "may ask again" in said
