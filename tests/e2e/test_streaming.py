"""Replies that stream, end to end (SPEC section 14): a real `clankie serve` whose scripted
model writes word by word (`pace_ms`), its run process publishing to the service, read by a
client's live long-polls. A stop mid-reply ends the run within a second and keeps what
readers saw (R7, D7); a SIGKILL mid-reply keeps the last checkpoint, marked (D9); a SIGTERM
checkpoints at once; `service_info` says whether calls stream (D18).
"""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from clankie.clientcore import ApiError
from tests.e2e.served import Served, finished
from tests.polling import eventually

WORDS = " ".join(f"word{n}" for n in range(400))  # 400 words, 40 ms apart: 16 s
SCRIPT: dict[str, Any] = {"turns": [[{"say": WORDS, "pace_ms": 40}]] * 10}
ENV = {"CLANKIE_STREAM_CHECKPOINT": "0.5", "CLANKIE_STREAM_INTERVAL": "0.05"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    served = Served.start(tmp_path / "home", script=SCRIPT, env=ENV)
    yield served
    served.stop()


def conversation(served: Served) -> str:
    workspace = served.home.path.parent / "workspace"
    workspace.mkdir(exist_ok=True)
    with served.client() as client:
        return str(client.call("conversation_create", {
            "kind": "owner", "workspace": str(workspace)})["conversation_id"])


def live_text(served: Served, c: str, at_least: int) -> dict[str, Any]:
    """The live reply once it holds `at_least` characters, read as a surface does."""
    at: dict[str, Any] = {"reply_id": None, "offset": 0}
    text = ""
    with served.client() as client:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            page = client.call("events_tail", {"conversation_id": c, "after": 0,
                                               "limit": 500, "wait_ms": 1_000, "live": at})
            live = page["live"]
            if live is None:
                continue
            text = (text if live["offset"] else "") + live["text"]
            at = {"reply_id": live["reply_id"], "offset": live["length"]}
            if len(text) >= at_least:
                return {**live, "text": text}
    raise AssertionError(f"no live reply of {at_least} characters: {text!r}")


def checkpointed(served: Served) -> str | None:
    """The text of the store's reply checkpoint, read as any reader of the file would."""
    with closing(sqlite3.connect(f"file:{served.home.store}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT text FROM reply_checkpoints").fetchone()
    return None if row is None else str(row[0])


def messages(served: Served, c: str) -> list[dict[str, Any]]:
    with served.client() as client:
        events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
    return [e for e in events if e["type"] == "message" and e["author"] == "clankie"]


def test_d7_r7_a_stop_mid_reply_ends_the_run_within_a_second_and_keeps_what_was_shown(
        served: Served):
    c = conversation(served)
    with served.client() as client:
        run_id = client.call("conversation_send", {"conversation_id": c, "text": "go"})[
            "run_id"]
        seen = live_text(served, c, 60)
        stopped_at = time.monotonic()
        client.call("run_cancel", {"run_id": run_id})
        run = finished(client, run_id, timeout=1)
        assert time.monotonic() - stopped_at < 1.0
        assert run["status"] == "cancelled"
        info = client.call("service_info")
    [kept] = messages(served, c)
    assert kept["partial"] == "stopped" and kept["message_id"] == seen["reply_id"]
    assert kept["text"].startswith(seen["text"]) and WORDS.startswith(kept["text"])
    assert len(kept["text"]) < len(WORDS)
    assert info["model"]["streaming"] is None  # the scripted model is no endpoint (D18)


def test_d9_a_kill_mid_reply_keeps_the_last_checkpoint_marked_interrupted(
        served: Served, tmp_path: Path):
    c = conversation(served)
    with served.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
    seen = live_text(served, c, 100)
    eventually(lambda: checkpointed(served), "a checkpoint of what was seen",
               until=lambda text: text is not None and text.startswith(seen["text"]))
    served.stop(signal.SIGKILL)
    again = Served.start(served.home.path, init=False, script=SCRIPT, env=ENV)
    try:
        [kept] = messages(again, c)
        assert kept["partial"] == "interrupted" and kept["message_id"] == seen["reply_id"]
        assert kept["text"].startswith(seen["text"]) and WORDS.startswith(kept["text"])
        with again.client() as client:
            events = client.call("events_tail", {"conversation_id": c, "limit": 500})[
                "events"]
        ends = [e for e in events if e["type"] == "run_status" and e["status"] == "failed"]
        assert ends and ends[0]["error"] == "orphaned_by_restart"
        assert events.index(kept) < events.index(ends[0])
    finally:
        again.stop()
        served.proc = again.proc  # the fixture's stop finds it ended


def test_d9_a_sigterm_mid_reply_checkpoints_at_once(tmp_path: Path):
    env = {**ENV, "CLANKIE_STREAM_CHECKPOINT": "60"}  # only the stop's own checkpoint
    served = Served.start(tmp_path / "home", script=SCRIPT, env=env)
    try:
        c = conversation(served)
        with served.client() as client:
            client.call("conversation_send", {"conversation_id": c, "text": "go"})
        seen = live_text(served, c, 40)
        assert served.stop(signal.SIGTERM) == 0
        served = Served.start(served.home.path, init=False, script=SCRIPT, env=env)
        kept = eventually(lambda: messages(served, c), "the interrupted reply")
        assert kept[0]["partial"] == "interrupted"
        assert kept[0]["text"].startswith(seen["text"])
    finally:
        served.stop()


def test_d4_t6_a_live_reader_revoked_while_it_waits_gets_nothing_more(tmp_path: Path):
    """A waiting live long-poll woken by a publish is answered from memory (no thread, no
    transaction), its credential checked in memory as the edge checks it: revoked while it
    waited, the publish that wakes it gets `unauthenticated`, never the reply."""
    script = {"turns": [[{"say": "slow " * 40, "pace_ms": 1_000}]]}
    served = Served.start(tmp_path / "home", script=script, env=ENV)
    try:
        c = conversation(served)
        with served.client() as owner:
            reader = owner.call("credential_issue", {"kind": "operator", "name": "reader"})
            owner.call("conversation_send", {"conversation_id": c, "text": "go"})
            with served.client(reader["token"]) as client:
                at: dict[str, Any] = {"reply_id": None, "offset": 0}
                page = eventually(lambda: client.call("events_tail", {
                    "conversation_id": c, "after": 0, "limit": 500, "wait_ms": 5_000,
                    "live": at}), "a live reply", until=lambda p: p["live"] is not None
                    and p["live"]["length"] > 0)
                live = page["live"]
                waiting = {"conversation_id": c, "after": page["next_after"], "limit": 500,
                           "wait_ms": 10_000,
                           "live": {"reply_id": live["reply_id"], "offset": live["length"]}}
                result: list[Any] = []

                def wait() -> None:
                    try:
                        result.append(client.call("events_tail", waiting))
                    except ApiError as exc:
                        result.append(exc)

                thread = threading.Thread(target=wait)
                thread.start()
                owner.call("credential_revoke", {"credential_id": reader["credential_id"]})
                thread.join(15)
        assert isinstance(result[0], ApiError) and result[0].code == "unauthenticated"
    finally:
        served.stop()
