"""Provider-neutral shapes of a conversation with a model, and the `Model` interface.

Owns `Text`, `ToolCall`, `ToolResult`, `Turn`, the `Model` protocol every provider
implements, what a run hands it (`Waits`: how the run waits between tries, `retry.py`),
and `ModelError`, the one failure a provider may raise (it fails the run).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

OnWait = Callable[[str, datetime], None]
Sleep = Callable[[float], None]


@dataclass(frozen=True, slots=True)
class Text:
    text: str


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str  # JSON text, exactly as the model sent it


@dataclass(frozen=True, slots=True)
class ToolResult:
    call_id: str
    content: str  # JSON text


Block = Text | ToolCall | ToolResult


@dataclass(frozen=True, slots=True)
class Turn:
    role: Literal["user", "assistant"]
    blocks: tuple[Block, ...]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, object]  # JSON Schema


class ModelError(Exception):
    """The model could not be asked or answered unusably; the run fails with this text."""


def unusable(provider: str, what: str) -> ModelError:
    return ModelError(f"{provider}: unusable reply: {what}")


def reply_text(provider: str, value: Any, what: str) -> str:
    """A field of a model's reply that must be text; an SDK builds its reply objects without
    checking them, so an endpoint can send a number, a list or an object there."""
    if not isinstance(value, str):
        raise unusable(provider, f"{what} is {type(value).__name__}, not text")
    return value.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate becomes ?


def short_error(exc: Exception) -> str:
    """The first line of an SDK error, bounded: enough to read on a run, never a dump."""
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def _no_report(summary: str, retry_at: datetime) -> None:
    pass


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Waits:
    """How one run waits between tries: `on_wait(summary, retry_at)` is told first (the
    executor appends a `run_activity` event), then `sleep(seconds)` waits. A `sleep` that
    returns early and raises ends the call with that exception, untouched (a stopped run);
    `clock` is only for `retry_at` and for a `Retry-After` given as a date."""

    on_wait: OnWait = _no_report
    sleep: Sleep = time.sleep
    clock: Callable[[], datetime] = utc_now


NO_WAITS = Waits()


class Model(Protocol):
    name: str

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits = ...) -> list[Text | ToolCall]:
        """One model call: what the assistant says and which tools it calls, in order.
        `waits` says how this run waits between tries of a call that failed transiently
        (`retry.py`, SPEC R6); a model that makes no network call ignores it."""
        ...
