"""Issue 30's findings on the phone page, at the HTML level (SPEC H5, H6, R9): a restart's
ending said in words, options shown as not yet active before the owner holds control (with
the lease's length for the one confirmation that takes it and sends), text from others set
apart from the page's own controls, and every time with its zone."""

from __future__ import annotations

import re

from tests.web.test_h4_http import LISTENER, page_client, paired
from tests.web.test_page_words import section
from tests.world import World


def headers(key: str) -> dict[str, str]:
    return {"Origin": LISTENER, "X-Clankie-Key": key}


def test_h6_r9_a_question_a_restart_ended_says_clankie_restarted_and_nothing_ran(
        world: World):
    """Issue 30: after a restart the page said only "it was cancelled"; R9 wants why and
    what to do: clankie restarted, nothing was answered or run, send a message to go on."""
    c = world.conversation()
    shown = world.ask(c)["pending"]["request_id"]
    world.service.recover()  # what `clankie serve` does first after a restart (R3)
    with page_client(world) as client:
        paired(world, client)
        view = client.get(f"/view?c={c}&r={shown}").text
    ended = section(view, '<p id="ended"', "</p>")
    assert "clankie restarted" in ended
    assert "nothing was answered or run" in ended
    assert "send a message to carry on" in ended


def test_h5_options_before_control_are_shown_not_yet_active_with_the_leases_length(
        world: World):
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        key = paired(world, client)
        before = client.get(f"/view?c={c}").text
        client.post("/api/take-control", json={}, headers=headers(key))
        held = client.get(f"/view?c={c}").text
    options = re.findall(r'<button[^>]*data-option="[^"]*"[^>]*>', before)
    assert options and all("inactive" in b for b in options)
    assert "not active until you take control" in before
    confirm = re.search(r'<div[^>]*id="control-confirm"[^>]*>', before)
    assert confirm and " hidden" in confirm.group(0)  # shown only after a tap
    ttl = world.service.settings.take_control_ttl
    assert f'data-ttl="{ttl}"' in confirm.group(0)  # the lease's length, for its expiry
    assert all("inactive" not in b
               for b in re.findall(r'<button[^>]*data-option="[^"]*"[^>]*>', held))
    assert "not active until" not in held


def test_h5_text_from_others_is_set_apart_from_the_pages_own_controls(world: World):
    """An option labelled "Take control" must not pass for the page's button: every label
    and the prompt are in an element marked as another party's text (boxed and quoted by
    the stylesheet), never bare in a button."""
    c = world.conversation()
    world.ask(c, {"kind": "choice", "prompt": "Take control?",
                  "options": [{"label": "Take control"}, {"label": "Cancel the question…"}]})
    with page_client(world) as client:
        paired(world, client)
        view = client.get(f"/view?c={c}").text
    assert re.search(r'<h2 id="prompt"[^>]*><span class="theirs"[^>]*>Take control\?</span>',
                     view), view
    for label in ("Take control", "Cancel the question…"):
        assert re.search(r'data-option="[^"]*"[^>]*>\s*<span class="theirs"[^>]*>'
                         + re.escape(label) + "</span>", view), label


def test_h5_every_time_on_the_page_shows_its_zone(world: World):
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        key = paired(world, client)
        client.post("/api/take-control", json={}, headers=headers(key))
        view = client.get(f"/view?c={c}").text
    times = re.findall(r"\d{4}-\d\d-\d\d \d\d:\d\d[^<]*", view)
    assert len(times) >= 2, view  # the question's expiry and the lease's
    assert all(re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d (UTC[+-]\d\d:\d\d|UTC|[A-Z]{2,5})\b", t)
               for t in times), times
