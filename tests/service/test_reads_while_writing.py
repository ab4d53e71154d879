"""Issue 39: "reads do not wait behind writes". Every op that does not write is served on its
caller's thread through a read-only connection, so it answers while the store's writer is
busy (held here by a job of the test's); and every op the dispatcher table marks as a
write runs on that writer. Each table row is checked, so an op marked wrongly either way
fails here."""

from __future__ import annotations

import threading
from typing import Any

from ..world import World

# The ops that only read, with an input that reads something real (filled in below).
READS = ("conversation_get", "conversation_list", "events_tail", "run_get", "input_get",
         "service_info", "credential_list", "whoami")


def payloads(world: World) -> dict[str, dict[str, Any]]:
    c = world.conversation()
    snap = world.ask(c)
    run_id = world.events(c)[1]["run_id"]
    return {"conversation_get": {"conversation_id": c}, "conversation_list": {},
            "events_tail": {"conversation_id": c}, "run_get": {"run_id": run_id},
            "input_get": {"conversation_id": c,
                          "request_id": snap["pending"]["request_id"]},
            "service_info": {}, "credential_list": {}, "whoami": {}}


def test_issue39_every_read_op_answers_while_the_writer_is_busy(world: World):
    given = payloads(world)
    release = threading.Event()
    inside = threading.Event()

    def hold() -> None:
        inside.set()
        release.wait(30)

    world.store.submit(hold, lambda *_: None)
    assert inside.wait(10)
    try:
        for op in READS:
            answered: list[Any] = []
            reader = threading.Thread(target=lambda op=op, into=answered: into.append(
                world.call(op, given[op])))
            reader.start()
            reader.join(10)
            assert answered, f"{op} waited behind the writer"
    finally:
        release.set()


def test_issue39_the_table_marks_exactly_the_ops_that_write(world: World):
    """An op marked as a write runs on the writer (its transaction is opened there); one
    not marked never opens a write transaction on its caller's thread (it would fail)."""
    table = world.service._table
    assert {name for name, served in table.items() if not served.writes} == {
        *READS, "agent_wait", "device_pair_finish"}  # the last two hand their writes over
    written: list[str] = []
    real = world.store.write

    def write() -> Any:
        written.append(threading.current_thread().name)
        return real()

    world.store.write = write  # type: ignore[method-assign]
    try:
        world.conversation()
    finally:
        world.store.write = real  # type: ignore[method-assign]
    assert written == ["clankie-store"]
