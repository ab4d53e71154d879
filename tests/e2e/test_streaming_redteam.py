"""Red team of replies that stream, service side (SPEC section 14, D1-D14, D18-D20): a real
`clankie serve`, its scripted model writing slowly (`pace_ms`) or the SDK models reading a
hostile fake endpoint on loopback (tests/fakes.py), read by live long-polls as an attacker
would read them. Each test names the rule it holds the service to.
"""

from __future__ import annotations

import json
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clankie.clientcore import ApiError
from tests.e2e.served import Served, finished
from tests.polling import eventually

WORDS = " ".join(f"word{n}" for n in range(400))
ENV = {"CLANKIE_STREAM_CHECKPOINT": "0.5", "CLANKIE_STREAM_INTERVAL": "0.05"}


def conversation(served: Served) -> str:
    workspace = served.home.path.parent / "workspace"
    workspace.mkdir(exist_ok=True)
    with served.client() as client:
        return str(client.call("conversation_create", {
            "kind": "owner", "workspace": str(workspace)})["conversation_id"])


def tail(client: Any, c: str, **more: Any) -> dict[str, Any]:
    return dict(client.call("events_tail", {"conversation_id": c, "limit": 500, **more}))


def live_of(client: Any, c: str, at_least: int = 1, timeout: float = 30,
            reply_id: str | None = None) -> dict[str, Any]:
    """The live reply (accumulated as a surface does) once it holds `at_least` characters
    (of `reply_id` when given, else any)."""
    at: dict[str, Any] = {"reply_id": None, "offset": 0}
    text = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = tail(client, c, after=0, wait_ms=1_000, live=at)
        live = page["live"]
        if live is None:
            continue
        text = (text if live["offset"] else "") + live["text"]
        at = {"reply_id": live["reply_id"], "offset": live["length"]}
        if len(text) >= at_least and reply_id in (None, live["reply_id"]):
            return {**live, "text": text}
    raise AssertionError(f"no live reply of {at_least} characters: {text!r}")


def clankie_messages(client: Any, c: str) -> list[dict[str, Any]]:
    return [e for e in tail(client, c)["events"]
            if e["type"] == "message" and e["author"] == "clankie"]


@pytest.fixture
def scripted(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    script = getattr(request, "param", None) or {
        "turns": [[{"say": WORDS, "pace_ms": 40}]] * 10}
    served = Served.start(tmp_path / "home", script=script, env=ENV)
    yield served
    served.stop()


# ------------------------------------------------------------------ D2: attempt


TWO_CALLS = {"turns": [[{"say": "Looking first.", "pace_ms": 1},
                        {"tool": "list_files", "args": {"path": "."}},
                        {"say": WORDS, "pace_ms": 40}]] * 3}


@pytest.mark.parametrize("scripted", [TWO_CALLS], indirect=True)
def test_d2_attempt_is_the_try_number_of_its_call_not_the_count_of_calls_in_the_run(
        scripted: Served):
    """D2: a live reply's `attempt` is R6's try number, from 1. The run's second model
    call, tried once, is its try 1: it is not the run's second reply."""
    c = conversation(scripted)
    with scripted.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
        first = eventually(lambda: clankie_messages(client, c), "the first reply stored")
        live = live_of(client, c, at_least=20)
        assert live["reply_id"] != first[0]["message_id"]
        assert live["attempt"] == 1, live
