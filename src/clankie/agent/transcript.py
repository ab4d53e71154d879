"""Provider-neutral shapes of a conversation with a model, and the `Model` interface.

Owns `Text`, `ToolCall`, `ToolResult`, `Turn`, the `Model` protocol every provider
implements, what a run hands it (`Waits`: how the run waits between tries, `retry.py`, and
`Live`, where the reply is shown while it is written, SPEC D2),
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


class Live(Protocol):
    """Where one model call shows its reply while it is written (SPEC D1-D3): called by a
    model on the thread that reads the call, and never blocking it (D13). A try of the
    call starts with `begin`; what arrives then is `text` (already made valid text, as
    `reply_text` makes it: a lone surrogate becomes `?`), `calling` (a tool call began,
    by its name as sent) or `content` (anything else a model sends that counts as content
    for the timeouts, thinking say: never shown); `end` when the call's end marker came.
    A model that does not stream calls the same, all at once, when its call returns."""

    @property
    def reply_id(self) -> str | None:
        """The current try's reply: the `message_id` its text is stored under."""
        ...

    def begin(self, attempt: int = 1) -> None:
        """A try of the call starts: R6's try number `attempt`, from 1 for each call."""
        ...

    def text(self, piece: str, block: int) -> None:
        """`piece` follows in text block number `block` (0, 1, ... in the reply's order of
        blocks); a later block's text comes after one blank line."""
        ...

    def calling(self, name: str) -> None: ...

    def content(self) -> None: ...

    def end(self) -> None: ...

    def published(self) -> int:
        """Characters of the current try that readers may have seen: what a retry
        withdraws (D8)."""
        ...

    def streaming(self, streams: bool) -> None:
        """Whether this service's calls stream, once known (D18)."""
        ...


class _NoLive:
    """Shows nothing: a model called outside a run (a test, doctor's probe)."""

    reply_id = None

    def begin(self, attempt: int = 1) -> None:
        pass

    def text(self, piece: str, block: int) -> None:
        pass

    def calling(self, name: str) -> None:
        pass

    def content(self) -> None:
        pass

    def end(self) -> None:
        pass

    def published(self) -> int:
        return 0

    def streaming(self, streams: bool) -> None:
        pass


NO_LIVE: Live = _NoLive()


def shown_whole(live: Live, blocks: list[Text | ToolCall]) -> None:
    """A reply that did not stream, shown at its end (D18 `off`): its text blocks, the
    calls it makes, then its end."""
    number = 0
    for block in blocks:
        if isinstance(block, Text):
            live.text(block.text, number)
            number += 1
        else:
            live.calling(block.name)
    live.end()


def reply_words(blocks: list[Text | ToolCall]) -> str:
    """A reply's text as it is stored and was shown: its text blocks that are not empty,
    joined by one blank line (D2)."""
    return "\n\n".join(b.text for b in blocks if isinstance(b, Text) and b.text)


@dataclass(frozen=True, slots=True)
class Waits:
    """How one run waits between tries: `on_wait(summary, retry_at)` is told first (the
    executor appends a `run_activity` event), then `sleep(seconds)` waits. A `sleep` that
    returns early and raises ends the call with that exception, untouched (a stopped run);
    `clock` is only for `retry_at` and for a `Retry-After` given as a date."""

    on_wait: OnWait = _no_report
    sleep: Sleep = time.sleep
    clock: Callable[[], datetime] = utc_now
    live: Live = NO_LIVE  # where the run's reply is shown while it is written (D2)


NO_WAITS = Waits()


class Model(Protocol):
    name: str

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits = ...) -> list[Text | ToolCall]:
        """One model call: what the assistant says and which tools it calls, in order.
        `waits` says how this run waits between tries of a call that failed transiently
        (`retry.py`, SPEC R6); a model that makes no network call ignores it."""
        ...
