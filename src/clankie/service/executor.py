"""The run executor inside `clankie serve`: Clankie's runs, executed for real.

Owns scheduling: per conversation one run at a time, in order (R4: a run is started, in
the store, at most once: by the transaction that queues it, or by the one that finishes or
stops the run before it), and many conversations in parallel (`serial.SerialQueues`). A
commit that starts a run hands it straight to a worker (no event loop, no polling), which
executes it and then each run its finish starts; workers are daemon threads reused from
run to run (the model SDKs are blocking; the store's steps are made on its writer), so a
model call that hangs can never keep the process from stopping; a run left `running` by a
stop is failed `orphaned_by_restart` at the next start and never
executed again (R3). Every outcome is recorded on the run: succeeded, or failed with a
clear error; a model failure is also logged, in one line (R6). Each wait before a model
call is tried again is shown as a `run_activity` event while the run is running (R6, V4):
the run's `Waits`.

Stopping (R7): `run_cancel` commits the stop first, so the store refuses every later write
of the run; then `stop_run` stops the run's `StopScope` (`agent/stop.py`), which ends its
model call in flight (the socket is shut down) and every wait, and makes the turn loop
take no further step. A stopped run is not finished again: its worker moves on to the
conversation's next queued run (R4).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime

from clankie.agent import stop
from clankie.agent.context import TurnContext
from clankie.agent.stop import StopScope  # by name: in the class, `stop` is the method
from clankie.agent.transcript import Model, ModelError, Waits
from clankie.agent.turn import run_turn
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import IllegalTransition
from clankie.core.model import Run, RunStatus
from clankie.core.vocabulary import Code

from .runs import RunHooks, Said
from .serial import SerialQueues
from .showing import Shown
from .tooling import RunTools

log = logging.getLogger("clankie.runs")

ModelForRun = Callable[[TurnContext], Model]
DONE_KEPT = 1024  # run IDs remembered as executed, so that a late stop_run makes no scope


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
    """Executes the runs handed to it, through the run side it was built from (`RunHooks`:
    claim, context, record, finish), and nothing else of the service."""

    def __init__(self, hooks: RunHooks, model_for: ModelForRun) -> None:
        self._hooks = hooks
        self._model_for = model_for
        workers = _Workers()
        # A conversation's items are its started runs, each handed once: none is dropped.
        self._queues: SerialQueues[Run] = SerialQueues(self._drain, workers.submit)
        self._lock = threading.Lock()  # guards the two below
        self._scopes: dict[str, stop.StopScope] = {}  # executing runs (and stopped early)
        self._done: OrderedDict[str, None] = OrderedDict()  # runs executed lately (bounded)
        self._executing = 0
        self._count_lock = threading.Lock()
        self._stopped = False

    def submit(self, conversation_id: str, run: Run) -> None:
        """Called after the commit that started `run`, from any thread: a worker executes
        it at once, or after the run of the conversation it is executing now."""
        if self._stopped:
            raise RuntimeError("the run executor is stopped")
        self._queues.submit(conversation_id, run)

    @property
    def _draining(self) -> set[str]:
        """The conversations a worker is draining now."""
        return self._queues.draining()

    def stop_run(self, run_id: str) -> None:
        """The run was stopped (R7, committed): end its model call and its next step now.
        A run claimed but not yet executing finds its scope stopped when it begins."""
        with self._lock:
            if run_id in self._done:  # its worker finished first: nothing to stop, and a
                return                # scope made now would be kept for ever
            scope = self._scopes.setdefault(run_id, stop.StopScope())
        scope.stop()

    def stop(self, timeout: float) -> None:
        """Start no more runs; give running ones `timeout` seconds, then leave them."""
        self._stopped = True
        deadline = time.monotonic() + timeout
        while self._executing and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._executing:
            log.warning("%d run(s) still executing at stop; the next start fails them",
                        self._executing)

    def _drain(self, conversation_id: str, started: Run) -> None:
        """Execute a started run, then the conversation's next ones one at a time, in order
        (R4), until none: a finishing run starts the next one in the transaction that
        finishes it. Once stopping, a started run is left as it is (the next start fails
        it, R3)."""
        try:
            run: Run | None = started
            while run is not None and not self._stopped:
                run = self._execute(run)
        except ClankieError as exc:  # e.g. storage_unavailable: a full disk
            log.error("the runs of %s wait: %s (a restart fails any it started)",
                      conversation_id, exc)
        except Exception:  # a worker must survive anything a conversation does
            log.exception("the run queue of %s stopped", conversation_id)

    def _count(self, delta: int) -> None:
        with self._count_lock:
            self._executing += delta

    def _waits(self, run: Run, scope: StopScope, shown: Shown) -> Waits:
        """How this run waits between tries of a model call (R6): each wait is shown as a
        `run_activity` event, then slept in the run's stop scope, so that a stop (R7) ends
        the wait at once and no further try is made; its replies are shown while written
        (`shown`, D2)."""
        def on_wait(summary: str, retry_at: datetime) -> None:
            self._hooks.record_model_retry(run.run_id, summary, retry_at)

        return Waits(on_wait=on_wait, sleep=scope.wait, live=shown)

    def _execute(self, run: Run) -> Run | None:
        """Execute a started run and finish it; returns the conversation's next run, started
        by the finish (none once stopping). A run stopped meanwhile (R7) is not finished
        again: the next run is claimed instead."""
        self._count(+1)
        with self._lock:
            scope = self._scopes.setdefault(run.run_id, stop.StopScope())
        try:
            status, error = RunStatus.SUCCEEDED, None
            said: tuple[Said, ...] = ()
            shown = self._hooks.publisher.shown(run.conversation_id, run.run_id)
            try:
                settings = self._hooks.settings
                tools = RunTools(self._hooks, run.run_id)
                context = self._hooks.run_context(run.run_id)
                try:
                    with stop.within(scope):
                        run_turn(self._model_for(context), context, tools, settings.max_steps,
                                 self._waits(run, scope, shown), stop=scope)
                finally:
                    said = tools.unsaid()
                    self._hooks.publisher.done(shown)
            except stop.Stopped:
                pass
            except ModelError as exc:
                status, error = RunStatus.FAILED, f"model_error: {exc}"
                log.warning("run %s of %s failed: %s", run.run_id, run.conversation_id, error)
            except ClankieError as exc:
                status, error = RunStatus.FAILED, f"{exc.code}: {exc.detail}"
            except Exception as exc:  # any bug in a run fails that run, never the service
                if not scope.stopped:
                    log.exception("run %s failed", run.run_id)
                status, error = RunStatus.FAILED, f"internal_error: {type(exc).__name__}"
            if not scope.stopped:
                try:
                    return self._hooks.finish_run(run.run_id, status, error, said=said,
                                                    claim_next=not self._stopped)
                except IllegalTransition:  # the store ended it first: a stop not heard yet
                    pass
                except ClankieError as exc:
                    if exc.code != Code.NOT_ELIGIBLE:  # not_eligible: the same, with words
                        log.error("run %s could not be recorded as %s: %s", run.run_id,
                                  status, exc)
                        return None
            log.info("run %s stopped by its owner", run.run_id)
            return None if self._stopped else self._hooks.claim_next_run(run.conversation_id)
        finally:
            with self._lock:
                self._scopes.pop(run.run_id, None)
                self._done[run.run_id] = None
                while len(self._done) > DONE_KEPT:
                    self._done.popitem(last=False)
            self._count(-1)
