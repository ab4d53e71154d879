"""The run process (issue 39): Clankie's runs, executed beside the service.

`python -m clankie.service.runner_main FD`, started by the service (`runner.Runner`) with
its end of a socket pair, and told first what runs need (`runner.Start`). Owns this side:
a run side of its own (`Runs`, over a `Context` and a `Store` of its own: the same code as
the service's, its writes made by its own writer thread, taking turns with the service's
on the store's write lock; it never migrates the store) and the run executor of
`executor.py` over it. What the service must know of its commits goes to it: the
conversations that got events (`ToService.changed`: the service wakes their long-polls),
the owner's hook documents (the service runs the hook), and its log records. It ends when
the service does (the channel closes: a run in flight is simply left, its transaction
undone, and the service's next start fails it, R3), or when the service tells it to stop,
after giving its runs the time the service gives them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterable

from clankie.agent.providers import model_for_runs
from clankie.store import Store

from .base import Context, new_uuid, utcnow
from .executor import RunExecutor
from .longpoll import LongPolls
from .notify import HookDocument
from .runner import Channel, Start
from .runs import Runs


class ToService(LongPolls):
    """The run process's long-polls: none wait here; each commit's conversations are told
    to the service, whose long-polls wait for them."""

    def __init__(self, channel: Channel) -> None:
        super().__init__()
        self._channel = channel

    def changed(self, conversation_ids: Iterable[str]) -> None:
        with contextlib.suppress(OSError):  # the service is gone: nobody waits
            self._channel.send("changed", list(conversation_ids))


class HookOfService:
    """The owner's hook, run by the service: its documents are sent there."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel

    def submit(self, conversation_id: str, document: HookDocument) -> None:
        with contextlib.suppress(OSError):
            self._channel.send("notify", conversation_id, document)

    def stop(self) -> None:
        pass


class LogToService(logging.Handler):
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
    root.addHandler(LogToService(channel))
    threading.excepthook = _logged  # nothing here writes to a terminal
    store = Store(start.store_path, migrate=False, write_lock=start.write_lock)
    ctx = Context(store, start.settings, utcnow, new_uuid,
                  HookOfService(channel) if start.notifies else None,
                  long_polls=ToService(channel))
    executor = RunExecutor(Runs(ctx, None), model_for_runs(start.settings, start.script))
    while (message := channel.receive()) is not None:
        kind = message[0]
        if kind == "execute":
            try:
                executor.submit(message[1], message[2])
            except RuntimeError as exc:  # stopping: the service's next start fails it (R3)
                logging.getLogger("clankie.runs").warning("run %s not executed: %s",
                                                          message[2].run_id, exc)
        elif kind == "stop_run":
            executor.stop_run(message[1])
        elif kind == "stop":
            threading.Thread(target=_stop, args=(executor, store, message[1]),
                             daemon=True).start()
    os._exit(0)  # the service has ended: whatever runs here is left, and failed at its start


def _logged(args: threading.ExceptHookArgs) -> None:
    logging.getLogger("clankie.runs").error(
        "the run process's thread %s failed", args.thread.name if args.thread else "?",
        exc_info=args.exc_value)


def _stop(executor: RunExecutor, store: Store, timeout: float) -> None:
    executor.stop(timeout)
    store.close()  # what its runs wrote is committed
    logging.shutdown()
    os._exit(0)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Exception:  # logged to the service, if it still listens; never a traceback shown
        logging.getLogger("clankie.runs").exception("the run process failed")
        os._exit(1)
