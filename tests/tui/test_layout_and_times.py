"""Issue 19, as a new user found it in tmux: the toast that announces a question never hides
any of the question panel (nor the input line), no line of the panel is cut off, the panel
says when the question was asked, and each line of the chat log starts with its local time.

Checked on what the screen composes (which widget is on top at each cell, the panel's
scrollable height), not on pixels, with the fixed API of the snapshot tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Input, RichLog, Static

from clankie import dto
from clankie.tui import render
from clankie.tui.app import ChatApp
from tests.tui.test_snapshots import AT, EVENTS, NOW, SNAPSHOT, C, FixedApi

LONG_PROMPT = ("Which of these test runners should this project use, given that it already has "
               "a tox.ini, two CI workflows and a Makefile that calls python -m unittest "
               "discover, and that the team prefers plain asserts?")
TEN = {**SNAPSHOT, "pending": {**SNAPSHOT["pending"], "prompt": LONG_PROMPT, "options": [
    {"option_id": f"o{n}", "label": f"runner {n}", "description": f"the {n}th choice"}
    for n in range(1, 11)]}}


@pytest.fixture(autouse=True)
def utc(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


class Api(FixedApi):
    def __init__(self, snapshot: dict[str, Any]) -> None:
        super().__init__(EVENTS)
        self.snapshot = snapshot

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        if op == "input_get":
            return self.snapshot
        return await super().call(op, payload)


def chat(snapshot: dict[str, Any] = SNAPSHOT, now: datetime = NOW) -> ChatApp:
    return ChatApp(Api(snapshot), C, "unix:///run/clankie.sock", clock=lambda: now)


async def until(pilot: Any, predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.02)


def on_top(app: ChatApp, region: Region) -> set[Widget]:
    """The widgets the screen shows on top, cell by cell, over `region`."""
    return {app.screen.get_widget_at(x, y)[0]
            for y in range(region.y, region.bottom) for x in range(region.x, region.right)}


# Ten options and a long prompt need more than 24 lines: on 80x24 they scroll (below).
@pytest.mark.parametrize(("size", "snapshot"), [
    ((100, 30), SNAPSHOT), ((100, 40), SNAPSHOT), ((80, 24), SNAPSHOT), ((100, 40), TEN),
    ((120, 50), TEN)], ids=["100x30", "100x40", "80x24", "100x40 ten", "120x50 ten"])
async def test_issue19_the_question_toast_hides_nothing_of_the_panel_or_the_input(
        size: tuple[int, int], snapshot: dict[str, Any]) -> None:
    app = chat(snapshot)
    async with app.run_test(size=size, notifications=True) as pilot:
        await until(pilot, lambda: any("Clankie asks" in str(t.render())
                                       for t in app.screen.query("Toast")), "the toast")
        await pilot.pause()
        panel, box = app.query_one("#question", Static), app.query_one("#question-box")
        toast = next(t for t in app.screen.query("Toast") if "Clankie asks" in str(t.render()))
        assert box.display and toast.region.height > 0
        assert not toast.region.overlaps(box.region), (toast.region, box.region)
        # The panel's last line, and every other cell of it, is the panel's own on screen.
        assert panel.region.bottom <= box.content_region.bottom  # nothing below its frame
        last = Region(panel.region.x, panel.region.bottom - 1, panel.region.width, 1)
        assert on_top(app, last) == {panel}
        assert on_top(app, box.region) == {panel, box}
        assert on_top(app, app.query_one(Input).region) <= {app.query_one(Input)}
        # The toast lies over the log, below the two top lines.
        assert toast.region.y >= 2 and app.query_one(RichLog).region.contains_region(
            toast.region)


@pytest.mark.parametrize("size", [(100, 40), (120, 50)])
async def test_issue19_no_line_of_a_ten_option_question_is_cut_off(
        size: tuple[int, int]) -> None:
    app = chat(TEN)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.snapshot is not None, "the snapshot")
        await pilot.pause()
        panel, box = app.query_one("#question", Static), app.query_one("#question-box")
        text = str(panel.render())
        assert "10. runner 10 - the 10th choice" in text and "revision 6" in text
        assert box.max_scroll_y == 0  # all of it fits: nothing to scroll to, nothing cut
        assert box.content_region.contains_region(panel.region)
        assert panel.region.height >= len(text.split("\n"))


async def test_issue19_on_a_small_screen_a_big_question_scrolls_rather_than_being_cut() -> None:
    app = chat(TEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.snapshot is not None, "the snapshot")
        await pilot.pause()
        panel, box = app.query_one("#question", Static), app.query_one("#question-box")
        assert box.max_scroll_y > 0 and box.show_vertical_scrollbar  # the rest is a scroll away
        box.scroll_end(animate=False)
        await pilot.pause()
        last = Region(panel.region.x, box.content_region.bottom - 1, panel.region.width, 1)
        assert box.scroll_y == box.max_scroll_y and on_top(app, last) == {panel}
        # (the panel's region is where it lies, scrolled: above the box's top now)
        # its last line: under 30 rows the line of IDs is left out (SPEC section 10)
        assert "Expires" in panel.render_line(last.y - panel.region.y).text


async def test_issue19_the_panel_says_when_the_question_was_asked_in_local_time() -> None:
    app = chat()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: app.snapshot is not None, "the snapshot")
        await pilot.pause()
        text = str(app.query_one("#question", Static).render())
        # one line each, so neither wraps on an 80-column terminal (issue 19's trial)
        assert "  Asked 2026-11-30 12:00 (1 h ago)" in text.split("\n")
        assert "  Expires 2026-12-01 12:00 (in 23 h)" in text.split("\n")
        assert "  request 5f0e4c3b, incarnation 0a1b2c3d, revision 6" in text.split("\n")


async def test_issue19_each_chat_line_starts_with_its_local_time() -> None:
    assert AT.startswith("2026-11-30T12:00") and datetime(2026, 11, 30, 13, tzinfo=UTC) == NOW
    app = chat()
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: "Clankie asked a question" in app.transcript(), "the log")
        lines = app.transcript().split("\n")
        assert "12:00 you: Set up tests for this project, please." in lines
        assert "12:00 clankie: Before I start, one preference question." in lines
        assert "12:00 Clankie asked a question." in lines
        first = app.query_one(RichLog).lines[0]
        assert next(s.style is not None and s.style.dim for s in first if s.text.strip())
    later = chat(now=NOW + timedelta(days=1))  # yesterday's lines carry their date
    async with later.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: "Clankie asked a question" in later.transcript(), "the log")
        assert ("2026-11-30 12:00 you: Set up tests for this project, please."
                in later.transcript().split("\n"))


def test_the_connection_state_is_at_the_start_of_the_status_line_so_80_columns_show_it():
    """Tried as a new user at 80x24: the line was cut before "disconnected, retrying". The
    state and the question come first now, the address last."""
    from clankie.tui.render import status_line

    for connected, state in ((False, "disconnected, retrying"), (True, "idle")):
        line = status_line("unix:///home/someone/.local/share/clankie/clankie.sock",
                           "0123456789abcdef", "question pending, expires in 23 h 59 min",
                           working=False, connected=connected)
        assert line[:80].startswith(state) and "question pending" in line[:80], line


async def test_issue19_the_log_still_ends_with_the_latest_line_after_a_resize() -> None:
    """Issue 19's trial: after the terminal shrank to 80x24 the log showed older lines and
    hid the latest (the question just asked) until scrolled by hand."""
    app = chat()
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "Clankie asked a question" in app.transcript(), "the log")
        for n in range(40):
            app.say(f"line {n} of a long conversation, long enough to wrap on a small screen")
        log = app.query_one(RichLog)
        await until(pilot, lambda: log.max_scroll_y > 0 and log.scroll_y == log.max_scroll_y,
                    "the log at its end")
        await pilot.resize_terminal(80, 24)
        await until(pilot, lambda: log.size.width < 100, "the smaller screen")
        await until(pilot, lambda: log.scroll_y == log.max_scroll_y, "the log at its end again")
        # and wrapped anew to the width it has now: no line is cut at the right edge
        assert max(strip.cell_length for strip in log.lines) <= log.scrollable_content_region.width
        assert "line 39 of a long conversation" in " ".join(app.transcript().split())


async def test_issue19_on_80_columns_no_log_line_is_cut_by_the_scrollbar() -> None:
    """Issue 19's second trial: on 80x24 the log wrapped its lines at 78 columns, then the
    scrollbar came and covered the last two, and a horizontal scrollbar took a line."""
    app = chat()
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: "Clankie asked a question" in app.transcript(), "the log")
        for n in range(30):
            app.say(f"line {n}: a fairly long message that should wrap across several lines "
                    "of the log without losing a word")
        log = app.query_one(RichLog)
        await until(pilot, lambda: log.max_scroll_y > 0, "the log to scroll")
        await pilot.pause()
        assert max(strip.cell_length for strip in log.lines) <= log.scrollable_content_region.width
        assert log.max_scroll_x == 0 and not log.show_horizontal_scrollbar


def test_issue19_a_long_workspace_path_keeps_its_last_folders_in_the_header() -> None:
    """Issue 19's second trial: at 80 columns the header cut the path's end, the folder one
    recognises; it is shortened from the start instead, to the width it has."""
    path = "/tmp/tmp.T4pJOzk8nK/a-very-long-directory-name/and-the-project-itself"
    model = dto.ModelOut(provider="scripted", model=None, endpoint_host=None)
    for width in (60, 78, 120):
        shown = render.header(path, model, width)
        assert len(shown) <= width and shown.endswith("and-the-project-itself"), shown
    assert render.header(path, model, 200) == f"model scripted (offline) | workspace {path}"
    assert render.header(path, model) == f"model scripted (offline) | workspace {path}"
