"""`clankie serve`'s start (issue 31; SPEC section 10: it accepts connections within 1 s, before
it loads what only a run or the page needs): the run executor is made when the first run is
handed to it, once however many threads hand runs at the same moment, and a stop before any
run has nothing to stop. What `serve` has imported when it first answers is
tests/e2e/test_serve.py's."""

from __future__ import annotations

import threading
from typing import Any, ClassVar

import pytest

from clankie.serve import ExecutorOnFirstRun
from clankie.service import executor


class Recording:
    """In place of `RunExecutor`: records what it is made with and handed."""

    made: ClassVar[list[Recording]] = []
    inside = threading.Event()
    go_on = threading.Event()

    def __init__(self, service: Any, model_for: Any) -> None:
        Recording.inside.set()
        assert Recording.go_on.wait(10), "the test never let the first make finish"
        self.args = (service, model_for)
        self.handed: list[tuple[str, str]] = []
        self.stopped: list[object] = []
        Recording.made.append(self)

    def submit(self, conversation_id: str, run_id: str) -> None:
        self.handed.append((conversation_id, run_id))

    def stop_run(self, run_id: str) -> None:
        self.stopped.append(run_id)

    def stop(self, timeout: float) -> None:
        self.stopped.append(timeout)


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> type[Recording]:
    Recording.made, Recording.inside, Recording.go_on = [], threading.Event(), threading.Event()
    monkeypatch.setattr(executor, "RunExecutor", Recording)
    return Recording


def test_issue31_the_executor_is_made_once_by_the_first_of_many_runs_handed_at_once(
        recording: type[Recording]):
    lazy = ExecutorOnFirstRun("service", "model_for")  # type: ignore[arg-type]
    lazy.stop_run("r0")  # nothing made yet: nothing executes, nothing to stop
    assert recording.made == []
    threads = [threading.Thread(target=lazy.submit, args=("c", f"r{n}")) for n in range(8)]
    for thread in threads:
        thread.start()
    assert recording.inside.wait(10), "no run was handed"
    recording.go_on.set()
    for thread in threads:
        thread.join(10)
    assert not any(t.is_alive() for t in threads)
    [made] = recording.made
    assert made.args == ("service", "model_for")
    assert sorted(made.handed) == [("c", f"r{n}") for n in range(8)]
    lazy.stop_run("r3")
    lazy.stop(5)
    assert made.stopped == ["r3", 5]


def test_issue31_a_service_stopped_before_any_run_makes_no_executor_and_takes_no_run(
        recording: type[Recording]):
    lazy = ExecutorOnFirstRun("service", "model_for")  # type: ignore[arg-type]
    lazy.stop(5)
    with pytest.raises(RuntimeError, match="the run executor is stopped"):
        lazy.submit("c", "r1")
    assert recording.made == []
