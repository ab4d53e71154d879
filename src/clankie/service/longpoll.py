"""Long-polls (SPEC V1, V5, P4): wake-ups after commits, and waiting slots per credential.

Owns fair waiting. A long-poll (`events_tail` with `wait_ms` > 0, `agent_wait` with
`wait_s` > 0) that finds nothing to return takes one of its credential's `LONG_POLL_SLOTS`
slots and waits for a commit that adds events to its conversation; with no slot free it
returns at once with what is there. The service's stop ends every wait at once, with what
is there, marked by the long-poll's `cut_short`, so that its caller is told (an agent's
wait, P4; a follower, who reads the service again when it is back).
Slots are counted by the authenticated credential, so rotating a token or spelling it
otherwise gains none. A call that does not wait takes no slot, so waiting long-polls
never delay anything else.

How a caller waits is the caller's own: `Poll.read` never blocks. It returns the result,
or None, meaning "wait until your `wake` is called or `remaining()` has passed, then read
again". `wake` is called on the committing thread, so it must be quick and must not
raise: a thread sets a `threading.Event`; the HTTP edge sets an `asyncio.Event` through
its loop, so a long-poll waiting there holds no worker thread at all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Final

from pydantic import BaseModel

__all__ = ["LONG_POLL_SLOTS", "LongPolls", "Poll", "Read", "Wake", "waited"]

LONG_POLL_SLOTS: Final = 8

Wake = Callable[[], None]
# One read, authenticated: the caller's credential ID, the result, and whether it is one
# to return now (events came; the question ended) rather than wait for.
Read = Callable[[], tuple[str, BaseModel, bool]]


class _Watch:
    """One waiting long-poll's interest in a conversation (compared by identity); `live`:
    also in its live reply's publishes (SPEC D4; no other long-poll is woken by them)."""

    __slots__ = ("conversation_id", "live", "wake")

    def __init__(self, conversation_id: str, wake: Wake, live: bool) -> None:
        self.conversation_id = conversation_id
        self.wake = wake
        self.live = live


class LongPolls:
    """The service's long-polls: per-conversation commit counters, watches, slots."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._generations: dict[str, int] = {}
        self._publishes: dict[str, int] = {}  # live replies published, by conversation
        self._watches: dict[str, set[_Watch]] = {}
        self._slots: dict[str, int] = {}  # credential ID -> long-polls holding a slot
        self._stopping = False

    @property
    def waiting(self) -> int:
        """How many long-polls hold a slot now."""
        with self._lock:
            return sum(self._slots.values())

    @property
    def stopping(self) -> bool:
        with self._lock:
            return self._stopping

    def generation(self, conversation_id: str) -> int:
        """How many commits added events to the conversation."""
        with self._lock:
            return self._generations.get(conversation_id, 0)

    def changed(self, conversation_ids: Iterable[str]) -> None:
        """After a commit: wake the long-polls of the conversations that got events."""
        with self._lock:
            woken: list[_Watch] = []
            for conversation_id in conversation_ids:
                self._generations[conversation_id] = self._generations.get(
                    conversation_id, 0) + 1
                woken.extend(self._watches.get(conversation_id, ()))
        for watch in woken:
            watch.wake()

    def publishes(self, conversation_id: str) -> int:
        """How many times the conversation's live reply was published (or settled)."""
        with self._lock:
            return self._publishes.get(conversation_id, 0)

    def published(self, conversation_id: str) -> None:
        """The conversation's live reply was published: wake the long-polls that read it."""
        with self._lock:
            self._publishes[conversation_id] = self._publishes.get(conversation_id, 0) + 1
            woken = [w for w in self._watches.get(conversation_id, ()) if w.live]
        for watch in woken:
            watch.wake()

    def stop(self) -> None:
        """Shutting down: every long-poll is woken now, and none waits from now on."""
        with self._lock:
            self._stopping = True
            woken = [w for watches in self._watches.values() for w in watches]
        for watch in woken:
            watch.wake()

    def claim(self, credential_id: str) -> bool:
        """Take a slot of the credential; False when all of its slots are taken."""
        with self._lock:
            held = self._slots.get(credential_id, 0)
            if self._stopping or held >= LONG_POLL_SLOTS:
                return False
            self._slots[credential_id] = held + 1
            return True

    def release(self, credential_id: str) -> None:
        with self._lock:
            held = self._slots[credential_id] - 1
            if held:
                self._slots[credential_id] = held
            else:
                del self._slots[credential_id]

    def watch(self, conversation_id: str, since: int, wake: Wake,
              published: int | None = None) -> _Watch:
        """Call `wake` on each commit with events for the conversation from now on, and at
        once if one came after the generation `since` (or the service is stopping); with
        `published` (a live long-poll), also on each publish of its live reply, and at
        once if one came after that count."""
        watch = _Watch(conversation_id, wake, published is not None)
        with self._lock:
            self._watches.setdefault(conversation_id, set()).add(watch)
            missed = self._stopping or self._generations.get(conversation_id, 0) != since or (
                published is not None
                and self._publishes.get(conversation_id, 0) != published)
        if missed:
            wake()
        return watch

    def unwatch(self, watch: _Watch) -> None:
        with self._lock:
            watches = self._watches[watch.conversation_id]
            watches.discard(watch)
            if not watches:
                del self._watches[watch.conversation_id]


class Poll:
    """One long-poll call: `read()` until it returns the result, waiting in between;
    `close()` (or the `with` block's end) gives its slot back, however it ended."""

    def __init__(self, polls: LongPolls, conversation_id: str, wait_s: float, read: Read,
                 wake: Wake, live: bool = False,
                 quick: Callable[[], BaseModel | None] | None = None,
                 cut_short: Callable[[BaseModel], BaseModel] | None = None) -> None:
        self.waits = wait_s > 0
        # what a wait returns when the service's stop ends it early (none: the result as read)
        self._cut_short = cut_short
        self._live = live
        self._quick = quick
        self._waited: int | None = None  # the generation its last read found nothing new in
        self._began: int | None = polls.publishes(conversation_id) if live else None
        self._polls = polls
        self._conversation_id = conversation_id
        self._deadline = time.monotonic() + wait_s
        self._read = read
        self._wake = wake
        self._slot: str | None = None  # the credential whose slot this long-poll holds
        self._watch: _Watch | None = None

    def __enter__(self) -> Poll:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def remaining(self) -> float:
        """Seconds left until `wait_ms` has passed."""
        return max(0.0, self._deadline - time.monotonic())

    def read(self) -> BaseModel | None:
        """The result to return, or None: wait for a wake-up or the deadline, and read
        again. Raises `ClankieError` as the read does (every read authenticates again)."""
        since = self._polls.generation(self._conversation_id)
        published = self._polls.publishes(self._conversation_id) if self._live else None
        credential_id, page, ready = self._read()
        if ready or self.remaining() <= 0 or (
                published is not None and published != self._began):  # published anew (D4)
            return page
        if self._polls.stopping:
            return self._stopped(page)
        if self._slot is None:
            if not self._polls.claim(credential_id):  # the stop may have come meanwhile
                return self._stopped(page) if self._polls.stopping else page  # V5: at once
            self._slot = credential_id
            self._watch = self._polls.watch(self._conversation_id, since, self._wake,
                                            published)
        self._waited = since
        return None

    def _stopped(self, page: BaseModel) -> BaseModel:
        return page if self._cut_short is None else self._cut_short(page)

    def read_quickly(self) -> BaseModel | None:
        """A live long-poll woken by a publish alone (no commit added events since its last
        read found none): the result made from memory, without a thread or a transaction
        (`quick`), or None when a whole `read` is needed."""
        if self._quick is None or self._waited is None or self._polls.stopping or (
                self._polls.generation(self._conversation_id) != self._waited
                or self._polls.publishes(self._conversation_id) == self._began):
            return None
        return self._quick()

    def close(self) -> None:
        if self._watch is not None:
            self._polls.unwatch(self._watch)
            self._watch = None
        if self._slot is not None:
            self._polls.release(self._slot)
            self._slot = None


def waited(open_poll: Callable[[Wake], Poll]) -> BaseModel:
    """A long-poll waited for on this thread (the HTTP edge waits on its loop instead)."""
    woken = threading.Event()
    with open_poll(woken.set) as poll:
        while True:
            woken.clear()
            result = poll.read()
            if result is not None:
                return result
            woken.wait(poll.remaining())
