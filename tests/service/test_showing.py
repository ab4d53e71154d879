"""A run's reply shown while written, in the run process (`service/showing.py`; SPEC D3,
D11, D13): publishes spaced by `stream_interval`, at once for a try's start, its first
content and its end; `quiet` when content stops; the reading thread never waits for the
channel. Unit tests of one module: the channel is the test's own list."""

from __future__ import annotations

import threading
import time

from clankie.service.live import Publish
from clankie.service.showing import Publisher
from clankie.settings import Settings

from ..polling import eventually


class Sent:
    def __init__(self, hold: threading.Event | None = None) -> None:
        self.publishes: list[tuple[float, Publish]] = []
        self.hold = hold
        self.entered = threading.Event()

    def __call__(self, publish: Publish) -> None:
        self.entered.set()
        if self.hold is not None:
            self.hold.wait(30)
        self.publishes.append((time.monotonic(), publish))


def publisher(sent: Sent, **settings: object) -> Publisher:
    return Publisher(sent, Settings(**settings), lambda streams: None)  # type: ignore[arg-type]


def test_d3_a_try_is_published_at_its_start_first_content_and_end_and_between_by_interval():
    sent = Sent()
    shown = publisher(sent, stream_interval=0.1).shown("c", "r")
    shown.begin()
    assert [p.state for _, p in sent.publishes] == ["waiting"]  # at once, on this thread
    started = time.monotonic()
    for n in range(300):  # a piece a millisecond: 0.3 s
        shown.text(f"{n} ", 0)
        time.sleep(0.001)
    shown.end()
    took = time.monotonic() - started
    states = [p.state for _, p in sent.publishes]
    assert states[0] == "waiting" and states[1] == "writing" and states[-1] == "complete"
    assert "".join(p.appended for _, p in sent.publishes) == "".join(f"{n} " for n in range(300))
    assert len(sent.publishes) <= 2 + took / 0.1 + 2  # start, first content, by interval, end
    gaps = [b - a for (a, _), (b, _) in zip(sent.publishes[2:-1], sent.publishes[3:-1],
                                             strict=False)]
    assert all(gap >= 0.09 for gap in gaps), gaps
    assert shown.published() == len("".join(f"{n} " for n in range(300)))


def test_d2_text_blocks_are_joined_by_one_blank_line_and_a_new_try_starts_afresh():
    sent = Sent()
    shown = publisher(sent).shown("c", "r")
    shown.begin()
    shown.text("One.", 0)
    shown.text("Two.", 1)
    shown.calling("read_file")
    shown.calling("rm_rf")
    shown.end()
    first = shown.reply_id
    assert "".join(p.appended for _, p in sent.publishes) == "One.\n\nTwo."
    assert sent.publishes[-1][1].calling == ("read_file", "tool")  # unknown tools unnamed
    shown.begin(2)  # the call's second try (R6's number, given by the retry loop)
    assert shown.reply_id != first and shown.published() == 0
    assert sent.publishes[-1][1].attempt == 2 and sent.publishes[-1][1].appended == ""


def test_d11_a_reply_silent_after_content_turns_quiet_and_is_published():
    sent = Sent()
    shown = publisher(sent, model_stall_timeout=5).shown("c", "r")  # quiet after 2.5 s
    shown.begin()
    shown.text("Thinking", 0)
    quiet = eventually(lambda: [p for _, p in sent.publishes if p.state == "quiet"],
                       "the reply to turn quiet", timeout=10)
    assert quiet[0].appended == ""
    shown.text(" on.", 0)
    eventually(lambda: sent.publishes[-1][1].state == "writing", "writing again")


def test_d13_the_reading_thread_never_waits_for_the_channel():
    hold = threading.Event()
    sent = Sent(hold)
    shown = publisher(sent, stream_interval=0.02).shown("c", "r")
    started = threading.Thread(target=shown.begin, daemon=True)  # a start is sent by
    started.start()                                               # the run's own thread
    assert sent.entered.wait(5)
    reading = threading.Thread(target=lambda: [shown.text("x", 0) for _ in range(10_000)],
                               daemon=True)
    try:
        reading.start()  # the channel is stuck, and the model is still read to its end
        reading.join(20)
        assert not reading.is_alive()
    finally:
        hold.set()
    started.join(5)


def test_d13_one_replys_publish_never_waits_behind_anothers():
    """A try's start is sent on its run's own thread. With the publisher's one lock, every
    run of the process queued behind the reply being sent (py-spy: eight continuations at
    once, docs/performance.md); each reply's publishes are ordered on a lock of its own."""
    hold = threading.Event()
    stuck = Sent(hold)
    sent = Sent()
    publishing = publisher(lambda p: (stuck if p.run_id == "slow" else sent)(p),  # type: ignore[arg-type]
                           stream_interval=0.02)
    slow, other = publishing.shown("c1", "slow"), publishing.shown("c2", "other")
    first = threading.Thread(target=slow.begin, daemon=True)
    first.start()
    try:
        assert stuck.entered.wait(5)  # the slow reply's start is on its way, and stays
        second = threading.Thread(target=other.begin, daemon=True)
        second.start()
        second.join(10)
        assert not second.is_alive() and [p.run_id for _, p in sent.publishes] == ["other"]
    finally:
        hold.set()
    first.join(5)
