"""Replies being written, in the service's memory (SPEC D2-D5, D9): never an event, never
stored but as a checkpoint.

Owns `LiveReplies`: for each conversation at most one live reply, as the run process last
published it (`publish`, from the runner's channel thread: the run process already spaces
its publishes by `stream_interval`, D3), read by `events_tail` with `live` (`read`: a delta
after the reader's offset, else a snapshot; counted in code points), and *settled*, gone
from memory, only by the commit that stores or explains it (`settled`, D5: called from a
transaction's `on_commit`). Its text is one string, the reply so far; a reader gets a
slice of it. A reply settled is remembered (a bounded set), so a publish that was on its
way when it was stored brings nothing back.

Checkpoints (D9): `checkpoints()` says which replies changed since they were last
checkpointed; the service's checkpointer hands them to the store's writer (never waiting
for it), and the job reads the reply as it stands when it runs on the writer, so a reply
stored meanwhile is never written back.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from clankie import dto
from clankie.core.model import iso

SETTLED_KEPT: Final = 4096  # reply IDs remembered as settled (publishes arrive late)
Woken = Callable[[str], None]  # told the conversation whose live reply was published


@dataclass(frozen=True, slots=True)
class Publish:
    """One publish of a run's live reply, as the run process sends it: `appended` follows
    the text it published before under the same `reply_id` (a new `reply_id` starts a new
    reply). Times are the run process's wall clock, in seconds."""

    conversation_id: str
    run_id: str
    reply_id: str
    attempt: int
    state: str
    appended: str
    calling: tuple[str, ...]
    requested_at: float  # when the try's request was made
    content_at: float | None  # when its last content came; None while waiting


@dataclass(slots=True)
class _Reply:
    run_id: str
    reply_id: str
    attempt: int
    state: str
    text: str
    calling: tuple[str, ...]
    requested_at: float
    content_at: float | None
    checkpointed: int = -1  # the `version` last checkpointed
    kept: bool = False  # read to be stored as it stands (D7, D8): no publish changes it
    version: int = 0  # publishes so far
    started_at: str = field(default="")


class LiveReplies:
    """The live replies of every conversation (module docstring)."""

    def __init__(self, woken: Woken) -> None:
        self._woken = woken
        self._lock = threading.Lock()
        self._replies: dict[str, _Reply] = {}  # by conversation
        self._settled: OrderedDict[str, None] = OrderedDict()

    def publish(self, p: Publish) -> None:
        with self._lock:
            if p.reply_id in self._settled:
                return
            reply = self._replies.get(p.conversation_id)
            if reply is not None and reply.kept and reply.run_id == p.run_id:
                return
            if reply is None or reply.reply_id != p.reply_id:
                reply = _Reply(p.run_id, p.reply_id, p.attempt, p.state, p.appended,
                               p.calling, p.requested_at, p.content_at,
                               started_at=iso(datetime.fromtimestamp(p.requested_at, UTC)))
                self._replies[p.conversation_id] = reply
            else:
                if p.appended:
                    reply.text += p.appended
                reply.state, reply.calling, reply.content_at = p.state, p.calling, p.content_at
            reply.version += 1
        self._woken(p.conversation_id)

    def settled(self, conversation_id: str, run_id: str, reply_id: str | None = None) -> None:
        """After the commit that stored or explained it (D5): the run's live reply (only
        `reply_id`, when given) leaves memory, and no late publish brings it back."""
        with self._lock:
            if reply_id is not None:
                self._remember(reply_id)
            reply = self._replies.get(conversation_id)
            if reply is None or reply.run_id != run_id or (
                    reply_id is not None and reply.reply_id != reply_id):
                return
            self._remember(reply.reply_id)
            del self._replies[conversation_id]
        self._woken(conversation_id)

    def _remember(self, reply_id: str) -> None:
        self._settled[reply_id] = None
        while len(self._settled) > SETTLED_KEPT:
            self._settled.popitem(last=False)

    def of_run(self, conversation_id: str, run_id: str) -> tuple[str, str] | None:
        """`(reply_id, text)` of the run's live reply as last published, if it has one."""
        return self._of_run(conversation_id, run_id, keep=False)

    def keep(self, conversation_id: str, run_id: str) -> tuple[str, str] | None:
        """`of_run`, read to be stored as it stands (D7, D8): from now on no publish of the
        run changes what readers see, so what they saw is what is kept, even when the run
        process publishes more before the commit settles the reply."""
        return self._of_run(conversation_id, run_id, keep=True)

    def _of_run(self, conversation_id: str, run_id: str,
                keep: bool) -> tuple[str, str] | None:
        with self._lock:
            reply = self._replies.get(conversation_id)
            if reply is None or reply.run_id != run_id:
                return None
            reply.kept = reply.kept or keep
            return reply.reply_id, reply.text

    def read(self, conversation_id: str, at: dto.LiveAt) -> dto.LiveReply | None:
        """The conversation's live reply for a reader that last got `at` (D4)."""
        with self._lock:
            reply = self._replies.get(conversation_id)
            if reply is None:
                return None
            text, length = reply.text, len(reply.text)
            run_id, reply_id, attempt, state = (reply.run_id, reply.reply_id, reply.attempt,
                                                reply.state)
            calling, since = list(reply.calling), reply.content_at or reply.requested_at
            started_at = reply.started_at
        offset = at.offset if at.reply_id == reply_id and at.offset <= length else 0
        now = time.time()
        return dto.LiveReply(
            type="reply_delta", conversation_id=conversation_id, run_id=run_id,
            reply_id=reply_id, attempt=attempt, state=state,
            offset=offset, text=text[offset:] if offset else text, length=length,
            calling=calling, idle_ms=max(0, int((now - since) * 1000)),
            started_at=started_at, at=iso(datetime.fromtimestamp(now, UTC)))

    def differs(self, conversation_id: str, at: dto.LiveAt) -> bool:
        """Whether the live reply is other than what the reader last got: another reply,
        or more text than its offset (D4: a long-poll then returns at once)."""
        with self._lock:
            reply = self._replies.get(conversation_id)
            return reply is not None and (reply.reply_id != at.reply_id
                                          or len(reply.text) > at.offset)

    def checkpoints(self) -> list[tuple[str, str]]:
        """`(conversation_id, run_id)` of each reply published since its last checkpoint."""
        with self._lock:
            return [(conversation_id, reply.run_id)
                    for conversation_id, reply in self._replies.items()
                    if reply.version != reply.checkpointed]

    def to_checkpoint(self, conversation_id: str, run_id: str) -> tuple[str, str] | None:
        """`(reply_id, text)` to checkpoint now (on the writer), marked as checkpointed."""
        with self._lock:
            reply = self._replies.get(conversation_id)
            if reply is None or reply.run_id != run_id:
                return None
            reply.checkpointed = reply.version
            return reply.reply_id, reply.text
