"""SPEC H5 at the HTML level: what the phone page says, in plain words (issue 21's follow-up
from a first user): which project a question is for, what was chosen, a refusal the owner
can act on, an ended question said as ended, a read-only browser's options, a cancel that
takes a second deliberate step, and no "Take control" offered while it is held."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

from clankie.web.shown import said_ended as _ended
from tests.web.test_h4_http import (
    LISTENER,
    binding,
    page_client,
    paired,
    still_pending,
    words,
)
from tests.world import World


def headers(csrf: str) -> dict[str, str]:
    return {"Origin": LISTENER, "X-Clankie-Key": csrf}


def section(html: str, start: str, end: str) -> str:
    return html[html.index(start):html.index(end, html.index(start))]


def test_h5_the_question_says_which_workspace_and_the_list_tells_rows_apart(world: World):
    c = world.conversation()
    other = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        paired(world, client)
        html = client.get(f"/view?c={c}").text
    full = str(world.workspace)
    last = "/".join(full.rstrip("/").split("/")[-2:])
    # above the question: the workspace's last folders, the full path in a title
    above = html[:html.index('id="prompt"')]
    assert f'title="{full}"' in above and last in above
    rows = re.findall(r"<li>(.*?)</li>", section(html, 'aria-label="Conversations"', "</nav>"),
                      re.S)
    assert len(rows) == 2
    shown = next(r for r in rows if c in r)
    quiet = next(r for r in rows if other in r)
    assert last in shown and last in quiet
    assert "Question waiting" in shown and "Question waiting" not in quiet
    assert 'aria-current="page"' in shown and "Shown now" in shown
    assert "Shown now" not in quiet


def test_h5_accepted_says_what_was_chosen(world: World):
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        csrf = paired(world, client)
        client.post("/api/take-control", json={}, headers=headers(csrf))
        reply = client.post("/api/answer", json=binding(c, world), headers=headers(csrf))
        assert words(reply.json()) == {"outcome": "accepted", "message": "Accepted: "
                                       "\u201cpytest\u201d. Clankie has not necessarily run yet."}
        world.ask(c, {"kind": "text", "prompt": "Name it?"})
        reply = client.post("/api/answer", json=dict(binding_text(c, world), text="tabs.py"),
                            headers=headers(csrf))
        assert reply.json()["message"] == ("Accepted: your text answer. Clankie has not "
                                           "necessarily run yet.")


def binding_text(c: str, world: World) -> dict[str, Any]:
    snap = world.snapshot(c)
    return {"conversation_id": c, "request_id": snap["pending"]["request_id"],
            "incarnation": snap["incarnation"], "revision": snap["revision"]}


def test_h5_cancel_is_a_second_deliberate_step_apart_from_the_answer(world: World):
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        paired(world, client)
        html = client.get(f"/view?c={c}").text
    form = section(html, '<form id="answer"', "</form>")
    assert "cancel-question" not in form  # not among the answer controls
    assert re.search(r'<button[^>]*id="cancel-question"', html)
    confirm = re.search(r'<button[^>]*id="cancel-confirm"[^>]*>', html)
    assert confirm and " hidden" in confirm.group(0)  # shown only after the first tap
    assert "Really cancel" in html
    assert still_pending(world, c)


def test_h5_a_refusal_for_want_of_the_lease_says_tap_take_control_first(world: World):
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        csrf = paired(world, client)
        refused = client.post("/api/answer", json=binding(c, world), headers=headers(csrf))
    reply = refused.json()
    assert reply["outcome"] == "refused"
    assert 'tap "Take control" first' in reply["message"]
    assert "input_answer" not in reply["message"] and "lease" not in reply["message"]
    assert still_pending(world, c)


def test_h5_answering_an_ended_question_says_it_ended_and_how(world: World):
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        csrf = paired(world, client)
        client.post("/api/take-control", json={}, headers=headers(csrf))
        stale = binding(c, world)
        world.call("input_answer", stale)  # the owner answers from the terminal first
        late = client.post("/api/answer", json=dict(stale, option_id=world.snapshot(
            c, stale["request_id"])["request"]["options"][1]["option_id"]),
            headers=headers(csrf)).json()
    assert late["outcome"] == "ended"
    assert "answered from the terminal" in late["message"]
    assert "answer again" not in late["message"]


def test_h5_the_operator_is_named_in_plain_words():
    by = SimpleNamespace(kind="operator", credential_id="cred-op")
    question = SimpleNamespace(status="answered",
                               receipt=SimpleNamespace(answered_by=by, reason=None))
    assert _ended(question, "cred-phone") == (  # type: ignore[arg-type]
        "it was answered from the terminal (operator)")


def test_h5_a_revoked_browser_is_told_in_plain_words(world: World):
    with page_client(world) as client:
        paired(world, client)
        device = next(x for x in world.call("credential_list")["credentials"]
                      if x["kind"] == "device")
        world.call("credential_revoke", {"credential_id": device["credential_id"]})
        message = client.get("/view").json()["message"]
        page = client.get("/view").text
    assert "no longer paired" in message and "`" not in message
    assert "`" not in page


def test_h5_a_read_only_browser_sees_the_options_as_a_plain_list(world: World):
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        paired(world, client, mode="read_only")
        html = client.get(f"/view?c={c}").text
    assert "This browser can only look" in html
    options = section(html, 'class="options"', "</ul>")
    assert [re.sub(r"<[^>]+>|\s+", " ", li).split()[0]
            for li in re.findall(r"<li>(.*?)</li>", options, re.S)] == [
        "pytest", "unittest", "nose"]
    assert "<button" not in html and "data-option" not in html


def test_h5_take_control_is_not_offered_while_held(world: World):
    with page_client(world) as client:
        csrf = paired(world, client)
        assert re.search(r'<button[^>]*id="take-control"(?![^>]*hidden)', client.get("/view").text)
        client.post("/api/take-control", json={}, headers=headers(csrf))
        held = client.get("/view").text
    button = re.search(r'<button[^>]*id="take-control"[^>]*>', held)
    assert button is None or " hidden" in button.group(0)
    assert 'id="lease"' in held and "data-expires" in held  # the page's clock follows it


def test_h6_the_view_does_not_change_while_nothing_changes(world: World):
    """The page redraws its view only when the view's HTML changes: a view that changed
    every second (a countdown, a clock) would take focus and the cancel step away."""
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        csrf = paired(world, client)
        client.post("/api/take-control", json={}, headers=headers(csrf))
        first = client.get(f"/view?c={c}").text
        world.clock.advance(1.5)
        assert client.get(f"/view?c={c}").text == first


def test_h5_the_ended_note_follows_the_latest_question_not_the_first_one(world: World):
    """Second trial (issue 21): after the phone cancelled question A, the page kept
    watching A and said "cancelled from this browser" while B came and was answered from
    the terminal. The note now moves to the latest question that ended, and the page
    watches the one pending now."""
    c = world.conversation()

    def state(view: str) -> dict[str, str]:
        found = re.search(r'data-request="([^"]*)" data-noted="([^"]*)"', view)
        assert found, view
        return {"r": found.group(1), "n": found.group(2)}

    with page_client(world) as client:
        paired(world, client)
        first = world.ask(c)["pending"]["request_id"]
        world.cancel(c, world.snapshot(c))  # ended elsewhere; the page showed it
        second = world.ask(c)["pending"]["request_id"]
        view = client.get(f"/view?c={c}&r={first}").text
        assert "has ended: it was cancelled" in view
        assert state(view) == {"r": second, "n": first}  # watching the pending one now
        world.answer(c, world.snapshot(c), option=0)  # the terminal answers the second
        view = client.get(f"/view?c={c}&r={second}&n={first}").text
        assert "has ended: it was answered from the terminal (operator)" in view
        assert "cancelled" not in section(view, '<p id="ended"', "</p>")
        assert state(view) == {"r": second, "n": second}


def test_h5_an_accepted_label_is_quoted_and_visible_in_the_pages_own_line(world: World):
    """Red team of issue 30: the status line after an answer showed the label raw, so a
    label "No. Nothing was sent: ..." passed for the page's own words, and one with U+202E
    reversed the page's sentence. The label is quoted, on one line, its controls shown."""
    c = world.conversation()
    world.ask(c, {"kind": "choice", "prompt": "Pick?",
                  "options": [{"label": "No. Nothing was sent\n\u202eevil"}, {"label": "b"}]})
    with page_client(world) as client:
        paired(world, client)
        client.post("/api/take-control", json={}, headers={"Origin": LISTENER})
        snap = world.snapshot(c)
        reply = client.post("/api/answer", headers={"Origin": LISTENER}, json={
            "conversation_id": c, "request_id": snap["pending"]["request_id"],
            "incarnation": snap["incarnation"], "revision": snap["revision"],
            "option_id": snap["pending"]["options"][0]["option_id"]})
    message = reply.json()["message"]
    assert message.startswith("Accepted: \u201cNo. Nothing was sent")
    assert "\u202e" not in message and "\n" not in message
