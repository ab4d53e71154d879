"""The service's parts are given at construction, never set later (issues 20, 32): the run
executor is built from the run side it calls back (`RunHooks`; SPEC A10: a run started by
a transaction is handed to it after the commit), the notifier and the page's address are
passed in, and stopping the service stops both; the service forwards nothing to its
parts."""

from __future__ import annotations

from typing import Any

from clankie.core.model import Run
from clankie.service import Service
from clankie.service.runs import RunHooks
from tests.world import World


class Recording:
    """An executor that only notes what it is told."""

    def __init__(self, hooks: RunHooks) -> None:
        self.hooks = hooks
        self.submitted: list[tuple[str, str]] = []
        self.stopped: list[float] = []

    def submit(self, conversation_id: str, run: Run) -> None:
        self.submitted.append((conversation_id, run.run_id))

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
    # issue 39: started in the transaction that queued it (no other run was before it)
    assert world.call("run_get", {"run_id": run_id})["status"] == "running"


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


# The 12 methods that only passed a call on to a part (issue 32): callers name the part.
FORWARDED = {"runs": ("claim_next_run", "finish_run", "ask_question", "post_replies",
                      "record_tool_call", "record_model_retry", "run_context",
                      "workspace_of", "recover"),
             "devices": ("init_owner", "pairing_preview", "device_status")}


def test_issue32_the_service_forwards_nothing_and_its_executor_cannot_be_set(world: World):
    """Issue 32: no forwarders on the service; each is its part's own method. The executor
    is the run side's, given at construction (A10), never a settable attribute."""
    for part, names in FORWARDED.items():
        for name in names:
            assert not hasattr(Service, name), name
            assert callable(getattr(getattr(world.service, part), name)), (part, name)
    for gone in ("executor", "home", "home_files", "new_id", "notifier", "generation"):
        assert not hasattr(Service, gone), gone
    assert world.service.runs.executor is None  # none given: runs stay queued


def test_issue32_run_hooks_name_what_the_executor_and_tools_use_and_runs_has_each(
        world: World):
    """Issue 32: `RunHooks` is exactly what the executor and a run's tools use of the
    service; `Runs` has each member, and the executor is built from it (A10)."""
    members = {name for name in vars(RunHooks) if not name.startswith("_")}
    assert members == {"settings", "home", "home_files", "publisher",
                       *FORWARDED["runs"]} - {"recover"}
    for name in members:
        assert hasattr(world.service.runs, name), name
    assert world.service.runs.settings is world.service.settings
    assert world.service.runs.home == world.service.ctx.home
    executor: Recording = world.executing(Recording)
    assert executor.hooks is world.service.runs


def test_h1_issue32_the_pages_address_is_given_at_construction(world: World):
    """SPEC H1: `service_info` says where the page is reached; issue 32: the service is
    given it when it is built (`clankie serve` binds the page's socket first)."""
    assert world.call("service_info")["web_url"] is None  # no page served
    served = Service(world.store, world.service.settings, clock=world.clock,
                     web_url="http://127.0.0.1:18901")
    world.service = served
    assert world.call("service_info")["web_url"] == "http://127.0.0.1:18901"
