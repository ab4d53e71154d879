"""The run process (issue 39): Clankie's runs executed in a process of their own, beside the
service.

Owns the service's side of it. `Runner` is the service's executor (`base.Executor`): it
starts the process (`runner_main.py`) when `clankie serve` is ready (`warm`) or at the
first run handed to it, and gives it what runs need (the settings, the script, the store's
path, the home); it hands it each started run (`submit`) and each stop (`stop_run`, R7),
and makes on the store's writer, after the requests waiting there, each write of the run
side the process asks for (`WRITES`: claim, finish, ask, say, record), answering once it
has committed. The process reads the store through connections of its own and calls the
model and the workspace tools; it writes nothing itself. Its log records join the
service's log. If it ends while the service runs (a crash, a kill), every run it held is
failed, saying so, but for the runs it was handed and never said it took (it says so before
executing one: they called no model), and a new process runs those and the next runs; when
the service ends, so does it (its end of the channel closes).

Why a process: an answer then costs the service process its HTTP, its transaction and its
continuation's writes, while the run's own work (its context, the turn loop, the model's
SDK) runs on the other core under an interpreter lock of its own (docs/decisions.md,
"Issue 39: runs in a process of their own").

`Channel` is one end of a Unix socket pair: each message a tuple, pickled, after its
length. Only these two processes, of the same install, ever read or write it.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import queue
import socket
import sqlite3
import subprocess
import sys
import threading
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Final

from clankie.core.errors import ClankieError
from clankie.core.lifecycle import IllegalTransition
from clankie.core.model import Run
from clankie.settings import Settings
from clankie.workspace.confine import FileId

from .base import storage_failure
from .live import Publish

if TYPE_CHECKING:
    from clankie.agent.scripted import Script

    from .runs import Runs

log = logging.getLogger("clankie.runs")

# The run side's writes the process may ask for (`RunHooks`), and nothing else.
WRITES: Final = frozenset({"claim_next_run", "finish_run", "ask_question", "post_replies",
                           "record_tool_call", "record_model_retry"})
STOP_MARGIN_S = 2.0  # past the runs' own time at a stop, before the process is killed
HELD_KEPT = 10_000  # runs remembered as the process's (a stopped run is never finished)


@dataclass(frozen=True)
class Start:
    """What the run process is given first: all it needs that is not in the store."""

    settings: Settings
    script: Script | None
    store_path: str
    home: FileId | None


class Channel:
    """One end of the socket pair: messages out from any thread, in on one thread. With
    `posting` (the service's end), `post` queues a message for a thread of its own to send,
    so that the service's threads (the store's writer above all) never wait for a process
    that is slow, stopped or gone."""

    def __init__(self, sock: socket.socket, posting: bool = False) -> None:
        self._sock = sock
        self._incoming = sock.makefile("rb")
        self._sending = threading.Lock()
        self._posted: queue.SimpleQueue[tuple[Any, ...] | None] | None = None
        if posting:
            self._posted = queue.SimpleQueue()
            threading.Thread(target=self._post_loop, daemon=True,
                             name="clankie-runner-post").start()

    def send(self, *message: Any) -> None:
        """Raises `OSError` once the other end is gone."""
        data = pickle.dumps(message, pickle.HIGHEST_PROTOCOL)
        with self._sending:
            self._sock.sendall(len(data).to_bytes(4, "big") + data)

    def post(self, *message: Any) -> None:
        """Send `message` soon, from the channel's own thread; never blocks, never raises
        (a message to a process that is gone is dropped: its runs are failed as it ends)."""
        assert self._posted is not None
        self._posted.put(message)

    def _post_loop(self) -> None:
        assert self._posted is not None
        while (message := self._posted.get()) is not None:
            with contextlib.suppress(OSError):
                self.send(*message)

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
        if self._posted is not None:
            self._posted.put(None)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._incoming.close()
        self._sock.close()


def wire_error(error: BaseException) -> tuple[str, ...]:
    """An exception as the other process raises it again (`raised`)."""
    if isinstance(error, ClankieError):
        return ("clankie", error.code.value, error.detail)
    if isinstance(error, IllegalTransition):
        return ("illegal", str(error))
    return ("other", f"{type(error).__name__}: {error}")


def raised(error: tuple[str, ...]) -> Exception:
    kind, *said = error
    if kind == "clankie":
        return ClankieError(said[0], said[1])
    if kind == "illegal":
        return IllegalTransition(said[0])
    return RuntimeError(said[0])


class Runner:
    """The service's executor: runs executed in the run process (module docstring)."""

    def __init__(self, runs: Runs, settings: Settings, script: Script | None) -> None:
        self._runs = runs
        self._start = Start(settings, script, runs.ctx.store.path, runs.ctx.home)
        self._lock = threading.Lock()  # guards the six below
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: Channel | None = None
        self._stopping = False
        # The runs the process now running was given or started (run -> conversation):
        # it may write and show replies for these only, and only these fail if it dies.
        self._held: dict[str, str] = {}
        # Of those, the runs handed to it that it has not yet said it took: if it ends, these
        # called no model (it says so before executing one), and the next process runs them.
        self._given: dict[str, Run] = {}
        # Runs handed while a process that died is being replaced: the next one gets them.
        self._waiting: list[Run] | None = None

    def warm(self) -> None:
        """Start the process now, so that the first run does not wait for it (a failure is
        logged; the first run tries again, and fails saying why)."""
        with self._lock:
            if self._stopping or self._waiting is not None:
                return
            try:
                self._started()
            except OSError as exc:
                log.error("could not start the run process: %s", exc)

    def submit(self, conversation_id: str, run: Run) -> None:
        """Never blocks (it is called on the store's writer, after a commit): the message
        is queued to the process's channel."""
        with self._lock:
            if self._waiting is not None:  # its process died: the next one gets it
                self._waiting.append(run)
                return
            channel = self._started()
            self._hold(run)
            self._given[run.run_id] = run
            channel.post("execute", conversation_id, run)

    def _hold(self, run: Run) -> None:
        """(Under the lock.) A stopped run is never finished: the oldest go past a bound."""
        self._held[run.run_id] = run.conversation_id
        while len(self._held) > HELD_KEPT:
            self._given.pop(oldest := next(iter(self._held)), None)
            del self._held[oldest]

    def stop_run(self, run_id: str) -> None:
        with self._lock:
            channel = self._channel
        if channel is not None:
            channel.post("stop_run", run_id)  # gone: its runs are failed as it ends

    def stop(self, timeout: float) -> None:
        """Start no more runs; give running ones `timeout` seconds, then end the process."""
        with self._lock:
            self._stopping = True
            process, channel = self._process, self._channel
        if process is None or channel is None:
            return
        channel.post("stop", timeout)
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
            with theirs:
                process = subprocess.Popen(
                    [sys.executable, "-m", "clankie.service.runner_main",
                     str(theirs.fileno())],
                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,  # it logs to us
                    start_new_session=True)  # a Ctrl+C in serve's terminal is serve's
            channel = Channel(ours, posting=True)
            channel.post("start", self._start)
            self._process, self._channel = process, channel
            self._held, self._given = {}, {}
            threading.Thread(target=self._serve, args=(process, channel), daemon=True,
                             name="clankie-runner").start()
        return self._channel

    def _serve(self, process: subprocess.Popen[bytes], channel: Channel) -> None:
        """What the process sends, until it ends."""
        while (message := channel.receive()) is not None:
            if message[0] == "took":
                self._took(channel, message[1])
            elif message[0] == "live":
                self._publish(channel, message[1])
            elif message[0] == "call":
                self._write(channel, *message[1:])
            elif message[0] == "streaming":
                self._runs.ctx.streaming_is(bool(message[1]))
            elif message[0] == "log":
                _, level, name, text = message
                logging.getLogger(name).log(level, "%s", text)
        self._ended(process, channel)

    def _took(self, channel: Channel, run_id: object) -> None:
        with self._lock:
            if channel is self._channel and isinstance(run_id, str):
                self._given.pop(run_id, None)

    def _holds(self, channel: Channel, run_id: object, conversation_id: object = None) -> bool:
        """Whether the process behind `channel` holds this run (of this conversation)."""
        with self._lock:
            held = self._held.get(run_id) if isinstance(run_id, str) else None
            return (channel is self._channel and held is not None
                    and conversation_id in (None, held))

    def _publish(self, channel: Channel, publish: Any) -> None:
        """A live reply from the process (D3), for a run it holds, into memory."""
        if isinstance(publish, Publish) and self._holds(channel, publish.run_id,
                                                         publish.conversation_id):
            self._runs.ctx.live.publish(publish)

    def _write(self, channel: Channel, call_id: int, name: str, args: tuple[Any, ...],
               kwargs: dict[str, Any]) -> None:
        """One write the process asked for, made on the store's writer after the requests
        waiting there; answered once committed (or failed). Only the run side's writes,
        and only for runs it holds (claims: for conversations whose run it holds)."""
        def done(result: Any, error: BaseException | None) -> None:
            if isinstance(error, sqlite3.Error):  # its commit's included
                error = storage_failure(error)
            with self._lock:
                if channel is self._channel:
                    if name == "finish_run" and error is None:
                        self._held.pop(args[0], None)
                    if isinstance(result, Run):  # a run it started (claimed, or by a finish)
                        self._hold(result)
            channel.post("reply", call_id, None if error is None else wire_error(error),
                         result)

        if name not in WRITES:
            done(None, RuntimeError(f"{name} is not a write the run process may ask for"))
            return
        subject = args[0] if args else None
        if not (self._claims(channel, subject) if name == "claim_next_run"
                else self._holds(channel, subject)):
            done(None, RuntimeError(f"{name}: not a run this process holds"))
            return
        try:
            self._runs.ctx.store.submit(partial(getattr(self._runs, name), *args, **kwargs),
                                        done, urgent=False)
        except sqlite3.Error as exc:  # the store is closed: the service is stopping
            done(None, exc)

    def _claims(self, channel: Channel, conversation_id: object) -> bool:
        with self._lock:
            return channel is self._channel and conversation_id in self._held.values()

    def _ended(self, process: subprocess.Popen[bytes], channel: Channel) -> None:
        """The process ended, or closed its channel: unless the service is stopping, fail
        the runs it held (and only those: R4) but for those it never took (they called no
        model: R3 is kept), then hand each failed one's next run, the runs never taken, and
        every run handed meanwhile, to a new process."""
        with self._lock:
            untaken = list(self._given.values())
            held = set(self._held) - {run.run_id for run in untaken}
            self._held, self._given = {}, {}
            if self._channel is channel and not self._stopping:
                self._waiting = []  # runs handed from now on wait for the new process
        channel.close()
        try:
            code = process.wait(STOP_MARGIN_S)
        except subprocess.TimeoutExpired:
            process.kill()
            code = process.wait()
        with self._lock:
            if self._channel is channel:
                self._process, self._channel = None, None
            stopping = self._stopping
        if stopping:
            return
        log.error("the run process ended (exit status %s); the runs it held are failed",
                  code)
        started: list[Run] = []
        try:
            started = self._runs.fail_running(held, f"internal_error: the run process ended "
                                                    f"(exit status {code})")
        except ClankieError as exc:
            log.error("the runs of the ended run process stay running (a restart fails "
                      "them): %s", exc)
        with self._lock:
            waiting, self._waiting = self._waiting or [], None
        for run in [*untaken, *started, *waiting]:
            self._runs.hand(run)
