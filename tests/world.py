"""A test world: a service on a real SQLite file, a movable clock, a workspace, credentials.

Questions are reached the real way: an owner message queues a turn run, the run is claimed
(started) and calls the `ask_question` tool.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from clankie.core.model import RunStatus
from clankie.service import Service
from clankie.service.runs import RunHooks
from clankie.settings import Settings
from clankie.store import Store

T0 = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


CHOICE = {"kind": "choice", "prompt": "Which test runner do you prefer?",
          "options": [{"label": "pytest", "description": "plain asserts"},
                      {"label": "unittest"}, {"label": "nose"}]}
TEXT = {"kind": "text", "prompt": "What should the module be called?"}


@dataclass
class World:
    root: Path
    store: Store
    service: Service
    clock: Clock
    operator: str
    workspace: Path
    executed: list[str] = field(default_factory=list)

    @classmethod
    def create(cls, root: Path, settings: Settings | None = None) -> World:
        clock = Clock()
        # The store in a home folder of its own, as `clankie init` makes it: the service's
        # home (its store's folder) is denied to the tools in every workspace (SPEC W4)
        (root / "home").mkdir()
        store = Store(root / "home" / "clankie.db")
        service = Service(store, settings or Settings(), clock=clock)
        token = service.devices.init_owner()
        assert token is not None
        workspace = root / "workspace"
        workspace.mkdir()
        return cls(root, store, service, clock, token, workspace)

    def close(self) -> None:
        self.store.close()

    def executing(self, executor: Callable[[RunHooks], Any]) -> Any:
        """The world's service made again with a run executor, built from its run side as
        `clankie serve` builds its own (given at construction, never set later); returns
        it."""
        self.service = Service(self.store, self.service.settings, clock=self.clock,
                               executor=executor)
        return self.service.runs.executor

    def call(self, op: str, payload: dict[str, Any] | None = None,
             token: str | None = None) -> dict[str, Any]:
        result = self.service.call(op, token or self.operator, payload or {})
        return result.model_dump(mode="json")

    def conversation(self, kind: str = "owner") -> str:
        payload: dict[str, Any] = {"kind": kind}
        if kind == "owner":
            payload["workspace"] = str(self.workspace)
        return str(self.call("conversation_create", payload)["conversation_id"])

    def running_turn(self, conversation_id: str, text: str = "hello") -> str:
        """Send a message and start its turn run; earlier runs run (and succeed) first (R4)."""
        sent = self.call("conversation_send", {"conversation_id": conversation_id, "text": text})
        assert sent["run_id"] is not None
        if self.call("run_get", {"run_id": sent["run_id"]})["status"] == "running":
            return str(sent["run_id"])  # started by the send (a service with an executor)
        for _ in range(100):
            run = self.service.runs.claim_next_run(conversation_id)
            assert run is not None, "the turn run could not start"
            if run.run_id == sent["run_id"]:
                return str(run.run_id)
            self.service.runs.finish_run(run.run_id, RunStatus.SUCCEEDED)
        raise AssertionError("too many runs queued before the turn")

    def ask(self, conversation_id: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Reach a pending question the real way; return the snapshot's pending question."""
        run_id = self.running_turn(conversation_id)
        result = self.service.runs.ask_question(run_id, args or CHOICE)
        assert result.status == "pending", result
        self.service.runs.finish_run(run_id, RunStatus.SUCCEEDED)
        return self.snapshot(conversation_id)

    def snapshot(self, conversation_id: str, request_id: str | None = None) -> dict[str, Any]:
        payload: dict[str, Any] = {"conversation_id": conversation_id}
        if request_id:
            payload["request_id"] = request_id
        return self.call("input_get", payload)

    def answer(self, conversation_id: str, snap: dict[str, Any], *, option: int | None = None,
               text: str | None = None, token: str | None = None,
               request_id: str | None = None) -> dict[str, Any]:
        q = snap["pending"] or snap["request"]
        payload: dict[str, Any] = {"conversation_id": conversation_id,
                                   "request_id": request_id or q["request_id"],
                                   "incarnation": snap["incarnation"],
                                   "revision": snap["revision"]}
        if option is not None:
            payload["option_id"] = q["options"][option]["option_id"]
        if text is not None:
            payload["text"] = text
        return self.call("input_answer", payload, token)

    def cancel(self, conversation_id: str, snap: dict[str, Any],
               token: str | None = None) -> dict[str, Any]:
        q = snap["pending"] or snap["request"]
        return self.call("input_cancel", {"conversation_id": conversation_id,
                                          "request_id": q["request_id"],
                                          "incarnation": snap["incarnation"],
                                          "revision": snap["revision"]}, token)

    def events(self, conversation_id: str, after: int = 0) -> list[dict[str, Any]]:
        page = self.call("events_tail", {"conversation_id": conversation_id, "after": after,
                                         "limit": 500})
        return list(page["events"])

    def dump(self) -> list[tuple[str, list[Any]]]:
        """Every row of every table, to prove that something changed nothing."""
        conn = sqlite3.connect(self.store.path)
        try:
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
            return [(t, conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall())
                    for t in tables]
        finally:
            conn.close()

    @contextmanager
    def db(self) -> Iterator[sqlite3.Connection]:
        """A raw connection for checks, closed afterwards (sqlite3's own `with` only commits)."""
        conn = sqlite3.connect(self.store.path)
        try:
            yield conn
        finally:
            conn.close()


def event_types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True)
