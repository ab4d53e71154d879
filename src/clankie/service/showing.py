"""A run's reply shown while it is written, in the run process (SPEC D2, D3, D11, D13).

Owns `Shown`, the `Live` one run's model writes to (`agent/transcript.Live`), and
`Publisher`, the one thread of the run process that sends what runs have shown to the
service (`live.Publish`), spaced by `stream_interval` per run: at once for a try's start,
its first content and its end, otherwise within `stream_interval` of the text's arrival.
It also turns a reply `quiet` when content stops (10 s, or half of `model_stall_timeout`
when that is less). The thread that reads a model call only appends to a list under a
lock of its own and, at most once per publish, wakes the publisher: it never waits for
the channel, the service or a reader (D13). A try's start and end are sent by the run's
own thread, before it goes on: so the service has them before the run's next write.

What was published is what readers may have seen: a retry withdraws it (D8) and says how
much (`published`). Text not yet published when a call fails goes with it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

from clankie.agent.tools import MAX_CALLS, TOOL_SPECS
from clankie.settings import Settings

from .live import Publish

Send = Callable[[Publish], None]
KNOWN_TOOLS = frozenset(spec.name for spec in TOOL_SPECS)
QUIET_S = 10.0
SEPARATOR = "\n\n"  # between a reply's text blocks (D2)
PENDING_JOINED = 64  # pieces not yet published are joined into one string at this many


class Shown:
    """One run's live reply, as its model call writes it (module docstring)."""

    def __init__(self, publisher: Publisher, conversation_id: str, run_id: str) -> None:
        self._publisher = publisher
        self.conversation_id = conversation_id
        self.run_id = run_id
        self._lock = threading.Lock()  # guards what the reading thread changes
        # One publish of this reply at a time, in order (the run's thread and the
        # publisher's); `_published` is read under it. Other replies never wait on it.
        self.sending = threading.Lock()
        self.reply_id: str | None = None
        self._attempt = 0
        self._state = "waiting"
        self._pending: list[str] = []  # text not yet published
        self._block = -1  # the text block the last piece was in
        self._has_text = False
        self._calling: list[str] = []
        self._requested_at = 0.0
        self._content_at: float | None = None
        self._content_mono = 0.0
        self._due = False  # a publish is asked of the publisher
        self._sent_reply: str | None = None  # what the last publish said
        self._sent_state = ""
        self._sent_calling = 0
        self._published = 0  # characters sent of this try (under the publisher's lock)
        self.last_publish = 0.0  # monotonic

    # The `Live` protocol, called by the model.

    def begin(self, attempt: int = 1) -> None:
        with self._lock:
            self.reply_id = str(uuid.uuid4())
            self._attempt = attempt
            self._state, self._pending, self._block, self._has_text = "waiting", [], -1, False
            self._calling = []
            self._requested_at, self._content_at = time.time(), None
        self._publisher.now(self)

    def text(self, piece: str, block: int) -> None:
        if not piece:
            return
        with self._lock:
            if block != self._block and self._has_text:
                self._pending.append(SEPARATOR)
            self._block, self._has_text = block, True
            self._pending.append(piece)
            if len(self._pending) >= PENDING_JOINED:  # many small pieces cost more than
                self._pending = ["".join(self._pending)]  # their text (D3, D21)
            first = self._content()
        self._publisher.due(self, at_once=first)

    def calling(self, name: str) -> None:
        with self._lock:
            if len(self._calling) < MAX_CALLS:  # the turn runs no more of a reply (D3: a
                self._calling.append(name if name in KNOWN_TOOLS else "tool")  # bound)
            first = self._content()
        self._publisher.due(self, at_once=first)

    def content(self) -> None:
        with self._lock:
            changed = self._state != "writing"
            first = self._content()
        if changed:
            self._publisher.due(self, at_once=first)

    def end(self) -> None:
        with self._lock:
            self._state = "complete"
        self._publisher.now(self)

    def published(self) -> int:
        with self.sending:
            return self._published

    def streaming(self, streams: bool) -> None:
        self._publisher.streaming(streams)

    # The publisher's side.

    def _content(self) -> bool:
        """Content came now (under the lock); whether it is the try's first."""
        first = self._content_at is None
        self._content_at, self._content_mono = time.time(), time.monotonic()
        if self._state != "complete":
            self._state = "writing"
        return first

    def take(self, quiet_after: float) -> Publish | None:
        """What to publish now (under `sending`), or None if nothing
        changed. A reply silent for `quiet_after` seconds becomes `quiet` (D11)."""
        with self._lock:
            self._due = False
            if (self._state == "writing" and self._content_at is not None
                    and time.monotonic() - self._content_mono >= quiet_after):
                self._state = "quiet"
            if self.reply_id is None or (
                    self.reply_id == self._sent_reply and not self._pending
                    and self._state == self._sent_state
                    and len(self._calling) == self._sent_calling):
                return None
            if self.reply_id != self._sent_reply:
                self._published = 0
            appended = "".join(self._pending)
            self._pending = []
            self._sent_reply, self._sent_state = self.reply_id, self._state
            self._sent_calling = len(self._calling)
            return Publish(self.conversation_id, self.run_id, self.reply_id, self._attempt,
                           self._state, appended, tuple(self._calling), self._requested_at,
                           self._content_at)

    def sent(self, publish: Publish) -> None:
        """Count what was sent (under `sending`)."""
        self._published += len(publish.appended)

    def quiet_at(self, quiet_after: float) -> float | None:
        """When, monotonic, this reply turns quiet unless more content comes."""
        with self._lock:
            if self._state != "writing":
                return None
            return self._content_mono + quiet_after

    def mark_due(self) -> bool:
        """Ask for a publish; False if one is asked already."""
        with self._lock:
            if self._due:
                return False
            self._due = True
            return True


class Publisher:
    """The run process's one sender of live replies (module docstring)."""

    def __init__(self, send: Send, settings: Settings,
                 streaming: Callable[[bool], None]) -> None:
        self._send = send
        self._interval = settings.stream_interval
        self._quiet_after = min(QUIET_S, settings.model_stall_timeout / 2)
        self._streaming = streaming
        self._told: bool | None = None
        self._wake = threading.Condition()
        self._due: dict[int, tuple[Shown, float]] = {}  # id -> (shown, when, monotonic)
        self._shown: dict[int, Shown] = {}  # every reply being written
        threading.Thread(target=self._loop, daemon=True, name="clankie-publish").start()

    def shown(self, conversation_id: str, run_id: str) -> Shown:
        shown = Shown(self, conversation_id, run_id)
        with self._wake:
            self._shown[id(shown)] = shown
        return shown

    def done(self, shown: Shown) -> None:
        with self._wake:
            self._shown.pop(id(shown), None)
            self._due.pop(id(shown), None)

    def streaming(self, streams: bool) -> None:
        if self._told is not streams:
            self._told = streams
            self._streaming(streams)

    def now(self, shown: Shown) -> None:
        """Publish now, on the caller's thread (a try's start or end)."""
        with shown.sending:
            publish = shown.take(self._quiet_after)
            if publish is not None:
                self._publish(shown, publish)

    def due(self, shown: Shown, at_once: bool) -> None:
        """A publish is wanted: at once, or `stream_interval` after the last one."""
        if not shown.mark_due() and not at_once:
            return
        when = time.monotonic() if at_once else shown.last_publish + self._interval
        with self._wake:
            self._due[id(shown)] = (shown, when)
            self._wake.notify()

    def _publish(self, shown: Shown, publish: Publish) -> None:
        try:
            self._send(publish)
        except OSError:  # the service is gone; so are its readers
            return
        shown.sent(publish)
        shown.last_publish = time.monotonic()

    def _loop(self) -> None:
        while True:
            with self._wake:
                now = time.monotonic()
                quiet = [(at, s) for s in self._shown.values() if id(s) not in self._due
                         and (at := s.quiet_at(self._quiet_after)) is not None]
                ready = [s for s, when in self._due.values() if when <= now]
                ready += [s for at, s in quiet if at <= now]
                for shown in ready:
                    self._due.pop(id(shown), None)
                if not ready:
                    deadlines = [when for _, when in self._due.values()]
                    deadlines += [at for at, _ in quiet]
                    self._wake.wait(min(deadlines) - now if deadlines else None)
                    continue
            for shown in ready:
                with shown.sending:
                    publish = shown.take(self._quiet_after)
                    if publish is not None:
                        self._publish(shown, publish)
