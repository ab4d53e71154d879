"""Waiting on a condition in tests: the one poll-until helper, `eventually`, and its async twin.

Both call `probe` until `until(value)` holds (by default: until the value is truthy) and return
that value. Past the deadline they fail with an `AssertionError` naming what they waited for
and the last value seen, never by falling through. Every loop is bounded by the deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def _timed_out(what: str, timeout: float, last: object) -> AssertionError:
    shown = repr(last)
    if len(shown) > 5_000:
        shown = shown[:5_000] + "...(cut)"
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}; last seen: {shown}")


def eventually(probe: Callable[[], T], what: str, *, timeout: float = 10.0,
               every: float = 0.01, until: Callable[[T], object] = bool) -> T:
    """`probe()` once `until` holds for it, polled every `every` s for at most `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, value)
        time.sleep(every)


async def eventually_async(probe: Callable[[], T], what: str, *, timeout: float = 20.0,
                           every: float = 0.02, until: Callable[[T], object] = bool,
                           pause: Callable[[float], Awaitable[object]] = asyncio.sleep) -> T:
    """`eventually` inside an event loop: waits with `await pause(every)` (a Textual
    `pilot.pause`, so the app keeps drawing), never blocking the loop."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, value)
        await pause(every)
