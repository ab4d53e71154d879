"""The run process (issue 39): Clankie's runs executed in a process of their own, beside the
service.

Owns the service's side of it. `Runner` is the service's executor (`base.Executor`): it
starts the process (`runner_main.py`) when `clankie serve` is ready (`warm`) or at the
first run handed to it, and gives it what runs need (the settings, the script, the store's
path and its own descriptor of the store's write lock); it hands it each started run
(`submit`) and each stop (`stop_run`, R7). The process is a whole run side of its own: it
reads and writes the store through its own connections and its own writer thread, taking
turns with the service's writer on the write lock (`Store(write_lock=...)`), and calls the
model and the workspace tools. After each of its commits it tells the service which
conversations got events (the service wakes their long-polls) and sends the documents of
the owner's hook (the service runs it); its log records join the service's log. If it
ends while the service runs (a crash, a kill), every run it held is failed, saying so,
and the next run starts a new one; when the service ends, so does it (its end of the
channel closes).

Why a process: an answer then costs the service process its HTTP and its own transaction,
while the run's work (its context, the turn loop, the model's SDK, and its writes) runs on
the other core under an interpreter lock of its own (docs/decisions.md, "Issue 39").

`Channel` is one end of a Unix socket pair: each message a tuple, pickled, after its
length. Only these two processes, of the same install, ever read or write it.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from clankie.core.errors import ClankieError
from clankie.core.model import Run
from clankie.settings import Settings

if TYPE_CHECKING:
    from clankie.agent.scripted import Script

    from .runs import Runs

log = logging.getLogger("clankie.runs")

STOP_MARGIN_S: Final = 2.0  # past the runs' own time at a stop, before the process is killed


@dataclass(frozen=True)
class Start:
    """What the run process is given first: all it needs that is not in the store."""

    settings: Settings
    script: Script | None
    store_path: str
    write_lock: int | None  # its own descriptor of the store's write lock
    notifies: bool  # whether the service runs the owner's hook (it sends the documents)


class Channel:
    """One end of the socket pair: messages out from any thread, in on one thread."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._incoming = sock.makefile("rb")
        self._sending = threading.Lock()

    def send(self, *message: Any) -> None:
        """Raises `OSError` once the other end is gone."""
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        with self._sending:
            self._sock.sendall(len(data).to_bytes(4, "big") + data)

    def receive(self) -> tuple[Any, ...] | None:
        """The next message; None once the other end is gone."""
        try:
            head = self._incoming.read(4)
            body = self._incoming.read(int.from_bytes(head, "big")) if len(head) == 4 else b""
        except OSError:
            return None
        if len(head) < 4 or len(body) < int.from_bytes(head, "big"):
            return None
        message: tuple[Any, ...] = pickle.loads(body)
        return message

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._incoming.close()
        self._sock.close()


class Runner:
    """The service's executor: runs executed in the run process (module docstring)."""

    def __init__(self, runs: Runs, settings: Settings, script: Script | None,
                 write_lock: int | None = None) -> None:
        """`write_lock`: the process's descriptor of the store's write lock (a second open
        of the file whose first the service's store locks), given to the process only."""
        self._runs = runs
        self._start = Start(settings, script, runs.ctx.store.path, write_lock,
                            runs.ctx.notifier is not None)
        self._lock = threading.Lock()  # guards the three below
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: Channel | None = None
        self._stopping = False

    def warm(self) -> None:
        """Start the process now, so that the first run does not wait for it (a failure is
        logged; the first run tries again, and fails saying why)."""
        with self._lock:
            if self._stopping:
                return
            try:
                self._started()
            except OSError as exc:
                log.error("could not start the run process: %s", exc)

    def submit(self, conversation_id: str, run: Run) -> None:
        with self._lock:
            self._started().send("execute", conversation_id, run)

    def stop_run(self, run_id: str) -> None:
        with self._lock:
            channel = self._channel
        if channel is not None:
            with contextlib.suppress(OSError):  # gone: its runs are failed as it ends
                channel.send("stop_run", run_id)

    def stop(self, timeout: float) -> None:
        """Start no more runs; give running ones `timeout` seconds, then end the process."""
        with self._lock:
            self._stopping = True
            process, channel = self._process, self._channel
        if process is None or channel is None:
            return
        with contextlib.suppress(OSError):
            channel.send("stop", timeout)
        try:
            process.wait(timeout + STOP_MARGIN_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _started(self) -> Channel:
        """The process's channel, the process started if there is none (under the lock)."""
        if self._stopping:
            raise RuntimeError("the run executor is stopped")
        if self._channel is None:
            ours, theirs = socket.socketpair()
            kept = [theirs.fileno()] + ([self._start.write_lock]
                                        if self._start.write_lock is not None else [])
            with theirs:
                process = subprocess.Popen(
                    [sys.executable, "-m", "clankie.service.runner_main",
                     str(theirs.fileno())],
                    pass_fds=kept, stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,  # it logs to us
                    start_new_session=True)  # a Ctrl+C in serve's terminal is serve's
            channel = Channel(ours)
            channel.send("start", self._start)
            self._process, self._channel = process, channel
            threading.Thread(target=self._serve, args=(process, channel), daemon=True,
                             name="clankie-runner").start()
        return self._channel

    def _serve(self, process: subprocess.Popen[bytes], channel: Channel) -> None:
        """What the process tells, until it ends: which conversations got events in its
        commits (their long-polls are woken), the hook's documents, its log records."""
        ctx = self._runs.ctx
        while (message := channel.receive()) is not None:
            if message[0] == "changed":
                ctx.long_polls.changed(message[1])
            elif message[0] == "notify" and ctx.notifier is not None:
                ctx.notifier.submit(message[1], message[2])
            elif message[0] == "log":
                _, level, name, text = message
                logging.getLogger(name).log(level, "%s", text)
        self._ended(process, channel)

    def _ended(self, process: subprocess.Popen[bytes], channel: Channel) -> None:
        """The process ended, or closed its channel: forget it, and unless the service is
        stopping, fail every run it held and start the next ones in a new process."""
        try:
            code = process.wait(STOP_MARGIN_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        channel.close()
        with self._lock:
            if self._channel is channel:
                self._process, self._channel = None, None
            stopping = self._stopping
        if stopping:
            return
        log.error("the run process ended (exit status %s); the runs it held are failed",
                  code)
        try:
            started = self._runs.fail_running(f"internal_error: the run process ended "
                                              f"(exit status {code})")
        except ClankieError as exc:
            log.error("the runs of the ended run process stay running (a restart fails "
                      "them): %s", exc)
            return
        for run in started:
            self._runs.hand(run)
