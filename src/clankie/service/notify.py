"""The notification hook: the owner's own command, run after a question is committed.

Owns running `notify_command` (an argv, never a shell string) with one JSON document on
standard input, after each committed `input_requested` (and `input_resolved` with
`notify_on_resolved`). A hook runs in the background: at most one at a time for a
conversation, at most `MAX_RUNNING` at once in all, `TIMEOUT_S` each (then its process
group is killed); a conversation keeps at most `MAX_QUEUED` waiting documents (the oldest
are dropped, and said so in the log). Its failure, timeout or missing program is logged
with the reason and changes nothing about any question.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from clankie.core.model import Conversation, InputRequested, InputResolved, Question, iso

log = logging.getLogger("clankie.notify")

MAX_RUNNING = 4
TIMEOUT_S = 10.0
MAX_QUEUED = 16


class Notifier:
    def __init__(self, argv: Sequence[str], timeout: float = TIMEOUT_S,
                 max_running: int = MAX_RUNNING) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self._slots = threading.BoundedSemaphore(max_running)
        self._lock = threading.Lock()
        self._queues: dict[str, deque[dict[str, Any]]] = {}
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

    def submit(self, conversation_id: str, document: dict[str, Any]) -> None:
        """Queue a document; returns at once (the hook never delays a commit's reply)."""
        with self._lock:
            queue = self._queues.get(conversation_id)
            if queue is not None:  # a worker is on this conversation: it takes this too
                if len(queue) == MAX_QUEUED:
                    dropped = queue.popleft()
                    log.warning("notify: dropped the hook for %s of %s (too many waiting)",
                                dropped.get("event"), conversation_id)
                queue.append(document)
                return
            self._queues[conversation_id] = deque([document])
        threading.Thread(target=self._drain, args=(conversation_id,), daemon=True,
                         name="clankie-notify").start()

    def _drain(self, conversation_id: str) -> None:
        while True:
            with self._lock:
                queue = self._queues[conversation_id]
                if not queue:
                    del self._queues[conversation_id]
                    return
                document = queue.popleft()
            with self._slots:
                self._run(document)

    def _run(self, document: dict[str, Any]) -> None:
        data = json.dumps(document, ensure_ascii=False).encode("utf-8") + b"\n"
        if self._stopped:
            return
        try:  # not under the lock: `submit`, called after every commit, takes it
            proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    start_new_session=True)
        except OSError as exc:
            log.warning("notify: %s could not run: %s", self.argv[0], exc.strerror or exc)
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
        try:
            _, err = proc.communicate(data, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            log.warning("notify: %s took longer than %g s and was stopped", self.argv[0],
                        self.timeout)
            return
        if proc.returncode != 0:
            first = err.decode("utf-8", "replace").strip().splitlines()[:1]
            log.warning("notify: %s exited %d%s", self.argv[0], proc.returncode,
                        f": {first[0][:200]}" if first else "")


def document(conversation: Conversation, event: InputRequested | InputResolved,
             question: Question | None) -> dict[str, Any]:
    """What a hook reads on standard input: the question, and how to read it."""
    c, r = conversation.conversation_id, event.request_id
    doc: dict[str, Any] = {
        "event": event.type, "conversation_id": c,
        "workspace": conversation.workspace.path if conversation.workspace else None,
        "request_id": r, "read_with": f"clankie conversations questions {c} --request {r}"}
    if isinstance(event, InputResolved):
        return dict(doc, outcome=event.outcome.value)
    assert question is not None
    return dict(doc, kind=question.kind.value, prompt=question.prompt,
                options=[o.label for o in question.options],
                expires_at=iso(question.expires_at))
