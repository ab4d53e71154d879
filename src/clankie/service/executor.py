"""The run executor inside `clankie serve`: Clankie's runs, executed for real.

Owns scheduling: per conversation one run at a time, in order (R4: `claim_next_run`
starts a run at most once), and many conversations in parallel on one asyncio loop. Each
run executes in a daemon worker thread, reused from run to run (the store and the model
SDKs are blocking), so a model call that hangs can never keep the process from stopping;
a run left `running` by a stop is failed `orphaned_by_restart` at the next start and
never executed again (R3).
Every outcome is recorded on the run: succeeded, or failed with a clear error.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from clankie.agent.context import TurnContext
from clankie.agent.transcript import Model, ModelError
from clankie.agent.turn import run_turn
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import IllegalTransition
from clankie.core.model import Run, RunStatus

from .service import Service
from .tooling import RunTools

log = logging.getLogger("clankie.runs")
T = TypeVar("T")

ModelForRun = Callable[[TurnContext], Model]


class _Workers:
    """Daemon threads that run the executor's blocking calls. A thread is added only when
    every one is busy (so conversations still run in parallel) and is then reused: no
    thread, and no store connection, is made per call."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1  # an idle worker is promised this job
        if start:
            threading.Thread(target=self._work, daemon=True, name="clankie-run").start()
        self._jobs.put(job)

    def _work(self) -> None:
        while True:
            self._jobs.get()()
            with self._lock:
                self._idle += 1


class RunExecutor:
    def __init__(self, service: Service, model_for: ModelForRun) -> None:
        self._service = service
        self._model_for = model_for
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="clankie-runs",
                                        daemon=True)
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._workers = _Workers()
        self._dirty: set[str] = set()
        self._executing = 0
        self._count_lock = threading.Lock()
        self._stopped = False

    def start(self) -> RunExecutor:
        self._thread.start()
        return self

    def submit(self, conversation_id: str, run_id: str) -> None:
        """Called after a run's commit, from any thread: the conversation has work."""
        if self._stopped:
            raise RuntimeError("the run executor is stopped")
        self._loop.call_soon_threadsafe(self._wake, conversation_id)

    def stop(self, timeout: float) -> None:
        """Start no more runs; give running ones `timeout` seconds, then leave them."""
        self._stopped = True
        deadline = time.monotonic() + timeout
        while self._executing and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._executing:
            log.warning("%d run(s) still executing at stop; the next start fails them",
                        self._executing)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def _wake(self, conversation_id: str) -> None:
        self._dirty.add(conversation_id)
        if conversation_id not in self._tasks:
            self._tasks[conversation_id] = self._loop.create_task(self._drain(conversation_id))

    async def _drain(self, conversation_id: str) -> None:
        try:
            while not self._stopped:
                self._dirty.discard(conversation_id)
                run = await self._in_thread(self._service.claim_next_run, conversation_id)
                if run is None:
                    if conversation_id in self._dirty:
                        continue  # woken while claiming: look again
                    return
                await self._in_thread(self._execute, run)
        except Exception:  # the loop must survive anything a conversation does
            log.exception("the run queue of %s stopped", conversation_id)
        finally:
            self._tasks.pop(conversation_id, None)

    async def _in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        future: asyncio.Future[T] = self._loop.create_future()

        def settle(result: T | None, error: BaseException | None) -> None:
            if future.done():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)  # type: ignore[arg-type]

        def work() -> None:
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the awaiting task, which re-raises it
                self._loop.call_soon_threadsafe(settle, None, exc)
            else:
                self._loop.call_soon_threadsafe(settle, result, None)

        self._workers.submit(work)
        return await future

    def _count(self, delta: int) -> None:
        with self._count_lock:
            self._executing += delta

    def _execute(self, run: Run) -> None:
        self._count(+1)
        try:
            status, error = RunStatus.SUCCEEDED, None
            try:
                context = self._service.run_context(run.run_id)
                settings = self._service.settings
                run_turn(self._model_for(context), context,
                         RunTools(self._service, run.run_id, settings), settings.max_steps)
            except ModelError as exc:
                status, error = RunStatus.FAILED, f"model_error: {exc}"
            except ClankieError as exc:
                status, error = RunStatus.FAILED, f"{exc.code}: {exc.detail}"
            except Exception as exc:  # any bug in a run fails that run, never the service
                log.exception("run %s failed", run.run_id)
                status, error = RunStatus.FAILED, f"internal_error: {type(exc).__name__}"
            try:
                self._service.finish_run(run.run_id, status, error)
            except (ClankieError, IllegalTransition) as exc:
                log.error("run %s could not be recorded as %s: %s", run.run_id, status, exc)
        finally:
            self._count(-1)
