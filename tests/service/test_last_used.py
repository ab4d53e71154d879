"""Issue 32, "every request now writes `credentials.last_used_at`": a credential's last use
costs a read nothing on the store (it is noted in memory, and `credential_list` shows the
later of the two), and a write stores it in the write's own transaction, one statement
more, never a transaction of its own (SPEC section 10, `credential_list`'s `last_used_at`).
Statements are counted with SQLite's trace callback on every connection of the store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from clankie.core.model import iso
from tests.world import World


@contextmanager
def traced(world: World) -> Iterator[tuple[list[str], list[str]]]:
    """The statements the store's writer and its readers run meanwhile."""
    written: list[str] = []
    read: list[str] = []
    store = world.store
    store._writer.set_trace_callback(written.append)
    readers = list(store._readers._all)
    for conn in readers:
        conn.set_trace_callback(read.append)
    try:
        yield written, read
    finally:
        store._writer.set_trace_callback(None)
        for conn in readers:
            conn.set_trace_callback(None)


def me(world: World) -> dict[str, object]:
    [mine] = [c for c in world.call("credential_list")["credentials"]
              if c["kind"] == "operator"]
    return mine


def test_issue32_a_read_op_never_writes_last_used_at_and_shows_it_from_memory(world: World):
    world.call("conversation_list")  # a reader connection exists before the count
    stored = world.dump()
    operations, commits = world.store.operations, world.store.commits
    world.clock.advance(120)
    with traced(world) as (written, read):
        world.call("conversation_list")
        world.call("service_info")
    assert written == []  # the writer ran nothing at all
    assert read and not any(s.upper().startswith(("UPDATE", "INSERT", "DELETE")) for s in read)
    assert (world.store.operations, world.store.commits) == (operations, commits)
    assert world.dump() == stored
    assert me(world)["last_used_at"] == iso(world.clock())  # noted in memory, and shown


def test_issue32_a_write_stores_last_used_at_in_its_own_transaction(world: World):
    world.clock.advance(60)
    with traced(world) as (written, _):
        world.call("conversation_create", {"kind": "room"})
    updates = [i for i, s in enumerate(written)
               if s.startswith("UPDATE credentials SET last_used_at")]
    inserts = [i for i, s in enumerate(written) if s.startswith("INSERT INTO conversations")]
    begins = [i for i, s in enumerate(written) if s.startswith("BEGIN")]
    commits = [i for i, s in enumerate(written) if s == "COMMIT"]
    assert len(updates) == 1 and len(inserts) == 1  # one statement more, once
    assert len(begins) == 1 and len(commits) == 1  # one transaction for both
    assert begins[0] < updates[0] < commits[0] and begins[0] < inserts[0] < commits[0]
    with world.db() as conn:
        [(used,)] = conn.execute("SELECT last_used_at FROM credentials WHERE kind = "
                                 "'operator'").fetchall()
    assert used == me(world)["last_used_at"] == iso(world.clock())
