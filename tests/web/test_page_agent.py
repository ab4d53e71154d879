"""SPEC section 13 on the phone page, at the HTML level (P3, H5, A1, A11): a coding agent's
question is listed and shown with who asks (the agent credential's name, the MCP client's
name, the workspace), Clankie's own says Clankie asks, the owner answers or cancels an
agent's question there as any other and is told what that means to the agent (a
preference it reads; no run of Clankie), and names an agent chose are escaped text."""

from __future__ import annotations

import html as html_lib
import re
from typing import Any

from clankie import wording
from tests.web.test_h4_http import LISTENER, page_client, paired, words
from tests.web.test_page_words import section
from tests.world import World

LICENCE = {"kind": "choice", "prompt": "Which licence do you prefer?",
           "options": [{"label": "MIT", "description": "short"}, {"label": "Apache-2.0"}]}
EVIL_NAME = '<img src=x onerror="alert(1)">\x1b[2J"coder'
EVIL_CLIENT = "</strong><script>alert(2)</script>\u202eRLO\x07"


def headers(csrf: str) -> dict[str, str]:
    return {"Origin": LISTENER, "X-Clankie-Key": csrf}


def agent_asks(world: World, name: str = "coder", client: str | None = "claude-code",
               ) -> tuple[str, dict[str, Any]]:
    token = world.call("credential_issue", {"kind": "agent", "name": name})["token"]
    payload: dict[str, Any] = {"workspace": str(world.workspace), **LICENCE}
    if client is not None:
        payload["client"] = client
    asked = world.call("agent_ask", payload, token)
    assert asked["status"] == "pending", asked
    return token, asked


def binding(world: World, c: str, option: int | None = 0) -> dict[str, Any]:
    snap = world.snapshot(c)
    q = snap["pending"]
    found = {"conversation_id": c, "request_id": q["request_id"],
             "incarnation": snap["incarnation"], "revision": snap["revision"]}
    return found if option is None else {**found,
                                         "option_id": q["options"][option]["option_id"]}


def test_p3_h5_the_page_says_which_agent_asks_through_which_client_and_where(world: World):
    _, asked = agent_asks(world)
    c = asked["conversation_id"]
    own = world.conversation()
    world.ask(own)
    with page_client(world) as client:
        paired(world, client)
        page = html_lib.unescape(client.get(f"/view?c={c}").text)
        theirs = html_lib.unescape(client.get(f"/view?c={own}").text)
    above = page[:page.index('id="prompt"')]
    assert 'Asked by <strong>agent "coder" through "claude-code"</strong>' in above
    last = "/".join(str(world.workspace).rstrip("/").split("/")[-2:])
    assert last in above  # the workspace, as for any question
    question = section(page, '<section class="question"', "</section>")
    assert wording.AGENT_ANSWER in question
    assert "Asked by <strong>Clankie</strong>" in theirs[:theirs.index('id="prompt"')]
    assert wording.AGENT_ANSWER not in theirs
    rows = re.findall(r"<li>(.*?)</li>", section(page, 'aria-label="Conversations"', "</nav>"),
                      re.S)
    row = next(r for r in rows if c in r)
    assert 'agent "coder" through "claude-code"' in row and "Question waiting" in row
    assert "agent" not in next(r for r in rows if own in r).replace(own, "")


def test_a1_p3_h5_the_owner_answers_an_agents_question_on_the_page_and_the_agent_reads_it(
        world: World):
    token, asked = agent_asks(world)
    c, r = asked["conversation_id"], asked["request_id"]
    with page_client(world) as client:
        csrf = paired(world, client)
        client.post("/api/take-control", json={}, headers=headers(csrf))
        reply = client.post("/api/answer", json=binding(world, c), headers=headers(csrf))
    assert words(reply.json()) == {"outcome": "accepted", "message": "Accepted: \u201cMIT\u201d. "
                                   + wording.accepted({"run_id": None})}
    read = world.call("agent_wait", {"request_id": r, "wait_s": 0}, token)
    assert read["status"] == "answered" and read["answer"]["label"] == "MIT"
    assert read["answered_by"]["kind"] == "device"


def test_p3_h5_cancelling_an_agents_question_says_the_agent_reads_no_answer(world: World):
    token, asked = agent_asks(world)
    c, r = asked["conversation_id"], asked["request_id"]
    with page_client(world) as client:
        csrf = paired(world, client)
        client.post("/api/take-control", json={}, headers=headers(csrf))
        reply = client.post("/api/cancel", json=binding(world, c, None), headers=headers(csrf))
    said = reply.json()
    assert said["outcome"] == "accepted" and said["message"].startswith("Cancelled.")
    assert "Clankie" not in said["message"] and "no answer" in said["message"]
    assert world.call("agent_wait", {"request_id": r, "wait_s": 0}, token)["status"] == \
        "cancelled"


def test_p3_h5_names_an_agent_or_its_client_chose_are_escaped_text_on_the_page(world: World):
    """Section 10 "Text from others" (the web page escapes it as HTML) and H5: a name with
    markup, a script, escape sequences and a bidirectional override is text on the page:
    no element it names exists, and its control characters are shown as escapes."""
    _, asked = agent_asks(world, EVIL_NAME, EVIL_CLIENT)
    c = asked["conversation_id"]
    with page_client(world) as client:
        paired(world, client)
        pages = [client.get(f"/view?c={c}").text, client.get(f"/view?c={c}").text]
    for page in pages:
        assert "<img" not in page and "<script>alert" not in page
        assert "</strong><script>" not in page
        assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", page)
        shown = html_lib.unescape(page)
        assert '<img src=x onerror=\\"alert(1)\\">\\x1b[2J\\"coder' in shown
        assert "</strong><script>alert(2)</script>\\u202eRLO\\x07" in shown


def test_p5_r9_an_agents_question_a_restart_ended_says_the_agent_may_ask_again(world: World):
    """Issue 42: after a restart the page said of an agent's question "...nothing was
    answered or run; send a message to carry on (on the computer)", but a message to an
    agent's conversation is refused `not_eligible`. P5: the agent may ask again."""
    _, asked = agent_asks(world)
    c, r = asked["conversation_id"], asked["request_id"]
    world.service.runs.recover()  # what `clankie serve` does first after a restart (R3)
    with page_client(world) as client:
        paired(world, client)
        view = client.get(f"/view?c={c}&r={r}").text
    ended = html_lib.unescape(section(view, '<p id="ended"', "</p>"))
    assert f"it was {wording.RESTARTED_AGENT_QUESTION}" in ended
    assert "send a message" not in ended and "on the computer" not in ended
    assert "clankie restarted" in ended and "ask again" in ended


def test_h5_p3_an_answer_to_a_question_its_agent_cancelled_is_refused_naming_the_agent(
        world: World):
    """Issue 42: an answer tapped after the agent cancelled its own question was refused
    with "it was cancelled from another device"; the receipt says `answered_by.kind:
    agent`, so the refusal names the agent (H5: each refusal names its real cause)."""
    token, asked = agent_asks(world)
    c, r = asked["conversation_id"], asked["request_id"]
    with page_client(world) as client:
        csrf = paired(world, client)
        client.post("/api/take-control", json={}, headers=headers(csrf))
        bound = binding(world, c)
        world.call("agent_cancel", {"request_id": r}, token)
        reply = client.post("/api/answer", json=bound, headers=headers(csrf))
        view = html_lib.unescape(client.get(f"/view?c={c}&r={r}").text)
    said = reply.json()
    assert {k: said[k] for k in ("outcome", "message")} == {
        "outcome": "ended", "message": "Nothing was sent: this question had already ended "
        '(it was cancelled by agent "coder" through "claude-code", which asked it).'}
    assert said["code"] == "request_closed"  # and the receipt says who, as data
    assert said["receipt"]["answered_by"]["kind"] == "agent"
    ended = section(view, '<p id="ended"', "</p>")
    assert 'it was cancelled by agent "coder" through "claude-code", which asked it' in ended
    assert "another device" not in ended
