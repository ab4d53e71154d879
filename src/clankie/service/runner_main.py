"""The run process (issue 39): Clankie's runs, executed beside the service.

`python -m clankie.service.runner_main FD`, started by the service (`runner.Runner`) with
its end of a socket pair, and told first what runs need (`runner.Start`). Owns this side:
the run executor of `executor.py`, unchanged, over `RemoteRuns`, the run side as seen from
here: what a run reads (its context, its workspace, the home's files) is read here, through
read-only connections of its own; every write is asked of the service and waited for, and
its answer raised here as it was raised there. Log records go to the service's log. It
writes nothing itself. It ends when the service does (the channel closes: a run in flight
is simply left, and the service's next start fails it, R3), or when the service tells it to
stop, after giving its runs the time the service gives them.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

from clankie import dto
from clankie.agent.context import TurnContext
from clankie.agent.providers import model_for_runs
from clankie.core.errors import ClankieError
from clankie.core.model import Run, RunStatus, WorkspaceIdentity
from clankie.core.vocabulary import Code
from clankie.settings import Settings
from clankie.store import Readers
from clankie.workspace.confine import FileId
from clankie.workspace.tools import Outcome

from .base import files_of
from .executor import RunExecutor
from .runner import Channel, Start, raised
from .runs import CallRecord, Said, read_run_context, read_workspace
from .showing import Publisher


class _Call:
    """A write asked of the service, waiting for its answer."""

    def __init__(self) -> None:
        self.answered = threading.Event()
        self.error: tuple[str, ...] | None = None
        self.value: Any = None


class RemoteRuns:
    """The run side (`RunHooks`) for the executor in this process: reads here, writes there."""

    def __init__(self, channel: Channel, start: Start) -> None:
        self.settings: Settings = start.settings
        self.home: FileId | None = start.home
        self._store_path = start.store_path
        self._readers = Readers(start.store_path)
        self._channel = channel
        self.publisher = Publisher(partial(channel.send, "live"), start.settings,
                                   partial(channel.send, "streaming"))
        self._numbers = itertools.count()
        self._lock = threading.Lock()  # guards the one below
        self._waiting: dict[int, _Call] = {}

    # What a run reads, here.

    def home_files(self) -> frozenset[FileId]:
        return files_of(self._store_path, self.home)

    def run_context(self, run_id: str) -> TurnContext:
        return read_run_context(self._readers.read, run_id, datetime.now(UTC),
                                self.settings.git_timeout)

    def workspace_of(self, run_id: str) -> WorkspaceIdentity | None:
        return read_workspace(self._readers.read, run_id)

    # What a run writes, there.

    def claim_next_run(self, conversation_id: str) -> Run | None:
        started: Run | None = self._ask("claim_next_run", conversation_id)
        return started

    def finish_run(self, run_id: str, status: RunStatus, error: str | None = None, *,
                   said: Sequence[Said] = (), claim_next: bool = False) -> Run | None:
        following: Run | None = self._ask("finish_run", run_id, status, error,
                                          said=tuple(said), claim_next=claim_next)
        return following

    def ask_question(self, run_id: str, arguments: Any, call: CallRecord | None = None,
                     said: Sequence[Said] = ()) -> dto.AskResult:
        result: dto.AskResult = self._ask("ask_question", run_id, arguments, call,
                                          tuple(said))
        return result

    def post_replies(self, run_id: str, said: Sequence[Said]) -> None:
        self._ask("post_replies", run_id, tuple(said))

    def record_tool_call(self, run_id: str, call: CallRecord, outcome: Outcome,
                         said: Sequence[Said] = ()) -> None:
        self._ask("record_tool_call", run_id, call, outcome, tuple(said))

    def record_model_retry(self, run_id: str, summary: str, retry_at: datetime) -> bool:
        recorded: bool = self._ask("record_model_retry", run_id, summary, retry_at)
        return recorded

    def _ask(self, name: str, *args: Any, **kwargs: Any) -> Any:
        call = _Call()
        with self._lock:
            number = next(self._numbers)
            self._waiting[number] = call
        try:
            self._channel.send("call", number, name, args, kwargs)
        except OSError:
            with self._lock:
                self._waiting.pop(number, None)
            raise _gone() from None
        call.answered.wait()
        if call.error is not None:
            raise raised(call.error)
        return call.value

    def answered(self, number: int, error: tuple[str, ...] | None, value: Any) -> None:
        with self._lock:
            call = self._waiting.pop(number, None)
        if call is not None:
            call.error, call.value = error, value
            call.answered.set()


def _gone() -> ClankieError:
    return ClankieError(Code.STORAGE_UNAVAILABLE, "the service has stopped")


class ToService(logging.Handler):
    """Log records, whole (a traceback included), to the service's log."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self._channel = channel

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(OSError):  # the service is gone; so is its log
            self._channel.send("log", record.levelno, record.name, self.format(record))


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the service says when to stop
    channel = Channel(socket.socket(fileno=int(argv[1])))
    first = channel.receive()
    if first is None or first[0] != "start":
        return
    start: Start = first[1]
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    root.addHandler(ToService(channel))
    threading.excepthook = _logged  # nothing here writes to a terminal
    runs = RemoteRuns(channel, start)
    executor = RunExecutor(runs, model_for_runs(start.settings, start.script))
    while (message := channel.receive()) is not None:
        kind = message[0]
        if kind == "reply":
            runs.answered(*message[1:])
        elif kind == "execute":
            try:
                channel.send("took", message[2].run_id)  # before any model call for it
                executor.submit(message[1], message[2])
            except RuntimeError as exc:  # stopping: the service's next start fails it (R3)
                logging.getLogger("clankie.runs").warning("run %s not executed: %s",
                                                          message[2].run_id, exc)
        elif kind == "stop_run":
            executor.stop_run(message[1])
        elif kind == "stop":
            threading.Thread(target=_stop, args=(executor, channel, message[1]),
                             daemon=True).start()
    os._exit(0)  # the service has ended: whatever runs here is left, and failed at its start


def _logged(args: threading.ExceptHookArgs) -> None:
    logging.getLogger("clankie.runs").error(
        "the run process's thread %s failed", args.thread.name if args.thread else "?",
        exc_info=args.exc_value)


def _stop(executor: RunExecutor, channel: Channel, timeout: float) -> None:
    executor.stop(timeout)
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Exception:  # logged to the service, if it still listens; never a traceback shown
        logging.getLogger("clankie.runs").exception("the run process failed")
        os._exit(1)
