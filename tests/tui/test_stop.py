"""SPEC R7 in the TUI: `/stop` stops the running run, against a real `clankie serve` whose
model (the OpenAI-compatible provider, through its SDK) hangs on the fake endpoint."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio
from textual.pilot import Pilot

from clankie import dto
from clankie.client import AsyncClient
from clankie.tui.app import ChatApp
from clankie.tui.commands import USAGE, Stop, Usage, parse
from tests.e2e.served import Served
from tests.e2e.test_providers import PROVIDERS
from tests.fakes import Endpoint, Reply, model_endpoint
from tests.tui.test_chat import type_line, until

OPENAI = PROVIDERS["openai"]


@pytest_asyncio.fixture
async def stopping(tmp_path: Path) -> AsyncIterator[tuple[ChatApp, Pilot, Endpoint, Served]]:
    (tmp_path / "project").mkdir()
    with model_endpoint() as endpoint:
        served = Served.start(tmp_path / "home", env=OPENAI.env(endpoint.url), script=None)
        try:
            with served.client() as client:
                c = str(client.op(dto.CONVERSATION_CREATE,
                                  dto.ConversationCreate(
                                 workspace=str(tmp_path / "project"))).conversation_id)
            token = served.home.token_file.read_text().strip()
            app = ChatApp(AsyncClient(f"unix://{served.home.socket}", token), c, "test")
            async with app.run_test(size=(100, 40)) as pilot:
                yield app, pilot, endpoint, served
        finally:
            served.stop()


def runs(served: Served, c: str) -> list[dict[str, Any]]:
    with served.client() as client:
        events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
    return [e for e in events if e["type"] == "run_status"]


def test_r7_stop_is_a_command_and_in_the_help():
    assert parse("/stop") == Stop()
    assert parse("  /stop  ") == Stop()
    assert "/stop" in USAGE
    # Not the command, and not a chat line either (SPEC section 10: a `/` line that is not
    # a command is refused, sent nowhere): a usage hint, so "stop now" never queues a run.
    assert isinstance(parse("/stop now"), Usage)


async def test_r7_slash_stop_stops_the_running_run(stopping):
    app, pilot, endpoint, served = stopping
    release = threading.Event()
    endpoint.plan += [Reply(body=OPENAI.text("words after the stop").body, hold=release),
                      OPENAI.text("Hello again.")]
    await type_line(app, pilot, "Do something long.")
    await until(pilot, lambda: endpoint.requests and app.running, "the run to be running")
    await type_line(app, pilot, "/stop")
    await until(pilot, lambda: "Clankie's run was stopped." in app.transcript(), "the stop")
    await until(pilot, lambda: endpoint.hung_up, "the model call to be abandoned", 5)
    release.set()
    stopped = [e for e in runs(served, app.conversation_id) if e["status"] == "cancelled"]
    assert [e["error"] for e in stopped] == ["stopped_by_owner"]
    await until(pilot, lambda: not app.running, "the status line to say nothing runs")
    await type_line(app, pilot, "/stop")
    await until(pilot, lambda: "Nothing to stop" in app.transcript(), "nothing to stop")
    await type_line(app, pilot, "And now?")
    await until(pilot, lambda: "clankie: Hello again." in app.transcript(), "the next reply")
    assert "words after the stop" not in app.transcript()
