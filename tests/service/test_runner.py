"""Issue 39: runs executed in a process of their own (`service/runner.py`, `runner_main.py`).

The real run process, over a real store: it executes each run the service starts (A10, R4),
writing through a store of its own and telling the service which conversations its
commits touched and the owner's hook's documents; it is started once however many runs
are handed at the same moment, not at all by a service stopped first; a service that
stops gives its runs their time and ends it; a service that ends without a word (its
channel closed) ends it too. A process killed while it holds a run is
tests/e2e/test_run_process.py's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from clankie.service import Service
from clankie.service.runner import Runner

from ..polling import eventually
from ..world import World, event_types

ASK = {"kind": "choice", "prompt": "Tabs or spaces?",
       "options": [{"label": "tabs"}, {"label": "spaces"}]}
SCRIPT: Any = {"turns": [[{"ask": ASK}], [{"say": "Noted: {answer}."}, {"ask": ASK}]]}


@pytest.fixture
def runner(world: World) -> Iterator[Runner]:
    made: Runner = world.executing(lambda runs: Runner(runs, world.service.settings, SCRIPT))
    yield made
    made.stop(timeout=5)


def pending(world: World, c: str) -> dict[str, Any]:
    """The snapshot once the conversation's question waits and no run of it is left."""
    def settled() -> dict[str, Any] | None:
        snap = world.snapshot(c)
        with world.store.read() as tx:
            running = tx.unfinished_runs(c)
        return snap if snap["pending"] and not running else None
    return eventually(settled, f"a question pending in {c} and its run finished",
                      timeout=20)


def child(runner: Runner) -> int:
    process = runner._process
    assert process is not None
    return process.pid


def test_issue39_a10_r4_runs_are_executed_by_the_run_process(world: World, runner: Runner):
    c = world.conversation()
    world.call("conversation_send", {"conversation_id": c, "text": "ask me"})
    snap = pending(world, c)
    assert child(runner) != os.getpid()
    after = world.events(c)[-1]["seq"]
    reply = world.answer(c, snap, option=1)
    assert reply["receipt"]["continuation"] == "running"  # started with the answer
    again = pending(world, c)
    events = world.events(c, after)
    assert event_types(events) == ["input_resolved", "run_status", "run_status", "message",
                                   "input_requested", "tool_activity", "run_status"]
    assert events[3]["text"] == "Noted: spaces."
    assert events[-1]["status"] == "succeeded"
    assert again["pending"]["request_id"] != snap["pending"]["request_id"]


def test_issue39_the_process_is_started_once_by_many_runs_handed_at_once(
        world: World, runner: Runner):
    conversations = [world.conversation() for _ in range(6)]
    threads = [threading.Thread(target=world.call, args=(
        "conversation_send", {"conversation_id": c, "text": "ask me"})) for c in conversations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    first = child(runner)
    for c in conversations:
        pending(world, c)
    assert child(runner) == first


def test_issue39_a_service_stopped_before_any_run_starts_no_process(world: World):
    runner: Runner = world.executing(lambda runs: Runner(runs, world.service.settings,
                                                         SCRIPT))
    runner.stop(timeout=5)
    runner.warm()  # nothing, once stopped
    assert runner._process is None
    c = world.conversation()
    sent = world.call("conversation_send", {"conversation_id": c, "text": "hi"})
    run = world.call("run_get", {"run_id": sent["run_id"]})
    assert (run["status"], run["error"]) == (
        "failed", "start_failed: the run executor is stopped")  # A10
    assert runner._process is None


def test_issue39_a_stopping_service_ends_the_process(world: World, runner: Runner):
    c = world.conversation()
    world.call("conversation_send", {"conversation_id": c, "text": "ask me"})
    pending(world, c)
    process = runner._process
    assert process is not None
    runner.stop(timeout=5)
    assert process.wait(10) == 0


def test_issue39_a_service_gone_without_a_word_ends_the_process(world: World, runner: Runner):
    runner.warm()
    process, channel = runner._process, runner._channel
    assert process is not None and channel is not None
    channel.close()  # as the service's death closes it
    assert process.wait(10) == 0


def test_issue39_the_run_process_writes_itself_and_tells_the_service(world: World):
    """The continuation's writes are the run process's own (the service's writer makes one
    write operation: the answer); after each of its commits the service's long-polls of
    the conversation are woken, and the owner's hook gets the question it asked."""
    documents: list[tuple[str, Any]] = []

    class Hook:
        def submit(self, conversation_id: str, document: Any) -> None:
            documents.append((conversation_id, document))

        def stop(self) -> None: ...

    world.service = Service(world.store, world.service.settings, clock=world.clock,
                            notifier=Hook(), executor=lambda runs: Runner(
                                runs, world.service.settings, SCRIPT))
    runner = world.service.runs.executor
    assert isinstance(runner, Runner)
    try:
        c = world.conversation()
        world.call("conversation_send", {"conversation_id": c, "text": "ask me"})
        snap = pending(world, c)
        operations = world.store.operations
        woken = world.service.ctx.long_polls.generation(c)
        asked = len(documents)
        world.answer(c, snap, option=0)
        again = pending(world, c)
        assert world.store.operations - operations == 1  # the answer's, nothing more
        # the answer's commit, then the run process's two: say + ask, and the finish
        assert world.service.ctx.long_polls.generation(c) - woken == 3
        assert [d["request_id"] for _, d in documents[asked:]
                if d["event"] == "input_requested"] == [again["pending"]["request_id"]]
    finally:
        runner.stop(timeout=5)
