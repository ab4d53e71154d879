"""The service's parts are given at construction, never set later (issues 20, 32): the run
executor is built from the run side it calls back (`RunHooks`; SPEC A10: a committed run
is handed to it after the commit), the notifier and the page's address are passed in, and
stopping the service stops both; the service forwards nothing to its parts."""

from __future__ import annotations

from typing import Any

from clankie.service import Service
from clankie.service.runs import RunHooks
from tests.world import World


class Recording:
    """An executor that only notes what it is told."""

    def __init__(self, hooks: RunHooks) -> None:
        self.hooks = hooks
        self.submitted: list[tuple[str, str]] = []
        self.stopped: list[float] = []

    def submit(self, conversation_id: str, run_id: str) -> None:
        self.submitted.append((conversation_id, run_id))

    def stop_run(self, run_id: str) -> None: ...

    def stop(self, timeout: float) -> None:
        self.stopped.append(timeout)


class Notes:
    def __init__(self) -> None:
        self.stopped = False
        self.documents: list[tuple[str, dict[str, Any]]] = []

    def submit(self, conversation_id: str, document: dict[str, Any]) -> None:
        self.documents.append((conversation_id, document))

    def stop(self) -> None:
        self.stopped = True


def test_the_executor_is_built_from_the_service_and_gets_each_committed_run(world: World):
    executor: Recording = world.executing(Recording)
    assert executor.hooks is world.service.runs and world.service.runs.executor is executor
    c = world.conversation()
    run_id = world.call("conversation_send", {"conversation_id": c, "text": "hi"})["run_id"]
    assert executor.submitted == [(c, run_id)]
    assert world.call("run_get", {"run_id": run_id})["status"] == "queued"


def test_the_notifier_is_given_and_stopping_the_service_stops_both(world: World):
    notes = Notes()
    service = Service(world.store, world.service.settings, clock=world.clock,
                      executor=Recording, notifier=notes)  # type: ignore[arg-type]
    assert service.ctx.notifier is notes and isinstance(service.runs.executor, Recording)
    world.service = service
    c = world.conversation()
    world.ask(c)
    assert [(cid, document["event"]) for cid, document in notes.documents] == [
        (c, "input_requested")]
    service.stop(timeout=3)
    assert service.runs.executor.stopped == [3] and notes.stopped
