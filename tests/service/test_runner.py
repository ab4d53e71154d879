"""Issue 39: runs executed in a process of their own (`service/runner.py`, `runner_main.py`).

The real run process, over a real store: it executes each run the service starts (A10, R4)
and writes nothing itself (every write is the service's, on its writer); it is started
once however many runs are handed at the same moment, not at all by a service stopped
first; a run it held when it ended (killed) is failed saying so, and the next run is
executed by a new one; a service that stops gives its runs their time and ends it; a
service that ends without a word (its channel closed) ends it too; and it may ask the
service for the run side's writes and nothing else.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from clankie.core.model import RunStatus
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
        with world.store.read() as tx:
            running = tx.unfinished_runs(c)
        snap = world.snapshot(c)  # read after: a run finishing between moves the revision
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


def test_issue39_the_process_may_ask_for_the_run_sides_writes_and_nothing_else(
        world: World, runner: Runner):
    """A message asking for any other method of the run side (`recover`, `start_next`) is
    answered with an error and does nothing."""
    runner.warm()
    channel = runner._channel
    assert channel is not None
    before = world.dump()
    answers: list[tuple[Any, ...]] = []
    sent = threading.Event()

    class Recording:
        def post(self, *message: Any) -> None:
            answers.append(message)
            sent.set()

    for name in ("recover", "start_next", "fail_running", "__init__"):
        sent.clear()
        runner._write(Recording(), 7, name, (), {})  # type: ignore[arg-type]
        assert sent.wait(5)
    assert [a[:2] for a in answers] == [("reply", 7)] * 4
    assert all(a[2][0] == "other" and "is not a write" in a[2][1] for a in answers)
    assert world.dump() == before


def test_issue39_an_error_of_a_write_is_raised_in_the_run_process_as_it_was_raised():
    """The executor tells a run stopped meanwhile by the error its finish raises (R7)."""
    from clankie.core.errors import ClankieError
    from clankie.core.lifecycle import IllegalTransition
    from clankie.service.runner import raised, wire_error

    error = raised(wire_error(IllegalTransition("a cancelled run cannot finish")))
    assert isinstance(error, IllegalTransition) and str(error) == "a cancelled run cannot finish"
    refusal = raised(wire_error(ClankieError("not_eligible", "only a running run can reply")))
    assert isinstance(refusal, ClankieError)
    assert (refusal.code, refusal.detail) == ("not_eligible", "only a running run can reply")
    other = raised(wire_error(KeyError("x")))
    assert isinstance(other, RuntimeError) and str(other) == "KeyError: 'x'"


def test_issue39_the_process_writes_only_for_runs_it_holds(world: World, runner: Runner,
                                                          monkeypatch: pytest.MonkeyPatch):
    """Red team: a write for a run the service never handed to this process (another
    conversation's, a made-up one) is refused, and changes nothing."""
    c = world.conversation()
    world.call("conversation_send", {"conversation_id": c, "text": "ask me"})
    pending(world, c)  # its run has ended
    run_id = next(e["run_id"] for e in world.events(c) if e["type"] == "run_status")
    channel = runner._channel
    assert channel is not None
    before = world.dump()
    answers: list[tuple[Any, ...]] = []
    monkeypatch.setattr(channel, "post", lambda *message: answers.append(message))
    for number, (name, args) in enumerate((
            ("finish_run", (run_id, RunStatus.FAILED, "x")),
            ("post_replies", (run_id, ((None, "words"),))),
            ("record_model_retry", (str(uuid.uuid4()), "x", world.clock())),
            ("claim_next_run", (c,)))):
        runner._write(channel, number, name, args, {})
    assert [a[:2] for a in answers] == [("reply", n) for n in range(4)]
    assert all("not a run this process holds" in a[2][1] for a in answers)
    assert world.dump() == before
