"""Snapshots of the chat screen with a pending question, and of the question view.

A fixed API (canned events and snapshot) keeps the screens deterministic; what the app
does with a real service is shown by test_chat.py. Update with `--snapshot-update` after
checking the new SVGs by eye.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from textual.widgets import RichLog

from clankie.tui.app import ChatApp
from tests.polling import eventually_async
from tests.tui.fake import FakeService

C = "7d9c0a52-5a7e-4f51-9b1e-2f8e3c1d4a6b"
R = "5f0e4c3b-2a19-4807-b6c5-d4e3f2a1b0c9"
AT = "2026-11-30T12:00:00.000000Z"
EVENTS = [
    {"type": "message", "seq": 1, "conversation_id": C, "message_id": "m1", "author": "owner",
     "text": "Set up tests for this project, please.", "at": AT},
    {"type": "run_status", "seq": 2, "conversation_id": C, "run_id": "r1", "kind": "turn",
     "status": "running", "at": AT},
    {"type": "message", "seq": 3, "conversation_id": C, "message_id": "m2",
     "author": "clankie", "text": "Before I start, one preference question.", "at": AT},
    {"type": "input_requested", "seq": 4, "conversation_id": C, "request_id": R,
     "prompt": "Which test runner should this project use?", "choices": ["pytest", "unittest"],
     "at": AT},
    {"type": "run_status", "seq": 5, "conversation_id": C, "run_id": "r1", "kind": "turn",
     "status": "succeeded", "at": AT},
]
SNAPSHOT = {"conversation_id": C, "incarnation": "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d",
            "revision": 6, "request": None, "pending": {
                "request_id": R, "kind": "choice",
                "prompt": "Which test runner should this project use?",
                "options": [{"option_id": "o1", "label": "pytest",
                             "description": "plain asserts, fixtures"},
                            {"option_id": "o2", "label": "unittest",
                             "description": "standard library only"}],
                "allow_text": True, "status": "pending", "incarnation": "0a1b",
                "asked_at": AT, "expires_at": "2026-12-01T12:00:00.000000Z", "receipt": None}}


WORKING = [
    *EVENTS[:2],
    {"type": "tool_activity", "seq": 3, "conversation_id": C, "run_id": "r1",
     "tool": "list_files", "status": "ok", "code": None, "summary": "listed . depth 1: 4 entries",
     "at": AT},
    {"type": "tool_activity", "seq": 4, "conversation_id": C, "run_id": "r1",
     "tool": "read_file", "status": "refused", "code": "denied_path",
     "summary": "read_file .env: refused denied_path", "at": AT},
    {"type": "tool_activity", "seq": 5, "conversation_id": C, "run_id": "r1",
     "tool": "read_file", "status": "ok", "code": None,
     "summary": "read pyproject.toml lines 1-12 of 12", "at": AT},
]


class FixedApi:
    def __init__(self, events: list[dict[str, Any]] = EVENTS) -> None:
        self.tailed = False
        self.events = events

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        if op == "events_tail":
            if not self.tailed:
                self.tailed = True
                return {"events": self.events, "next_after": len(self.events),
                        "oldest_seq": 1, "trimmed": False}
            await asyncio.Event().wait()  # nothing more happens
        if op == "input_get":
            return SNAPSHOT
        if op == "conversation_get":
            return {"conversation_id": C, "workspace": {"path": "/home/owner/src/shop"}}
        if op == "service_info":
            return {"model": {"provider": "scripted", "model": None, "endpoint_host": None}}
        raise AssertionError(f"unexpected {op}")

    async def aclose(self) -> None:
        pass


NOW = datetime(2026, 11, 30, 13, 0, tzinfo=UTC)  # an hour after the question was asked


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Times are shown in the owner's local time zone: UTC here, so the screens are the
    same on every machine."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def app(events: list[dict[str, Any]] = EVENTS, now: datetime = NOW) -> ChatApp:
    return ChatApp(FixedApi(events), C, "unix:///home/owner/.local/share/clankie/clankie.sock",
                   clock=lambda: now)


async def settled(pilot: Any) -> None:
    await eventually_async(pilot.app.transcript, "the question in the transcript",
                           until=lambda shown: "Clankie asked a question" in shown
                           and pilot.app.model is not None,  # the header read too
                           pause=pilot.pause)
    pilot.app.clear_notifications()
    await pilot.pause()


def test_chat_screen_with_a_pending_question(snap_compare):
    assert snap_compare(app(), terminal_size=(100, 30), run_before=settled)


def test_a_question_cancelled_elsewhere_is_shown_ended(snap_compare):
    """SPEC section 10: a question that ended, by any surface, is shown as ended at once,
    never with live options (issue 19: after a CLI cancel the panel kept its options)."""
    fake = FakeService()
    chat = ChatApp(fake, fake.c, "unix:///home/owner/.local/share/clankie/clankie.sock",
                   clock=fake.clock)

    async def cancelled(pilot: Any) -> None:
        def question() -> str:
            shown = str(chat.query_one("#question").render())
            if "Clankie asks" not in shown and fake.pending is None:
                fake.ask()
            return shown

        await eventually_async(question, "the question panel to ask",
                               until=lambda shown: "Clankie asks" in shown, pause=pilot.pause)
        fake.clock.now += timedelta(minutes=5)
        fake.cancel_elsewhere()
        await eventually_async(lambda: str(chat.query_one("#question").render()),
                               "the question panel to show the question ended",
                               until=lambda shown: "ended" in shown and chat.model is not None,
                               pause=pilot.pause)
        chat.clear_notifications()
        await pilot.pause()

    assert snap_compare(chat, terminal_size=(100, 30), run_before=cancelled)


async def working(pilot: Any) -> None:
    await eventually_async(pilot.app.transcript, "the tool activity in the transcript",
                           until=lambda shown: "read pyproject.toml" in shown
                           and pilot.app.model is not None,
                           pause=pilot.pause)
    pilot.app.clear_notifications()
    await pilot.pause()


def test_w9_the_chat_screen_while_clankie_reads_its_workspace(snap_compare):
    assert snap_compare(app(WORKING), terminal_size=(100, 30), run_before=working)


async def test_w9_tool_activity_is_a_dim_line_and_the_status_says_what_clankie_does():
    chat = app(WORKING)
    async with chat.run_test(size=(100, 30)) as pilot:
        await working(pilot)
        assert "  read_file .env: refused denied_path" in chat.transcript()
        log = chat.query_one(RichLog)
        activity = [strip for strip in log.lines if "listed ." in strip.text]
        assert activity and all(seg.style is not None and seg.style.dim
                                for seg in activity[0] if seg.text.strip())
        status = str(chat.query_one("#status").render())
        assert "Clankie: read pyproject.toml lines 1-12 of 12" in status


def test_the_status_line_counts_down_and_warns_in_the_last_tenth(snap_compare):
    late = datetime(2026, 12, 1, 11, 0, tzinfo=UTC)  # 1 h left of 24 h
    assert snap_compare(app(now=late), terminal_size=(100, 30), run_before=settled)


async def test_a_question_rings_the_bell_and_notifies_with_its_prompt():
    for events, expected in ((EVENTS, 1), (WORKING, 0)):
        chat = app(events)
        bells: list[int] = []
        chat.bell = lambda rung=bells: rung.append(1)  # type: ignore[method-assign]
        async with chat.run_test(size=(100, 30)) as pilot:
            await eventually_async(lambda chat=chat: chat.snapshot, "the first snapshot",
                                   until=lambda snapshot: snapshot is not None,
                                   pause=pilot.pause)
            await pilot.pause()
            notes = [n.message for n in chat._notifications]
            status = str(chat.query_one("#status").render())
            assert not chat.query_one("#status").has_class("expiring")
        assert len(bells) == expected, events
        asked = [m for m in notes if "Clankie asks: Which test runner" in m]
        assert len(asked) == expected
        assert "question pending, expires in 23 h" in status


async def test_the_status_line_warns_when_a_tenth_of_the_time_is_left():
    late = app(now=datetime(2026, 12, 1, 11, 0, tzinfo=UTC))
    async with late.run_test(size=(100, 30)) as pilot:
        await settled(pilot)
        assert "expires in 1 h" in str(late.query_one("#status").render())
        assert late.query_one("#status").has_class("expiring")
    gone = app(now=datetime(2026, 12, 1, 12, 0, 1, tzinfo=UTC) + timedelta(0))
    async with gone.run_test(size=(100, 30)) as pilot:
        await settled(pilot)
        assert "question pending, expired" in str(gone.query_one("#status").render())


def test_r3_an_interrupted_run_is_said_plainly():
    from clankie import dto
    from clankie.tui.render import event_line

    line = event_line(dto.RunStatusEvent(type="run_status", seq=9, conversation_id=C,
                                         run_id="r", kind="continuation", status="failed",
                                         error="orphaned_by_restart", at=AT))
    assert line is not None and "interrupted by a restart and will not run again" in line
