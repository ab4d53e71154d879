"""SPEC R7, stopping a run: `run_cancel` in the service and the real executor.

The store is the authority: once `run_cancel` has committed `cancelled`/`stopped_by_owner`,
every later write of the run is refused, so nothing it says or calls after the stop is
kept; the executor then abandons the run's model call and moves on to the next run (R4).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from clankie.agent.transcript import Text, ToolCall
from clankie.core.errors import ClankieError
from clankie.core.model import RunStatus
from clankie.service.executor import RunExecutor
from clankie.service.runs import CallRecord
from clankie.workspace.tools import Outcome

from ..polling import eventually
from ..world import CHOICE, World


def refused(action: Callable[[], Any]) -> str:
    with pytest.raises(ClankieError) as err:
        action()
    return err.value.code


def cancel(world: World, run_id: str, token: str | None = None) -> dict[str, Any]:
    return world.call("run_cancel", {"run_id": run_id}, token)


def run_events(world: World, c: str, run_id: str) -> list[str]:
    return [e["status"] for e in world.events(c) if e["type"] == "run_status"
            and e["run_id"] == run_id]


def test_r7_run_cancel_stops_a_queued_run_before_it_starts(world: World):
    c = world.conversation()
    run_id = world.call("conversation_send", {"conversation_id": c, "text": "hi"})["run_id"]
    before = world.snapshot(c)["revision"]
    run = cancel(world, run_id)
    assert (run["status"], run["error"], run["started_at"]) == ("cancelled", "stopped_by_owner",
                                                                None)
    assert run["finished_at"] is not None
    assert world.service.runs.claim_next_run(c) is None  # the claim skips it: it never starts
    assert run_events(world, c, run_id) == ["queued", "cancelled"]  # one event for the stop
    assert world.snapshot(c)["revision"] == before + 1
    assert world.call("run_get", {"run_id": run_id}) == run


def test_r7_a_stopped_running_run_can_store_nothing_more_and_its_question_stays(world: World):
    c = world.conversation()
    run_id = world.running_turn(c)
    assert world.service.runs.ask_question(run_id, CHOICE).status == "pending"
    run = cancel(world, run_id)
    assert (run["status"], run["error"]) == ("cancelled", "stopped_by_owner")
    assert run["started_at"] is not None and run["finished_at"] is not None
    dump = world.dump()
    service = world.service
    call = CallRecord(0, "c1", "list_files", "{}")
    assert refused(lambda: service.runs.post_replies(run_id, ["late words"])) == "not_eligible"
    assert refused(lambda: service.runs.ask_question(run_id, CHOICE, call, ["x"])) == "not_eligible"
    assert refused(lambda: service.runs.record_tool_call(
        run_id, call, Outcome({}, "ok", None, "listed"))) == "not_eligible"
    with pytest.raises(Exception):  # noqa: B017 - an illegal transition, whatever its type
        service.runs.finish_run(run_id, RunStatus.SUCCEEDED, said=["bye"])
    assert world.dump() == dump
    assert world.snapshot(c)["pending"]["status"] == "pending"  # it was stored: it stays
    assert run_events(world, c, run_id) == ["queued", "running", "cancelled"]


@pytest.mark.parametrize("end", ["cancelled", "succeeded", "failed"])
def test_r7_a_duplicate_run_cancel_of_an_ended_run_returns_it_unchanged(world: World, end: str):
    c = world.conversation()
    run_id = world.running_turn(c)
    if end == "cancelled":
        first = cancel(world, run_id)
    else:
        world.service.runs.finish_run(run_id, RunStatus(end), "x" if end == "failed" else None)
        first = world.call("run_get", {"run_id": run_id})
    dump = world.dump()
    assert cancel(world, run_id) == first
    assert world.dump() == dump


def test_r7_an_unknown_run_or_another_owners_run_is_not_found(world: World):
    c = world.conversation()
    run_id = world.call("conversation_send", {"conversation_id": c, "text": "hi"})["run_id"]
    assert refused(lambda: cancel(world, "0" * 8 + "-0000-4000-8000-" + "0" * 12)) == "not_found"
    world.call("owner_revoke")
    token = world.service.devices.init_owner()  # a new owner of this service
    assert token is not None
    assert refused(lambda: cancel(world, run_id, token)) == "not_found"
    with world.db() as db:
        assert db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone() \
            == ("queued",)


def test_r7_who_may_stop_an_operator_or_the_active_take_control_device(world: World):
    c = world.conversation()
    runs = [world.call("conversation_send", {"conversation_id": c, "text": str(i)})["run_id"]
            for i in range(2)]
    viewer = world.call("device_pair", {"name": "tv", "mode": "read_only"})["token"]
    captain = world.call("credential_issue", {"kind": "captain", "name": "cap"})["token"]
    phone = world.call("device_pair", {"name": "phone", "mode": "control"})["token"]
    dump = world.dump()
    for token in (viewer, captain, phone):  # the phone holds no Take Control lease yet
        assert refused(lambda t=token: cancel(world, runs[0], t)) == "forbidden"
    assert world.dump() == dump
    world.call("device_take_control", {"ttl_s": 60}, phone)
    assert cancel(world, runs[0], phone)["status"] == "cancelled"
    assert cancel(world, runs[1])["status"] == "cancelled"  # the operator


def test_r7_a_stopped_continuation_shows_cancelled_on_its_receipt(world: World):
    c = world.conversation()
    snap = world.ask(c)
    receipt = world.answer(c, snap, option=0)["receipt"]
    assert receipt["continuation"] == "queued"
    cancel(world, receipt["run_id"])
    ended = world.snapshot(c, receipt["request_id"])["request"]["receipt"]
    assert (ended["continuation"], ended["continuation_error"]) == ("cancelled",
                                                                    "stopped_by_owner")
    assert ended["outcome"] == "answered"  # the answer stays accepted


def test_r7_conversation_get_names_the_unfinished_runs_to_stop(world: World):
    c = world.conversation()
    first = world.running_turn(c)
    second = world.call("conversation_send", {"conversation_id": c, "text": "more"})["run_id"]
    got = world.call("conversation_get", {"conversation_id": c})
    assert [(r["run_id"], r["status"]) for r in got["unfinished_runs"]] == [
        (first, "running"), (second, "queued")]
    cancel(world, first)
    cancel(world, second)
    assert world.call("conversation_get", {"conversation_id": c})["unfinished_runs"] == []


# ------------------------------------------------------------------ with the executor


class HeldModel:
    """A model whose calls block: in a retry wait until the run's stop (`obeys`), or until
    `release` (a call that returns anyway, with words and a tool call that must not be
    acted on)."""

    name = "held"

    def __init__(self, obeys: bool) -> None:
        self.obeys = obeys
        self.release = threading.Event()
        self.calls: list[float] = []
        self.returned: list[float] = []

    def step(self, system: str, turns: Any, tools: Any, waits: Any = None
             ) -> list[Text | ToolCall]:
        self.calls.append(time.monotonic())
        if len(self.calls) > 1:
            return [Text("the next run")]
        try:
            if self.obeys:
                waits.sleep(30)  # a retry's wait (R6), as the executor gives it
            else:
                assert self.release.wait(30)
        finally:
            self.returned.append(time.monotonic())
        return [Text("late words"), ToolCall("c1", "ask_question", '{"kind": "text", '
                                             '"prompt": "late?"}')]


@pytest.fixture
def executed(world: World):
    made: list[RunExecutor] = []

    def make(model: HeldModel) -> RunExecutor:
        executor: RunExecutor = world.executing(
            lambda service: RunExecutor(service, lambda _context: model))
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.stop(timeout=5)


@pytest.mark.parametrize("obeys", [True, False], ids=["waiting", "returns-anyway"])
def test_r7_the_executor_stops_a_running_run_and_starts_the_next(world: World, executed,
                                                                   obeys: bool):
    model = HeldModel(obeys)
    executed(model)
    c = world.conversation()
    first = world.call("conversation_send", {"conversation_id": c, "text": "one"})["run_id"]
    second = world.call("conversation_send", {"conversation_id": c, "text": "two"})["run_id"]
    eventually(lambda: len(model.calls), "the model to be called once", until=lambda n: n == 1)
    asked = time.monotonic()
    assert cancel(world, first)["status"] == "cancelled"
    if obeys:
        eventually(lambda: model.returned, "the held model call to return", timeout=5)
        took = model.returned[0] - asked
        assert took <= 1.0, f"the held model call ended {took:.3f} s after the stop"
    else:
        model.release.set()
    eventually(lambda: world.call("run_get", {"run_id": second})["status"],
               "the second run to succeed", until=lambda status: status == "succeeded")
    assert world.call("run_get", {"run_id": first})["error"] == "stopped_by_owner"
    said = [e["text"] for e in world.events(c) if e["type"] == "message"]
    assert said == ["one", "two", "the next run"]  # nothing the stopped run said after
    assert world.snapshot(c)["pending"] is None  # nor the question it would have asked
    with world.db() as db:
        assert db.execute("SELECT count(*) FROM tool_calls").fetchone() == (0,)
    assert run_events(world, c, first) == ["queued", "running", "cancelled"]


def test_r7_a_stop_that_comes_after_the_run_ended_keeps_nothing(world: World, executed):
    """Red team (issue 18): `run_cancel` commits the stop, then tells the executor; when the
    run's worker had ended it meanwhile (its finish refused by the store), the late
    `stop_run` made a stop scope nobody would remove, one per such race."""
    model = HeldModel(False)
    executor = executed(model)
    c = world.conversation()
    run = world.call("conversation_send", {"conversation_id": c, "text": "one"})["run_id"]
    eventually(lambda: len(model.calls), "the model to be called once", until=lambda n: n == 1)
    model.release.set()
    eventually(lambda: world.call("run_get", {"run_id": run})["status"], "the run to succeed",
               until=lambda status: status == "succeeded")
    eventually(lambda: (len(executor._scopes), executor._executing),
               "the executor to keep no stop scope and go idle (scopes, executing)",
               until=lambda state: state == (0, 0))
    executor.stop_run(run)  # as `_stop` does after a commit that raced the run's end
    assert executor._scopes == {}
