"""A conversation's questions as the service keeps them, in memory, for the TUI's tests.

Owns a small model of SPEC sections 4-8 that a test drives step by step: questions asked,
answered or cancelled from another surface, expired, a reset, a restart (every call fails
while the service is down; at start-up the pending question is cancelled, reason
`restart`; while it is down, retention may drop every event: `trimmed`). It answers the
app's calls as `clankie.client.AsyncClient` would (results, `ApiError` problems,
`ServiceUnreachable`), records every call in `calls`, and its long polls wait until
something happens. It runs on the app's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from clankie.client import ApiError, ServiceUnreachable

C = "3c1e9a7b-8d2f-4e6a-9b0c-1d2e3f4a5b6c"
START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
TTL = timedelta(hours=24)
WORKSPACE = "/home/owner/src/project"
MODEL = {"provider": "openai", "model": "gpt-4o-mini", "endpoint_host": "api.openai.com"}


def stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Clock:
    """The time the fake service and the app both read; moved by the test."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


class FakeService:
    """`asker`: an agent conversation's (SPEC P3): its questions carry it, its answers
    start no run (the fake starts none anyway), and `conversation_get` says who asks."""

    def __init__(self, clock: Clock | None = None, conversation_id: str = C,
                 asker: dict[str, Any] | None = None) -> None:
        self.clock = clock or Clock()
        self.c = conversation_id
        self.asker = asker
        self._ids = itertools.count(1)
        self.incarnation = self._id()
        self.revision = 1
        self.questions: dict[str, dict[str, Any]] = {}  # request_id -> question, asked order
        self.events: list[dict[str, Any]] = []
        self.oldest = 1  # the seq of the oldest event kept (V1 retention)
        self.up = True
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._moved: asyncio.Event | None = None

    # ------------------------------------------------------------------- the model

    def _id(self) -> str:
        n = next(self._ids)
        return f"{n:08x}-0000-4000-8000-{n:012x}"

    @property
    def pending(self) -> dict[str, Any] | None:
        return next((q for q in self.questions.values() if q["status"] == "pending"), None)

    @property
    def latest(self) -> str | None:
        """The request ID of the question asked last (pending or ended)."""
        return next(reversed(self.questions), None)

    def _event(self, kind: str, /, **fields: Any) -> None:
        self.events.append({"type": kind, "seq": len(self.events) + 1,
                            "conversation_id": self.c, **fields,
                            "at": stamp(self.clock())})
        self._wake()

    def _wake(self) -> None:
        if self._moved is not None:
            self._moved.set()
            self._moved = None

    def _end(self, q: dict[str, Any], outcome: str, reason: str | None,
             answer: dict[str, Any] | None = None) -> dict[str, Any]:
        self.revision += 1
        q["status"] = outcome
        # Clankie's accepted answer queues its continuation (A9); an agent's starts none (P3).
        run = self._id() if outcome == "answered" and not q.get("asker") else None
        q["receipt"] = {"receipt_id": self._id(), "request_id": q["request_id"],
                        "outcome": outcome, "reason": reason, "answer": answer,
                        "answered_by": None, "run_id": run,
                        "continuation": "queued" if run else None,
                        "continuation_error": None, "resolved_at": stamp(self.clock()),
                        "revision": self.revision}
        self._event("input_resolved", request_id=q["request_id"], outcome=outcome)
        return q["receipt"]

    def ask(self, prompt: str = "Tabs or spaces?") -> None:
        """Clankie asks (Q); a question already pending stays the one pending."""
        if self.pending is not None:
            return
        self.revision += 1
        rid = self._id()
        self.questions[rid] = {
            "request_id": rid, "kind": "choice", "prompt": prompt,
            "options": [{"option_id": self._id(), "label": "tabs", "description": ""},
                        {"option_id": self._id(), "label": "spaces", "description": ""}],
            "allow_text": False, "status": "pending", "incarnation": self.incarnation,
            "asked_at": stamp(self.clock()), "expires_at": stamp(self.clock() + TTL),
            "receipt": None, "asker": self.asker}
        self._event("input_requested", request_id=rid, prompt=prompt,
                    choices=["tabs", "spaces"])

    def say(self, text: str = "I looked at the README.") -> None:
        """Clankie (or the owner elsewhere) says something: the revision moves (SPEC
        section 2: every committed change), the question stays pending."""
        self.revision += 1
        self._event("message", message_id=str(uuid.uuid4()), author="clankie", text=text)

    def answer_elsewhere(self, n: int = 1) -> None:
        if (q := self.pending) is not None:
            self._end(q, "answered", None, {"option_id": q["options"][n - 1]["option_id"]})

    def cancel_elsewhere(self) -> None:
        if (q := self.pending) is not None:
            self._end(q, "cancelled", "explicit")

    def revoke_asker(self) -> None:
        """The owner revokes the agent that asks here (issue 42): its question ends."""
        if (q := self.pending) is not None:
            self._end(q, "invalidated", "asker_revoked")

    def expire(self) -> None:
        """Time passes beyond the pending question's expiry and another reader sees it
        (S5: expiry is committed on use)."""
        if (q := self.pending) is not None:
            self.clock.now = datetime.fromisoformat(q["expires_at"].replace("Z", "+00:00")) \
                + timedelta(seconds=1)
            self._expire_on_use()

    def _expire_on_use(self) -> None:
        q = self.pending
        if q is not None and stamp(self.clock()) >= q["expires_at"]:
            self._end(q, "expired", "expired")

    def reset(self) -> None:
        if (q := self.pending) is not None:
            self._end(q, "invalidated", "reset")
        self.incarnation = self._id()
        self.revision += 1
        self._event("conversation_reset")

    def stop(self) -> None:
        """The service goes away: calls in flight and new ones fail."""
        self.up = False
        self._wake()

    def trim(self) -> None:
        """Retention drops every event so far (V1): a follower behind gets `trimmed`."""
        self.oldest = len(self.events) + 1

    def start(self, orphaned: str | None = None) -> None:
        """The service is back; at start-up it cancels the pending question (E) and fails
        the run `orphaned` (R3: a continuation that was running)."""
        if (q := self.pending) is not None:
            self._end(q, "cancelled", "restart")
        if orphaned is not None:
            self.revision += 1
            self._event("run_status", run_id=orphaned, status="failed",
                        error="orphaned_by_restart", kind="continuation")
        self.up = True

    def snapshot(self, request_id: str | None = None) -> dict[str, Any]:
        """What `input_get` says now (S1), without committing anything."""
        request = None
        if request_id is not None:
            if request_id not in self.questions:
                raise ApiError({"code": "unknown_request", "status": 404,
                                "detail": "unknown request"})
            request = dict(self.questions[request_id])
        pending = self.pending
        return {"conversation_id": self.c, "incarnation": self.incarnation,
                "revision": self.revision, "pending": dict(pending) if pending else None,
                "request": request}

    # ------------------------------------------------------------------- the API

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        payload = payload or {}
        self.calls.append((op, payload))
        self._reachable()
        if op == "events_tail":
            return await self._tail(payload)
        if op == "input_get":
            self._expire_on_use()
            return self.snapshot(payload.get("request_id"))
        if op in ("input_answer", "input_cancel"):
            return self._resolve(op, payload)
        if op == "conversation_send":  # an owner's message; no run starts in the fake
            self.revision += 1
            message = str(uuid.uuid4())
            self._event("message", message_id=message, author="owner", text=payload["text"])
            return {"message_id": message, "run_id": None}
        if op == "service_info":
            return {"version": "0.0.0", "started_at": stamp(START), "model": MODEL,
                    "settings": {}}
        if op == "conversation_get":
            return {"conversation_id": self.c, "kind": "agent" if self.asker else "owner",
                    "workspace": {"path": WORKSPACE}, "incarnation": self.incarnation,
                    "revision": self.revision, "native_owner": None,
                    "created_at": stamp(START), "unfinished_runs": [], "asker": self.asker}
        raise AssertionError(f"the fake service has no {op}")

    async def aclose(self) -> None:
        pass

    def _reachable(self) -> None:
        if not self.up:
            raise ServiceUnreachable("the service is down (fake)", "start it")

    async def _tail(self, payload: dict[str, Any]) -> dict[str, Any]:
        after = payload.get("after", 0)
        trimmed = after < self.oldest - 1
        after = max(after, self.oldest - 1)
        if payload.get("wait_ms", 0) and len(self.events) <= after and not trimmed:
            if self._moved is None:
                self._moved = asyncio.Event()
            moved = self._moved
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(moved.wait(), payload["wait_ms"] / 1000)
            self._reachable()
        page = self.events[after:after + payload.get("limit", 100)]
        return {"events": page, "next_after": page[-1]["seq"] if page else after,
                "oldest_seq": self.oldest, "trimmed": trimmed}

    def _resolve(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        """A5, A6, A12, in their order, for the answers and cancels the TUI sends."""
        self._expire_on_use()
        q = self.questions.get(payload["request_id"])
        if q is None:
            raise ApiError({"code": "unknown_request", "status": 404, "detail": "unknown"})
        if q["status"] != "pending":
            code = "already_answered" if q["status"] == "answered" else "request_closed"
            raise ApiError({"code": code, "status": 409, "detail": code,
                            "receipt": q["receipt"]})
        if payload["incarnation"] != self.incarnation:
            raise ApiError({"code": "stale_incarnation", "status": 409, "detail": "stale"})
        if payload["revision"] != self.revision:
            raise ApiError({"code": "stale_revision", "status": 409, "detail": "stale"})
        if op == "input_cancel":
            return {"receipt": self._end(q, "cancelled", "explicit"), "duplicate": False}
        return {"receipt": self._end(q, "answered", None, {"option_id": payload["option_id"]}),
                "duplicate": False}
