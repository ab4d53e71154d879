"""The notification hook: the owner's own command, run after a question is committed.

Owns running `notify_command` (an argv, never a shell string) with one JSON document on
standard input, after each committed `input_requested` (and, with `notify_on_resolved`,
each `input_resolved` and each continuation a restart failed: R9). A hook runs in the
background: at most one at a time for a conversation, at most `MAX_RUNNING` at once in
all, `TIMEOUT_S` each (then its process group is killed); a conversation keeps at most
`MAX_QUEUED` waiting documents (the oldest are dropped, and said so in the log). Its
failure, timeout or missing program is logged with the reason and changes nothing about
any question.

A hook gets nothing secret (SPEC T4): its environment is built from an allow list
(`ENVIRONMENT`: the locale, the paths, the desktop's session variables; never a token,
never an API key, never `CLANKIE_TOKEN`), and what it writes is read up to `OUTPUT_BYTES`
and the rest discarded, so a chatty hook cannot grow the service.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from typing import NotRequired, TypedDict

from clankie import wording
from clankie.core.model import (
    Conversation,
    InputRequested,
    InputResolved,
    Question,
    Run,
    iso,
)
from clankie.core.vocabulary import Reason
from clankie.text import visible

from .serial import SerialQueues

log = logging.getLogger("clankie.notify")


class AskerDoc(TypedDict):
    """An agent that asks (P3): its credential and the MCP client it asked through."""

    credential_id: str
    name: str
    client: str | None


class AnswererDoc(TypedDict):
    """Who answered or cancelled (SPEC R2 `answered_by`): a credential and its kind."""

    credential_id: str
    kind: str


class HookDocument(TypedDict):
    """What a hook reads on standard input (see `document`), in the order it is written:
    what every document says, then what its event adds."""

    event: str  # input_requested, input_resolved or continuation_failed
    conversation_id: str
    workspace: str | None
    request_id: str | None
    read_with: str
    answer_url: NotRequired[str]
    asker: NotRequired[AskerDoc]
    asked_by: NotRequired[str]  # always there; set last of what every document says
    # input_resolved (from its receipt; `run_id` too)
    outcome: NotRequired[str]
    reason: NotRequired[str | None]  # and continuation_failed
    receipt_id: NotRequired[str | None]
    answered_by: NotRequired[AnswererDoc | None]
    # input_requested
    kind: NotRequired[str]
    prompt: NotRequired[str]
    options: NotRequired[list[str]]
    expires_at: NotRequired[str]
    # continuation_failed (and input_resolved)
    run_id: NotRequired[str | None]
    error: NotRequired[str | None]

MAX_RUNNING = 4
TIMEOUT_S = 10.0
MAX_QUEUED = 16
OUTPUT_BYTES = 64 * 1024
# What a hook may inherit: enough to find programs, speak the owner's language and reach
# their desktop's notifications; nothing that authenticates anyone.
ENVIRONMENT = frozenset({"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ",
                         "TMPDIR", "TERM", "DISPLAY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR",
                         "DBUS_SESSION_BUS_ADDRESS", "CLANKIE_HOME"})


def hook_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The allowed part of this process's environment (and every `LC_*`)."""
    env = os.environ if environ is None else environ
    return {k: v for k, v in env.items() if k in ENVIRONMENT or k.startswith("LC_")}


class Notifier:
    def __init__(self, argv: Sequence[str], timeout: float = TIMEOUT_S,
                 max_running: int = MAX_RUNNING) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self._slots = threading.BoundedSemaphore(max_running)
        self._lock = threading.Lock()
        self._queues: SerialQueues[HookDocument] = SerialQueues(
            self._take, _thread, keep=MAX_QUEUED, on_drop=_dropped)
        self._running: set[subprocess.Popen[bytes]] = set()
        self._stopped = False

    def stop(self) -> None:
        """Run no more hooks and stop the running ones (the service is stopping)."""
        with self._lock:
            self._stopped = True
            running = list(self._running)
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

    def submit(self, conversation_id: str, document: HookDocument) -> None:
        """Queue a document; returns at once (the hook never delays a commit's reply)."""
        self._queues.submit(conversation_id, document)

    def _take(self, conversation_id: str, document: HookDocument) -> None:
        with self._slots:
            self._run_hook(document)

    def _run_hook(self, document: HookDocument) -> None:
        data = json.dumps(document, ensure_ascii=False).encode("utf-8") + b"\n"
        if self._stopped:
            return
        try:  # not under the lock: `submit`, called after every commit, takes it
            proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True, env=hook_environment())
        except OSError as exc:
            log.warning("notify: %s could not run: %s", visible(self.argv[0]),
                        exc.strerror or exc)
            return
        with self._lock:
            stopped = self._stopped  # a stop between the check and the start missed it
            if not stopped:
                self._running.add(proc)
        if stopped:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return
        try:
            self._wait(proc, data)
        finally:
            with self._lock:
                self._running.discard(proc)

    def _wait(self, proc: subprocess.Popen[bytes], data: bytes) -> None:
        ended, err = _bounded(proc, data, self.timeout)
        if not ended:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            log.warning("notify: %s took longer than %g s and was stopped",
                        visible(self.argv[0]), self.timeout)
            return
        if proc.returncode != 0:
            first = err.decode("utf-8", "replace").strip().splitlines()[:1]
            log.warning("notify: %s exited %d%s", visible(self.argv[0]), proc.returncode,
                        f": {visible(first[0][:200])}" if first else "")


def _bounded(proc: subprocess.Popen[bytes], data: bytes, timeout: float) -> tuple[bool, bytes]:
    """Give the hook its document and read what it says on stderr, keeping the first
    `OUTPUT_BYTES`; whether it ended within `timeout`, and what was kept."""
    assert proc.stdin is not None and proc.stderr is not None
    deadline = time.monotonic() + timeout
    with contextlib.suppress(BrokenPipeError):  # a hook need not read its input
        proc.stdin.write(data)
    with contextlib.suppress(BrokenPipeError):
        proc.stdin.close()
    kept = b""
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while (left := deadline - time.monotonic()) > 0:
            if not selector.select(left):
                continue
            chunk = os.read(proc.stderr.fileno(), 65536)
            if not chunk:
                proc.stderr.close()
                try:
                    proc.wait(max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    return False, kept
                return True, kept
            kept += chunk[:OUTPUT_BYTES - len(kept)]
    proc.stderr.close()
    return False, kept


def _thread(drain: Callable[[], None]) -> None:
    threading.Thread(target=drain, daemon=True, name="clankie-notify").start()


def _dropped(conversation_id: str, document: HookDocument) -> None:
    log.warning("notify: dropped the hook for %s of %s (too many waiting)",
                document.get("event"), conversation_id)


def document(conversation: Conversation, event: InputRequested | InputResolved,
             question: Question | None, web_origin: str = "") -> HookDocument:
    """What a hook reads on standard input: the question, and how to read it; with
    `web_origin`, `answer_url`: the page's address for it (SPEC H7), which carries no
    credential (without a paired browser it shows nothing) and names the question, so an
    old notification says that its question ended rather than pass another for it. Who
    asks (P3): `asked_by`, "Clankie" or the agent as the CLI and the TUI say it (one line,
    its control and format characters as escapes), and for an agent `asker` (its
    credential's ID and name, the MCP client's name, exact; the workspace is `workspace`).
    An ending says its `outcome` and, from the receipt, its `reason` (`restart` for R3's,
    R9), `receipt_id`, `answered_by` and the continuation's `run_id`, as `input_get` gives
    them (null each when the receipt is gone); never the answer (a hook may pass what it
    reads on to a phone's push service: `read_with` reads it)."""
    doc = _about(conversation, event.type, event.request_id, question, web_origin)
    if isinstance(event, InputResolved):
        receipt = question.receipt if question is not None else None
        by = receipt.answered_by if receipt is not None else None
        doc["outcome"] = event.outcome.value
        doc["reason"] = receipt.reason if receipt is not None else None
        doc["receipt_id"] = receipt.receipt_id if receipt is not None else None
        doc["answered_by"] = None if by is None else {"credential_id": by.credential_id,
                                                      "kind": by.kind.value}
        doc["run_id"] = receipt.run_id if receipt is not None else None
        return doc
    assert question is not None
    doc["kind"] = question.kind.value
    doc["prompt"] = question.prompt
    doc["options"] = [o.label for o in question.options]
    doc["expires_at"] = iso(question.expires_at)
    return doc


def continuation_document(conversation: Conversation, run: Run, question: Question | None,
                          web_origin: str = "") -> HookDocument:
    """A continuation that a restart failed (R3, R9), told like a question's ending:
    `event: "continuation_failed"`, the question whose answer started it (`request_id`,
    null when its receipt was evicted), `run_id`, `reason: "restart"` and the run's
    `error` (`orphaned_by_restart`)."""
    doc = _about(conversation, "continuation_failed",
                 question.request_id if question is not None else None, question, web_origin)
    doc["run_id"] = run.run_id
    doc["reason"] = Reason.RESTART.value
    doc["error"] = run.error
    return doc


def _about(conversation: Conversation, event: str, request_id: str | None,
           question: Question | None, web_origin: str) -> HookDocument:
    """What every document says: which event, where, which question and how to read it,
    who asks."""
    c, r = conversation.conversation_id, request_id
    doc: HookDocument = {
        "event": event, "conversation_id": c,
        "workspace": conversation.workspace.path if conversation.workspace else None,
        "request_id": r, "read_with": f"clankie conversations questions {c}" + (
            f" --request {r}" if r is not None else "")}
    if web_origin and r is not None:
        doc["answer_url"] = f"{web_origin}/?c={c}&r={r}"  # that question, ended or not
    asker = question.asker if question is not None else conversation.agent
    if asker is not None:  # an agent asks, not Clankie (P3): its credential and client
        doc["asker"] = {"credential_id": asker.credential_id, "name": asker.name,
                        "client": asker.client}
    # in the words the CLI and TUI use, and made visible as they make it (section 10): one
    # line a hook may show as it is, whatever names the agent and its client chose
    doc["asked_by"] = visible(wording.who(doc.get("asker")))
    return doc
