"""`clankie.cli.follow.Follower` alone, against a fake client and a fake clock (SPEC section
10 "Finding what waits": `events --follow` survives a restart like the TUI). The e2e test
(tests/e2e/test_cli_waiting.py) restarts a real service; the give-up bound (10 min of a
service that never comes back) and the spacing of the tries need a clock a test can move."""

from __future__ import annotations

import json
from typing import Any, cast

import click
import pytest

from clankie.cli import follow
from clankie.cli.common import OTHER, json_lines
from clankie.client import PAUSE_AFTER_EMPTY_S, Client, ServiceUnreachable, Uncertain

C = "abcd1234-0000-4000-8000-000000000001"


class Clock:
    def __init__(self) -> None:
        self.now, self.slept = 1000.0, []  # type: float, list[float]

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def info(started_at: str) -> dict[str, Any]:
    """A whole `service_info` result (the CLI reads it into its model, issue 32)."""
    return {"version": "0", "started_at": started_at, "settings": {},
            "model": {"provider": "scripted", "model": None, "endpoint_host": None}}


def page(seqs: list[int], next_after: int) -> dict[str, Any]:
    """An `events_tail` page of events of a type this version does not know: only their
    `seq` matters here."""
    return {"events": [{"type": "later", "seq": s} for s in seqs], "next_after": next_after,
            "oldest_seq": 1, "trimmed": False}


class Service:
    """Answers `service_info` and `events_tail` as `plan` says: a page, or an error."""

    url, via_env = "unix:///fake", False

    def __init__(self, plan: list[Any]) -> None:
        self.plan, self.started_at, self.connections = plan, "2026-12-05T02:00:00Z", 1
        self.asked: list[int] = []

    def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        if op == "service_info":
            return info(self.started_at)
        self.asked.append(payload["after"])
        step = self.plan.pop(0)
        if isinstance(step, Exception):
            raise step
        if callable(step):
            return cast(dict[str, Any], step())
        return page(step, step[-1] if step else payload["after"])


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(follow.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(follow.time, "sleep", fake.sleep)
    return fake


def follower(service: Service, notes: list[str], after: int = 0) -> follow.Follower:
    return follow.Follower(cast(Client, service), C, after, as_json=False, note=notes.append)


def test_a_service_that_never_comes_back_is_given_up_after_10_min_saying_how_to_go_on(
        clock: Clock, capsys: pytest.CaptureFixture[str]):
    gone = ServiceUnreachable("cannot reach clankie", "start it with `clankie serve`")
    service = Service([gone] * 1000)
    notes: list[str] = []
    tail = follower(service, notes, after=7)
    with pytest.raises(click.exceptions.Exit) as exited:
        tail.page()
    assert exited.value.exit_code == OTHER
    assert clock.slept[:3] == [0.2, 0.5, 0.8] and set(clock.slept[2:]) == {0.8}
    assert follow.GIVE_UP_S <= sum(clock.slept) < follow.GIVE_UP_S + 1
    assert len(notes) == 1 and "trying again for up to 10 min" in notes[0]
    err = capsys.readouterr().err
    assert "has not come back within 10 min" in err and "clankie serve" in err
    assert f"clankie conversations events {C} --after 7 --follow" in err
    assert set(service.asked) == {7}


def test_section10_issue42_with_json_giving_up_is_a_problem_document_on_one_line(
        clock: Clock, capsys: pytest.CaptureFixture[str]):
    """`events --follow --json` prints JSON Lines; the page it could not read is a
    `service_unreachable` problem on one line, with where to go on from (`after`)."""
    gone = ServiceUnreachable("cannot reach clankie", "start it with `clankie serve`")
    tail = follow.Follower(cast(Client, Service([gone] * 1000)), C, 7, as_json=True,
                           note=lambda _: None)
    with click.Context(click.Command("events")) as ctx, \
            pytest.raises(click.exceptions.Exit) as exited:
        json_lines()
        tail.page()
    assert exited.value.exit_code == OTHER and ctx.meta["clankie.json_lines"]
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1, out
    problem = json.loads(out)
    assert (problem["code"], problem["sent"], problem["after"]) == (
        "service_unreachable", "no", 7)
    assert "clankie serve" in problem["fix"]


def test_after_a_loss_it_goes_on_from_the_event_it_reached_and_says_what_happened(
        clock: Clock):
    service = Service([[1, 2], Uncertain("no reply"), ServiceUnreachable("gone", "fix"), [3]])
    notes: list[str] = []
    tail = follower(service, notes)
    assert [e.seq for e in tail.page().events] == [1, 2]
    service.started_at = "2026-12-05T02:05:00Z"  # it restarted while the follower waited
    assert [e.seq for e in tail.page().events] == [3]
    assert service.asked == [0, 2, 2, 2]
    assert "lost clankie" in notes[0] and "clankie restarted at" in notes[1]
    assert "following again after #2" in notes[1] and len(notes) == 2


def test_a_restart_between_two_reads_is_said_too_a_reconnect_alone_is_not(clock: Clock):
    """The old service may end a long poll at once as it stops; the next read then reaches
    the new one over a new connection, with no failure in between."""
    service = Service([[1], [], [2]])
    notes: list[str] = []
    tail = follower(service, notes)
    tail.page()
    service.connections += 1  # a new connection, the same service: nothing to say
    tail.page()
    assert notes == []

    def restarted() -> dict[str, Any]:
        service.connections += 1
        service.started_at = "2026-12-05T02:09:00Z"
        return page([2], 2)

    service.plan = [restarted]
    tail.page()
    assert len(notes) == 1 and "clankie restarted at" in notes[0]


def live_page(reply_id: str, text: str, length: int, after: int = 0) -> dict[str, Any]:
    return {**page([], after), "live": {
        "type": "reply_delta", "conversation_id": C, "run_id": C, "reply_id": reply_id,
        "attempt": 1, "state": "writing", "offset": length - len(text), "text": text,
        "length": length, "calling": [], "idle_ms": 0, "started_at": "2026-12-05T02:00:00Z",
        "at": "2026-12-05T02:00:00Z"}}


def test_d16_d4_it_sends_back_the_reply_and_length_it_received_and_after_a_restart_null(
        clock: Clock):
    """D4: clients send back the `reply_id` and `length` they last received; D16: after a
    service restart `events --follow` asks again with a null `reply_id`. A live answer with
    no events is an answer, not a long-poll that found no slot: no pause after it."""
    r = "abcd1234-0000-4000-8000-00000000000f"
    lives: list[Any] = []

    class Live(Service):
        def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
            if op == "events_tail":
                lives.append(payload.get("live"))
            return super().call(op, payload)

    def restarted() -> dict[str, Any]:
        service.connections += 1
        service.started_at = "2026-12-05T02:09:00Z"
        return {**page([], 0), "live": None}  # nothing being written: an empty answer

    service = Live([lambda: live_page(r, "Hello", 5), lambda: live_page(r, " you", 9),
                    restarted, lambda: live_page(r, "Hello you", 9)])
    tail = follow.Follower(cast(Client, service), C, 0, as_json=False, note=[].append,
                           live=True)
    for _ in range(4):
        tail.page()
    assert lives == [{"reply_id": None, "offset": 0}, {"reply_id": r, "offset": 5},
                     {"reply_id": r, "offset": 9}, {"reply_id": None, "offset": 0}]
    assert clock.slept == [PAUSE_AFTER_EMPTY_S]  # after the empty answer only
    assert tail.live == (r, 9, "writing")


def test_d4_without_live_a_follower_asks_for_none():
    asked: list[dict[str, Any]] = []

    class Plain(Service):
        def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
            if op == "events_tail":
                asked.append(payload)
            return super().call(op, payload)

    follow.Follower(cast(Client, Plain([[1]])), C, 0, as_json=False, note=print).page(0)
    assert "live" not in asked[0]


def test_section10_back_after_a_loss_the_first_read_does_not_wait_so_it_says_so_at_once(
        clock: Clock):
    """A new user saw "(lost clankie ...)" stand for 25 s after the service was back: the
    first read after a loss was a long-poll, and the restart was said when it ended. Now it
    asks without waiting, says so, and waits again from the next read on; after a loss it
    asks for the live reply with a null `reply_id` (D16)."""
    r = "abcd1234-0000-4000-8000-00000000000f"
    asked: list[dict[str, Any]] = []

    class Recorded(Service):
        def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
            if op == "events_tail":
                asked.append(payload)
            return super().call(op, payload)

    service = Recorded([lambda: live_page(r, "Hi", 2), ServiceUnreachable("gone", "fix"),
                        lambda: {**page([], 0), "live": None}, [5]])
    notes: list[str] = []
    tail = follow.Follower(cast(Client, service), C, 0, as_json=False, note=notes.append,
                           live=True)
    tail.page()
    service.started_at = "2026-12-05T02:09:00Z"
    tail.page()
    assert "clankie restarted at" in notes[-1]
    tail.page()
    assert [a["wait_ms"] for a in asked] == [follow.FOLLOW_WAIT_MS] * 2 + [0] + \
        [follow.FOLLOW_WAIT_MS]
    assert asked[2]["live"] == {"reply_id": None, "offset": 0}
    assert clock.slept == [follow.RETRY_S[0]]  # no pause after the read that did not wait
