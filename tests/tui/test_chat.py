"""The TUI against a real `clankie serve` (Textual Pilot): notices, `/question` and its
commands bound to what was displayed, conflicts shown again, chat never an answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from textual.pilot import Pilot
from textual.widgets import Input, Static

from clankie import dto
from clankie.cli import chat as chat_command
from clankie.cli.main import main
from clankie.client import AsyncClient, NotYours
from clankie.peer import Listener
from clankie.tui.app import TAIL_WAIT_MS, ChatApp
from clankie.tui.decide import RETRY_S
from tests.e2e.served import Served, settle
from tests.polling import eventually_async
from tests.squatter import Squatter, needs_root

ASK = {"kind": "choice", "prompt": "Tabs or spaces?",
       "options": [{"label": "tabs", "description": "one per level"}, {"label": "spaces"}]}
SCRIPT = {"turns": [[{"say": "Let me ask first."}, {"ask": ASK}],
                    [{"say": "You chose {answer}."}]] + [[{"say": "ok"}]] * 20}


@pytest.fixture
def served(tmp_path: Path):
    server = Served.start(tmp_path / "home", script=SCRIPT)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def conversation(served: Served, tmp_path: Path) -> str:
    (tmp_path / "project").mkdir()
    with served.client() as client:
        return str(client.op(dto.CONVERSATION_CREATE,
                             dto.ConversationCreate(
                                 workspace=str(tmp_path / "project"))).conversation_id)


@pytest_asyncio.fixture
async def chat(served: Served, conversation: str) -> AsyncIterator[tuple[ChatApp, Pilot]]:
    token = served.home.token_file.read_text().strip()
    app = ChatApp(AsyncClient(f"unix://{served.home.socket}", token), conversation, "test")
    async with app.run_test(size=(100, 40)) as pilot:
        yield app, pilot


async def until(pilot: Pilot, predicate: Callable[[], Any], what: str,
                timeout: float = 20) -> None:
    await eventually_async(predicate, what, timeout=timeout, every=0.05, pause=pilot.pause)


async def type_line(app: ChatApp, pilot: Pilot, text: str) -> None:
    app.query_one(Input).value = text
    await pilot.press("enter")


async def asked(app: ChatApp, pilot: Pilot) -> None:
    """A message whose run asks; once the run has ended, the panel shows the snapshot the
    owner decides on: the run's end moves the revision (section 2), and the TUI reads the
    question again on it, as a person answering later would find it."""
    await type_line(app, pilot, "Set up tests, please.")
    await until(pilot, lambda: "Clankie asked a question" in app.transcript()
                and live(app) is not None, "the question notice")
    await until(pilot, lambda: not app.running, "the run that asked to end")
    latest = (await app._op(dto.INPUT_GET, {"conversation_id": app.conversation_id})).revision
    await until(pilot, lambda: app.snapshot is not None and app.snapshot.revision == latest,
                "the panel to show the question as it stands")


def live(app: ChatApp) -> dto.QuestionOut | None:
    """The pending question of the snapshot the panel shows."""
    return app.snapshot.pending if app.snapshot else None


def panel(app: ChatApp) -> str:
    return str(app.query_one("#question", Static).render())


async def displayed(app: ChatApp, pilot: Pilot) -> None:
    await type_line(app, pilot, "/question")
    await until(pilot, lambda: live(app) is not None and "2. spaces" in panel(app),
                "the question panel")


def pending(served: Served, c: str) -> dict[str, Any] | None:
    with served.client() as client:
        return client.call("input_get", {"conversation_id": c})["pending"]


async def test_v3_notice_then_question_then_answer_2_and_the_reply(chat, served, conversation):
    app, pilot = chat
    await asked(app, pilot)
    assert "clankie: Let me ask first." in app.transcript()
    await displayed(app, pilot)
    shown = panel(app)
    assert "1. tabs - one per level" in shown and "2. spaces" in shown
    assert app.snapshot is not None and f"revision {app.snapshot.revision}" in shown
    await type_line(app, pilot, "/question answer 2")
    await until(pilot, lambda: "clankie: You chose spaces." in app.transcript(), "the reply")
    assert "Accepted (receipt" in app.transcript()
    assert pending(served, conversation) is None
    await until(pilot, lambda: "That question ended: answered with spaces" in panel(app),
                "the panel to show it ended")


async def test_an_answer_from_the_cli_shows_the_question_ended_and_nothing_is_sent(
        chat, served, conversation):
    """SPEC section 10: a question that ended, by any surface, is shown as ended at once,
    never with live options; `/question answer N` then has nothing to answer."""
    app, pilot = chat
    await asked(app, pilot)
    await displayed(app, pilot)
    shown = app.snapshot
    assert shown is not None and shown.pending is not None
    with served.client() as client:  # someone answers from the CLI meanwhile
        client.op(dto.INPUT_ANSWER,
                  dto.InputAnswer(conversation_id=conversation,
                                  request_id=shown.pending.request_id,
                                  incarnation=shown.incarnation, revision=shown.revision,
                                  option_id=shown.pending.options[0].option_id))
    await until(pilot, lambda: "That question ended: answered with tabs" in panel(app),
                "the panel to show it ended")
    assert "/question answer" not in panel(app) and "no question" in str(
        app.query_one("#status", Static).render())
    await type_line(app, pilot, "/question answer 2")
    await until(pilot, lambda: "No question is pending; nothing was sent" in app.transcript(),
                "the refusal on the spot")
    with served.client() as client:
        receipt = client.op(dto.INPUT_GET,
                            dto.InputGet(conversation_id=conversation,
                                         request_id=shown.pending.request_id)).request
    assert receipt.receipt.answer.option_id == shown.pending.options[0].option_id


async def test_a_moved_revision_is_read_again_so_the_answer_binds_to_it(chat, served,
                                                                       conversation):
    """SPEC section 10 "Operator TUI": the panel shows the latest snapshot; a chat message
    moves the revision while the question is pending, the panel is read again, and the
    answer binds to the revision shown (the conflict path, when the revision moves unseen,
    is tests/tui/test_question_state.py's)."""
    app, pilot = chat
    await asked(app, pilot)
    await displayed(app, pilot)
    assert app.snapshot is not None
    moved_from = app.snapshot.revision
    await type_line(app, pilot, "one more thing")  # a chat message moves the revision
    with served.client() as client:
        settle(client, conversation)
        now = client.call("input_get", {"conversation_id": conversation})["revision"]
    assert now > moved_from
    await until(pilot, lambda: app.snapshot is not None and app.snapshot.revision == now,
                "the panel read again")
    await type_line(app, pilot, "/question answer 1")
    await until(pilot, lambda: "Accepted (receipt" in app.transcript(), "the accept")
    assert "The question changed" not in app.transcript()


async def test_text_on_a_choice_question_without_text_is_refused_locally(chat, served,
                                                                          conversation):
    app, pilot = chat
    await asked(app, pilot)
    await displayed(app, pilot)
    before = pending(served, conversation)
    await type_line(app, pilot, "/question text tabs please")
    await until(pilot, lambda: "takes one of its options, not text" in app.transcript(),
                "the local refusal")
    assert pending(served, conversation) == before


async def test_a2_v3_yes_is_chat_and_the_question_stays_pending(chat, served, conversation):
    app, pilot = chat
    await asked(app, pilot)
    await type_line(app, pilot, "yes")
    await until(pilot, lambda: "you: yes" in app.transcript(), "the chat message")
    with served.client() as client:
        settle(client, conversation)
        snapshot = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=conversation))
        runs = client.call("events_tail", {"conversation_id": conversation, "limit": 500})
    assert snapshot.pending is not None
    assert not any(e["type"] == "run_status" and e["kind"] == "continuation"
                   for e in runs["events"])
    last = runs["events"][-1]["seq"]
    await until(pilot, lambda: app.after >= last, "the TUI to receive every event")
    assert live(app) is not None  # messages and runs never made the TUI think it answered


async def test_a_question_is_shown_as_it_comes_and_cancel_ends_it(chat, served,
                                                                   conversation):
    app, pilot = chat
    await asked(app, pilot)
    await until(pilot, lambda: "2. spaces" in panel(app), "the panel, without /question")
    await type_line(app, pilot, "/question cancel")
    await until(pilot, lambda: "Cancelled the question." in app.transcript(), "the cancel")
    assert pending(served, conversation) is None
    await until(pilot, lambda: "That question ended: cancelled (explicit)" in panel(app),
                "the panel to show it ended")


async def test_help_lists_the_commands(chat):
    app, pilot = chat
    await type_line(app, pilot, "/help")
    await until(pilot, lambda: "/question answer N" in app.transcript(), "the help")
    await type_line(app, pilot, "/question answer")
    await until(pilot, lambda: "usage: /question answer N" in app.transcript(), "the usage")



async def test_a_slash_line_that_is_not_a_command_is_refused_and_sent_nowhere(
        chat, served, conversation):
    """SPEC section 10 "Operator TUI": text that starts with `/` and is not a command is
    refused on the spot with the commands, the nearest first, and sent nowhere; `//text`
    sends a chat message that starts with `/`."""
    app, pilot = chat
    for line in ("/stpo", "/stop now", "/quit", "/quesiton"):
        await type_line(app, pilot, line)
    await until(pilot, lambda: "/quesiton is not a command" in app.transcript(), "refusals")
    shown = " ".join(app.transcript().split())  # as said, not as wrapped on the screen
    assert ("/stpo is not a command; nothing was sent. Did you mean /stop? Commands: /stop,"
            in shown)
    assert "/quit is not a command; nothing was sent. Ctrl+Q quits." in shown
    assert "Did you mean /question? Commands: /question," in shown.split(
        "/quesiton is not a command", 1)[1]
    assert "usage: /stop (with nothing after it)" in shown
    assert "begin it with //" in shown
    await type_line(app, pilot, "//etc/hosts is odd")
    await until(pilot, lambda: "you: /etc/hosts is odd" in app.transcript(), "the message")
    with served.client() as client:
        settle(client, conversation)
        events = client.call("events_tail", {"conversation_id": conversation,
                                             "limit": 500})["events"]
    said = [e["text"] for e in events if e["type"] == "message" and e["author"] == "owner"]
    assert said == ["/etc/hosts is odd"], said

class SlowReplies:
    """The real client, with each answer's reply held back a moment after the service
    answered: the window in which a cancelled worker would lose an accepted answer."""

    def __init__(self, inner: AsyncClient) -> None:
        self.inner = inner

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.inner.call(op, payload)
        if op == "input_answer":
            await asyncio.sleep(0.5)
        return result

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_reading_the_question_right_after_answering_never_cancels_the_answer(
        served, conversation):
    token = served.home.token_file.read_text().strip()
    api = SlowReplies(AsyncClient(f"unix://{served.home.socket}", token))
    app = ChatApp(api, conversation, "test")
    async with app.run_test(size=(100, 40)) as pilot:
        await _answer_then_read(app, pilot, served, conversation)


async def _answer_then_read(app, pilot, served, conversation) -> None:
    await asked(app, pilot)
    await displayed(app, pilot)
    await type_line(app, pilot, "/question answer 1")
    await type_line(app, pilot, "/question")  # at once, while the answer is in flight
    await until(pilot, lambda: "Accepted (receipt" in app.transcript(), "the accept")
    assert pending(served, conversation) is None


class Counted:
    """The real client, counting the calls begun (what the app tried, and when it was
    waiting in a long poll)."""

    def __init__(self, inner: AsyncClient) -> None:
        self.inner = inner
        self.begun: list[tuple[str, int]] = []

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        self.begun.append((op, (payload or {}).get("wait_ms", 0)))
        return await self.inner.call(op, payload)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_after_a_restart_the_tui_is_connected_again_at_once(served, conversation):
    """SPEC section 10 "Operator TUI": when the service comes back after a restart, the TUI
    is connected again within 1 s (it said "disconnected, retrying" until its first long
    poll ended, up to 25 s, with nothing happening in the conversation). The tries are
    never more than 0.8 s apart; the first that succeeds connects, so the reconnect is
    seen long before a long poll (25 s) could end."""
    assert max(RETRY_S) < 1.0
    token = served.home.token_file.read_text().strip()
    api = Counted(AsyncClient(f"unix://{served.home.socket}", token))
    app = ChatApp(api, conversation, "test")
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: app.connected and ("events_tail", TAIL_WAIT_MS)
                    in api.begun, "the long poll")
        assert await asyncio.to_thread(served.stop) == 0
        await until(pilot, lambda: not app.connected, "the loss", timeout=30)
        lost = len(api.begun)
        await until(pilot, lambda: len(api.begun) >= lost + len(RETRY_S) + 1,
                    "the tries to reach their widest spacing")
        again = await asyncio.to_thread(lambda: Served.start(served.home.path, init=False,
                                                             script=SCRIPT))
        try:
            await until(pilot, lambda: app.connected, "the reconnect", timeout=5)
            await pilot.pause()
            assert "disconnected" not in str(app.query_one("#status", Static).render())
        finally:
            await asyncio.to_thread(again.stop)

@needs_root
async def test_t2_reconnecting_to_another_users_listener_sends_nothing(served, conversation):
    """The service stops and another user takes its TCP port: the reconnect loop reaches
    that listener, sends it nothing, says so and stops following (no retry sends)."""
    token = served.home.token_file.read_text().strip()
    port = int(served.tcp_url.rsplit(":", 1)[1])
    app = ChatApp(AsyncClient(served.tcp_url, token), conversation, served.tcp_url)
    squatter: Squatter | None = None
    try:
        async with app.run_test(size=(100, 40)) as pilot:
            await asked(app, pilot)  # the tail follows the service
            assert await asyncio.to_thread(served.stop) == 0
            squatter = await asyncio.to_thread(Squatter.tcp, port)
            await until(pilot, lambda: "is not yours" in app.transcript(), "the refusal",
                        timeout=30)
            assert f"the service at {served.tcp_url} is not yours" in app.transcript()
            await until(pilot, lambda: not any(w.group == "tail" and w.is_running
                                               for w in app.workers), "the tail to stop")
            assert not app.connected
    finally:
        if squatter is not None:
            squatter.close()
    assert squatter is not None
    heard = squatter.close()
    assert heard.connections >= 1 and heard.everything == b"", heard


class NotYoursApi:
    """A service address whose listener turned out to be another user's (T2)."""

    URL = "http://127.0.0.1:18900"

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        raise NotYours(self.URL, Listener(65534, "/proc/net/tcp"))

    async def aclose(self) -> None:
        pass


C = "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b"


async def test_t2_after_a_not_yours_refusal_the_status_says_stopped_and_quit_exits_5():
    """Refused under T2, the app stops following: the status line says so (not
    'disconnected, retrying'), and Ctrl+Q leaves with the CLI's exit 5."""
    app = ChatApp(NotYoursApi(), C, NotYoursApi.URL)
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: "is not yours" in app.transcript(), "the refusal")
        await pilot.pause()
        status = str(app.query_one("#status", Static).render())
        assert "not yours: stopped" in status and "retrying" not in status, status
        await pilot.press("ctrl+q")
    assert app.return_code == 5


async def test_quitting_a_chat_that_was_not_refused_exits_0(chat):
    app, pilot = chat
    await pilot.press("ctrl+q")
    assert app.return_code == 0


def test_cli_clankie_chat_exits_with_the_apps_return_code(monkeypatch: pytest.MonkeyPatch):
    class Connected:
        url, token, via_env = NotYoursApi.URL, "clk_x", False

        def __enter__(self) -> Connected:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def call(self, op: str, payload: dict[str, object]) -> dict[str, object]:
            assert op == "conversation_get"  # `clankie chat C` checks that C exists
            return {"conversation_id": payload["conversation_id"], "kind": "owner",
                    "workspace": None, "incarnation": C, "revision": 1,
                    "native_owner": None, "created_at": "2026-12-01T00:00:00Z"}

    def refused_run(self: ChatApp) -> None:
        self._return_code = 5  # what Ctrl+Q sets after a NotYours refusal

    monkeypatch.setattr(chat_command, "connect", Connected)
    monkeypatch.setattr(ChatApp, "run", refused_run)
    assert main(["chat", C]) == 5


class Gated(Counted):
    """The real client whose next call, once `hold` is set, waits for `go`: a restart that
    completes between two calls, as a fast one does, seen by no failed call."""

    def __init__(self, inner: AsyncClient) -> None:
        super().__init__(inner)
        self.hold = False
        self.held = asyncio.Event()
        self.go = asyncio.Event()

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        if self.hold:
            self.hold = False
            self.held.set()
            await self.go.wait()
        return await super().call(op, payload)


async def test_issue42_the_header_names_the_new_model_after_a_fast_restart_onto_another(
        served, conversation):
    """Issue 42: the header kept the old model after a restart fast enough that no call of
    the TUI failed (its long poll ended by the stop, the next one reached the new service):
    `service_info` was read again only after a failure. The stop now says so on the page
    it cuts short (`service_stopping`), and the TUI reconnects as after any loss."""
    from tests.e2e.test_providers import PROVIDERS
    from tests.fakes import model_endpoint

    token = served.home.token_file.read_text().strip()
    api = Gated(AsyncClient(f"unix://{served.home.socket}", token))
    app = ChatApp(api, conversation, "test")
    header = lambda: str(app.query_one("#where", Static).render())  # noqa: E731
    with model_endpoint() as endpoint:
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: "model scripted (offline)" in header() and
                        ("events_tail", TAIL_WAIT_MS) in api.begun, "the old model")
            api.hold = True
            assert await asyncio.to_thread(served.stop) == 0
            await until(pilot, api.held.is_set, "the next call, held")
            again = await asyncio.to_thread(lambda: Served.start(
                served.home.path, init=False, script=None,
                env=PROVIDERS["openai"].env(endpoint.url)))
            try:
                api.go.set()
                await until(pilot, lambda: "model openai/fake-gpt" in header(),
                            "the new model in the header", timeout=10)
                await until(pilot, lambda: app.connected, "connected again")
            finally:
                await asyncio.to_thread(again.stop)
                served.proc = again.proc
