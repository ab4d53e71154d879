"""SPEC D17 at the HTTP level: the phone page's `/api/events` reads the live reply (D4) as
`events_tail` does, with the same input (`live`, checked by the service: a bad one is
`invalid_request`) and the same `live` object, behind the same two credential halves (H3)
and headers (H4); and the view's context says how a reply was cut off (D6-D9) or that it
was withdrawn (D8). A real service and store, with a model of the test's own that writes
through its live reply (`tests/service/test_live.py`)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from clankie import dto
from clankie.core.errors import ClankieError
from clankie.core.vocabulary import Code
from clankie.service.executor import RunExecutor
from clankie.web.shown import context_line
from tests.polling import eventually
from tests.service.test_live import Writing, with_model
from tests.web.test_h4_http import page_client, paired
from tests.web.test_page_h5_h6 import text
from tests.web.test_page_words import section
from tests.world import World

INVALID = ClankieError(Code.INVALID_REQUEST, "")  # its status, as the service's edge gives it
NO_REPLY = {"reply_id": None, "offset": 0}


@pytest.fixture
def executors(world: World) -> Iterator[list[RunExecutor]]:
    made: list[RunExecutor] = []
    yield made
    for executor in made:
        executor.stop(timeout=5)


def events_url(c: str, live: Any = None, after: int = 0) -> str:
    """The page's own request: the conversation, where it is, and what of the live reply it
    has (a reply ID and a length, no text, no token)."""
    url = f"/api/events?c={c}&after={after}"
    if live is not None:
        url += "&live=" + quote(live if isinstance(live, str) else json.dumps(live))
    return url


def writing(world: World, executors: list[RunExecutor], pieces: list[str]) -> str:
    """A conversation whose run has published `pieces` and holds its live reply open."""
    model = Writing(pieces, hold=threading.Event())
    with_model(world, executors, model)
    c = world.conversation()
    world.call("conversation_send", {"conversation_id": c, "text": "go"})
    assert model.published.wait(10)
    return c


def test_d17_d4_api_events_takes_events_tails_live_input_and_refuses_a_bad_one(
        world: World):
    c = world.conversation()
    with page_client(world) as client:
        paired(world, client)
        before = world.dump()
        for bad in ({"reply_id": None}, {"offset": 0}, {"reply_id": None, "offset": -1},
                    {"reply_id": None, "offset": 2**24 + 1}, {"reply_id": "x", "offset": 0},
                    {"reply_id": None, "offset": 0, "more": 1},
                    {"reply_id": None, "offset": "0"}, [], "not json", ""):
            refused = client.get(events_url(c, bad))
            assert refused.status_code == INVALID.status, (bad, refused.text)
            assert refused.json()["code"] == "invalid_request", (bad, refused.text)
            assert "live" not in refused.json()
        none = client.get(events_url(c, NO_REPLY))
        old = client.get(events_url(c))  # the page of before: exactly as it was
        assert world.dump() == before
    assert none.status_code == 200 and none.json()["live"] is None
    assert old.status_code == 200 and "live" not in old.json()


def test_d17_d4_api_events_answers_events_tails_live_object_a_snapshot_then_a_delta(
        world: World, executors: list[RunExecutor]):
    c = writing(world, executors, ["Half ", "a <b>reply</b>"])
    direct = world.call("events_tail", {"conversation_id": c, "live": NO_REPLY})["live"]
    with page_client(world) as client:
        paired(world, client)
        snapshot = client.get(events_url(c, NO_REPLY)).json()["live"]
        delta = client.get(events_url(c, {"reply_id": direct["reply_id"], "offset": 5})
                           ).json()["live"]
    assert set(snapshot) == set(direct)  # the same object, field for field
    assert {k: v for k, v in snapshot.items() if k not in ("at", "idle_ms")} == {
        k: v for k, v in direct.items() if k not in ("at", "idle_ms")}
    assert (snapshot["type"], snapshot["offset"], snapshot["text"]) == (
        "reply_delta", 0, "Half a <b>reply</b>")
    assert (delta["reply_id"], delta["offset"], delta["text"], delta["length"]) == (
        direct["reply_id"], 5, "a <b>reply</b>", len("Half a <b>reply</b>"))


def test_d17_h3_h4_the_live_reply_needs_both_halves_and_is_never_kept_by_a_cache(
        world: World, executors: list[RunExecutor]):
    c = writing(world, executors, ["Secret ", "words"])
    with page_client(world) as client:
        key = paired(world, client)
        answered = client.get(events_url(c, NO_REPLY))
        assert answered.json()["live"]["text"] == "Secret words"
        assert answered.headers["cache-control"] == "no-store"
        assert "set-cookie" not in answered.headers
        del client.headers["X-Clankie-Key"]  # the cookie alone
        no_key = client.get(events_url(c, NO_REPLY))
        wrong_key = client.get(events_url(c, NO_REPLY), headers={"X-Clankie-Key": "0" * 64})
        client.cookies.clear()  # the key alone
        no_cookie = client.get(events_url(c, NO_REPLY), headers={"X-Clankie-Key": key})
        bearer = client.get(events_url(c, NO_REPLY),
                            headers={"Authorization": f"Bearer {world.operator}"})
    for refused in (no_key, wrong_key, no_cookie):
        assert refused.status_code == 401 and "Secret" not in refused.text
        assert refused.headers["cache-control"] == "no-store"
    assert bearer.status_code == 400 and "Secret" not in bearer.text


def test_d17_a_read_only_browser_reads_the_live_reply_too(world: World,
                                                           executors: list[RunExecutor]):
    c = writing(world, executors, ["Seen ", "by all"])
    with page_client(world) as client:
        paired(world, client, mode="read_only")
        live = client.get(events_url(c, NO_REPLY)).json()["live"]
    assert live["text"] == "Seen by all"


def context_of(world: World, c: str) -> str:
    with page_client(world) as client:
        paired(world, client)
        view = client.get(f"/view?c={c}").text
    return section(view, 'id="context"', "</section>")


def test_d17_d7_a_stopped_reply_shows_its_text_and_that_the_owner_stopped_it(
        world: World, executors: list[RunExecutor]):
    c = writing(world, executors, ["Half ", "a reply"])
    reply_id = world.call("events_tail", {"conversation_id": c, "live": NO_REPLY})[
        "live"]["reply_id"]
    [run] = [e["run_id"] for e in world.events(c) if e["type"] == "run_status"][:1]
    world.call("run_cancel", {"run_id": run})
    context = context_of(world, c)
    assert "Half a reply" in text(context) and "(stopped by you)" in text(context)
    assert f'data-message="{reply_id}"' in context  # the page replaces its live reply by it


def test_d17_d8_a_reply_that_failed_for_good_shows_its_text_cut_off(
        world: World, executors: list[RunExecutor]):
    model = Writing(["Half ", "said"], then="fail")
    with_model(world, executors, model)
    c = world.conversation()
    world.call("conversation_send", {"conversation_id": c, "text": "go"})
    eventually(lambda: world.events(c), "the run to fail",
               until=lambda events: any(e["type"] == "run_status" and e["status"] == "failed"
                                        for e in events))
    shown = text(context_of(world, c))
    assert "Half said (cut off: " in shown and "400 bad request)" in shown  # its reason
    assert "run failed" not in shown  # said once, with the reply


def test_d17_d8_a_withdrawn_reply_is_said_withdrawn_and_the_next_try_shown(
        world: World, executors: list[RunExecutor]):
    with_model(world, executors, Writing(["Lost ", "words"], then="retry"))
    c = world.conversation()
    world.call("conversation_send", {"conversation_id": c, "text": "go"})
    eventually(lambda: world.events(c), "the run to end",
               until=lambda events: any(e["type"] == "run_status" and e["status"] ==
                                        "succeeded" for e in events))
    shown = text(context_of(world, c))
    assert "Lost words" not in shown
    assert "withdrawn" in shown and "10 characters" in shown
    assert shown.index("withdrawn") < shown.index("Second try.")


def test_d17_d9_an_interrupted_reply_says_what_followed_was_lost(world: World):
    event = dto.MessageEvent.model_validate({
        "type": "message", "seq": 3, "conversation_id": "c", "message_id": "m",
        "author": "clankie", "text": "Before the kill", "at": "2026-12-06T15:00:00Z",
        "partial": "interrupted"})
    line = context_line(event)
    assert line is not None and line.text == "Before the kill"
    assert line.note.startswith("(cut off when clankie restarted; what followed ")
    assert line.note.endswith(" was lost)")


def test_d17_a_cut_off_reply_keeps_its_line_breaks_up_to_a_bound_a_whole_one_is_one_line():
    """A cut-off reply's line is `pre-wrap` (the browser test: tests/e2e/test_phone_page.py):
    its line breaks come as they are, at most `CUT_OFF_LINES` of them; other lines of the
    context stay one line each, their line breaks as `\\n`."""
    from clankie.web.shown import CUT_OFF_LINES

    def line(text: str, partial: str | None) -> Any:
        return context_line(dto.MessageEvent.model_validate({
            "type": "message", "seq": 3, "conversation_id": "c", "message_id": "m",
            "author": "clankie", "text": text, "at": "2026-12-06T15:00:00Z",
            "partial": partial}))

    assert line("one\ntwo", "stopped").text == "one\ntwo"
    assert line("one\ntwo", None).text == "one\\ntwo"
    many = "\n".join(str(n) for n in range(CUT_OFF_LINES + 5))
    assert line(many, "interrupted").text == "\n".join(
        str(n) for n in range(CUT_OFF_LINES)) + "…"


def test_d17_the_view_says_when_clankie_gives_up_on_a_silent_model(world: World):
    """D11: a quiet reply says when clankie gives up; the page reads the setting here."""
    c = world.conversation()
    with page_client(world) as client:
        paired(world, client)
        view = client.get(f"/view?c={c}").text
    stall = world.service.settings.model_stall_timeout
    assert f'data-stall="{stall:g}"' in view
    assert 'id="live-slot"' in view  # where the live reply goes: below the last messages


def test_d17_clankies_latest_reply_is_whole_until_its_question_is_answered(
        world: World, executors: list[RunExecutor]):
    """Where the live reply was, its stored message is shown whole (not cut to a line) with
    the question it leads to; once that question is answered, it is one line again, so
    the next reply, written below, is on the screen (new-user trial)."""
    from tests.service.test_live import scripted

    words = "I looked at the project. " * 20
    scripted(world, executors, {"turns": [[{"say": words, "pace_ms": 0}, {"ask": {
        "kind": "choice", "prompt": "Which?", "options": [{"label": "a"}, {"label": "b"}]}}]]})
    c = world.conversation()
    world.call("conversation_send", {"conversation_id": c, "text": "go"})
    eventually(lambda: world.events(c), "the run that asks to end",  # it moves the revision
               until=lambda events: any(e["type"] == "run_status" and e["status"] ==
                                        "succeeded" for e in events))
    snap = world.snapshot(c)
    assert snap["pending"] is not None
    asked = context_of(world, c)
    assert 'class="message whole"' in asked and words.strip() in text(asked)
    world.answer(c, snap, option=0)
    answered = context_of(world, c)
    assert "whole" not in answered and words.strip() not in text(answered)
    assert "I looked at the project." in text(answered)
