"""Issue 30's findings on the phone page, at the HTML level (SPEC H5, H6, R3): a restart's
ending said in words, options shown as not yet active before the owner holds control (with
the lease's length for the one confirmation that takes it and sends), text from others set
apart from the page's own controls, and every time with its zone."""

from __future__ import annotations

import re

from tests.web.test_h4_http import LISTENER, page_client, paired
from tests.web.test_page_words import section
from tests.world import World


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def headers(key: str) -> dict[str, str]:
    return {"Origin": LISTENER, "X-Clankie-Key": key}


def test_h6_r3_a_question_a_restart_ended_says_clankie_restarted_and_nothing_ran(
        world: World):
    """Issue 30: after a restart the page said only "it was cancelled"; the SPEC wants why and
    what to do: clankie restarted, nothing was answered or run, send a message to go on."""
    c = world.conversation()
    shown = world.ask(c)["pending"]["request_id"]
    world.service.runs.recover()  # what `clankie serve` does first after a restart (R3)
    with page_client(world) as client:
        paired(world, client)
        view = client.get(f"/view?c={c}&r={shown}").text
    ended = section(view, '<p id="ended"', "</p>")
    assert "clankie restarted" in ended
    assert "nothing was answered or run" in ended
    assert "send a message to carry on" in ended


def test_r9_a_continuation_a_restart_failed_is_said_with_how_to_carry_on(world: World):
    """R9 on the page: the answer's run, orphaned by a restart, is said in the context above
    the question (in the words every surface uses), never as a bare error code."""
    from clankie import wording

    c = world.conversation()
    snap = world.ask(c)
    world.answer(c, snap, option=0)  # its continuation waits, queued (no executor here)
    world.service.runs.recover()
    with page_client(world) as client:
        paired(world, client)
        view = client.get(f"/view?c={c}&r={snap['pending']['request_id']}").text
    context = text(section(view, 'id="context"', "</section>"))
    assert f"Clankie&#39;s run failed: {wording.RUN_INTERRUPTED}" in context
    assert "clankie restarted" in context and "send a message to carry on" in context


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


def test_h5_above_the_question_what_led_to_it_then_clankies_reply_after_the_answer(
        world: World):
    """Issue 30: the page showed a question with nothing of what led to it. Above it now:
    the last messages (the owner's, Clankie's, tool activity in one line each), read with
    the browser's own token; after an answer, Clankie's reply when it comes."""
    from clankie.core.model import RunStatus
    from clankie.service.runs import CallRecord
    from clankie.workspace.tools import Outcome
    from tests.world import CHOICE

    c = world.conversation()
    run = world.running_turn(c, "please tidy the config\nand the tests")
    world.service.runs.record_tool_call(run, CallRecord(1, "call-1", "read_file", "{}"),
                                   Outcome({}, "ok", None, "read config.toml lines 1-20"))
    world.service.runs.post_replies(run, [(None, "I read <b>config.toml</b>.")])
    assert world.service.runs.ask_question(run, CHOICE).status == "pending"
    world.service.runs.finish_run(run, RunStatus.SUCCEEDED)
    with page_client(world) as client:
        key = paired(world, client)
        view = client.get(f"/view?c={c}").text
        above = section(view, 'id="context"', 'id="prompt"')
        lines = [text(li) for li in re.findall(r"<li[^>]*>(.*?)</li>", above, re.S)]
        assert lines == ["You: please tidy the config\\nand the tests",
                         "Tool: read config.toml lines 1-20",
                         "Clankie: I read &lt;b&gt;config.toml&lt;/b&gt;."], lines
        client.post("/api/take-control", json={}, headers=headers(key))
        snap = world.snapshot(c)
        answered = client.post("/api/answer", headers=headers(key), json={
            "conversation_id": c, "request_id": snap["pending"]["request_id"],
            "incarnation": snap["incarnation"], "revision": snap["revision"],
            "option_id": snap["pending"]["options"][0]["option_id"]})
        assert answered.json()["outcome"] == "accepted"
        continuation = world.service.runs.claim_next_run(c)
        assert continuation is not None
        world.service.runs.post_replies(continuation.run_id, [(None, "Done: pytest it is.")])
        world.service.runs.finish_run(continuation.run_id, RunStatus.SUCCEEDED)
        after = client.get(f"/view?c={c}&r={snap['pending']['request_id']}").text
    assert "has ended" in after
    assert "Clankie: Done: pytest it is." in text(section(after, 'id="context"', "</section>"))


def test_h5_the_context_is_read_with_the_browsers_own_rights(world: World):
    """A read-only browser reads it too (events_tail is a reader's); a revoked one reads
    nothing."""
    c = world.conversation()
    world.ask(c)
    with page_client(world) as client:
        paired(world, client, mode="read_only")
        assert 'id="context"' in client.get(f"/view?c={c}").text
        device = next(x for x in world.call("credential_list")["credentials"]
                      if x["kind"] == "device")
        world.call("credential_revoke", {"credential_id": device["credential_id"]})
        refused = client.get(f"/view?c={c}")
    assert refused.status_code == 401 and "hello" not in refused.text
