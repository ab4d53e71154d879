"""The TUI after a restart (SPEC R9), `/continue`, and SPEC section 10 "Operator TUI"'s last
paragraph: a chat line that looks like an answer is sent as chat and then said to be one,
with the command that answers; the question is logged once; the panel's ID line is left
out when the window has fewer than 30 rows.

Against `tests.tui.fake.FakeService` (Pilot), a real `clankie serve` (Pilot) and the real
`clankie chat` in tmux."""

from __future__ import annotations

import asyncio
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest

from clankie import wording
from clankie.client import AsyncClient
from clankie.tui.app import ChatApp
from tests.e2e.served import Served, settle
from tests.tui.fake import C, FakeService
from tests.tui.test_chat import SCRIPT, asked, chat, conversation, served  # noqa: F401
from tests.tui.test_question_state import chat as fake_chat
from tests.tui.test_question_state import panel, settled, type_line, until

CONTINUE = ("conversation_send", {"conversation_id": C, "text": "Carry on where you left off."})


def flat(text: str) -> str:
    """As said, not as wrapped on the screen."""
    return " ".join(text.split())


def sent(fake: FakeService) -> list[tuple[str, dict[str, Any]]]:
    """What the app asked the service to change (every op but the reads)."""
    return [(op, p) for op, p in fake.calls
            if op not in ("events_tail", "input_get", "service_info", "conversation_get")]


async def test_r9_a_restart_s_endings_are_said_in_the_log_and_panel_with_how_to_carry_on():
    fake = FakeService()
    app = fake_chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        fake.ask()
        await settled(app, pilot, fake, "ask")
        fake.stop()
        await until(pilot, lambda: not app.connected, "the loss")
        fake.start(orphaned="0000000a-0000-4000-8000-00000000000a")
        await until(pilot, lambda: wording.RUN_INTERRUPTED in flat(app.transcript()),
                    "the orphaned run said")
        said = flat(app.transcript())
        assert f"was {wording.RESTARTED_QUESTION}" in said
        assert "/continue" in said.split(wording.RESTARTED_QUESTION, 1)[1]
        await until(pilot, lambda: wording.RESTARTED_QUESTION in flat(panel(app)),
                    "the panel says it")
        assert "/continue" in panel(app)
        assert not [op for op, _ in sent(fake)]  # nothing was answered or sent again


async def test_r9_continue_sends_carry_on_as_an_ordinary_owner_message():
    fake = FakeService()
    app = fake_chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        await type_line(app, pilot, "/continue")
        await until(pilot, lambda: "you: Carry on where you left off." in app.transcript(),
                    "the message")
        assert sent(fake) == [CONTINUE]  # a message, never a replay of anything
        await type_line(app, pilot, "/help")
        await until(pilot, lambda: "/continue" in app.transcript(), "the help naming it")
        await type_line(app, pilot, "/contiune")
        await until(pilot, lambda: "/contiune is not a command" in app.transcript(),
                    "the refusal")
        assert "Did you mean /continue?" in flat(app.transcript())
        await type_line(app, pilot, "/continue now")
        await until(pilot, lambda: "usage: /continue" in app.transcript(), "the usage")
        assert sent(fake) == [CONTINUE]


@pytest.mark.parametrize(("line", "command"), [
    ("1", "/question answer 1"), ("  2 ", "/question answer 2"), ("SPACES", "/question answer 2"),
    ("Tabs", "/question answer 1"), ("yes", "/question answer N"), ("No", "/question answer N"),
])
async def test_operator_tui_chat_that_looks_like_an_answer_is_sent_then_said_to_be_chat(
        line: str, command: str):
    """SPEC section 10 "Operator TUI": sent as chat (A2), and the next line says it was a
    chat message, not an answer, and gives the command that answers."""
    fake = FakeService()
    app = fake_chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        fake.ask()
        await settled(app, pilot, fake, "ask")
        await type_line(app, pilot, line)
        await until(pilot, lambda: "not an answer" in app.transcript(), "the hint")
        assert sent(fake) == [("conversation_send", {"conversation_id": C,
                                                     "text": line.rstrip("\n")})]
        lines = app.transcript().splitlines()
        said = next(i for i, text in enumerate(lines)
                    if "you:" in text and text.rstrip().endswith(line.strip()))
        assert "was a chat message, not an answer" in lines[said + 1]
        assert command in flat("\n".join(lines[said + 1:]))
        assert fake.pending is not None


async def test_operator_tui_other_chat_or_chat_without_a_question_gets_no_hint():
    fake = FakeService()
    app = fake_chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        await type_line(app, pilot, "yes")  # no question shown: only chat
        fake.ask()
        await settled(app, pilot, fake, "ask")
        await type_line(app, pilot, "Look at the README first.")
        await until(pilot, lambda: "you: Look at the README first." in app.transcript(),
                    "the message")
        await pilot.pause()
        assert "not an answer" not in app.transcript()


@pytest.mark.parametrize(("rows", "shown"), [(24, False), (29, False), (30, True), (40, True)])
async def test_operator_tui_the_panel_s_id_line_is_left_out_under_30_rows(rows: int,
                                                                         shown: bool):
    fake = FakeService()
    app = fake_chat(fake)
    async with app.run_test(size=(80, rows)) as pilot:
        fake.ask()
        await settled(app, pilot, fake, "ask")
        await until(pilot, lambda: "2. spaces" in panel(app), "the panel")
        assert ("incarnation" in panel(app)) is shown
        assert "Tabs or spaces?" in panel(app)


async def test_operator_tui_a_question_is_logged_once(chat, served, conversation):  # noqa: F811
    app, pilot = chat
    await asked(app, pilot)
    with served.client() as client:
        settle(client, conversation)
        last = client.call("events_tail", {"conversation_id": conversation,
                                           "limit": 500})["events"][-1]["seq"]
    await until(pilot, lambda: app.after >= last, "every event")
    said = app.transcript()
    assert said.count("Clankie asked a question") == 1
    assert "asked question" not in said  # the ask_question tool's own activity line
    # ... and nothing in its place: no line of the log is an empty or "None" entry
    assert not [line for line in said.splitlines() if line.split(" ", 1)[-1] in ("None", "")]


async def test_r9_after_a_real_restart_the_tui_says_so_and_continue_starts_a_new_turn(
        served, conversation):  # noqa: F811
    token = served.home.token_file.read_text().strip()
    app = ChatApp(AsyncClient(f"unix://{served.home.socket}", token), conversation, "test")
    async with app.run_test(size=(100, 40)) as pilot:
        await asked(app, pilot)
        assert await asyncio.to_thread(served.stop, signal.SIGKILL) == -signal.SIGKILL
        await until(pilot, lambda: not app.connected, "the loss", timeout=30)
        again = await asyncio.to_thread(lambda: Served.start(served.home.path, init=False,
                                                             script=SCRIPT))
        try:
            await until(pilot, lambda: wording.RESTARTED_QUESTION in flat(app.transcript()),
                        "the restart said in the log")
            await until(pilot, lambda: wording.RESTARTED_QUESTION in flat(panel(app)),
                        "and in the panel")
            await type_line(app, pilot, "/continue")
            await until(pilot, lambda: "you: Carry on where you left off." in app.transcript(),
                        "the message")
            with again.client() as client:
                settle(client, conversation)
                events = client.call("events_tail", {"conversation_id": conversation,
                                                     "limit": 500})["events"]
            owner = [e["text"] for e in events if e["type"] == "message"
                     and e["author"] == "owner"]
            assert owner == ["Set up tests, please.", "Carry on where you left off."]
            runs = [e["kind"] for e in events if e["type"] == "run_status"
                    and e["status"] == "queued"]
            assert runs == ["turn", "turn"]  # a new turn for the message, nothing replayed
        finally:
            await asyncio.to_thread(again.stop)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_r9_clankie_chat_in_tmux_says_clankie_restarted_and_how_to_carry_on(tmp_path: Path):
    from tests.tui.test_tmux import chat_in_tmux, screen_shows
    from tests.tui.test_tmux import type_line as type_in

    with chat_in_tmux(tmp_path) as (first, session, _):
        type_in(session, "Set up tests, please.")
        screen_shows(session, "Clankie asked a question")
        screen_shows(session, "2. spaces")
        assert first.stop(signal.SIGKILL) == -signal.SIGKILL
        again = Served.start(first.home.path, init=False, script=SCRIPT)
        try:
            screen_shows(session, "cancelled because clankie restarted")
            screen_shows(session, "send a message to carry on")
            type_in(session, "/continue")
            screen_shows(session, "you: Carry on where you left off.")
        finally:
            again.stop()


@pytest.mark.parametrize("line", ["/question answer 1", "/question text four spaces"])
async def test_r9_issue31_an_answer_typed_while_the_service_is_down_says_the_question_will_end(
        line: str):
    """Issue 31: an answer typed during a restart got only "Not sent: cannot reach
    clankie ...", and then the restart cancelled the question: the owner's decision was gone
    with no warning. Now the answer is said not sent, and that if clankie is restarting the
    question will end and they will be told how to carry on (R9)."""
    fake = FakeService()
    app = fake_chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        fake.ask()
        fake.questions[fake.latest]["allow_text"] = True  # both kinds of answer are taken
        await settled(app, pilot, fake, "ask")
        fake.stop()
        await until(pilot, lambda: not app.connected, "the loss")
        await type_line(app, pilot, line)
        await until(pilot, lambda: "not sent" in app.transcript(), "the refusal")
        said = flat(app.transcript())
        assert f"Your answer was not sent: the service is down (fake). " \
               f"{wording.ANSWER_NOT_SENT}" in said, said
        assert fake.pending is not None and fake.pending["receipt"] is None  # not answered
        assert "Clankie continues" not in said
