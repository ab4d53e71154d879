"""The one per-conversation serial queue (issue 20) that the run executor (R4) and the
notification hook share: one conversation's items one at a time and in order, conversations
in parallel, a bounded backlog that drops the oldest, and a drainer no item can stop."""

from __future__ import annotations

import threading
from collections.abc import Callable

from clankie.service.serial import SerialQueues
from tests.polling import eventually


def thread(job: Callable[[], None]) -> None:
    threading.Thread(target=job, daemon=True).start()


def test_r4_one_conversation_s_items_are_handled_one_at_a_time_in_order():
    gate = threading.Event()
    handled: list[tuple[str, int]] = []
    at_once: list[int] = []
    busy = [0]
    lock = threading.Lock()

    def handle(key: str, item: int) -> None:
        with lock:
            busy[0] += 1
            at_once.append(busy[0])
        gate.wait(10)
        with lock:
            busy[0] -= 1
            handled.append((key, item))

    queues: SerialQueues[int] = SerialQueues(handle, thread)
    for i in range(5):
        queues.submit("c", i)
    gate.set()
    eventually(lambda: len(handled), "five items handled", until=lambda n: n == 5)
    assert handled == [("c", i) for i in range(5)]
    assert max(at_once) == 1
    eventually(queues.draining, "the drainer to finish", until=lambda keys: keys == set())


def test_conversations_are_drained_in_parallel():
    both = threading.Barrier(2, timeout=10)
    handled: list[str] = []

    def handle(key: str, item: None) -> None:
        both.wait()  # each conversation's item waits for the other's: only parallel passes
        handled.append(key)

    queues: SerialQueues[None] = SerialQueues(handle, thread)
    queues.submit("a", None)
    queues.submit("b", None)
    eventually(lambda: sorted(handled), "both handled", until=lambda h: h == ["a", "b"])


def test_a_full_backlog_drops_its_oldest_item_and_says_which():
    gate = threading.Event()
    handled: list[int] = []
    dropped: list[tuple[str, int]] = []

    def handle(key: str, item: int) -> None:
        gate.wait(10)
        handled.append(item)

    spawned: list[Callable[[], None]] = []
    queues: SerialQueues[int] = SerialQueues(handle, spawned.append, keep=2,
                                             on_drop=lambda k, i: dropped.append((k, i)))
    for i in range(5):
        queues.submit("c", i)
    assert len(spawned) == 1  # one drainer for the conversation, not one per item
    assert dropped == [("c", 0), ("c", 1), ("c", 2)]
    gate.set()
    spawned[0]()
    assert handled == [3, 4]
    assert queues.draining() == set()


def test_an_item_that_raises_does_not_stall_its_conversation():
    handled: list[int] = []

    def handle(key: str, item: int) -> None:
        if item == 0:
            raise RuntimeError("boom")
        handled.append(item)

    spawned: list[Callable[[], None]] = []
    queues: SerialQueues[int] = SerialQueues(handle, spawned.append)
    queues.submit("c", 0)
    queues.submit("c", 1)
    spawned.pop()()
    queues.submit("c", 2)  # a new drainer, since the last one finished
    spawned.pop()()
    assert handled == [1, 2]
