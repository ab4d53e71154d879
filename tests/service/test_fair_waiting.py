"""Fair waiting in the service (SPEC V5): long-poll slots counted per credential.

The service is called as in-process callers call it (`Service.call` waits on the calling
thread); the HTTP edge's own waiting is tested in `tests/api/test_fair_waiting.py`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from clankie.core.errors import ClankieError
from clankie.service.longpoll import LONG_POLL_SLOTS
from tests.polling import eventually
from tests.world import World

LONG = 30_000  # ms: a long-poll that would outlive the test unless something wakes it
DEADLINE_S = 10.0



@contextmanager
def long_polls(world: World, c: str, after: int, tokens: list[str]
               ) -> Iterator[list[dict[str, Any] | ClankieError]]:
    """One long-poll per token, each on its own thread; joined (with a deadline) at the end."""
    outcomes: list[dict[str, Any] | ClankieError] = []
    lock = threading.Lock()

    def poll(token: str) -> None:
        try:
            outcome: dict[str, Any] | ClankieError = world.call(
                "events_tail", {"conversation_id": c, "after": after, "wait_ms": LONG}, token)
        except ClankieError as err:
            outcome = err
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=poll, args=(t,)) for t in tokens]
    for t in threads:
        t.start()
    try:
        yield outcomes
    finally:
        world.service.stop_waiting()  # whatever happened above, nothing waits on
        for t in threads:
            t.join(timeout=DEADLINE_S)
        assert not any(t.is_alive() for t in threads)


def test_v5_a_ninth_long_poll_of_one_credential_returns_at_once_another_gets_its_eight(
        world: World):
    c = world.conversation()
    after = world.call("events_tail", {"conversation_id": c})["next_after"]
    device = world.call("device_pair", {"name": "tv", "mode": "read_only"})["token"]
    with long_polls(world, c, after, [world.operator] * LONG_POLL_SLOTS +
                    [device] * LONG_POLL_SLOTS) as outcomes:
        eventually(lambda: world.service.waiting, "both credentials' long-polls to wait",
                   timeout=DEADLINE_S, until=lambda n: n == 2 * LONG_POLL_SLOTS)
        assert outcomes == []
        ninth: list[dict[str, Any]] = []
        extra = threading.Thread(target=lambda: ninth.append(world.call(
            "events_tail", {"conversation_id": c, "after": after, "wait_ms": LONG})))
        extra.start()
        extra.join(timeout=DEADLINE_S)  # a deadline on the wait: it would wait 30 s
        assert not extra.is_alive(), "the ninth long-poll waited"
        assert ninth == [{"events": [], "next_after": after, "oldest_seq": 1,
                          "trimmed": False}]
        assert world.service.waiting == 2 * LONG_POLL_SLOTS
        world.call("conversation_send", {"conversation_id": c, "text": "wake up"})
        eventually(lambda: len(outcomes), "the long-polls to wake", timeout=DEADLINE_S,
                   until=lambda n: n == 2 * LONG_POLL_SLOTS)
    for outcome in outcomes:  # each of the sixteen waited, and got the message
        assert isinstance(outcome, dict) and outcome["events"][0]["text"] == "wake up"
    assert world.service.waiting == 0


def test_v5_slots_are_counted_by_credential_not_by_token_text(world: World):
    c = world.conversation()
    after = world.call("events_tail", {"conversation_id": c})["next_after"]
    device = world.call("device_pair", {"name": "tv", "mode": "read_only"})
    with long_polls(world, c, after, [device["token"]] * LONG_POLL_SLOTS) as outcomes:
        eventually(lambda: world.service.waiting, "the long-polls to wait", timeout=DEADLINE_S,
                   until=lambda n: n == LONG_POLL_SLOTS)
        rotated = world.call("credential_rotate", {"credential_id": device["credential_id"]})
        started = time.monotonic()
        page = world.call("events_tail", {"conversation_id": c, "after": after,
                                          "wait_ms": 5_000}, rotated["token"])
        assert page["events"] == [] and time.monotonic() - started < 5.0
        world.call("conversation_send", {"conversation_id": c, "text": "wake up"})
        eventually(lambda: len(outcomes), "the long-polls to end", timeout=DEADLINE_S,
                   until=lambda n: n == LONG_POLL_SLOTS)
    # the rotated-away token is refused when they read again (A1: every read authenticates)
    assert all(isinstance(o, ClankieError) and o.code == "unauthenticated" for o in outcomes)
    assert world.service.waiting == 0


def test_v5_a_long_poll_that_times_out_gives_its_slot_back(world: World):
    c = world.conversation()
    after = world.call("events_tail", {"conversation_id": c})["next_after"]
    for _ in range(LONG_POLL_SLOTS + 1):  # more than the slots: none may leak
        page = world.call("events_tail", {"conversation_id": c, "after": after, "wait_ms": 1})
        assert page["events"] == []
    assert world.service.waiting == 0
    with long_polls(world, c, after, [world.operator] * LONG_POLL_SLOTS):
        eventually(lambda: world.service.waiting, "the long-polls to wait", timeout=DEADLINE_S,
                   until=lambda n: n == LONG_POLL_SLOTS)


def test_v5_a_call_with_wait_ms_zero_never_waits_for_a_slot(world: World):
    c = world.conversation()
    after = world.call("events_tail", {"conversation_id": c})["next_after"]
    with long_polls(world, c, after, [world.operator] * LONG_POLL_SLOTS):
        eventually(lambda: world.service.waiting, "the long-polls to wait", timeout=DEADLINE_S,
                   until=lambda n: n == LONG_POLL_SLOTS)
        world.call("conversation_send", {"conversation_id": c, "text": "hello"})
        page = world.call("events_tail", {"conversation_id": c, "after": after})
        assert page["events"][0]["text"] == "hello"
