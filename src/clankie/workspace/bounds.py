"""One tool call's bounds (SPEC W5): its deadline and its single memory account.

Owns the two limits every loop and every structure of a call answers to. The deadline:
`check_time` ends the call `time_limit` once `CALL_SECONDS` have passed since the
workspace was opened; every loop a workspace or a repository can lengthen asks it. The
memory account: whatever the reader keeps while a call runs (parsed commits and the
history walk's queue, tree entries on a walk's stack, the index's entries and its
cache-tree, folder listings, inflated objects, the object cache, the packs' fan-out tables,
a file while its line endings are converted, RE2's memory for the ignore and attribute
rules) draws on one account of `CALL_MEMORY` bytes (W5's 64 MiB less `UNCOUNTED`, a
measured margin for what is not counted), counted as held (the sizes of the
objects kept, as `sys.getsizeof` measures them, or a buffer's length), and given back when
let go; what cannot be taken back but can be done without (the cache, ignore rules) gives
way, or is skipped and counted, when the account has no room. Past it the call ends
`repository_too_large`, saying what it was holding and how much: no structure has a cap of
its own that could add up with the others past W5's 64 MiB. It also holds `Refusal`, the
one error every workspace check and bound raises (`confine` re-exports it).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from clankie.core.vocabulary import WorkspaceCode

CALL_SECONDS = 10.0  # W5: a tool call returns, with a result or `time_limit`, within this
W5_MEMORY = 64 * 1024 * 1024  # W5: what a call may hold beyond its result, all told
UNCOUNTED = 16 * 1024 * 1024  # what the account does not see: the interpreter's own growth
# (its arenas, the index file's bytes while parsed, transient copies); measured up to
# 10 MiB over the account's peak (issue 41's red team), so 16 MiB is kept for it
CALL_MEMORY = W5_MEMORY - UNCOUNTED  # what the account may count
SLOT = 8  # a list's, tuple's or set's pointer to an object it holds (64-bit CPython)


class Refusal(Exception):
    """A tool refused, with a SPEC W code and a short reason the model reads."""

    def __init__(self, code: WorkspaceCode, reason: str) -> None:
        super().__init__(f"{code}: {reason}")
        self.code = code
        self.reason = reason


def size_of(value: object) -> int:
    """What one object holds, as CPython measures it (`sys.getsizeof`), its slot in the
    container holding it included."""
    return sys.getsizeof(value) + SLOT


class Bounds:
    """The deadline and memory account of one tool call (or of one membership look-up)."""

    def __init__(self, seconds: float = CALL_SECONDS, memory: int | None = None) -> None:
        self.deadline = time.monotonic() + seconds
        self.seconds = seconds
        self.memory = CALL_MEMORY if memory is None else memory
        self.held = 0
        self.peak = 0

    # --- time ------------------------------------------------------------------------------

    def out_of_time(self) -> bool:
        return time.monotonic() > self.deadline

    def check_time(self) -> None:
        """Refuse `time_limit` once the call's time is up (W5)."""
        if time.monotonic() > self.deadline:
            raise Refusal(WorkspaceCode.TIME_LIMIT,
                          f"the tool call took longer than {self.seconds:g} s "
                          "and stopped; narrow it with a path")

    # --- memory ----------------------------------------------------------------------------

    def take(self, size: int, what: str) -> None:
        """Count `size` more bytes as held for `what`; `repository_too_large` when the
        account would pass its bound (nothing is counted then)."""
        if self.held + size > self.memory:
            raise Refusal(WorkspaceCode.REPOSITORY_TOO_LARGE,
                          f"{what} would make the call hold {self.held + size} bytes, more "
                          f"than the {self.memory} a tool call may hold; stopped")
        self.held += size
        self.peak = max(self.peak, self.held)

    def room(self, size: int) -> bool:
        """Whether `size` more bytes could be taken now."""
        return self.held + size <= self.memory

    def give(self, size: int) -> None:
        """Count `size` bytes taken before as let go."""
        self.held -= size

    @contextmanager
    def holding(self, size: int, what: str) -> Iterator[None]:
        """`size` bytes counted as held for the block."""
        self.take(size, what)
        try:
            yield
        finally:
            self.give(size)


class Held:
    """What one structure holds on the account, taken as it grows and given back whole
    when it is let go (`release`)."""

    def __init__(self, bounds: Bounds, what: str) -> None:
        self.bounds, self.what, self.size = bounds, what, 0

    def take(self, size: int) -> None:
        self.bounds.take(size, self.what)
        self.size += size

    def give(self, size: int) -> None:
        self.bounds.give(size)
        self.size -= size

    def release(self) -> None:
        self.bounds.give(self.size)
        self.size = 0
