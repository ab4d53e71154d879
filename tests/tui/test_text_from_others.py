"""Text from others in the TUI (SPEC section 10, "Text from others"), with Textual Pilot:
a model's escape sequences and markup in a message, a question's prompt and options, a
tool's summary and file name, a room message, a failed run's error and a problem's
detail are rendered as visible, literal text; no markup is applied, so a
`[@click=app.quit]` label is only words and clicking it does nothing."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from rich.cells import cell_len
from textual.content import Content
from textual.widgets import Input, RichLog, Static

from clankie.client import ApiError
from clankie.tui.app import ChatApp
from tests.polling import eventually_async
from tests.tui.test_snapshots import AT, NOW, SNAPSHOT, C, R

ESCAPES = "\x1b[2J\x1b]52;c;ZXZpbA==\x07\rX\x9b31m\x08\u202eRLO\u202c"
SHOWN = r"\x1b[2J\x1b]52;c;ZXZpbA==\x07\x0dX\x9b31m\x08\u202eRLO\u202c"
MARKUP = "[bold]b[/] [@click=app.quit]QUIT[/] [link=file:///etc]l[/]"
HOSTILE = ESCAPES + MARKUP
FILE = "f\x1b[2J\x9b1m\u202e[bold]n.txt"
FILE_SHOWN = r"f\x1b[2J\x9b1m\u202e[bold]n.txt"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def event(seq: int, type_: str, **fields: Any) -> dict[str, Any]:
    return {"type": type_, "seq": seq, "conversation_id": C, "at": AT, **fields}


EVENTS = [
    event(1, "message", message_id="m1", author="owner", text="mine " + HOSTILE),
    event(2, "run_status", run_id="r1", kind="turn", status="running"),
    event(3, "message", message_id="m2", author="clankie", text="msg " + HOSTILE),
    event(4, "message", message_id="m3", author="room", text="room " + HOSTILE),
    event(5, "run_status", run_id="r0", kind="turn", status="failed", error="err " + HOSTILE),
    event(6, "input_requested", request_id=R, prompt="ask " + HOSTILE,
          choices=["lab " + HOSTILE, "plain"]),
    event(7, "tool_activity", run_id="r1", tool="read_file", status="ok", code=None,
          summary=f"read {FILE} [@click=app.quit]QUIT[/] lines 1-1 of 1 {MARKUP}"),
]
PENDING = {**SNAPSHOT["pending"], "prompt": "ask " + HOSTILE,
           "options": [{"option_id": "o1", "label": "lab " + HOSTILE,
                        "description": "desc " + HOSTILE},
                       {"option_id": "o2", "label": "plain", "description": ""}]}
HOSTILE_SNAPSHOT = {**SNAPSHOT, "pending": PENDING}
PROBLEM = {"code": "invalid_request", "status": 422, "detail": "bad " + HOSTILE}


class HostileApi:
    """A service whose every text came from a hostile model, room or workspace."""

    def __init__(self, tail_refused: bool = False) -> None:
        self.tailed = False
        self.tail_refused = tail_refused

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        if op == "events_tail":
            if self.tail_refused:
                raise ApiError(PROBLEM)
            if not self.tailed:
                self.tailed = True
                return {"events": EVENTS, "next_after": 7, "oldest_seq": 1, "trimmed": False}
            await asyncio.Event().wait()
        if op == "input_get":
            return HOSTILE_SNAPSHOT
        if op == "conversation_send":
            raise ApiError(PROBLEM)
        if op == "conversation_get":
            return {"conversation_id": C, "workspace": {"path": "/srv/" + HOSTILE}}
        if op == "service_info":
            return {"model": {"provider": "openai", "model": "m " + HOSTILE,
                              "endpoint_host": "localhost"}}
        raise AssertionError(f"unexpected {op}")

    async def aclose(self) -> None:
        pass


def hostile_app(tail_refused: bool = False) -> ChatApp:
    return ChatApp(HostileApi(tail_refused), C, "test", clock=lambda: NOW)


async def until(pilot: Any, predicate: Any) -> None:
    await eventually_async(predicate, f"the condition on line {predicate.__code__.co_firstlineno}",
                           timeout=10, every=0.02, pause=pilot.pause)


def unwrapped(text: str) -> str:
    """The log wraps long lines at spaces: compare the words."""
    return " ".join(text.split())


def literal(content: Any) -> str:
    """The plain text of a widget's rendered content, checked to carry no markup."""
    assert isinstance(content, Content), content
    assert not content.spans, content.spans  # no style, link or action was applied
    return content.plain


async def test_text_from_others_in_the_log_are_visible_and_literal():
    app = hostile_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: "read f" in app.transcript())
        log = app.transcript()
        assert not RAW.search(log), log
        for line in (f"you: mine {SHOWN}{MARKUP}", f"clankie: msg {SHOWN}{MARKUP}",
                     f"room: room {SHOWN}{MARKUP}",
                     f"Clankie's run failed: err {SHOWN}{MARKUP}",
                     f"read {FILE_SHOWN} [@click=app.quit]QUIT[/] lines 1-1 of 1 {MARKUP}"):
            assert unwrapped(line) in unwrapped(log), (line, log)
        for strip in app.query_one(RichLog).lines:
            for segment in strip:
                assert segment.style is None or (not segment.style.link
                                                 and not segment.style.meta), segment


async def test_text_from_others_in_the_question_panel_are_visible_and_literal():
    app = hostile_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: app.snapshot is not None)
        await pilot.press(*"/question", "enter")
        await pilot.pause()
        panel = literal(app.query_one("#question", Static).render())
        assert not RAW.search(panel), panel
        assert f"Clankie asks: ask {SHOWN}{MARKUP}\n" in panel
        assert f"  1. lab {SHOWN}{MARKUP} - desc {SHOWN}{MARKUP}\n" in panel


async def test_the_workspace_and_model_in_the_header_are_visible_and_literal():
    app = hostile_app()  # wide enough for the whole path: a narrower header cuts its start
    async with app.run_test(size=(300, 50)) as pilot:
        await until(pilot, lambda: app.model is not None)
        await pilot.pause()
        header = literal(app.query_one("#where", Static).render())
        assert not RAW.search(header), header
        assert f"model openai/m {SHOWN}{MARKUP} | workspace /srv/{SHOWN}{MARKUP}" == header


async def test_text_from_others_in_the_status_line_are_literal_and_a_click_does_not_quit():
    app = hostile_app()
    async with app.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: app.doing is not None)
        await pilot.pause()
        status = app.query_one("#status", Static)
        line = status.render_line(0).text  # as the screen has it, padding included
        where = cell_len(line[:line.index("QUIT")])
        for x in range(where, where + 4):
            await pilot.click("#status", offset=(x, 0))
            assert app.is_running and app.return_code is None, x
        shown = literal(status.render())
        assert not RAW.search(shown), shown
        assert f"Clankie: read {FILE_SHOWN} [@click=app.quit]QUIT[/]" in shown


async def test_text_from_others_in_notifications_are_visible_and_never_markup():
    app = hostile_app()
    async with app.run_test(size=(200, 50), notifications=True) as pilot:
        await until(pilot, lambda: any("Clankie asks" in n.message
                                       for n in app._notifications))
        app.query_one(Input).value = "hello"
        await pilot.press("enter")
        await until(pilot, lambda: "Not sent" in app.transcript())
        asked = next(n for n in app._notifications if "Clankie asks" in n.message)
        assert not asked.markup
        assert f"Clankie asks: ask {SHOWN}{MARKUP}" in asked.message
        assert not RAW.search(asked.message)
        toasts = [toast.render() for toast in app.screen.query("Toast")]
        shown = next(t for t in toasts if "Clankie asks" in t.plain)
        assert f"Clankie asks: ask {SHOWN}{MARKUP}" in shown.plain
        assert not any("@click" in str(span.style) or "link" in str(span.style)
                       for span in shown.spans), shown.spans  # only the title's style
        assert (unwrapped(f"Not sent: invalid_request: bad {SHOWN}{MARKUP}")
                in unwrapped(app.transcript()))
    refused = hostile_app(tail_refused=True)
    async with refused.run_test(size=(200, 50)) as pilot:
        await until(pilot, lambda: len(refused._notifications) > 0)
        note = next(iter(refused._notifications))
        assert not note.markup
        assert note.message == f"invalid_request: bad {SHOWN}{MARKUP}"
        assert refused.is_running
