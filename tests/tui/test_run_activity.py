"""A wait before the model is asked again (SPEC R6, V4 `run_activity`) in the TUI: a dim
line of the chat log, and "model busy, retrying in N s" in the status line, counting
down; text from the endpoint's side shown visible, never as markup."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from textual.widgets import RichLog

from clankie import dto
from clankie.tui import render
from clankie.tui.app import ChatApp
from tests.polling import eventually_async
from tests.tui.test_snapshots import AT, EVENTS, C, FixedApi

START = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
RETRY_AT = "2026-11-30T12:00:07.000000Z"
WAITING = [
    *EVENTS[:2],
    {"type": "run_activity", "seq": 3, "conversation_id": C, "run_id": "r1",
     "activity": "model_retry", "summary": "openai: 429 rate limited; try 2 of 5 in 7 s",
     "retry_at": RETRY_AT, "at": AT},
]


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


async def shown(chat: ChatApp, pilot: Any, text: str) -> None:
    await eventually_async(chat.transcript, f"{text!r} in the transcript", timeout=10,
                           every=0.02, until=lambda shown: text in shown, pause=pilot.pause)


def status(chat: ChatApp) -> str:
    return str(chat.query_one("#status").render())


async def test_r6_v4_a_retry_is_a_dim_line_and_the_status_counts_down_to_the_next_try():
    clock = Clock()
    chat = ChatApp(FixedApi(WAITING), C, "unix:///run/clankie.sock", clock=clock)
    async with chat.run_test(size=(100, 30)) as pilot:
        await shown(chat, pilot, "model busy: openai: 429 rate limited; try 2 of 5 in 7 s")
        line = [strip for strip in chat.query_one(RichLog).lines if "model busy" in strip.text]
        assert line and all(seg.style is not None and seg.style.dim
                            for seg in line[0] if seg.text.strip())
        chat._read_clock()
        assert "Clankie: model busy, retrying in 7 s" in status(chat)
        clock.now = START + timedelta(seconds=5)
        chat._read_clock()
        assert "Clankie: model busy, retrying in 2 s" in status(chat)
        clock.now = START + timedelta(seconds=8)
        chat._read_clock()
        assert "Clankie: model busy, trying again" in status(chat)


def test_r6_retry_status_rounds_up_and_reads_the_event_not_the_summary():
    event = dto.RunActivityEvent.model_validate(WAITING[2])
    assert render.retry_status(event, START + timedelta(seconds=6.2)) == (
        "model busy, retrying in 1 s")
    assert render.retry_status(event, START + timedelta(seconds=7)) == (
        "model busy, trying again")


async def test_r6_a_hostile_summary_is_shown_visible_and_literal():
    hostile = {**WAITING[2], "summary": "openai: \x1b[2J[bold]x[/]"}
    chat = ChatApp(FixedApi([*WAITING[:2], hostile]), C, "unix:///run/clankie.sock",
                   clock=Clock())
    async with chat.run_test(size=(100, 30)) as pilot:
        await shown(chat, pilot, r"  model busy: openai: \x1b[2J[bold]x[/]")
