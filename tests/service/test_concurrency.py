"""Many answers to one request at once: exactly one is accepted, with exactly one run (A4, A5, A9).

Each thread has its own `Store` (its own SQLite connection) on the same file, so what
serialises them is SQLite's `BEGIN IMMEDIATE`, as between separate processes.
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

from clankie.core.errors import ClankieError
from clankie.service import Service
from clankie.store import Store
from tests.world import World

THREADS = 16
REQUESTS = 12


def test_sixteen_concurrent_answers_accept_exactly_one(tmp_path: Path):
    world = World.create(tmp_path)
    services = [Service(Store(world.store.path), world.service.settings, clock=world.clock)
                for _ in range(THREADS)]
    try:
        c = world.conversation()
        for _ in range(REQUESTS):
            snap = world.ask(c)
            q = snap["pending"]
            barrier = threading.Barrier(THREADS)
            outcomes: list[tuple[int, str, dict]] = [None] * THREADS  # type: ignore[list-item]

            def answer(i: int, q=q, snap=snap, barrier=barrier, outcomes=outcomes) -> None:
                option = i % 2  # half pick option 0, half option 1
                payload = {"conversation_id": c, "request_id": q["request_id"],
                           "incarnation": snap["incarnation"], "revision": snap["revision"],
                           "option_id": q["options"][option]["option_id"]}
                barrier.wait(timeout=30)
                try:
                    reply = services[i].call("input_answer", world.operator, payload)
                    outcomes[i] = (option, "duplicate" if reply.duplicate else "accepted",
                                   reply.receipt.model_dump())
                except ClankieError as err:
                    outcomes[i] = (option, err.code, err.extra.get("receipt", {}))

            threads = [threading.Thread(target=answer, args=(i,)) for i in range(THREADS)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            assert not any(t.is_alive() for t in threads)

            kinds = Counter(kind for _, kind, _ in outcomes)
            assert kinds["accepted"] == 1, outcomes
            (winner,) = [o for o in outcomes if o[1] == "accepted"]
            receipt_id, run_id = winner[2]["receipt_id"], winner[2]["run_id"]
            for option, kind, receipt in outcomes:
                assert receipt["receipt_id"] == receipt_id
                assert receipt["run_id"] == run_id
                if option == winner[0]:
                    assert kind in ("accepted", "duplicate")
                else:
                    assert kind == "already_answered"
            assert kinds["duplicate"] == THREADS // 2 - 1
            assert kinds["already_answered"] == THREADS // 2
            with world.db() as db:
                assert db.execute("SELECT count(*) FROM runs WHERE receipt_id = ?",
                                  (receipt_id,)).fetchone() == (1,)
    finally:
        for s in services:
            s.store.close()
        world.close()
