"""Replies that stream, through the service's ops (SPEC section 14, D2-D10): a real executor
on a real store, the scripted model writing word by word (`pace_ms`, D18) or a model of the
test's own that writes, fails and retries as an SDK's stream would.

A live reply is memory only (no seq, no revision, no event); `events_tail` with `live`
reads it as a delta after the reader's offset or a snapshot; it leaves memory only with the
commit that stores or explains it; a reply that does not end is kept, marked, or withdrawn
and said to be.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from clankie.agent.scripted import ScriptedModel
from clankie.agent.transcript import ModelError, Text, ToolCall, ToolSpec, Turn, Waits
from clankie.core.errors import ClankieError
from clankie.service.executor import RunExecutor
from clankie.service.service import Service

from ..polling import eventually
from ..world import World, event_types

WORDS = "One two three four five six seven eight nine ten eleven twelve."
ASK = {"kind": "choice", "prompt": "Tabs or spaces?",
       "options": [{"label": "tabs"}, {"label": "spaces"}]}


@pytest.fixture
def executors(world: World) -> Iterator[list[RunExecutor]]:
    made: list[RunExecutor] = []
    yield made
    for executor in made:
        executor.stop(timeout=5)


def scripted(world: World, executors: list[RunExecutor], script: dict[str, Any]) -> None:
    executors.append(world.executing(
        lambda runs: RunExecutor(runs, ScriptedModel(script).for_run)))


def with_model(world: World, executors: list[RunExecutor], model: Any) -> None:
    executors.append(world.executing(lambda runs: RunExecutor(runs, lambda _: model)))


def tail(world: World, c: str, after: int = 0, live: dict[str, Any] | None = None,
         wait_ms: int = 0) -> dict[str, Any]:
    payload: dict[str, Any] = {"conversation_id": c, "after": after, "limit": 500,
                               "wait_ms": wait_ms}
    if live is not None:
        payload["live"] = live
    return world.call("events_tail", payload)


class Reader:
    """A reader that follows the conversation as a surface does: live long-polls, sending
    back the `reply_id` and `length` it last got; it checks D5 on every answer."""

    def __init__(self, world: World, c: str) -> None:
        self.world, self.c = world, c
        self.after = 0
        self.at: dict[str, Any] = {"reply_id": None, "offset": 0}
        self.shown: dict[str, str] = {}  # reply_id -> text as the deltas built it
        self.states: list[str] = []
        self.events: list[dict[str, Any]] = []
        self.answers = 0

    def step(self, wait_ms: int = 2_000) -> dict[str, Any]:
        page = tail(self.world, self.c, self.after, self.at, wait_ms)
        self.answers += 1
        self.events += page["events"]
        self.after = page["next_after"]
        live = page.get("live", "absent")
        if live == "absent":  # a page cut short by limit carries none
            return page
        before = self.at["reply_id"]
        if live is None:
            if before is not None:  # D5: gone, so explained in this answer or earlier
                assert self.explained(before), (before, self.events[-5:])
            self.at = {"reply_id": None, "offset": 0}
            return page
        if live["reply_id"] != before and before is not None:
            assert self.explained(before)
        text = self.shown.get(live["reply_id"], "") if live["offset"] else ""
        assert len(text) == live["offset"]
        self.shown[live["reply_id"]] = text + live["text"]
        assert len(self.shown[live["reply_id"]]) == live["length"]
        self.states.append(live["state"])
        self.at = {"reply_id": live["reply_id"], "offset": live["length"]}
        return page

    def explained(self, reply_id: str) -> bool:
        return any(e.get("message_id") == reply_id or e["type"] in (
            "run_status", "run_activity", "tool_activity", "input_requested")
            for e in self.events)

    def follow(self, until: Any, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not until():
            assert time.monotonic() < deadline, "the reader waited too long"
            self.step()


def run_ended(reader: Reader) -> bool:
    return any(e["type"] == "run_status" and e["status"] in ("succeeded", "failed",
                                                             "cancelled")
               for e in reader.events)


def test_d2_d4_d6_a_reply_written_word_by_word_is_read_live_and_stored_as_shown(
        world: World, executors: list[RunExecutor]):
    scripted(world, executors, {"turns": [[{"say": WORDS, "pace_ms": 20}]]})
    c = world.conversation()
    reader = Reader(world, c)
    world.call("conversation_send", {"conversation_id": c, "text": "count"})
    reader.follow(lambda: run_ended(reader))
    [message] = [e for e in reader.events if e["type"] == "message" and
                 e["author"] == "clankie"]
    assert message["partial"] is None
    assert reader.shown[message["message_id"]] == message["text"] == WORDS  # D2, D6
    assert "writing" in reader.states
    assert reader.answers > 3  # it was read as it was written, not at its end


def test_d4_without_live_a_tail_is_as_before_and_a_live_input_is_checked(world: World):
    c = world.conversation()
    assert "live" not in tail(world, c)
    assert tail(world, c, live={"reply_id": None, "offset": 0})["live"] is None
    before = world.dump()
    for bad in ({"reply_id": None}, {"offset": 0}, {"reply_id": None, "offset": -1},
                {"reply_id": None, "offset": 2**24 + 1}, {"reply_id": "x", "offset": 0},
                {"reply_id": None, "offset": 0, "more": 1}, {"reply_id": None, "offset": "0"}):
        with pytest.raises(ClankieError) as refused:
            tail(world, c, live=bad)
        assert refused.value.code == "invalid_request"
    assert world.dump() == before


class Writing:
    """A model of the test's own: each step writes `pieces` through its live reply (after
    `hold` is set, when given), then does what `then` says."""

    name = "test"

    def __init__(self, pieces: list[str], then: str = "end",
                 hold: threading.Event | None = None) -> None:
        self.pieces, self.then, self.hold = pieces, then, hold
        self.published = threading.Event()
        self.tries = 0

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits) -> list[Text | ToolCall]:
        live = waits.live
        live.begin()
        self.tries += 1
        for piece in self.pieces:
            live.text(piece, 0)
        eventually(lambda: live.published() == len("".join(self.pieces)),
                   "the pieces to be published")
        self.published.set()
        if self.hold is not None:
            waits.sleep(30)  # until stopped
        if self.then == "retry" and self.tries == 1:
            waits.on_wait("test: the connection dropped; try 2 of 2 in 0 s", waits.clock())
            live.begin()
            live.text("Second try.", 0)
            live.end()
            return [Text("Second try.")]
        if self.then == "fail":
            raise ModelError("test: 400 bad request")
        live.end()
        return [Text("".join(self.pieces))]


def test_d7_a_stopped_reply_is_kept_as_readers_last_saw_it(world: World,
                                                           executors: list[RunExecutor]):
    model = Writing(["Half ", "a reply"], hold=threading.Event())
    with_model(world, executors, model)
    c = world.conversation()
    run_id = world.call("conversation_send", {"conversation_id": c, "text": "go"})["run_id"]
    assert model.published.wait(10)
    seen = tail(world, c, live={"reply_id": None, "offset": 0})["live"]
    assert seen["text"] == "Half a reply" and seen["state"] == "writing"
    world.call("run_cancel", {"run_id": run_id})
    events = world.events(c)
    assert event_types(events)[-2:] == ["message", "run_status"]
    stopped = events[-2]
    assert (stopped["text"], stopped["partial"], stopped["message_id"]) == (
        "Half a reply", "stopped", seen["reply_id"])
    assert tail(world, c, live={"reply_id": None, "offset": 0})["live"] is None


def test_d8_a_retried_try_is_withdrawn_and_the_next_stored(world: World,
                                                            executors: list[RunExecutor]):
    model = Writing(["Lost ", "words"], then="retry")
    with_model(world, executors, model)
    c = world.conversation()
    reader = Reader(world, c)
    world.call("conversation_send", {"conversation_id": c, "text": "go"})
    reader.follow(lambda: run_ended(reader))
    [activity] = [e for e in reader.events if e["type"] == "run_activity"]
    said = [e for e in reader.events if e["type"] == "message" and e["author"] == "clankie"]
    assert [m["text"] for m in said] == ["Second try."]
    withdrawn = activity["withdrawn"]
    assert withdrawn["length"] == len("Lost words")
    assert withdrawn["reply_id"] != said[0]["message_id"]
    assert "Lost words" not in str(world.dump())  # never stored (D8)


def test_d8_a_call_failed_for_good_keeps_what_was_shown(world: World,
                                                        executors: list[RunExecutor]):
    with_model(world, executors, Writing(["Half ", "said"], then="fail"))
    c = world.conversation()
    reader = Reader(world, c)
    world.call("conversation_send", {"conversation_id": c, "text": "go"})
    reader.follow(lambda: run_ended(reader))
    types = [(e["type"], e.get("partial"), e.get("status")) for e in reader.events]
    assert types[-2:] == [("message", "failed", None), ("run_status", None, "failed")]
    assert reader.events[-2]["text"] == "Half said"


def test_d9_d10_a_checkpoint_outlives_a_kill_and_the_model_reads_it_cut_off(
        world: World, executors: list[RunExecutor]):
    model = Writing(["Before ", "the kill"], hold=threading.Event())
    with_model(world, executors, model)
    c = world.conversation()
    run_id = world.call("conversation_send", {"conversation_id": c, "text": "go"})["run_id"]
    assert model.published.wait(10)
    seen = tail(world, c, live={"reply_id": None, "offset": 0})["live"]
    world.service.ctx.on_store(world.service.runs.checkpoint_replies)
    # As a kill leaves it: the run still `running`, the memory gone; then recovery (R3).
    world.service = Service(world.store, world.service.settings, clock=world.clock)
    world.service.runs.recover()
    executors[0].stop_run(run_id)  # the old executor's thread, which no kill took along
    events = world.events(c)
    assert event_types(events)[-2:] == ["message", "run_status"]
    kept, ended = events[-2:]
    assert (kept["text"], kept["partial"], kept["message_id"]) == (
        "Before the kill", "interrupted", seen["reply_id"])
    assert ended["error"] == "orphaned_by_restart"
    context = world.service.runs.run_context(ended["run_id"])
    assert ("clankie", "Before the kill\n[cut off here: clankie restarted; what followed "
            "was lost]") in context.history


def test_d6_words_before_a_question_come_before_its_input_requested(
        world: World, executors: list[RunExecutor]):
    scripted(world, executors, {"turns": [[{"say": "Let me ask.", "pace_ms": 5},
                                           {"ask": ASK}]]})
    c = world.conversation()
    reader = Reader(world, c)
    world.call("conversation_send", {"conversation_id": c, "text": "go"})
    reader.follow(lambda: run_ended(reader))
    types = event_types(reader.events)
    assert types.index("message", 1) < types.index("input_requested")
