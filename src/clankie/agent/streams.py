"""Model calls made as streams, or not (SPEC section 14: D1, D11, D12, D14, D18), for both
SDK models.

Owns what the two SDK models share in a call: `model_call` makes it as a stream (R6's tries
through `retry.call`, D11's bounds through `stop.streamed`) or whole, as `model_stream`
says (D18): `off` calls whole and shows the reply at its end (`shown_whole`); `auto`
streams and, when the endpoint refuses a streamed call before any content (HTTP 400, 404,
405, 415, 422, 501) or answers it with a body that is not an event stream, makes the call
once more whole (not an R6 try; R6 applies to it as written) and, if that succeeds, every
later call of the model (one per service process) whole, logging so once; `on` fails the
run on such a refusal, naming the setting. `opened` makes the streamed request through the
SDK and says whether it was refused; `numbered` numbers the stream's events from 1;
`malformed` is D12's error, logged once by provider, kind, place and size (D14: never a
reply's text, a tool's arguments or a chunk's bytes). Each model reads its own events
(`openai_chat.py`, `anthropic_messages.py`) and acts on nothing before the end marker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from . import retry, stop
from .transcript import ModelError, Text, ToolCall, Waits, shown_whole

log = logging.getLogger(__name__)

Blocks = list[Text | ToolCall]
T = TypeVar("T")
E = TypeVar("E")

REFUSING = frozenset({400, 404, 405, 415, 422, 501})  # a refusal of streaming (D18)
EVENT_STREAM = "text/event-stream"


class Streams:
    """Whether one model's calls still stream: `auto` stops for good (this process) at the
    first refusal a whole call then gets past (D18)."""

    def __init__(self) -> None:
        self.refused = False
        self._lock = threading.Lock()

    def refuse(self, provider: str, what: str) -> None:
        with self._lock:
            if self.refused:
                return
            self.refused = True
        log.warning("%s: the model endpoint does not stream (%s); every later call of this "
                    "process is made without streaming (model_stream = auto)", provider, what)


def clean(piece: str) -> str:
    """A piece of text made valid as `reply_text` makes a reply's: a lone surrogate is `?`."""
    return piece.encode("utf-8", "replace").decode("utf-8")


def malformed(provider: str, kind: str, position: int, size: int) -> retry.Malformed:
    """D12's error for a bad chunk, logged once (D14: its kind, place and size, never it)."""
    log.warning("%s: a malformed model stream: %s at chunk %d (%d bytes)", provider, kind,
                position, size)
    return retry.Malformed(kind, position)


def numbered(provider: str, events: Iterable[E]) -> Iterator[tuple[int, E]]:
    """The stream's events with their numbers, from 1; one that is not UTF-8, or that
    takes the reply past 16 MiB, is D12's (named by the chunk it was read in)."""
    iterator = iter(events)
    position = 0
    while True:
        try:
            event = next(iterator)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise malformed(provider, "a chunk that is not UTF-8", position + 1,
                            len(exc.object)) from None
        except Exception as exc:
            large = stop.too_large(exc)
            if large is None:
                raise
            past = str(large)
        else:
            position += 1
            yield position, event
            continue
        # raised outside the handler, so that no context behind it is classified instead
        raise malformed(provider, past, position + 1, stop.MAX_REPLY_BYTES)


def opened(sdk: retry.Sdk, create: Callable[[], T]) -> T:
    """The SDK's stream of a call (`create()`), once the endpoint answered it as one; a
    refusal of streaming (D18) raises `retry.StreamRefused` in R6's words."""
    try:
        stream = create()
    except sdk.module.APIStatusError as exc:
        if exc.status_code in REFUSING:
            words = retry.classify(exc, sdk, retry.Policy()).what
            raise retry.StreamRefused(words) from exc
        raise
    response: Any = getattr(stream, "response", None)
    kind = str(response.headers.get("content-type", "")) if response is not None else ""
    if kind.split(";")[0].strip().lower() != EVENT_STREAM:
        close = getattr(stream, "close", None)
        if close is not None:
            close()
        shown = "".join(c for c in kind if c.isprintable())[:60] or "none"
        raise retry.StreamRefused(f"it answered a streamed call with a body that is not an "
                                  f"event stream (content type {shown})")
    return stream


def model_call(sdk: retry.Sdk, policy: retry.Policy, waits: Waits, streams: Streams,
               streamed: Callable[[], Blocks], whole: Callable[[], T],
               read: Callable[[T], Blocks]) -> Blocks:
    """One model call's reply: `streamed()` tried as R6 says, or `whole()`'s response
    `read`, as `model_stream` says (see the module's docstring). `streamed` shows the
    reply through `waits.live` as it comes; a whole reply is shown at its end."""
    live = waits.live
    if policy.stream != "off" and not streams.refused:
        try:
            return retry.call(sdk, policy, waits, streamed, streamed=True)
        except retry.StreamRefused as refused:
            if policy.stream == "on":
                raise ModelError(f"{sdk.name}: {refused.what}; the call streamed, as "
                                 "model_stream = \"on\" says (\"auto\" would make it once more "
                                 "without streaming, \"off\" never streams)") from None
            blocks = read(retry.call(sdk, policy, waits, whole))
            streams.refuse(sdk.name, refused.what)
    else:
        live.streaming(False)
        blocks = read(retry.call(sdk, policy, waits, whole))
    live.streaming(False)
    shown_whole(live, blocks)
    return blocks


def content() -> None:
    """Content of the call came (D11: it moves the stall timeout)."""
    stop.content()
