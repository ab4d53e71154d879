"""Issue 19, red team F2: the TUI against something that answers JSON but is not clankie
(`{}` for every op, or a problem whose `status` is null) says so in a line and keeps
running; no worker dies with a traceback."""

from __future__ import annotations

from typing import Any

import pytest
from textual.worker import WorkerState

from clankie.client import AsyncClient
from clankie.tui.app import ChatApp
from tests.api.test_client_wire import reply
from tests.polling import eventually_async

C = "abcdef01-0000-4000-8000-000000000000"


def flat(said: str) -> str:
    return " ".join(said.split())  # the log wraps its lines


@pytest.mark.parametrize("answer", [
    reply(b"{}"), reply(b'{"code":"forbidden","status":null}', b"403 No"),
    # issue 42: a code that is none of SPEC section 10's was said "Refused: brew_coffee: ..."
    reply(b'{"code":"brew_coffee","status":418,"detail":"I am a teapot"}', b"418 Teapot")],
    ids=["empty-object", "problem-status-null", "418-unknown-code"])
async def test_f2_what_is_not_clankie_is_said_in_a_line_and_the_app_lives(
        peer: Any, answer: bytes):
    p = peer(answer)
    app = ChatApp(AsyncClient(p.url, "clk_x"), C, p.url)
    async with app.run_test(size=(100, 40)) as pilot:
        await eventually_async(app.transcript, "the line saying so", timeout=20,
                               every=0.05, pause=pilot.pause,
                               until=lambda said: "did not answer like clankie" in flat(said))
        app.query_one("Input").value = "/question"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await eventually_async(app.transcript, "the /question line", timeout=20,
                               every=0.05, pause=pilot.pause,
                               until=lambda said: "Could not read the question" in flat(said))
        assert app.is_running
        assert not [w for w in app.workers if w.state == WorkerState.ERROR]
        assert "Traceback" not in app.transcript()
        assert "Refused" not in app.transcript()
    # leaving run_test raised nothing: no worker failed
