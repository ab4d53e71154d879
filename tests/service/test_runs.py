"""Runs executed by the real executor on a real store: what each run writes, and when.

Issue 10: a continuation makes as few write transactions as its promises allow. Clankie's
words go out with the next thing the run stores (the question it asks, or its finish),
never later than that and never after a workspace tool has started; a finished run's
successor starts in the finishing transaction (R4 order unchanged). Issue 39: a run with
none before it starts in the transaction that queues it (the answer, the message).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from clankie.agent.scripted import ScriptedModel
from clankie.core.errors import ClankieError
from clankie.core.model import Run, RunStatus
from clankie.service.executor import RunExecutor

from ..polling import eventually
from ..world import World, event_types

ASK = {"kind": "choice", "prompt": "Tabs or spaces?",
       "options": [{"label": "tabs"}, {"label": "spaces"}]}


class Runs:
    """A world whose runs are executed by a `RunExecutor` playing `script`."""

    def __init__(self, world: World, script: dict[str, Any]) -> None:
        self.world = world
        self.executor: RunExecutor = world.executing(
            lambda service: RunExecutor(service, ScriptedModel(script).for_run))

    def settled(self, conversation_id: str) -> None:
        """Wait until no run of the conversation is queued or running."""
        def unfinished() -> list[Any]:
            with self.world.store.read() as tx:
                return tx.unfinished_runs(conversation_id)
        eventually(unfinished, f"the runs of {conversation_id} to finish",
                   until=lambda runs: not runs)
        eventually(lambda: self.executor._executing, "the executor to go idle",
                   until=lambda executing: executing == 0)

    def writes(self, action: Callable[[], Any], conversation_id: str) -> int:
        """How many write operations `action` and the runs it starts make."""
        before = self.world.store.operations
        action()
        self.settled(conversation_id)
        return self.world.store.operations - before


@pytest.fixture
def stop_after(world: World) -> Iterator[list[RunExecutor]]:
    executors: list[RunExecutor] = []
    yield executors
    for executor in executors:
        executor.stop(timeout=5)


def runs(world: World, script: dict[str, Any], stop_after: list[RunExecutor]) -> Runs:
    made = Runs(world, script)
    stop_after.append(made.executor)
    return made


def brief(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each event as (type, what it says): a message's text, a run's status, a tool."""
    keys = {"message": "text", "run_status": "status", "tool_activity": "tool",
            "input_requested": "prompt", "input_resolved": "outcome"}
    return [(e["type"], e[keys[e["type"]]]) for e in events]


def claimed(world: World, c: str) -> Run:
    """The conversation's first queued run, started (as a finishing run starts its next)."""
    run = world.service.runs.claim_next_run(c)
    assert run is not None
    return run


def send(world: World, c: str, text: str = "hi") -> Callable[[], Any]:
    return lambda: world.call("conversation_send", {"conversation_id": c, "text": text})


def test_a10_w9_a_continuation_that_says_and_asks_writes_twice(world: World, stop_after):
    """The words with the question, the finish: started (R4) in the answer's own
    transaction, so `running` is committed with the answer (issue 39). Before issue 10's
    change it was five: start, words, question, finish and an empty look for a next run;
    before issue 39 three (the start in a commit of its own)."""
    r = runs(world, {"turns": [[{"ask": ASK}], [{"say": "Noted: {answer}."}, {"ask": ASK}]]},
             stop_after)
    c = world.conversation()
    r.writes(send(world, c), c)
    snap = world.snapshot(c)
    after = world.events(c)[-1]["seq"]
    answer = lambda: world.answer(c, snap, option=1)  # noqa: E731
    assert r.writes(answer, c) == 1 + 2
    events = world.events(c, after)
    assert event_types(events) == ["input_resolved", "run_status", "run_status", "message",
                                   "input_requested", "tool_activity", "run_status"]
    assert [e.get("status") for e in events if e["type"] == "run_status"] == [
        "queued", "running", "succeeded"]
    assert events[3]["text"] == "Noted: spaces."
    after_run = world.snapshot(c)
    assert after_run["pending"]["prompt"] == "Tabs or spaces?"
    # revision (SPEC section 1): one per change (answer, start, words, question, finish),
    # though the words and the question share a transaction
    assert after_run["revision"] == snap["revision"] + 5


def test_v1_d2_last_words_are_stored_with_the_finish_one_message_a_reply(world: World,
                                                                          stop_after):
    """D2, D6: a model call's text blocks are one message, joined by a blank line."""
    r = runs(world, {"turns": [[{"say": "Hello."}, {"say": "Bye."}]]}, stop_after)
    c = world.conversation()
    after = 0
    assert r.writes(send(world, c), c) == 1 + 1  # the message with the start, words + finish
    assert brief(world.events(c, after)) == [
        ("message", "hi"), ("run_status", "queued"), ("run_status", "running"),
        ("message", "Hello.\n\nBye."), ("run_status", "succeeded")]


def test_w9_words_before_a_workspace_tool_are_stored_before_it_runs(world: World, stop_after):
    """A workspace tool may take seconds: what Clankie said first is not held back."""
    (world.workspace / "notes.txt").write_text("one\n")
    r = runs(world, {"turns": [[{"say": "Looking."},
                                {"tool": "read_file", "args": {"path": "notes.txt"}},
                                {"say": "Done."}]]}, stop_after)
    c = world.conversation()
    seen: list[list[str]] = []
    real = r.executor._hooks.workspace_of

    def workspace_of(run_id: str):  # called as the tool starts: what is stored by then?
        seen.append([e.get("text", "") for e in world.events(c) if e["type"] == "message"])
        return real(run_id)

    world.service.runs.workspace_of = workspace_of  # type: ignore[method-assign]
    r.writes(send(world, c), c)
    assert seen == [["hi", "Looking."]]
    assert brief(world.events(c))[3:] == [
        ("message", "Looking."), ("tool_activity", "read_file"), ("message", "Done."),
        ("run_status", "succeeded")]


def test_r4_the_next_run_starts_in_the_finishing_transaction(world: World, stop_after):
    """Two queued turns: start the first, finish it and start the second, finish that."""
    c = world.conversation()
    for text in ("one", "two"):
        world.call("conversation_send", {"conversation_id": c, "text": text})
    r = runs(world, {"turns": [[{"say": "first"}], [{"say": "second"}]]}, stop_after)
    assert r.writes(lambda: r.executor.submit(c, claimed(world, c)), c) == 3
    assert [said for _, said in brief(world.events(c))] == [
        "one", "queued", "two", "queued", "running", "first", "succeeded", "running",
        "second", "succeeded"]


def test_v1_a_failed_run_keeps_what_it_said(world: World, stop_after):
    """Words said in the step whose tool then failed the run are stored with the failure."""
    r = runs(world, {"turns": [[{"say": "Let me ask."}, {"ask": ASK}]]}, stop_after)
    c = world.conversation()
    real = world.service.runs.ask_question

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ClankieError("storage_unavailable", "the disk is full")

    world.service.runs.ask_question = broken  # type: ignore[method-assign]
    try:
        r.writes(send(world, c), c)
    finally:
        world.service.runs.ask_question = real  # type: ignore[method-assign]
    assert brief(world.events(c))[-3:] == [
        ("run_status", "running"), ("message", "Let me ask."), ("run_status", "failed")]


def test_r3_r4_a_stopped_executor_starts_no_next_run(world: World, stop_after):
    c = world.conversation()
    for text in ("one", "two"):
        world.call("conversation_send", {"conversation_id": c, "text": text})
    r = runs(world, {"turns": [[{"say": "first"}], [{"say": "second"}]]}, stop_after)
    real = world.service.runs.run_context

    def stop_while_running(run_id: str) -> Any:
        r.executor._stopped = True  # the stop arrives while the first run runs
        return real(run_id)

    world.service.runs.run_context = stop_while_running  # type: ignore[method-assign]
    r.executor.submit(c, claimed(world, c))
    eventually(lambda: (r.executor._executing, bool(r.executor._draining)),
               "the executor to go idle (executing, draining)",
               until=lambda state: state == (0, False))
    with world.store.read() as tx:
        left = tx.unfinished_runs(c)
    assert [run.status for run in left] == [RunStatus.QUEUED]  # R3 fails it at the next start
    assert brief(world.events(c))[-1] == ("run_status", "succeeded")
