"""SPEC section 12 (H2, H5, H6) in a real browser: Debian's Chromium driven by Playwright,
at a phone's viewport (390 x 844), against a real `clankie serve --web`.

One browser and one served process for the module (a second, with a short Take Control
lease, for the lease test); each test pairs its own browser context. Nothing here sleeps:
Playwright's `expect` waits for what the page must show (the lease test waits out a real
2 s lease that way).
`PHONE_SCREENSHOTS=1` writes the phone guide's screenshots (docs/phone.md) into docs/.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from clankie import dto
from tests.e2e.browser import chromium
from tests.e2e.served import ASK, ROOT, LineReader, Served, ask, clankie, init_home, settle

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}
WAIT_MS = 15_000  # how long the page may take to show something, on a loaded machine


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    executable = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def web(browser: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The served process (after the browser: without one, nothing is started)."""
    server = Served.start(tmp_path_factory.mktemp("phone") / "home", "--web", "127.0.0.1:0")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def phone(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                                  has_touch=True)
    try:
        yield context.new_page()
    finally:
        context.close()


def free_port() -> int:
    """A loopback port free now, for a `--web` listener that must keep its origin (the
    page's storage is per origin) across a restart of the service."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def phone_context(browser: Any) -> Any:
    """A phone's browser context of its own (its own cookies and storage)."""
    return browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)


def expect(locator: Any) -> Any:
    from playwright.sync_api import expect as playwright_expect

    return playwright_expect(locator)


def shot(page: Any, name: str, tmp_path: Path) -> None:
    where = ROOT / "docs" if os.environ.get("PHONE_SCREENSHOTS") == "1" else tmp_path
    page.screenshot(path=str(where / f"{name}.png"))


def pair(web: Served, page: Any, mode: str = "control", name: str = "phone") -> str:
    """Pair the page's browser as the owner would (open the URL, tap the button); its id."""
    with web.client() as operator:
        started = operator.call("device_pair_start", {"name": name, "mode": mode})
    page.goto(f"{web.web_url}/pair?code={started['code']}")
    page.get_by_role("button", name="Pair this browser").click()
    expect(page.get_by_text(f"This browser: {name}")).to_be_visible(timeout=WAIT_MS)
    return str(started["pairing_id"])


def take_control(page: Any) -> None:
    page.get_by_role("button", name="Take control").click()
    expect(page.locator("#lease.held")).to_be_visible(timeout=WAIT_MS)
    expect(page.locator("#take-control")).to_be_hidden()  # not offered while held


def on_a_question(served: Served, page: Any, workspace: Path) -> str:
    """A paired browser holding control, open on a question Clankie asked: its
    conversation."""
    pair(served, page)
    take_control(page)
    c = new_conversation(served, workspace)
    with served.client() as operator:
        ask(operator, c)
    page.goto(f"{served.web_url}/?c={c}")
    expect(page.get_by_role("heading", name="Tabs or spaces?")).to_be_visible()
    return c


def new_conversation(web: Served, workspace: Path) -> str:
    with web.client() as operator:
        return str(operator.op(dto.CONVERSATION_CREATE,
                               dto.ConversationCreate(workspace=str(workspace))).conversation_id)


def devices(web: Served) -> list[dict[str, Any]]:
    with web.client() as operator:
        return [c for c in operator.call("credential_list")["credentials"]
                if c["kind"] == "device"]


def test_h2_h5_h6_pair_from_the_printed_url_see_a_question_live_answer_by_tap(
        web: Served, phone: Any, workspace: Path, tmp_path: Path):
    env = dict(os.environ, CLANKIE_HOME=str(web.home.path), PYTHONPATH=str(ROOT / "src"))
    env.pop("CLANKIE_URL", None)
    env.pop("CLANKIE_TOKEN", None)
    cli = subprocess.Popen([sys.executable, "-m", "clankie", "devices", "pair", "--web",
                            "--name", "my phone", "--here"], env=env, cwd=ROOT, text=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    try:
        lines = LineReader(cli.stdout)
        url = lines.until(lambda line: "/pair?code=" in line, 30).strip()
        word = lines.until(lambda line: "confirmation word" in line, 30).split()[-1]
        before = len(devices(web))
        phone.goto(url)
        expect(phone.get_by_role("heading", name="Pair this browser as my phone?")
               ).to_be_visible()
        expect(phone.locator("#word")).to_have_text(word)
        shot(phone, "phone-pair", tmp_path)
        assert len(devices(web)) == before  # the GET (a link preview) paired nothing
        phone.get_by_role("button", name="Pair this browser").click()
        expect(phone.get_by_text("This browser: my phone")).to_be_visible(timeout=WAIT_MS)
        assert "code=" not in phone.url
        lines.until(lambda line: line.startswith("paired: my phone"), 30)
        assert cli.wait(timeout=30) == 0
        assert "clankie devices revoke" in "".join(lines.all_lines(10))  # H2
    finally:
        if cli.poll() is None:
            cli.kill()
        cli.wait(timeout=10)
    take_control(phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        request = ask(operator, c)
    # H6: the question appears without a reload
    expect(phone.get_by_role("heading", name="Tabs or spaces?")).to_be_visible(timeout=WAIT_MS)
    shot(phone, "phone-question", tmp_path)
    # H6: every control labelled (a screen reader names it), and one column at 360 px
    expect(phone.get_by_role("textbox", name="Or answer in your own words")).to_be_visible()
    for button in phone.get_by_role("button").all():
        assert (button.get_attribute("aria-label") or button.inner_text()).strip()
    phone.set_viewport_size({"width": 360, "height": 740})
    assert phone.evaluate("document.documentElement.scrollWidth") <= 360
    phone.get_by_role("button", name="Answer: tabs").tap()
    expect(phone.locator("#status")).to_have_text(
        "Accepted: \u201ctabs\u201d. Clankie has not necessarily run yet.", timeout=WAIT_MS)
    expect(phone.locator("#ended")).to_contain_text("it was answered from this browser",
                                                    timeout=WAIT_MS)
    shot(phone, "phone-accepted", tmp_path)
    with web.client() as operator:
        receipt = operator.op(dto.INPUT_GET,
                              dto.InputGet(conversation_id=c, request_id=request)).request.receipt
    assert receipt.outcome == "answered" and receipt.answered_by.kind == "device"
    assert phone.evaluate("document.cookie") == ""  # HttpOnly: no script can read it


def test_h5_answered_from_the_cli_first_the_page_shows_it_ended(
        web: Served, phone: Any, workspace: Path):
    pair(web, phone)
    take_control(phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        request = ask(operator, c)
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.get_by_role("heading", name="Tabs or spaces?")).to_be_visible()
    with web.client() as operator:
        snap = operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
    assert snap.pending is not None
    done = clankie("conversations", "answer", c, request, "--incarnation", snap.incarnation,
                   "--revision", str(snap.revision), "--option",
                   snap.pending.options[1].option_id, home=web.home.path)
    assert done.returncode == 0, done.stderr
    expect(phone.locator("#ended")).to_contain_text(
        "it was answered from the terminal (operator)", timeout=WAIT_MS)


def test_h5_h6_cancel_by_keyboard_takes_a_second_step_and_focus_stays_on_the_outcome(
        web: Served, phone: Any, workspace: Path):
    pair(web, phone)
    take_control(phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        ask(operator, c)
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.locator(".workspace")).to_contain_text("project")  # which project it is for
    phone.get_by_role("button", name="Cancel the question").focus()
    phone.keyboard.press("Enter")
    confirm = phone.get_by_role("button", name="Really cancel the question")
    expect(confirm).to_be_focused()
    with web.client() as operator:
        # the first step cancels nothing
        assert operator.op(dto.INPUT_GET,
                           dto.InputGet(conversation_id=c)).pending is not None
    phone.keyboard.press("Enter")
    expect(phone.locator("#status")).to_have_text(
        "Cancelled. No answer was sent, and no run of Clankie follows.", timeout=WAIT_MS)
    expect(phone.locator("#status")).to_be_focused()  # not the top of the page
    with web.client() as operator:
        assert operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending is None


def test_h5_a_stale_page_gets_the_conflict_and_the_fresh_question(
        web: Served, phone: Any, workspace: Path):
    pair(web, phone)
    take_control(phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        first = ask(operator, c)
    # Hold the page's live updates before it loads: it shows what it first showed (stale).
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)  # never answered: the request waits until the page closes

    def first_view_only(route: Any) -> None:  # the shell's first view (H3), then held
        if shown:
            held.append(route)
        else:
            shown.append(route)
            route.continue_()

    shown: list[Any] = []
    phone.route("**/api/events*", hold)
    phone.route("**/view*", first_view_only)
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.get_by_role("heading", name="Tabs or spaces?")).to_be_visible()
    with web.client() as operator:  # the question is answered elsewhere; another is asked
        snap = operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
        assert snap.pending is not None
        operator.op(dto.INPUT_ANSWER,
                    dto.InputAnswer(conversation_id=c, request_id=first,
                                    incarnation=snap.incarnation, revision=snap.revision,
                                    option_id=snap.pending.options[0].option_id))
        settle(operator, c)
        fresh = operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending
    assert fresh is not None and fresh.request_id != first
    phone.unroute("**/view*")
    phone.get_by_role("button", name="Answer: spaces").tap()  # still the old question
    expect(phone.locator("#status")).to_have_text(
        "Nothing was sent: this question had already ended (it was answered from the "
        "terminal (operator)).", timeout=WAIT_MS)
    expect(phone.locator(f'#answer[data-request="{fresh.request_id}"]')).to_be_visible(
        timeout=WAIT_MS)
    with web.client() as operator:
        # untouched
        assert operator.op(dto.INPUT_GET,
                           dto.InputGet(conversation_id=c)).pending.request_id == fresh.request_id
    phone.unroute("**/api/events*")
    # Issue 30: a refusal stayed said under questions it was not about. Once the question
    # shown changes again (answered elsewhere; Clankie asks anew), it is cleared.
    with web.client() as operator:
        snap = operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
        operator.op(dto.INPUT_ANSWER,
                    dto.InputAnswer(conversation_id=c, request_id=fresh.request_id,
                                    incarnation=snap.incarnation, revision=snap.revision,
                                    option_id=snap.pending.options[0].option_id))
    expect(phone.locator("#ended")).to_contain_text("answered from the terminal",
                                                    timeout=WAIT_MS)
    expect(phone.locator("#status")).to_have_text("", timeout=WAIT_MS)


def test_h5_a_read_only_browser_sees_the_question_and_no_answer_controls(
        web: Served, phone: Any, workspace: Path):
    pair(web, phone, mode="read_only", name="tablet")
    c = new_conversation(web, workspace)
    with web.client() as operator:
        ask(operator, c)
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.get_by_role("heading", name="Tabs or spaces?")).to_be_visible()
    expect(phone.get_by_text("read only")).to_be_visible()
    expect(phone.get_by_text("This browser can only look")).to_be_visible()
    expect(phone.get_by_role("list", name="The options").get_by_role("listitem")
           ).to_contain_text(["tabs", "spaces"])
    assert phone.get_by_role("button").count() == 0


def test_h2_h6_a_revoked_browser_stops_working_without_a_reload(
        web: Served, phone: Any, workspace: Path):
    device = pair(web, phone)
    take_control(phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        ask(operator, c)
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.get_by_role("button", name="Answer: tabs")).to_be_visible()
    assert clankie("devices", "revoke", device, home=web.home.path).returncode == 0
    expect(phone.locator("#revoked")).to_contain_text("no longer paired", timeout=WAIT_MS)
    expect(phone.locator("#status")).to_have_text("")  # said once, in plain words
    assert "`" not in phone.locator("body").inner_text()
    assert phone.get_by_role("button").count() == 0
    with web.client() as operator:
        assert operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending is not None


def test_a1_h5_take_control_then_the_lease_expires_and_the_answer_is_refused(
        browser: Any, tmp_path: Path, workspace: Path):
    short = Served.start(tmp_path / "home", "--web", "127.0.0.1:0",
                         env={"CLANKIE_TAKE_CONTROL_TTL": "2"})
    context = phone_context(browser)
    try:
        page = context.new_page()
        device = pair(short, page)
        c = new_conversation(short, workspace)
        with short.client() as operator:
            ask(operator, c)
        page.goto(f"{short.web_url}/?c={c}")
        take_control(page)
        expect(page.locator("#lease")).to_contain_text("do not hold", timeout=WAIT_MS)
        expect(page.locator("#status")).not_to_contain_text("took control")
        expect(page.get_by_role("button", name="Take control")).to_be_visible()
        assert not next(d for d in devices(short) if d["credential_id"] == device)[
            "holds_lease"]
        # H5: the lease ended, so the options are not active: a tap offers the one
        # confirmation that takes control and sends, and sends nothing by itself
        expect(page.locator('#answer button[data-option]').first).to_have_class(
            re.compile(r"\binactive\b"))
        page.get_by_role("button", name="Answer: tabs").tap()
        expect(page.locator("#control-confirm")).to_be_visible(timeout=WAIT_MS)
        expect(page.locator("#control-confirm-text")).to_have_text(
            "Take control and send tabs?")
        assert page.evaluate("[...document.querySelectorAll('#view button')]"
                             ".every(b => !b.disabled)")
        with short.client() as operator:
            assert operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending is not None
    finally:
        context.close()
        short.stop()


def test_p3_h5_an_agents_question_says_who_asks_and_is_answered_by_a_tap(
        web: Served, phone: Any, workspace: Path):
    """Section 13 on the page in a real browser: an agent's question shows who asks (its
    credential's name and its MCP client's, both chosen by others: markup in them is text,
    no element and no script) and that the agent is told an answer is a preference; a tap
    answers it as any other (A1), and the agent reads the answer (P4)."""
    from clankie import wording

    name, client = '<img src=x onerror="alert(1)">coder', "<script>alert(2)</script>cc"
    dialogs: list[str] = []
    phone.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    pair(web, phone)
    take_control(phone)
    with web.client() as operator:
        made = operator.call("credential_issue", {"kind": "agent", "name": name})
    with web.client(token=made["token"]) as agent:
        asked = agent.call("agent_ask", {
            "workspace": str(workspace), "client": client, "kind": "choice",
            "prompt": "Which licence do you prefer?",
            "options": [{"label": "MIT"}, {"label": "Apache-2.0"}]})
    c, r = asked["conversation_id"], asked["request_id"]
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.get_by_role("heading", name="Which licence do you prefer?")).to_be_visible(
        timeout=WAIT_MS)
    expect(phone.locator("#asker")).to_have_text(
        f'Asked by agent "{name.replace(chr(34), chr(92) + chr(34))}" through "{client}"')
    expect(phone.get_by_text(wording.AGENT_ANSWER)).to_be_visible()
    expect(phone.locator("nav a[aria-current=page]")).to_contain_text('agent "<img')
    assert phone.locator("#view img, #view script").count() == 0 and dialogs == []
    phone.get_by_role("button", name="Answer: MIT").tap()
    expect(phone.locator("#status")).to_have_text(
        "Accepted: \u201cMIT\u201d. " + wording.accepted({"run_id": None}), timeout=WAIT_MS)
    with web.client(token=made["token"]) as agent:
        read = agent.call("agent_wait", {"request_id": r, "wait_s": 0})
    assert (read["status"], read["answer"]["label"]) == ("answered", "MIT")
    assert read["answered_by"]["kind"] == "device" and dialogs == []


def test_h6_a_live_update_keeps_the_focus_and_the_cancel_step_where_the_owner_left_them(
        web: Served, phone: Any, workspace: Path):
    """H6 (keyboard use): the page's first live update redrew the view it was served with,
    so a keyboard user who had opened the cancel step lost it and the focus (the flaky
    run of the cancel test). A redraw of the same question keeps both."""
    pair(web, phone)
    take_control(phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        ask(operator, c)
    held: list[Any] = []

    def hold(route: Any) -> None:
        held.append(route)  # no live update until released

    phone.route("**/api/events*", hold)
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.get_by_role("heading", name="Tabs or spaces?")).to_be_visible()
    phone.get_by_role("button", name="Cancel the question").focus()
    phone.keyboard.press("Enter")
    confirm = phone.get_by_role("button", name="Really cancel the question")
    expect(confirm).to_be_focused()
    assert held, "the page did not ask for live updates"
    phone.evaluate("document.getElementById('state').dataset.before = 'yes'")
    second = workspace.parent / "second"
    second.mkdir()
    new_conversation(web, second)  # the view changes (its list): the next look redraws it
    phone.unroute("**/api/events*")  # the held request goes on to the service
    expect(phone.locator("#state")).not_to_have_attribute("data-before", "yes",
                                                          timeout=WAIT_MS)  # redrawn
    expect(confirm).to_be_visible()
    expect(confirm).to_be_focused()
    expect(phone.locator("#cancel-question")).to_have_attribute("aria-expanded", "true")
    with web.client() as operator:
        assert operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending is not None


# ------------------------------------------------ the two halves of the credential (H3, H7)


def test_h3_h7_a_notification_link_on_another_site_opens_the_question(
        web: Served, phone: Any, workspace: Path):
    """Issue 30: a paired phone that tapped `answer_url` in another app was told "This
    browser is not paired" (a `SameSite=Strict` cookie is not sent on a navigation that
    starts on another site). A page on http://localhost (another site than 127.0.0.1)
    links to the question, as a notification does."""
    pair(web, phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        ask(operator, c)
    link = f'<!doctype html><a id="go" href="{web.web_url}/?c={c}">A question</a>'.encode()

    class Elsewhere(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(link)

        def log_message(self, *args: Any) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Elsewhere)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        phone.goto(f"http://localhost:{other.server_address[1]}/")
        phone.locator("#go").click()
        expect(phone.get_by_role("heading", name="Tabs or spaces?")).to_be_visible(
            timeout=WAIT_MS)
        expect(phone.locator("#answer")).to_have_attribute("data-conversation", c)
    finally:
        other.shutdown()
        other.server_close()
        thread.join(timeout=10)


def test_h3_an_open_page_answers_after_a_service_restart_without_a_reload(
        browser: Any, tmp_path: Path, workspace: Path):
    """Issue 30: after a restart an open page's tap was refused "this request lacks the
    page's CSRF token; reload the page". The page's key outlives the restart (the store's
    page key), so the open page goes on: it shows the restart's ending, then the question
    asked after it, and its tap answers, with no reload."""
    port = free_port()  # the same port again after a restart: the same origin
    home = tmp_path / "home"
    first = Served.start(home, "--web", f"127.0.0.1:{port}")
    context = phone_context(browser)
    page = context.new_page()
    second = None
    try:
        c = on_a_question(first, page, workspace)
        loads = page.evaluate("performance.getEntriesByType('navigation').length")
        assert first.stop() == 0
        second = Served.start(home, "--web", f"127.0.0.1:{port}", init=False)
        with second.client() as operator:
            request = ask(operator, c)  # R3 ended the first; Clankie asks again
        expect(page.locator(f'#answer[data-request="{request}"]')).to_be_visible(
            timeout=WAIT_MS)
        if page.locator("#take-control").is_visible():
            take_control(page)
        page.get_by_role("button", name="Answer: tabs").tap()
        expect(page.locator("#status")).to_have_text(
            "Accepted: \u201ctabs\u201d. Clankie has not necessarily run yet.", timeout=WAIT_MS)
        assert page.evaluate("performance.getEntriesByType('navigation').length") == loads
        with second.client() as operator:
            receipt = operator.op(dto.INPUT_GET,
                                  dto.InputGet(conversation_id=c,
                                               request_id=request)).request.receipt
        assert receipt is not None and receipt.outcome == "answered"
    finally:
        context.close()
        first.stop()
        if second is not None:
            second.stop()


# ------------------------------------------------------------ issue 30: H5 and H6 findings


def test_h6_a_question_answered_elsewhere_while_typing_is_shown_ended_and_the_text_stays(
        web: Served, phone: Any, workspace: Path):
    """Issue 30: while the owner typed, a question answered from the terminal stayed live
    on the page (the page skipped its refresh while the box had focus). It is shown ended
    also while typing, and what was typed stays, to copy."""
    pair(web, phone)
    take_control(phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        request = ask(operator, c)
    phone.goto(f"{web.web_url}/?c={c}")
    typed = "I would rather use tabs, because " + "x" * 3_000
    box = phone.get_by_role("textbox", name="Or answer in your own words")
    box.fill(typed)
    expect(box).to_be_focused()
    with web.client() as operator:
        snap = operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
        operator.op(dto.INPUT_ANSWER,
                    dto.InputAnswer(conversation_id=c, request_id=request,
                                    incarnation=snap.incarnation, revision=snap.revision,
                                    option_id=snap.pending.options[1].option_id))
    expect(phone.locator("#ended")).to_contain_text(
        "it was answered from the terminal (operator)", timeout=WAIT_MS)
    # no longer answerable here (Clankie's next run may ask anew: another question)
    expect(phone.locator(f'#answer[data-request="{request}"]')).to_have_count(0)
    expect(phone.locator("#kept-text")).to_have_value(typed)


def test_h5_h6_a_conflict_shows_the_question_afresh_and_keeps_the_typed_text(
        web: Served, phone: Any, workspace: Path):
    """Issue 30: a conflict emptied what was typed. The page shows the question afresh and
    the text is back in its box."""
    pair(web, phone)
    take_control(phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        request = ask(operator, c)
    held: list[Any] = []
    shown: list[Any] = []

    def first_view_only(route: Any) -> None:  # the shell's first view, then held (stale)
        if shown:
            held.append(route)
        else:
            shown.append(route)
            route.continue_()

    phone.route("**/api/events*", lambda route: held.append(route))
    phone.route("**/view*", first_view_only)
    phone.goto(f"{web.web_url}/?c={c}")
    typed = "spaces, but only in the docs folder"
    phone.get_by_role("textbox", name="Or answer in your own words").fill(typed)
    with web.client() as operator:  # the owner says something: the revision moves on
        operator.call("conversation_send", {"conversation_id": c, "text": "one more thing"})
        settle(operator, c)
        assert operator.op(dto.INPUT_GET,
                           dto.InputGet(conversation_id=c)).pending.request_id == request
    phone.unroute("**/view*")
    phone.get_by_role("button", name="Send this answer").click()
    expect(phone.locator("#status")).to_contain_text("shown afresh", timeout=WAIT_MS)
    box = phone.get_by_role("textbox", name="Or answer in your own words")
    expect(box).to_have_value(typed)
    with web.client() as operator:
        # nothing was sent
        assert operator.op(dto.INPUT_GET,
                           dto.InputGet(conversation_id=c)).pending.request_id == request
    phone.unroute("**/api/events*")


def test_h6_r3_the_page_says_clankie_is_not_reachable_and_recovers_after_a_restart(
        browser: Any, tmp_path: Path, workspace: Path):
    """Issue 30: with the service down the page said "No question is waiting. This page
    updates by itself."; after a restart it said "it was cancelled" without why, under a
    stale "Not sent: the connection to clankie failed"."""
    port = free_port()  # the same port again after a restart: the same origin
    home = tmp_path / "home"
    first = Served.start(home, "--web", f"127.0.0.1:{port}")
    context = phone_context(browser)
    page = context.new_page()
    second = None
    try:
        on_a_question(first, page, workspace)
        other = workspace.parent / "quiet"
        other.mkdir()
        quiet = new_conversation(first, other)  # no question there: "updates by itself"
        tab = context.new_page()
        tab.goto(f"{first.web_url}/?c={quiet}")
        expect(tab.locator("#no-question")).to_be_visible(timeout=WAIT_MS)
        assert first.stop() == 0
        expect(page.locator("#status")).to_contain_text(
            "clankie is not reachable; retrying", timeout=WAIT_MS)
        expect(tab.locator("#status")).to_contain_text(
            "clankie is not reachable; retrying", timeout=WAIT_MS)
        expect(tab.locator("#no-question")).to_be_hidden()  # not said while it is untrue
        second = Served.start(home, "--web", f"127.0.0.1:{port}", init=False)
        expect(page.locator("#ended")).to_contain_text(
            "clankie restarted: nothing was answered or run", timeout=WAIT_MS)
        expect(page.locator("#status")).to_have_text("")
        expect(page.locator("#answer")).to_have_count(0)
    finally:
        context.close()
        first.stop()
        if second is not None:
            second.stop()


def agent_asks(served: Served, workspace: Path, name: str = "coder") -> tuple[str, dict[str, Any]]:
    """An agent credential (its token) and the question it asked (`agent_ask`'s result)."""
    with served.client() as operator:
        token = str(operator.call("credential_issue", {"kind": "agent", "name": name})["token"])
    with served.client(token=token) as agent:
        asked = agent.call("agent_ask", {
            "workspace": str(workspace), "client": "claude-code", "kind": "choice",
            "prompt": "Which licence do you prefer?",
            "options": [{"label": "MIT"}, {"label": "Apache-2.0"}]})
    return token, asked


def test_h5_a_multi_line_question_keeps_its_line_breaks_and_its_markup_stays_text(
        web: Served, phone: Any, workspace: Path):
    """Issue 42: the page showed a question of several lines as one line. Its line breaks
    (and indentation) show as written; everything else in it is still text (section 10)."""
    prompt = "Before I push:\n  1. <b>run</b> the tests\n  2. tag it &amp; go\n\nMay I?"
    pair(web, phone, mode="read_only", name="reader")
    with web.client() as operator:
        token = operator.call("credential_issue", {"kind": "agent", "name": "lines"})["token"]
    with web.client(token=token) as agent:
        asked = agent.call("agent_ask", {"workspace": str(workspace), "kind": "text",
                                         "prompt": prompt})
    phone.goto(f"{web.web_url}/?c={asked['conversation_id']}")
    shown = phone.locator("#prompt .theirs")
    expect(shown).to_be_visible(timeout=WAIT_MS)
    assert shown.inner_text() == prompt
    assert phone.locator("#prompt b").count() == 0
    assert shown.bounding_box()["width"] <= PHONE["width"]  # long lines still wrap


def test_e_h6_revoking_the_agent_ends_its_question_on_the_open_page_saying_why(
        web: Served, phone: Any, workspace: Path):
    """Issue 42: a revoked agent's question stayed pending on the page until it expired.
    It ends at once (`invalidated`, `asker_revoked`) and the open page says so (H6)."""
    pair(web, phone)
    token, asked = agent_asks(web, workspace, name="revoked-soon")
    phone.goto(f"{web.web_url}/?c={asked['conversation_id']}")
    expect(phone.get_by_role("heading", name="Which licence do you prefer?")).to_be_visible(
        timeout=WAIT_MS)
    with web.client(token=token) as agent:
        me = agent.call("whoami", {})["credential_id"]
    with web.client() as operator:
        operator.call("credential_revoke", {"credential_id": me})
    expect(phone.locator("#ended")).to_contain_text(
        "it was invalidated: the agent that asked it was revoked, so no answer can reach it",
        timeout=WAIT_MS)
    expect(phone.get_by_role("button", name="Answer: MIT")).to_have_count(0)


def test_r9_p5_after_a_restart_the_page_says_the_agent_may_ask_again_not_send_a_message(
        browser: Any, tmp_path: Path, workspace: Path):
    """Issue 42: after a restart the page said of an agent's question "...nothing was
    answered or run; send a message to carry on (on the computer)", yet a message to an
    agent's conversation is refused `not_eligible`; P5's way on is that the agent asks
    again."""
    from clankie import wording

    port = free_port()  # the same port again after a restart: the same origin
    home = tmp_path / "home"
    first = Served.start(home, "--web", f"127.0.0.1:{port}")
    context = phone_context(browser)
    page = context.new_page()
    second = None
    try:
        pair(first, page)
        _, asked = agent_asks(first, workspace)
        page.goto(f"{first.web_url}/?c={asked['conversation_id']}")
        expect(page.get_by_role("heading", name="Which licence do you prefer?")).to_be_visible(
            timeout=WAIT_MS)
        assert first.stop() == 0  # SIGTERM
        second = Served.start(home, "--web", f"127.0.0.1:{port}", init=False)
        ended = page.locator("#ended")
        expect(ended).to_contain_text(wording.RESTARTED_AGENT_QUESTION, timeout=WAIT_MS)
        assert "send a message" not in ended.inner_text()
        assert "on the computer" not in ended.inner_text()
    finally:
        context.close()
        first.stop()
        if second is not None:
            second.stop()


def test_h5_p3_a_tap_on_a_question_its_agent_cancelled_is_refused_naming_the_agent(
        web: Served, phone: Any, workspace: Path):
    """Issue 42: an answer tapped after the agent cancelled its own question was refused
    with "it was cancelled from another device"; the receipt says `answered_by.kind:
    agent`, so the refusal names the agent (H5: each refusal names its real cause)."""
    pair(web, phone)
    take_control(phone)
    token, asked = agent_asks(web, workspace, name="canceller")
    c, r = asked["conversation_id"], asked["request_id"]
    held: list[Any] = []
    shown: list[Any] = []

    def first_view_only(route: Any) -> None:  # the shell's first view (H3), then held
        if shown:
            held.append(route)
        else:
            shown.append(route)
            route.continue_()

    def hold(route: Any) -> None:
        held.append(route)  # never answered: the request waits until the page closes

    phone.route("**/api/events*", hold)  # the page stays as it first showed
    phone.route("**/view*", first_view_only)
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.get_by_role("heading", name="Which licence do you prefer?")).to_be_visible(
        timeout=WAIT_MS)
    with web.client(token=token) as agent:
        assert agent.call("agent_cancel", {"request_id": r})["question"]["status"] == \
            "cancelled"
    phone.get_by_role("button", name="Answer: MIT").tap()
    expect(phone.locator("#status")).to_have_text(
        "Nothing was sent: this question had already ended (it was cancelled by agent "
        '"canceller" through "claude-code", which asked it).', timeout=WAIT_MS)
    phone.unroute("**/view*")
    phone.unroute("**/api/events*")


def test_h5_before_control_a_tap_offers_take_control_and_send_as_one_confirmation(
        web: Served, phone: Any, workspace: Path, tmp_path: Path):
    """Issue 30: the options looked live before the owner held control, and a tap said
    "Not sent: tap Take control first, then answer again". Now they are shown not yet
    active, and a tap offers "Take control and send ANSWER?" with the lease's expiry."""
    pair(web, phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        request = ask(operator, c)
    phone.goto(f"{web.web_url}/?c={c}")
    expect(phone.locator("#inactive-note")).to_contain_text("not active until you take control")
    phone.get_by_role("button", name="Answer: tabs").tap()
    confirm = phone.get_by_role("button", name="Take control and send")
    expect(confirm).to_be_focused()
    expect(phone.locator("#control-confirm-text")).to_have_text("Take control and send tabs?")
    expect(phone.locator("#control-confirm-lease")).to_contain_text("for 1 h, until ")
    shot(phone, "phone-take-control-and-send", tmp_path)
    with web.client() as operator:
        # the tap alone sent nothing
        assert operator.op(dto.INPUT_GET,
                           dto.InputGet(conversation_id=c)).pending is not None
    confirm.tap()
    expect(phone.locator("#status")).to_have_text(
        "Accepted: \u201ctabs\u201d. Clankie has not necessarily run yet.", timeout=WAIT_MS)
    expect(phone.locator("#lease.held")).to_be_visible(timeout=WAIT_MS)
    with web.client() as operator:
        receipt = operator.op(dto.INPUT_GET,
                              dto.InputGet(conversation_id=c, request_id=request)).request.receipt
    assert receipt is not None and receipt.outcome == "answered"


def test_h5_a_held_enter_opens_the_confirmation_and_sends_nothing(
        web: Served, phone: Any, workspace: Path):
    """Red team of issue 30: holding Enter on an option opened "Take control and send
    ...?", moved the focus to its button, and the key's repeat pressed it: control taken
    and the answer sent with no deliberate second press. A repeat acts on nothing."""
    mine = pair(web, phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        ask(operator, c)
    phone.goto(f"{web.web_url}/?c={c}")
    phone.get_by_role("button", name="Answer: tabs").focus()
    phone.keyboard.down("Enter")
    confirm = phone.get_by_role("button", name="Take control and send")
    expect(confirm).to_be_focused()
    for _ in range(5):
        phone.keyboard.down("Enter")  # held: each a keydown with `repeat`
    phone.keyboard.up("Enter")
    expect(confirm).to_be_visible()
    with web.client() as operator:
        assert operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending is not None
    assert not [d for d in devices(web) if d["holds_lease"] and d["credential_id"] == mine]
    phone.keyboard.press("Enter")  # a fresh press is deliberate
    expect(phone.locator("#status")).to_have_text(
        "Accepted: \u201ctabs\u201d. Clankie has not necessarily run yet.", timeout=WAIT_MS)


def test_h5_a_long_word_from_others_wraps_within_the_phones_width(
        web: Served, phone: Any, workspace: Path):
    """Issue 30: a 200-character word made the page 10,931 px wide."""
    pair(web, phone)
    word = "a" * 200
    with web.client() as operator:
        made = operator.call("credential_issue", {"kind": "agent", "name": "b" * 200})
    with web.client(token=made["token"]) as agent:
        asked = agent.call("agent_ask", {
            "workspace": str(workspace), "client": "c" * 200, "kind": "choice",
            "prompt": f"Is {word} right?",
            "options": [{"label": word, "description": word}, {"label": "no"}]})
    phone.goto(f"{web.web_url}/?c={asked['conversation_id']}")
    expect(phone.locator("#prompt")).to_contain_text(word, timeout=WAIT_MS)
    assert phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]


def test_h5_the_question_shows_what_led_to_it_and_clankies_reply_after_the_answer(
        browser: Any, tmp_path: Path, workspace: Path):
    """Issue 30: above the question, what led to it (the owner's message, Clankie's reply,
    its tool activity, one line each) and who asks; after an answer, Clankie's reply when
    it comes. `PHONE_SCREENSHOTS=1` keeps docs/phone.md's screenshot of it."""
    script = {"turns": [[{"say": "I will look at the project first."},
                         {"tool": "list_files", "args": {"path": "."}},
                         {"say": "It has no .editorconfig yet."}, {"ask": ASK}],
                        [{"say": "Done: {answer} from now on."}]]}
    served = Served.start(tmp_path / "home", "--web", "127.0.0.1:0", script=script)
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                                  has_touch=True)
    try:
        page = context.new_page()
        pair(served, page)
        take_control(page)
        c = new_conversation(served, workspace)
        with served.client() as operator:
            ask(operator, c, "Please set up the formatting for this project.")
        page.goto(f"{served.web_url}/?c={c}")
        lines = page.locator("#context li")
        expect(lines.first).to_contain_text(
            "You: Please set up the formatting for this project.", timeout=WAIT_MS)
        expect(page.locator("#context")).to_contain_text(
            "Clankie: I will look at the project first.")
        expect(page.locator("#context li.tool")).to_have_count(1)
        expect(page.locator("#asker")).to_have_text("Asked by Clankie")
        shot(page, "phone-question-context", tmp_path)
        page.get_by_role("button", name="Answer: tabs").tap()
        expect(page.locator("#context")).to_contain_text("Clankie: Done: tabs from now on.",
                                                         timeout=WAIT_MS)
        expect(page.locator("#ended")).to_contain_text("answered from this browser")
        shot(page, "phone-ended", tmp_path)
    finally:
        context.close()
        served.stop()


def test_h5_before_control_a_typed_answer_takes_the_same_one_confirmation(
        web: Served, phone: Any, workspace: Path):
    pair(web, phone)
    c = new_conversation(web, workspace)
    with web.client() as operator:
        request = ask(operator, c)
    phone.goto(f"{web.web_url}/?c={c}")
    phone.get_by_role("textbox", name="Or answer in your own words").fill("tabs, width 4")
    phone.get_by_role("button", name="Send this answer").click()
    expect(phone.locator("#control-confirm-text")).to_have_text(
        "Take control and send your text answer?", timeout=WAIT_MS)
    with web.client() as operator:
        # nothing sent yet
        assert operator.op(dto.INPUT_GET,
                           dto.InputGet(conversation_id=c)).pending.request_id == request
    phone.get_by_role("button", name="Take control and send").click()
    expect(phone.locator("#status")).to_have_text(
        "Accepted: your text answer. Clankie has not necessarily run yet.", timeout=WAIT_MS)
    expect(phone.locator("#kept")).to_have_count(0)  # sent: nothing left to copy
    with web.client() as operator:
        receipt = operator.op(dto.INPUT_GET,
                              dto.InputGet(conversation_id=c, request_id=request)).request.receipt
    assert receipt is not None and receipt.answer.text == "tabs, width 4"


# ----------------------------------------------- docs/phone.md's notification (H7)


def readme_ntfy_click_recipe() -> list[str]:
    """The `notify_command` that makes `answer_url` an ntfy notification's click action
    (docs/phone.md, step 4; the README's until issue 42), as the owner would paste it."""
    readme = (ROOT / "docs" / "phone.md").read_text()
    step = readme[readme.index("**4. Get a notification that opens it.**"):]
    line = next(x.strip() for x in step.splitlines() if x.strip().startswith("notify_command"))
    import tomllib

    command: list[str] = tomllib.loads(line)["notify_command"]
    return command


class Ntfy(http.server.BaseHTTPRequestHandler):
    """A receiver of ntfy's publish API (`POST /TOPIC`, the message as the body, `Click`
    as a header; it answers the message as JSON), keeping what it received."""

    received: ClassVar[list[dict[str, str]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
        got = {"topic": self.path.strip("/"), "message": body,
               "click": self.headers.get("Click", "")}
        type(self).received.append(got)
        reply = json.dumps({"id": "x", "event": "message", **got}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args: Any) -> None:
        pass


def test_h7_the_readmes_ntfy_recipe_carries_answer_url_and_the_tap_opens_the_question(
        browser: Any, tmp_path: Path, workspace: Path):
    """H7 end to end: docs/phone.md's recipe, pasted as is but for the topic's address, is run
    by the notifier; the receiver (ntfy's publish API) gets the prompt as the message and
    `answer_url` as the click action; opening it in the paired browser shows the question.
    (Tried against this receiver only, not a real ntfy server: docs/phone.md says so.)"""
    command = readme_ntfy_click_recipe()
    assert shutil.which("jq") and shutil.which("curl"), "the recipe runs jq and curl"
    Ntfy.received = []
    receiver = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ntfy)
    thread = threading.Thread(target=receiver.serve_forever, daemon=True)
    thread.start()
    topic = f"http://127.0.0.1:{receiver.server_address[1]}/clankie"
    command = [part.replace("https://ntfy.example.org/clankie", topic) for part in command]
    port = free_port()  # the same port again after a restart: the same origin
    home = tmp_path / "home"
    init_home(home)
    (home / "settings.toml").write_text(
        f"web_origin = 'http://127.0.0.1:{port}'\nnotify_command = {json.dumps(command)}\n")
    served = Served.start(home, "--web", f"127.0.0.1:{port}", init=False)
    context = phone_context(browser)
    page = context.new_page()
    try:
        pair(served, page)
        c = new_conversation(served, workspace)
        with served.client() as operator:
            request = ask(operator, c)
        deadline = time.monotonic() + 30
        while not Ntfy.received and time.monotonic() < deadline:
            time.sleep(0.05)
        assert Ntfy.received, "the notifier published nothing"
        sent = Ntfy.received[0]
        assert sent["topic"] == "clankie" and sent["message"].strip() == "Tabs or spaces?"
        assert sent["click"] == f"http://127.0.0.1:{port}/?c={c}&r={request}"
        page.goto(sent["click"])
        expect(page.locator(f'#answer[data-request="{request}"]')).to_be_visible(
            timeout=WAIT_MS)
        # New-owner trial: an old notification's link opened the question asked after it
        # as if it were the same one. It names its question: that one is said ended.
        with served.client() as operator:
            snap = operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
            assert snap.pending is not None
            operator.op(dto.INPUT_ANSWER,
                        dto.InputAnswer(conversation_id=c, request_id=request,
                                        incarnation=snap.incarnation, revision=snap.revision,
                                        option_id=snap.pending.options[0].option_id))
            settle(operator, c)
            newer = ask(operator, c, "again")
        page.goto("about:blank")
        page.goto(sent["click"])
        expect(page.locator("#ended")).to_contain_text(
            "The question you were looking at has ended: it was answered from the terminal",
            timeout=WAIT_MS)
        expect(page.locator(f'#answer[data-request="{newer}"]')).to_be_visible()
    finally:
        context.close()
        served.stop()
        receiver.shutdown()
        receiver.server_close()
        thread.join(timeout=10)


# ------------------------------------------------------ replies that stream (SPEC D17)

# Text from others at its most hostile: markup, a script, a right-to-left override, an
# escape sequence, a lone joiner (made visible) and an emoji sequence (kept whole).
HOSTILE = ("<b>bold</b> <script>window.pwned = 1</script> \u202egnp.exe \x1b[31mred "
           "a\u200db \U0001f469\u200d\U0001f4bb")
STREAM_ENV = {"CLANKIE_STREAM_INTERVAL": "0.05"}


def words(n: int, start: int = 0) -> str:
    return " ".join(f"word{i}" for i in range(start, start + n))


@contextlib.contextmanager
def streaming(browser: Any, tmp_path: Path, script: dict[str, Any]) -> Iterator[
        tuple[Served, Any]]:
    """A `clankie serve --web` of its own whose scripted model writes word by word, and a
    phone's page; both stopped after."""
    served = Served.start(tmp_path / "home", "--web", "127.0.0.1:0", script=script,
                          env=STREAM_ENV)
    context = browser.new_context(viewport=PHONE, device_scale_factor=2, is_mobile=True,
                                  has_touch=True)
    try:
        yield served, context.new_page()
    finally:
        context.close()
        served.stop()


# What the page asks for (its GETs: the view and the long-poll), each with its time, and
# whether its reply's text ever went missing or was shown twice (checked at every change
# of the page, once the first words were there).
WATCH = """
window.asked = [];
const fetched = window.fetch;
window.fetch = function (url, options) {
  if (!options || !options.method || options.method === "GET") {
    window.asked.push({ at: performance.now(), url: String(url) });
  }
  return fetched.apply(this, arguments);
};
window.watching = { phrase: null, appeared: false, missing: 0, twice: 0, said: [] };
new MutationObserver(function () {
  const w = window.watching;
  const said = document.getElementById("said");
  if (said && said.textContent && said.textContent !== w.said[w.said.length - 1]) {
    w.said.push(said.textContent);
  }
  if (!w.phrase || !document.getElementById("view")) return;
  const text = document.getElementById("view").innerText;  // not the announcement
  const count = text.split(w.phrase).length - 1;
  if (count > 0) w.appeared = true;
  if (w.appeared && count === 0) w.missing += 1;
  if (count > 1) w.twice += 1;
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def send(served: Served, c: str, text: str = "go") -> str:
    with served.client() as operator:
        return str(operator.call("conversation_send", {"conversation_id": c,
                                                       "text": text})["run_id"])


def test_d17_the_live_reply_grows_as_text_and_its_stored_message_replaces_it_once(
        browser: Any, tmp_path: Path, workspace: Path):
    """The reply shows below the last messages as it is written and grows; hostile text is
    text (no markup runs, control and format characters made visible as the view shows
    them); the stored message takes its place in one step, never missing, never twice,
    and is announced once; the page asks at most 4 times a second, with no text in a URL."""
    from clankie.text import visible

    said = HOSTILE + " " + words(60)
    with streaming(browser, tmp_path, {"turns": [[{"say": said, "pace_ms": 50}]]}) as (
            served, page):
        page.add_init_script(WATCH)
        pair(served, page)
        c = new_conversation(served, workspace)
        page.goto(f"{served.web_url}/?c={c}")
        expect(page.locator("#no-question")).to_be_visible(timeout=WAIT_MS)
        page.evaluate("window.watching.phrase = 'word7 word8'")
        send(served, c, "Say something hostile")
        live = page.locator("#live-text")
        expect(live).to_contain_text("word3", timeout=WAIT_MS)
        shot(page, "phone-live-reply", tmp_path)
        early = live.text_content() or ""
        expect(live).to_contain_text("word30", timeout=WAIT_MS)
        later = live.text_content() or ""
        assert visible(said).startswith(early) and visible(said).startswith(later)
        assert len(later) > len(early)
        expect(page.locator("#live-state")).to_contain_text("Clankie is writing (")
        assert page.locator("#live").get_attribute("aria-live") == "off"
        assert page.locator("#live").get_attribute("aria-busy") == "true"
        stored = page.locator("#context li[data-message]")
        expect(stored).to_contain_text("word59", timeout=WAIT_MS)
        expect(page.locator("#live")).to_be_hidden()
        shot(page, "phone-live-stored", tmp_path)
        assert stored.locator(".theirs").text_content() == visible(said)
        assert page.evaluate("window.pwned") is None
        assert page.locator("#live b, #live script, #context b, #context script").count() == 0
        watched = page.evaluate("window.watching")
        assert watched["appeared"] and watched["missing"] == 0 and watched["twice"] == 0
        assert len(watched["said"]) == 1 and "word59" in watched["said"][0]
        asked = page.evaluate("window.asked")
    times = sorted(a["at"] for a in asked)
    assert len(times) > 8  # it did follow the reply
    for i, start in enumerate(times):  # D17: at most 4 a second, in any second
        assert len([t for t in times[i:] if t < start + 1000]) <= 4, times
    for url in (a["url"] for a in asked):  # H4: IDs and numbers only
        assert "word" not in url and "bold" not in url and "key" not in url.lower()


def test_d17_h6_typed_text_and_focus_survive_live_updates_and_a_stop_keeps_the_words(
        browser: Any, tmp_path: Path, workspace: Path):
    """While Clankie writes under a pending question, the owner types: the form, its text,
    the caret and the focus are never redrawn by a live update. A stop keeps the words
    shown, marked as stopped (D7)."""
    script = {"turns": [[{"ask": ASK}, {"say": words(300), "pace_ms": 60}]]}
    with streaming(browser, tmp_path, script) as (served, page):
        pair(served, page)
        take_control(page)
        c = new_conversation(served, workspace)
        page.goto(f"{served.web_url}/?c={c}")
        expect(page.locator("#no-question")).to_be_visible(timeout=WAIT_MS)
        run_id = send(served, c)
        expect(page.get_by_role("heading", name="Tabs or spaces?")).to_be_visible(
            timeout=WAIT_MS)
        live = page.locator("#live-text")
        expect(live).to_contain_text("word", timeout=WAIT_MS)
        box = page.get_by_role("textbox", name="Or answer in your own words")
        box.click()
        box.press_sequentially("tabs, because")
        page.evaluate("""() => {
            const box = document.getElementById("answer-text");
            box.setSelectionRange(4, 4);
            box.dataset.mark = "mine";  // gone if the form were drawn again
            document.getElementById("answer").dataset.mark = "mine";
        }""")
        before = len(live.text_content() or "")
        expect(live).not_to_have_text(re.compile(f"^.{{0,{before + 40}}}$", re.S),
                                      timeout=WAIT_MS)  # several updates later
        shot(page, "phone-live-typing", tmp_path)
        assert page.evaluate("""() => {
            const box = document.getElementById("answer-text");
            return [box.dataset.mark, document.getElementById("answer").dataset.mark,
                    box.value, document.activeElement === box, box.selectionStart];
        }""") == ["mine", "mine", "tabs, because", True, 4]
        with served.client() as operator:
            operator.call("run_cancel", {"run_id": run_id})
        stopped = page.locator("#context li[data-message]")
        expect(stopped).to_contain_text("(stopped by you)", timeout=WAIT_MS)
        expect(page.locator("#live")).to_be_hidden()
        expect(box).to_have_value("tabs, because")
        assert (stopped.locator(".theirs").text_content() or "").startswith("word0 word1")


def test_d17_s4_a_read_only_browser_sees_the_live_reply_and_gains_no_control(
        browser: Any, tmp_path: Path, workspace: Path):
    with streaming(browser, tmp_path, {"turns": [[{"say": words(80), "pace_ms": 50}]]}) as (
            served, page):
        pair(served, page, mode="read_only", name="tablet")
        c = new_conversation(served, workspace)
        page.goto(f"{served.web_url}/?c={c}")
        expect(page.locator("#no-question")).to_be_visible(timeout=WAIT_MS)
        send(served, c)
        expect(page.locator("#live-text")).to_contain_text("word10", timeout=WAIT_MS)
        assert page.get_by_role("button").count() == 0
        assert page.locator("#live textarea, #live input, #live a").count() == 0
        expect(page.locator("#context li[data-message]")).to_contain_text(
            "word79", timeout=WAIT_MS)


def test_d17_a_reader_scrolled_up_in_a_long_live_reply_stays_there_and_keeps_a_selection(
        browser: Any, tmp_path: Path, workspace: Path):
    """D17: a live update changes only the live element's text. A reader who scrolled up
    in a reply longer than its box stays where they are, and text they selected stays
    selected (so it can be copied while the reply is written); the element is never taken
    out of its place. Scrolled back to the end, the box follows the reply again."""
    with streaming(browser, tmp_path, {"turns": [[{"say": words(600), "pace_ms": 40}]]}) as (
            served, page):
        pair(served, page)
        c = new_conversation(served, workspace)
        page.goto(f"{served.web_url}/?c={c}")
        expect(page.locator("#no-question")).to_be_visible(timeout=WAIT_MS)
        send(served, c)
        live = page.locator("#live-text")
        expect(live).to_contain_text("word", timeout=WAIT_MS)
        page.wait_for_function(  # longer than its box by well over a screenful
            "() => { const t = document.getElementById('live-text');"
            " return t.scrollHeight > t.clientHeight + 400; }", timeout=WAIT_MS)
        page.evaluate("""() => {
            const slot = document.getElementById("live-slot");
            window.moved = 0;  // the live element taken out of its slot, or put back in
            new MutationObserver(function (changes) {
              for (const change of changes) {
                for (const node of [...change.addedNodes, ...change.removedNodes]) {
                  if (node.id === "live") window.moved += 1;
                }
              }
            }).observe(slot, { childList: true });
            const text = document.getElementById("live-text");
            text.scrollTop = 100;
            const words = text.querySelector(".theirs").firstChild;
            const range = document.createRange();
            range.setStart(words, 6);   // "word1 word2" of "word0 word1 word2 …"
            range.setEnd(words, 17);
            const selection = window.getSelection();
            selection.removeAllRanges();
            selection.addRange(range);
        }""")
        assert page.evaluate("window.getSelection().toString()") == "word1 word2"
        before = len(live.text_content() or "")
        expect(live).not_to_have_text(re.compile(f"^.{{0,{before + 60}}}$", re.S),
                                      timeout=WAIT_MS)  # several updates later
        assert page.evaluate("""() => [document.getElementById("live-text").scrollTop,
                                        window.getSelection().toString(), window.moved]
                             """) == [100, "word1 word2", 0]
        # At the end again, the box follows the reply as it grows.
        page.evaluate("""() => { const t = document.getElementById("live-text");
                                 t.scrollTop = t.scrollHeight; }""")
        before = len(live.text_content() or "")
        expect(live).not_to_have_text(re.compile(f"^.{{0,{before + 60}}}$", re.S),
                                      timeout=WAIT_MS)
        assert page.evaluate("""() => { const t = document.getElementById("live-text");
            return t.scrollTop + t.clientHeight >= t.scrollHeight - 8; }""")


def test_d17_a_cut_off_reply_no_longer_last_shows_its_line_breaks_and_nothing_acts(
        browser: Any, tmp_path: Path, workspace: Path):
    """A cut-off reply in "Latest in this conversation" showed its line breaks as a literal
    `\\n` once another line followed it (its text came escaped into a `pre-wrap` line). It
    shows them as line breaks, as the live box and the last whole reply do (D17); markup is
    text, and control characters are made visible (SPEC section 10)."""
    from clankie.text import visible

    said = ("First line <b>bold</b>\nsecond line \x1b[31mred\nthird line " + words(200))
    script = {"turns": [[{"say": said, "pace_ms": 40}], [{"say": "ok"}]]}
    with streaming(browser, tmp_path, script) as (served, page):
        pair(served, page)
        c = new_conversation(served, workspace)
        page.goto(f"{served.web_url}/?c={c}")
        expect(page.locator("#no-question")).to_be_visible(timeout=WAIT_MS)
        run_id = send(served, c)
        expect(page.locator("#live-text")).to_contain_text("word3", timeout=WAIT_MS)
        with served.client() as operator:
            operator.call("run_cancel", {"run_id": run_id})
        cut = page.locator("#context li.cut-off")
        expect(cut).to_contain_text("(stopped by you)", timeout=WAIT_MS)
        send(served, c, "next")  # the cut-off reply is no longer the last line
        expect(page.locator("#context li").last).to_contain_text("ok", timeout=WAIT_MS)
        expect(cut).not_to_have_class(re.compile(r"\bwhole\b"))
        theirs = cut.locator(".theirs")
        shown = theirs.text_content() or ""
        assert "\\n" not in shown and shown.startswith(
            "First line <b>bold</b>\nsecond line \\x1b[31mred\nthird line "), shown
        assert visible(said).startswith(shown.rstrip("…"))
        assert "\nsecond line" in theirs.inner_text()  # drawn as a line break
        assert page.locator("#context b, #context script").count() == 0
