"""SPEC D15 in the TUI (Textual Pilot) against a real `clankie serve`: the scripted model
writing word by word (`pace_ms`), or the openai provider streaming from the fake endpoint
(a stall, then a withdrawal or a failure). The reply grows where its message will be, its
complete rows written once and left in place when the message is stored; a view scrolled
up stays put and says new text is below; the status line counts from `idle_ms`; `/stop`,
a failure and a kill each leave the text shown, marked as SPEC words it."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Static

from clankie import dto
from clankie.client import AsyncClient
from clankie.tui import render
from clankie.tui.app import ChatApp, ChatLog
from tests.e2e.served import Served
from tests.e2e.test_providers import PROVIDERS
from tests.fakes import Endpoint, model_endpoint, openai_reply, stream_stalled
from tests.tui.test_chat import type_line, until

WORDS = " ".join(f"word{n}" for n in range(500))  # 500 words, 25 ms apart: 12.5 s
SCRIPT: dict[str, Any] = {"turns": [[{"say": WORDS, "pace_ms": 25}]] * 5}
ENV = {"CLANKIE_STREAM_INTERVAL": "0.05", "CLANKIE_STREAM_CHECKPOINT": "0.5"}
OPENAI = PROVIDERS["openai"]


def flat(text: str) -> str:
    """As said, not as wrapped on the screen."""
    return " ".join(text.split())


def status(app: ChatApp) -> str:
    return str(app.query_one("#status", Static).render())


def conversation(served: Served) -> str:
    workspace = served.home.path.parent / "project"
    workspace.mkdir(exist_ok=True)
    with served.client() as client:
        return str(client.op(dto.CONVERSATION_CREATE, dto.ConversationCreate(
            workspace=str(workspace))).conversation_id)


@asynccontextmanager
async def chatting(served: Served, size: tuple[int, int] = (100, 40)
                   ) -> AsyncIterator[tuple[ChatApp, Pilot[None]]]:
    token = served.home.token_file.read_text().strip()
    app = ChatApp(AsyncClient(f"unix://{served.home.socket}", token), conversation(served),
                  "test")
    async with app.run_test(size=size) as pilot:
        yield app, pilot


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served.start(tmp_path / "home", script=SCRIPT, env=ENV)
    try:
        yield server
    finally:
        server.stop()


def writing(app: ChatApp) -> int:
    """How many lines of the log the reply being written has (0: none)."""
    log = app.query_one(ChatLog)
    return 0 if log.writing is None else len(log.lines) - log.writing.start


async def test_d15_the_reply_grows_where_its_message_will_be_and_stays_there_once(served):
    async with chatting(served) as (app, pilot):
        await type_line(app, pilot, "Tell me a long story.")
        await until(pilot, lambda: writing(app) >= 4, "four lines of the reply")
        log = app.query_one(ChatLog)
        assert log.writing is not None
        start = log.writing.start
        complete = list(log.lines[start:start + 3])
        said = app.transcript()
        assert "clankie: word0 word1 word2" in said and said.rstrip().endswith("…")
        assert said.count("…") == 1
        assert "Clankie is writing (" in status(app)
        await until(pilot, lambda: writing(app) >= 8, "more of the reply")
        # complete rows are written once: the very same lines, never drawn again
        assert all(a is b for a, b in zip(log.lines[start:start + 3], complete, strict=True))
        await until(pilot, lambda: log.writing is None and not app.running,
                    "the message stored and the run ended", timeout=60)
        assert all(a is b for a, b in zip(log.lines[start:start + 3], complete, strict=True))
        said = app.transcript()
        assert "…" not in said and said.count("word0 ") == 1
        assert f"clankie: {WORDS}" in flat(said)
        assert "Clankie is writing" not in status(app) and "idle" in status(app)
        await pilot.resize_terminal(70, 40)  # written again at the new width: still once
        await until(pilot, lambda: app.query_one(ChatLog).wrapped_at == 70, "the new width")
        await pilot.pause()
        assert flat(app.transcript()).count(f"clankie: {WORDS}") == 1


async def test_d15_a_view_scrolled_up_stays_put_and_says_new_text_is_below(served):
    async with chatting(served, size=(60, 20)) as (app, pilot):
        log = app.query_one(ChatLog)
        below = app.query_one("#below", Static)
        await type_line(app, pilot, "Tell me a long story.")
        await until(pilot, lambda: log.max_scroll_y >= 3 and log.is_vertical_scroll_end,
                    "the log to follow the reply past one screen")
        assert not below.display
        log.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        height = len(log.lines)
        await until(pilot, lambda: len(log.lines) >= height + 3, "more lines below")
        assert log.scroll_y == 0  # the view stayed where the owner put it
        await until(pilot, lambda: below.display, "the line saying new text is below")
        assert "New text below" in str(below.render())
        await pilot.click("#below")
        await until(pilot, lambda: log.is_vertical_scroll_end and not below.display,
                    "the end shown again, the line gone")
        height = len(log.lines)
        await until(pilot, lambda: len(log.lines) >= height + 2 and log.is_vertical_scroll_end,
                    "the log to follow the reply again")


@pytest.fixture
def served_long(tmp_path: Path) -> Iterator[Served]:
    """A reply long enough (up to 50 s) to be scrolled in on a loaded machine; stopped."""
    long = " ".join(f"word{n}" for n in range(2000))
    server = Served.start(tmp_path / "home", script={"turns": [[{"say": long, "pace_ms": 25}]]},
                          env=ENV)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("key", ["end", "ctrl+end", "pagedown"])
async def test_d15_keys_that_go_to_the_end_of_the_focused_log_make_it_follow_again(
        served_long, key):
    """D15: the log follows the reply unless the owner has scrolled up. Scrolled up by
    keys (PageUp, the log focused), going back to the end by keys (End, ctrl+End, or
    PageDown until the end) follows the reply again: the line saying new text is below
    goes, and the unfinished line stays in view as the reply grows."""
    async with chatting(served_long, size=(60, 20)) as (app, pilot):
        log = app.query_one(ChatLog)
        below = app.query_one("#below", Static)
        await type_line(app, pilot, "Tell me a long story.")
        await until(pilot, lambda: log.max_scroll_y >= 20 and log.is_vertical_scroll_end,
                    "the log to follow the reply past a few screens")
        log.focus()
        await until(pilot, lambda: log.has_focus, "the log focused")
        await pilot.press("pageup")
        await until(pilot, lambda: below.display, "the line saying new text is below")
        for _ in range(10 if key == "pagedown" else 1):  # End once; PageDown to the end
            await pilot.press(key)
            await until(pilot, lambda: not app.animator.is_being_animated(log, "scroll_y"),
                        "the scroll to end")
            if log.is_vertical_scroll_end:
                break
        height = len(log.lines)
        await until(pilot, lambda: len(log.lines) >= height + 3, "more of the reply")
        await until(pilot, lambda: log.is_vertical_scroll_end and not below.display,
                    "the log to follow the reply again", timeout=5)
        assert log.writing is not None and log.writing.tail  # the unfinished line, in view
        assert log.scroll_y + log.scrollable_content_region.height >= len(log.lines)
        app.query_one(Input).focus()
        await until(pilot, lambda: app.query_one(Input).has_focus, "the input focused")
        await type_line(app, pilot, "/stop")  # the app leaves with no reply being written
        await until(pilot, lambda: "Clankie's run was stopped." in app.transcript(), "the stop")


async def test_d15_r7_slash_stop_while_a_reply_streams_keeps_it_ending_stopped_by_you(served):
    async with chatting(served) as (app, pilot):
        await type_line(app, pilot, "Tell me a long story.")
        await until(pilot, lambda: writing(app) >= 2, "the reply being written")
        await type_line(app, pilot, "/stop")
        await until(pilot, lambda: "Clankie's run was stopped." in app.transcript(), "the stop")
        said = app.transcript()
        assert flat(said).count(render.STOPPED_END) == 1 and "…" not in said
        assert said.count("clankie: word0 ") == 1
        kept = flat(said).split("clankie: ", 1)[1].split(f" {render.STOPPED_END}")[0]
        assert WORDS.startswith(kept) and len(kept) < len(WORDS)
        assert app.query_one(ChatLog).writing is None and app.live is None


async def test_d15_d9_a_reply_cut_off_by_a_kill_ends_saying_what_followed_was_lost(served):
    async with chatting(served) as (app, pilot):
        await type_line(app, pilot, "Tell me a long story.")
        await until(pilot, lambda: writing(app) >= 3, "the reply being written")
        assert await asyncio.to_thread(served.stop, signal.SIGKILL) == -signal.SIGKILL
        await until(pilot, lambda: not app.connected, "the loss", timeout=30)
        again = await asyncio.to_thread(lambda: Served.start(
            served.home.path, init=False, script=SCRIPT, env=ENV))
        try:
            await until(pilot, lambda: render.RESTARTED_END in flat(app.transcript()),
                        "the reply marked cut off by the restart", timeout=30)
            said = flat(app.transcript())
            assert said.count(render.RESTARTED_END) == 1 and said.count("word0 ") == 1
            assert "…" not in said and app.query_one(ChatLog).writing is None
        finally:
            again.stop()
            served.proc = again.proc


# ------------------------------------------------ a stalled stream: quiet, then withdrawn


@pytest.fixture
def stalling(tmp_path: Path) -> Iterator[tuple[Served, Endpoint]]:
    with model_endpoint() as endpoint:
        env = {**OPENAI.env(endpoint.url), **ENV, "CLANKIE_MODEL_STALL_TIMEOUT": "5",
               "CLANKIE_MODEL_RETRY_WAIT": "5"}
        served = Served.start(tmp_path / "home", env=env, script=None)
        try:
            yield served, endpoint
        finally:
            served.stop()


async def test_d15_d8_a_stalled_reply_is_said_quiet_then_withdrawn_in_one_dim_line(stalling):
    served, endpoint = stalling
    endpoint.plan += [stream_stalled(openai_reply("Words that will be withdrawn."), False, 4),
                      openai_reply("Second try.")]
    async with chatting(served) as (app, pilot):
        await type_line(app, pilot, "Hello?")
        await until(pilot, lambda: "clankie: Words that will …" in app.transcript(),
                    "the first try's words")
        await until(pilot, lambda: "no text from the model for" in status(app),
                    "the status line to say the model is silent")
        assert "; giving up at 5 s" in status(app)
        await until(pilot, lambda: "clankie: Second try." in app.transcript(),
                    "the second try", timeout=30)
        said = app.transcript()
        assert "Words that will" not in said  # the withdrawn lines went
        [line] = [strip for strip in app.query_one(ChatLog).lines
                  if "characters withdrawn" in strip.text]
        assert "16 characters withdrawn: openai:" in line.text
        assert all(seg.style is not None and seg.style.dim for seg in line if seg.text.strip())


async def test_d15_d8_a_reply_whose_call_fails_for_good_ends_cut_off_with_the_reason(
        tmp_path: Path):
    with model_endpoint() as endpoint:
        env = {**OPENAI.env(endpoint.url), **ENV, "CLANKIE_MODEL_STALL_TIMEOUT": "5",
               "CLANKIE_MODEL_RETRIES": "0"}
        served = Served.start(tmp_path / "home", env=env, script=None)
        try:
            endpoint.plan.append(stream_stalled(openai_reply("Words cut short here."), False, 4))
            async with chatting(served) as (app, pilot):
                await type_line(app, pilot, "Hello?")
                await until(pilot, lambda: "Clankie's run failed" in app.transcript(),
                            "the run to fail", timeout=30)
                said = flat(app.transcript())
                assert said.count("clankie: Words cut short (cut off: model_error: openai: the "
                                  "model sent nothing for 5 s") == 1
                assert "…" not in said
        finally:
            served.stop()


# ---------------------------------------------------------------- the status line's words


def live(state: str, idle_ms: int, begun_s: float = 0) -> dto.LiveReply:
    at = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)
    started = at - timedelta(seconds=begun_s)
    return dto.LiveReply.model_validate({
        "type": "reply_delta", "conversation_id": "c", "run_id": "r", "reply_id": "p",
        "attempt": 1, "state": state, "offset": 0, "text": "", "length": 0, "calling": [],
        "idle_ms": idle_ms, "started_at": started.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "at": at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")})


def test_d15_the_status_line_counts_on_from_idle_ms_in_the_spec_s_words():
    assert render.live_status(live("writing", 200, 10), 2.5, 60) == "Clankie is writing (12 s)"
    assert render.live_status(live("waiting", 3_000), 1.2, 60) == "waiting for the model (4 s)"
    assert render.live_status(live("quiet", 12_000), 2.0, 60) == (
        "no text from the model for 14 s; giving up at 60 s")
    assert render.live_status(live("quiet", 12_000), 2.0, None) == (
        "no text from the model for 14 s")
    assert render.live_status(live("complete", 0), 0, 60) is None
    line = render.status_line("unix:///x/clankie.sock", "c" * 36, "no question", True, True,
                              writing="Clankie is writing (12 s)")
    assert line.startswith("Clankie is writing (12 s) | no question")


# ------------------------------------------- one module's logic, against pages a test writes


class Pages:
    """A service whose tail answers with the pages a test puts, one a long poll (a unit
    test of the app's handling of live answers: the cases a real service gives only by
    chance of timing)."""

    def __init__(self) -> None:
        self.pages: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.sent: list[dict[str, Any]] = []
        self.after = 0

    def put(self, live_reply: dict[str, Any] | None, events: tuple[dict[str, Any], ...] = ()
            ) -> None:
        self.after += len(events)
        self.pages.put_nowait({"events": list(events), "next_after": self.after,
                               "oldest_seq": 1, "trimmed": False, "live": live_reply})

    async def call(self, op: str, payload: Any = None) -> dict[str, Any]:
        if op == "events_tail":
            self.sent.append(payload["live"])
            return await self.pages.get()
        if op == "input_get":
            return {"conversation_id": C, "incarnation": C, "revision": 1, "pending": None,
                    "request": None}
        if op == "conversation_get":
            return {"conversation_id": C, "workspace": {"path": "/tmp"}}
        return {"model": {"provider": "scripted", "model": None, "endpoint_host": None},
                "settings": {"model_stall_timeout": 60}}

    async def aclose(self) -> None:
        pass


C = "3c1e9a7b-8d2f-4e6a-9b0c-1d2e3f4a5b6c"
R = "5d1e9a7b-8d2f-4e6a-9b0c-1d2e3f4a5b6c"
STAMP = "2026-12-06T12:00:00.000000Z"


def delta(text: str, offset: int, length: int, state: str = "writing") -> dict[str, Any]:
    return {"type": "reply_delta", "conversation_id": C, "run_id": C, "reply_id": R,
            "attempt": 1, "state": state, "offset": offset, "text": text, "length": length,
            "calling": [], "idle_ms": 0, "started_at": STAMP, "at": STAMP}


async def test_d15_d5_a_reply_gone_without_its_message_is_kept_said_cut_off_never_complete():
    api = Pages()
    app = ChatApp(api, C, "test")
    async with app.run_test(size=(100, 30)) as pilot:
        api.put(delta("Half a thought", 0, 14))
        await until(pilot, lambda: "clankie: Half a thought…" in app.transcript(), "the text")
        api.put(delta(" and more", 14, 23))
        await until(pilot, lambda: "clankie: Half a thought and more…" in app.transcript(),
                    "the delta after it")
        api.put(None)  # gone, and no message, withdrawal or run's end explains it
        await until(pilot, lambda: render.NOT_KEPT_END in app.transcript(), "the mark")
        said = app.transcript()
        assert f"clankie: Half a thought and more {render.NOT_KEPT_END}" in said
        assert "…" not in said and said.count("Half a thought") == 1
        assert api.sent[:3] == [{"reply_id": None, "offset": 0}, {"reply_id": R, "offset": 14},
                                {"reply_id": R, "offset": 23}]  # the lengths it was sent


async def test_d15_a_line_said_while_a_reply_is_written_goes_above_it():
    api = Pages()
    app = ChatApp(api, C, "test")
    async with app.run_test(size=(100, 30)) as pilot:
        api.put(delta("Writing line one\nand two", 0, 24))
        await until(pilot, lambda: "and two…" in app.transcript(), "the reply")
        await type_line(app, pilot, "/help")
        await until(pilot, lambda: "/stop" in app.transcript(), "the help")
        api.put(delta(" goes on", 24, 32))
        await until(pilot, lambda: "and two goes on…" in app.transcript(), "more of it")
        lines = app.transcript().splitlines()
        assert lines[-2].endswith("clankie: Writing line one") and \
            lines[-1] == "  | and two goes on…"
        api.put(delta("", 32, 32, "complete"), ({
            "type": "message", "seq": 1, "conversation_id": C, "message_id": R,
            "author": "clankie", "text": "Writing line one\nand two goes on.", "at": STAMP},))
        await until(pilot, lambda: app.transcript().splitlines()[-1] == "  | and two goes on.",
                    "the message, where the reply was")
        assert app.transcript().count("Writing line one") == 1
