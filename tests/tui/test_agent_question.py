"""SPEC section 13 in the TUI (P3, A1, A11): a coding agent's question, in its conversation
of kind `agent`, is shown with who asks (the agent credential's name, the MCP client's name
and the workspace) and answered with `/question` as any other; an accepted answer says the
agent reads it (no run of Clankie follows); nothing reads as a request for approval; a chat
line there goes nowhere (the agent reads only answers); names an agent chose are text.

Driven against `tests.tui.fake.FakeService` with an asker, with the Pilot, and one
snapshot of the screen (update with `--snapshot-update` after checking the SVG by eye).
"""

from __future__ import annotations

import re
from typing import Any

from textual.content import Content
from textual.widgets import Input, Static

from clankie import wording
from tests.tui.fake import WORKSPACE, FakeService
from tests.tui.test_question_state import chat, panel, settled, type_line, until
from tests.tui.test_snapshots import utc  # noqa: F401 (the screens' time zone)
from tests.tui.test_text_from_others import MARKUP, RAW, SHOWN

AGENT = {"credential_id": "9" * 32, "name": "coder", "client": "claude-code"}
HOSTILE = "\x1b[2J\x1b]52;c;ZXZpbA==\x07\rX\x9b31m\x08\u202eRLO\u202c" + MARKUP
HOSTILE_AGENT = {"credential_id": "9" * 32, "name": 'bot"\nyou: yes ' + HOSTILE,
                 "client": "cc " + HOSTILE}
ASKS = f'Agent "coder" asks, through "claude-code", in {WORKSPACE}:'


def header(app: Any) -> str:
    return str(app.query_one("#where", Static).render())


async def test_p3_the_panel_log_header_and_toast_say_which_agent_asks_and_where():
    fake = FakeService(asker=AGENT)
    app = chat(fake)
    async with app.run_test(size=(110, 40), notifications=True) as pilot:
        await settled(app, pilot, fake, "start")
        fake.ask("Which licence do you prefer?")
        await until(pilot, lambda: "Which licence" in panel(app), "the agent's question")
        shown = panel(app)
        assert shown.startswith(ASKS + "\n  Which licence do you prefer?\n"), shown
        assert wording.AGENT_ANSWER in shown and "Clankie asks" not in shown
        await until(pilot, lambda: 'Agent "coder" asked a question.' in app.transcript(),
                    "the log line")
        assert "Clankie asked" not in app.transcript()
        await until(pilot, lambda: 'agent "coder" through "claude-code"' in header(app),
                    "the header")
        assert "model" not in header(app)  # no model of Clankie's works here
        toast = next(n.message for n in app._notifications if "asks" in n.message)
        assert toast.startswith('Agent "coder" asks, through "claude-code": Which licence')


async def test_p3_a_prompt_cannot_start_a_line_of_the_toast_of_its_own():
    """Red team: a prompt "harmless?\nClankie asks: may I push to main?" put a line of its
    own in the "A question" toast that read as Clankie asking."""
    fake = FakeService(asker=AGENT)
    app = chat(fake)
    async with app.run_test(size=(110, 40), notifications=True) as pilot:
        await settled(app, pilot, fake, "start")
        fake.ask("harmless?\nClankie asks: may I push to main?")
        await until(pilot, lambda: any("asks" in n.message for n in app._notifications),
                    "the toast")
        toast = next(n.message for n in app._notifications if "asks" in n.message)
        assert not [line for line in toast.splitlines() if line.startswith("Clankie")], toast


async def test_a1_p3_the_owner_answers_an_agents_question_as_any_other():
    fake = FakeService(asker=AGENT)
    fake.ask("May I push to main?")
    app = chat(fake)
    async with app.run_test(size=(110, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        q = fake.pending
        assert q is not None
        await type_line(app, pilot, "/question answer 2")
        await until(pilot, lambda: "Accepted" in app.transcript(), "the receipt")
        sent = [p for op, p in fake.calls if op == "input_answer"]
        assert sent == [{"conversation_id": fake.c, "request_id": q["request_id"],
                         "incarnation": fake.incarnation, "revision": sent[0]["revision"],
                         "option_id": q["options"][1]["option_id"]}]
        said = " ".join(app.transcript().split())  # the log wraps at spaces
        assert wording.accepted({"run_id": None}) in said
        assert "Clankie continues" not in said
        await until(pilot, lambda: "ended: answered with spaces" in panel(app), "ended")
        assert panel(app).startswith("No question is pending.\n  Agent \"coder\" asked: ")


async def test_p3_a_chat_line_in_an_agents_conversation_is_sent_nowhere():
    """The agent reads answers, never messages (P4): a line typed there is not sent, and
    the TUI says how to answer (a `yes` typed as chat must not pass for an answer)."""
    fake = FakeService(asker=AGENT)
    fake.ask("May I push to main?")
    app = chat(fake)
    async with app.run_test(size=(110, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        before = len(fake.calls)
        await type_line(app, pilot, "yes")
        await until(pilot, lambda: "Not sent" in app.transcript(), "the refusal")
        assert [op for op, _ in fake.calls[before:] if op == "conversation_send"] == []
        assert "/question answer N" in app.transcript()
        assert fake.pending is not None
        # Kept where it was typed: the owner turns it into `/question text ...`, not anew.
        assert app.query_one(Input).value == "yes"


async def test_p3_a_refused_chat_line_is_kept_selected_so_the_next_command_replaces_it():
    """Issue 42: the refused line stayed in the input with the cursor after it, so the next
    command typed was appended to it ("yes/question answer 1", then sent as a chat line and
    refused again). It stays, selected whole: typing replaces it, Home keeps it to edit."""
    fake = FakeService(asker=AGENT)
    fake.ask("May I push to main?")
    app = chat(fake)
    async with app.run_test(size=(110, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        await type_line(app, pilot, "yes")
        await until(pilot, lambda: "Not sent" in app.transcript(), "the refusal")
        box = app.query_one(Input)
        assert box.value == "yes" and box.selected_text == "yes"
        await pilot.press(*"/question answer 1")
        assert box.value == "/question answer 1"
        await pilot.press("enter")
        await until(pilot, lambda: "Accepted" in app.transcript(), "the answer")
        assert fake.pending is None
        # Home leaves the kept line whole, the cursor before it, to turn it into words.
        await type_line(app, pilot, "no thanks")
        await until(pilot, lambda: app.transcript().count("Not sent") == 2, "the refusal")
        await pilot.press("home", *"/question text ")
        assert box.value == "/question text no thanks"


async def test_p3_help_and_stop_in_an_agents_conversation_speak_of_the_agent():
    """New-user trial: `/help` said "a chat message to Clankie" and offered `/stop` where no
    run of Clankie exists and no chat line is sent."""
    fake = FakeService(asker=AGENT)
    fake.ask("May I push to main?")
    app = chat(fake)
    async with app.run_test(size=(110, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        await type_line(app, pilot, "/help")
        await until(pilot, lambda: "The agent reads only your answer" in app.transcript(),
                    "the agent's help")
        assert "chat message to Clankie" not in app.transcript()
        before = len(fake.calls)
        await type_line(app, pilot, "/stop")
        await until(pilot, lambda: "nothing to stop" in app.transcript(), "the stop line")
        assert [op for op, _ in fake.calls[before:] if op == "run_cancel"] == []


async def test_a_an_option_number_for_a_text_question_says_to_answer_in_words():
    fake = FakeService(asker=AGENT)
    fake.ask("What should the module be called?")
    assert fake.pending is not None
    fake.pending.update(kind="text", options=[], allow_text=True)
    app = chat(fake)
    async with app.run_test(size=(110, 40)) as pilot:
        await until(pilot, lambda: app.snapshot is not None and app.snapshot.pending
                    is not None, "the question")
        await type_line(app, pilot, "/question answer 1")
        await until(pilot, lambda: "takes words, not an option" in app.transcript(),
                    "the hint")
        assert "There is no option 1" not in app.transcript()


async def test_p3_names_an_agent_or_its_client_chose_are_visible_and_literal_in_the_tui():
    fake = FakeService(asker=HOSTILE_AGENT)
    fake.ask("ok?")
    app = chat(fake)
    async with app.run_test(size=(300, 40), notifications=True) as pilot:
        await until(pilot, lambda: "ok?" in panel(app) and "bot" in header(app),
                    "the panel and the header")
        for selector in ("#question", "#where"):
            content = app.query_one(selector, Static).render()
            assert isinstance(content, Content) and not content.spans  # no markup applied
            assert not RAW.search(content.plain), content.plain
            assert SHOWN + MARKUP in content.plain, content.plain
        first = panel(app).split("\n")[0]
        assert first.startswith('Agent "bot\\"\\nyou: yes ') and first.endswith(":")
        assert not any(line.startswith("you: yes") for line in app.transcript().split("\n"))
        for note in app._notifications:
            assert not note.markup and not RAW.search(note.message)
        assert not re.search("^you: yes", panel(app), re.M)


def test_p3_the_chat_screen_with_an_agents_question(snap_compare: Any):
    fake = FakeService(asker=AGENT)
    fake.ask("May I push to main?")
    app = chat(fake)

    async def shown(pilot: Any) -> None:
        await settled(app, pilot, fake, "start")
        await until(pilot, lambda: 'agent "coder"' in header(app) and app._notifications,
                    "the header and the toast")
        app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=(100, 30), run_before=shown)


# `clankie chat` in a project's directory opens the owner's conversation there; an agent's
# question waiting in the same directory is in another conversation (P3), so the TUI says so
# (new-user trial: the owner, told an agent asked, ran `clankie chat` there and saw nothing).

OWNER_C = "11111111-1111-4111-8111-111111111111"
AGENT_C = "22222222-2222-4222-8222-222222222222"
QUIET_C = "33333333-3333-4333-8333-333333333333"
ELSEWHERE_C = "44444444-4444-4444-8444-444444444444"


def listed(c: str, kind: str, path: str, asker: dict[str, Any] | None,
           waiting: bool = False) -> dict[str, Any]:
    return {"conversation_id": c, "kind": kind, "workspace": {"path": path},
            "incarnation": c, "revision": 1, "created_at": "2026-12-01T00:00:00Z",
            "native_owner": None, "asker": asker,
            "pending": {"request_id": "r", "prompt": "p", "expires_at": "x"} if waiting else None}


def pending(asker: dict[str, Any]) -> dict[str, Any]:
    """A whole pending question as `input_get` says it (the CLI reads it into its model)."""
    return {"request_id": "r", "kind": "text", "prompt": "p", "options": [],
            "allow_text": True, "status": "pending", "incarnation": "i", "asked_at": "x",
            "expires_at": "x", "receipt": None, "asker": asker}


def test_p3_clankie_chat_in_a_directory_names_the_agents_waiting_there(
        monkeypatch: Any, tmp_path: Any):
    from clankie.cli import chat as chat_command
    from clankie.cli.main import main
    from clankie.tui.app import ChatApp

    here = str(tmp_path.resolve())
    quiet = {**AGENT, "name": "quiet"}

    class Connected:
        url, token, via_env = "unix:///run/clankie.sock", "clk_x", False

        def __enter__(self) -> Connected:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
            if op == "conversation_list":
                return {"next_after": None, "conversations": [
                    listed(AGENT_C, "agent", here, AGENT, waiting=True),
                    listed(OWNER_C, "owner", here, None),
                    listed(QUIET_C, "agent", here, quiet),
                    listed(ELSEWHERE_C, "agent", "/elsewhere", AGENT)]}
            assert op == "input_get", op
            waiting = payload["conversation_id"] == AGENT_C
            return {"conversation_id": payload["conversation_id"], "incarnation": "i",
                    "revision": 2, "request": None,
                    "pending": pending(AGENT) if waiting else None}

    opened: list[ChatApp] = []
    monkeypatch.setattr(chat_command, "connect", Connected)
    monkeypatch.setattr(ChatApp, "run", lambda self: opened.append(self))
    monkeypatch.chdir(tmp_path)
    assert main(["chat"]) == 0
    (app,) = opened
    assert app.conversation_id == OWNER_C  # the owner's conversation, as before
    assert app.notes == [f"Opened conversation {OWNER_C[:8]}, bound to {here}.",
                         'Agent "coder" asks, through "claude-code", in this directory too: '
                         f"open it with clankie chat {AGENT_C[:8]}"]


async def test_p3_the_tui_says_its_notes_in_the_log_on_start():
    fake = FakeService()
    note = 'Agent "coder" asks in this directory too: open it with clankie chat 22222222'
    app = chat(fake)
    app.notes = [note]
    async with app.run_test(size=(110, 40)) as pilot:
        await until(pilot, lambda: note in " ".join(app.transcript().split()), "the note")


async def pushed_asked(app: Any, pilot: Any, fake: FakeService) -> None:
    """Once the TUI has started, the agent asks "May I push to main?" and the panel shows it."""
    await settled(app, pilot, fake, "start")
    fake.ask("May I push to main?")
    await until(pilot, lambda: "May I push" in panel(app), "the agent's question")


async def test_e_p2_a_revoked_agents_question_is_shown_ended_and_why():
    """Issue 42: revoking the agent ends its waiting question (`invalidated`,
    `asker_revoked`); the panel says so in words, never with live options."""
    fake = FakeService(asker=AGENT)
    app = chat(fake)
    async with app.run_test(size=(110, 40)) as pilot:
        await pushed_asked(app, pilot, fake)
        fake.revoke_asker()
        why = "invalidated (asker_revoked: the agent that asked it was revoked"
        await until(pilot, lambda: why in " ".join(panel(app).split()), "the panel")
        assert "/question answer" not in panel(app)
        assert "ended: invalidated" in app.transcript()


async def test_r9_p5_a_restarts_cancel_of_an_agents_question_says_the_agent_may_ask_again():
    """Issue 42: the log and the panel said of an agent's question a restart cancelled
    "send a message to carry on (or type /continue)", yet a message to an agent's
    conversation is refused `not_eligible`; P5's way on is that the agent asks again."""
    fake = FakeService(asker=AGENT)
    app = chat(fake)
    async with app.run_test(size=(110, 40)) as pilot:
        await pushed_asked(app, pilot, fake)
        fake.stop()
        await until(pilot, lambda: not app.connected, "the loss")
        fake.start()
        said = wording.RESTARTED_AGENT_QUESTION
        await until(pilot, lambda: said in " ".join(app.transcript().split()), "the log line")
        await until(pilot, lambda: said in " ".join(panel(app).split()), "the panel")
        for shown in (app.transcript(), panel(app)):
            assert "send a message" not in " ".join(shown.split()), shown
            assert "/continue" not in shown, shown
