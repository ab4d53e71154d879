"""Issue 20: the TUI's widgets draw themselves from the app's reactive state.

The app only sets its state (`snapshot`, `now`, `connected`, `workspace`, ...); the panel,
the status line and the header are bound to it and show each change without any call to
redraw them (SPEC section 10 "Operator TUI": the panel always shows the latest snapshot;
the status line says the connection and the question from the same snapshot).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from textual.widgets import Static

from clankie import dto
from clankie.tui import render
from clankie.tui.app import ChatApp, QuestionBox, QuestionPanel, StatusLine
from tests.polling import eventually_async
from tests.tui.test_snapshots import NOW, SNAPSHOT, C, FixedApi

SCRIPTED = dto.ModelOut(provider="scripted", model=None, endpoint_host=None)
LONG = "/tmp/tmp.T4pJOzk8nK/a-very-long-directory-name/and-the-project-itself"


class Api(FixedApi):
    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        if op == "conversation_get":
            return {"conversation_id": C, "workspace": {"path": LONG}}
        return await super().call(op, payload)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> Any:
        return self.now


def text(app: ChatApp, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


async def until(pilot: Any, predicate: Any, what: str) -> None:
    await eventually_async(predicate, what, timeout=10, every=0.02, pause=pilot.pause)


async def test_setting_the_state_redraws_the_panel_and_the_status_line() -> None:
    clock = Clock()
    app = ChatApp(Api(), C, "unix:///run/clankie.sock", clock=clock)
    async with app.run_test(size=(100, 30)) as pilot:
        await until(pilot, lambda: "question pending" in text(app, "#status"), "the question")
        assert isinstance(app.query_one("#question"), QuestionPanel)
        assert isinstance(app.query_one("#status"), StatusLine)
        box = app.query_one("#question-box", QuestionBox)
        assert box.has_class("shown")
        request = SNAPSHOT["pending"]
        ended = dto.Snapshot.model_validate({
            **SNAPSHOT, "revision": 7, "pending": None,
            "request": {**request, "status": "cancelled", "receipt": {
                "receipt_id": "c1", "request_id": request["request_id"],
                "outcome": "cancelled", "reason": "explicit", "answer": None,
                "answered_by": None, "run_id": None, "continuation": None,
                "continuation_error": None, "resolved_at": request["asked_at"],
                "revision": 7}}})
        app.snapshot = ended  # as `_take` does; nothing else is called
        assert text(app, "#question") == render.question_panel(ended, app.now)
        assert " | no question | " in text(app, "#status")
        app.snapshot = ended.model_copy(update={"request": None})
        await pilot.pause()
        assert not box.has_class("shown")
        app.connected = False
        assert text(app, "#status").startswith("disconnected, retrying")
        # the clock, read each second, moves the countdown and the panel's times
        live = dto.Snapshot.model_validate(SNAPSHOT)
        app.snapshot = live
        clock.now = NOW + timedelta(hours=22)
        app._tick()
        assert text(app, "#question") == render.question_panel(live, clock.now)
        await until(pilot, lambda: app.query_one("#status").has_class("expiring"),
                    "the last tenth marked")


async def test_the_header_is_cut_to_the_width_it_has_after_a_resize() -> None:
    app = ChatApp(Api(), C, "unix:///run/clankie.sock", clock=Clock())
    async with app.run_test(size=(160, 30)) as pilot:
        await until(pilot, lambda: LONG in text(app, "#where"), "the whole path")
        await pilot.resize_terminal(60, 24)
        await until(pilot, lambda: LONG not in text(app, "#where"), "the header cut")
        width = app.query_one("#where").content_region.width
        assert text(app, "#where") == render.header(LONG, SCRIPTED, width)
        assert text(app, "#where").endswith("-project-itself") and width <= 58
