"""The `run_activity` event (SPEC V4, R6) and the log line of a model failure, with the
real executor on a real store and a model that reports its waits as the retry layer does
(the retry layer itself: tests/agent/test_retry.py; with the SDKs: tests/e2e)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from clankie.agent.transcript import NO_WAITS, ModelError, Text, ToolCall, ToolSpec, Turn, Waits
from clankie.core.model import RunStatus
from clankie.service.executor import RunExecutor

from ..polling import eventually
from ..world import T0, World, event_types
from .test_runs import Runs

SUMMARY = "openai: 429 rate limited; try 2 of 5 in 7 s"


class Waiting:
    """A model call that waited once before its reply (or failed after it): what
    `retry.call` does, without a network."""

    name = "waiting"

    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail
        self.given: list[Waits] = []

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits = NO_WAITS) -> list[Text | ToolCall]:
        self.given.append(waits)
        waits.on_wait(SUMMARY, T0 + timedelta(seconds=7))
        if self.fail:
            raise ModelError(self.fail)
        return [Text("Here now.")]


def executed(world: World, model: Waiting, stop_after: list[RunExecutor]) -> Runs:
    r = Runs(world, {"turns": []})
    r.executor._model_for = lambda _context: model  # type: ignore[assignment,return-value]
    stop_after.append(r.executor)
    return r


@pytest.fixture
def stop_after() -> Any:
    executors: list[RunExecutor] = []
    yield executors
    for executor in executors:
        executor.stop(timeout=5)


def test_v4_r6_each_wait_of_a_running_run_is_one_run_activity_event(world: World,
                                                                     stop_after: Any):
    model = Waiting()
    r = executed(world, model, stop_after)
    c = world.conversation()
    sent = world.call("conversation_send", {"conversation_id": c, "text": "hi"})
    r.settled(c)
    events = world.events(c)
    assert event_types(events) == ["message", "run_status", "run_status", "run_activity",
                                   "message", "run_status"]
    activity = events[3]
    assert activity == {"type": "run_activity", "seq": activity["seq"], "conversation_id": c,
                        "run_id": sent["run_id"], "activity": "model_retry",
                        "summary": SUMMARY, "retry_at": "2026-11-30T12:00:07.000000Z",
                        "at": activity["at"], "withdrawn": None}  # nothing was shown (D8)
    assert model.given[0].sleep is not None  # the executor's own, per run


def test_v4_r6_a_run_that_is_no_longer_running_records_no_wait(world: World):
    c = world.conversation()
    run_id = world.running_turn(c)
    revision = world.snapshot(c)["revision"]
    assert world.service.runs.record_model_retry(run_id, SUMMARY, T0) is True
    assert world.snapshot(c)["revision"] == revision  # an observation, not a change
    world.service.runs.finish_run(run_id, RunStatus.SUCCEEDED)
    before = world.events(c)
    assert world.service.runs.record_model_retry(run_id, SUMMARY, T0) is False
    assert world.events(c) == before


def test_r6_a_model_failure_is_the_runs_error_and_one_line_of_the_log(
        world: World, stop_after: Any, caplog: pytest.LogCaptureFixture):
    error = "openai: 429 rate limited, gave up after 5 tries and 90 s of waiting"
    r = executed(world, Waiting(fail=error), stop_after)
    c = world.conversation()
    with caplog.at_level(logging.WARNING, logger="clankie.runs"):
        sent = world.call("conversation_send", {"conversation_id": c, "text": "hi"})
        r.settled(c)
        run = world.call("run_get", {"run_id": sent["run_id"]})
        eventually(lambda: caplog.records, "a log record")
    assert (run["status"], run["error"]) == ("failed", f"model_error: {error}")
    [record] = [rec for rec in caplog.records if rec.name == "clankie.runs"]
    assert record.getMessage() == (f"run {sent['run_id']} of {c} failed: model_error: "
                                   f"{error}")
    assert "\n" not in record.getMessage()
