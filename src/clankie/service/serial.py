"""The per-conversation serial queue: items of one conversation handled one at a time, in
order, and many conversations in parallel.

Owns the bookkeeping both background parts of the service share (the run executor, R4, and
the notification hook): `submit` returns at once; the first item of a conversation that has
no drainer starts one (through `spawn`, the caller's choice of thread), which hands the
conversation's items to `handle` in order until none is left. A conversation keeps at most
`keep` waiting items: the oldest is dropped (and given to `on_drop`). `handle` owns its own
errors; one that escapes is logged and the drainer goes on with the next item, so a
conversation's queue never stalls.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
log = logging.getLogger("clankie.serial")


class SerialQueues(Generic[T]):
    """One queue of `T` per conversation, drained by at most one job at a time."""

    def __init__(self, handle: Callable[[str, T], None],
                 spawn: Callable[[Callable[[], None]], None], *, keep: int | None = None,
                 on_drop: Callable[[str, T], None] | None = None) -> None:
        if keep is not None and keep < 1:
            raise ValueError("a queue keeps at least one item")
        self._handle = handle
        self._spawn = spawn
        self._keep = keep
        self._on_drop = on_drop
        self._lock = threading.Lock()
        self._queues: dict[str, deque[T]] = {}  # conversations being drained, and their items

    def submit(self, key: str, item: T) -> None:
        """Queue `item` for conversation `key`; returns at once, from any thread."""
        dropped: list[T] = []
        with self._lock:
            waiting = self._queues.get(key)
            if waiting is None:
                self._queues[key] = deque([item])
            else:  # its drainer takes this too
                if len(waiting) == self._keep:
                    dropped.append(waiting.popleft())
                waiting.append(item)
        if dropped and self._on_drop is not None:
            self._on_drop(key, dropped[0])
        if waiting is None:
            self._spawn(lambda: self._drain(key))

    def draining(self) -> set[str]:
        """The conversations a drainer is on now."""
        with self._lock:
            return set(self._queues)

    def _drain(self, key: str) -> None:
        while True:
            with self._lock:
                waiting = self._queues[key]
                if not waiting:
                    del self._queues[key]
                    return
                item = waiting.popleft()
            try:
                self._handle(key, item)
            except Exception:  # a drainer must survive anything one item does
                log.exception("an item of %s failed", key)
