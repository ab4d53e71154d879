"""The TUI's question state is one value, the latest snapshot it read (SPEC section 10
"Operator TUI": the question panel always shows what the latest snapshot says; a question
that ended, by any surface, is shown as ended at once, never with live options).

Driven against `tests.tui.fake.FakeService` (a state machine of SPEC sections 4-8) with the
Pilot: after any sequence of events from other surfaces the panel is the rendering of the
service's latest snapshot and the status line agrees; an answer binds to what the panel
shows and is never resubmitted; the first status is known without any event; a `/` line
that is not a command reaches the service not at all; after a restart the TUI is connected
again without waiting for a long poll.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from textual.pilot import Pilot
from textual.widgets import Input, Static

from clankie import dto
from clankie.tui import decide, render
from clankie.tui.app import ChatApp
from tests.polling import eventually_async
from tests.tui.fake import MODEL, WORKSPACE, C, FakeService

STEPS = ("ask", "answer_elsewhere", "cancel_elsewhere", "expire", "reset", "restart",
         "restart_trimmed", "answer_here", "answer_after_it_ended", "not_a_command")


def chat(fake: FakeService) -> ChatApp:
    return ChatApp(fake, C, "unix:///home/owner/.local/share/clankie/clankie.sock",
                   clock=fake.clock)


def panel(app: ChatApp) -> str:
    return str(app.query_one("#question", Static).render())


def status(app: ChatApp) -> str:
    return str(app.query_one("#status", Static).render())


def same(mine: dto.Snapshot, theirs: dto.Snapshot) -> bool:
    """The same state; the ended question a snapshot names matters only when none is
    pending (on start, the app reads without naming one)."""
    def seen(s: dto.Snapshot) -> dto.Snapshot:
        return s.model_copy(update={"request": None}) if s.pending is not None else s
    return seen(mine) == seen(theirs)


def agrees(app: ChatApp, said: dict[str, Any] | None) -> bool:
    """The panel, the status line and the commands' binding all read `said`, the
    service's snapshot."""
    if said is None:
        return app.snapshot is None and "question: ?" in status(app)
    snapshot = dto.Snapshot.model_validate(said)
    now = app.clock()
    return (app.snapshot is not None and same(app.snapshot, snapshot)
            and panel(app) == render.question_panel(snapshot, now, app.workspace, app.rows)
            and render.question_state(snapshot, now) in status(app))


def same_question(app: ChatApp) -> bool:
    assert app.snapshot is not None
    live = app.snapshot.pending is not None
    said = render.question_panel(app.snapshot, app.clock(), app.workspace).split("\n")[0]
    return (panel(app).split("\n")[0] == said
            and ("/question answer" in panel(app)) == live
            and (" | question pending" in status(app)) == live
            and (" | no question |" in status(app)) == (not live))


async def until(pilot: Pilot, predicate: Callable[[], Any], what: str,
                timeout: float = 20) -> None:
    await eventually_async(predicate, what, timeout=timeout, every=0.02, pause=pilot.pause)


async def type_line(app: ChatApp, pilot: Pilot, text: str) -> None:
    app.query_one(Input).value = text
    await pilot.press("enter")


def latest(fake: FakeService) -> dict[str, Any]:
    """The service's snapshot now, with the question asked last (pending or ended)."""
    return fake.snapshot(fake.latest)


async def settled(app: ChatApp, pilot: Pilot, fake: FakeService, after: str) -> None:
    def consistent() -> bool:
        # Whatever the app shows at any moment is its one snapshot (to the second: the
        # relative times follow a clock that the test moves).
        if app.snapshot is not None:
            assert same_question(app), (after, panel(app), status(app), app.snapshot)
        busy = any(w.is_running and w.group != "tail" for w in app.workers)
        return app.connected and not busy and agrees(app, latest(fake))
    await until(pilot, consistent, f"the panel to show the latest snapshot after {after}")
    ended = (latest(fake)["request"] or {}).get("status", "pending") != "pending"
    if fake.pending is None:
        assert "/question answer" not in panel(app) and "no question" in status(app)
    if ended and fake.pending is None:
        assert "ended" in panel(app)


async def step(app: ChatApp, pilot: Pilot, fake: FakeService, name: str) -> None:
    before = len(fake.calls)
    if name in ("restart", "restart_trimmed"):
        fake.stop()
        await until(pilot, lambda: not app.connected and "disconnected" in status(app),
                    "the loss of the service")
        if name == "restart_trimmed":
            fake.trim()  # the TUI comes back to a tail that lost events (V1, V3)
        fake.start()
    elif name == "answer_here":
        shown = app.snapshot
        await type_line(app, pilot, "/question answer 2")
        sent = [p for op, p in fake.calls[before:] if op == "input_answer"]
        if shown is not None and shown.pending is not None:
            await until(pilot, lambda: "Accepted (receipt" in app.transcript(), "the accept")
            sent = [p for op, p in fake.calls[before:] if op == "input_answer"]
            q = shown.pending
            assert sent == [{"conversation_id": C, "request_id": q.request_id,
                             "incarnation": shown.incarnation,
                             "revision": shown.revision,
                             "option_id": q.options[1].option_id}]
        else:
            assert sent == []
    elif name == "answer_after_it_ended":
        # Another surface answers; the TUI's person answers what the panel still shows.
        live = fake.pending
        fake.answer_elsewhere()
        said = app.transcript()
        await type_line(app, pilot, "/question answer 1")
        if live is not None:
            await until(pilot, lambda: any(op == "input_answer" for op, _ in
                                           fake.calls[before:])
                        or "No question is pending" in app.transcript()[len(said):],
                        "the answer or the refusal")
    elif name == "not_a_command":
        for line in ("/questoin answer 1", "/quit"):
            await type_line(app, pilot, line)
        await until(pilot, lambda: "/quit is not a command" in app.transcript(),
                    "the refusal")
        assert fake.calls[before:] == []  # sent nowhere: no call at all
    else:
        getattr(fake, name)()
    await settled(app, pilot, fake, name)
    answers = [op for op, _ in fake.calls[before:] if op in ("input_answer", "input_cancel")]
    assert len(answers) <= 1, "an answer was resubmitted"


async def scenario(steps: list[str]) -> None:
    fake = FakeService()
    app = chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        for name in steps:
            await step(app, pilot, fake, name)


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.sampled_from(STEPS), max_size=8))
@example(["ask", "cancel_elsewhere"])  # issue 19: a cancel from the CLI left live options
@example(["ask", "answer_after_it_ended", "ask", "restart", "ask", "reset", "ask", "expire"])
@example(["ask", "restart_trimmed", "ask", "restart_trimmed"])
def test_the_panel_is_always_the_latest_snapshot_after_any_events(steps: list[str]) -> None:
    asyncio.run(scenario(steps))


async def test_the_first_status_is_known_without_any_event():
    """Read on start: a pending question whose events are long gone (trimmed history, a
    quiet conversation whose first long poll would wait 25 s) shows at once; the header
    says the workspace and the model."""
    fake = FakeService()
    fake.ask()
    fake.events.clear()
    app = chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await until(pilot, lambda: agrees(app, latest(fake)), "the first status", timeout=5)
        assert "question pending" in status(app) and "2. spaces" in panel(app)
        header = str(app.query_one("#where", Static).render())
        assert WORKSPACE in header and f"{MODEL['provider']}/{MODEL['model']}" in header
        ops = [op for op, _ in fake.calls]
        assert ops.count("service_info") == 1 and "input_get" in ops


async def test_a_question_past_its_expiry_is_read_again_and_shown_ended():
    """S5: expiry is committed on use; the TUI reads the snapshot when the countdown ends
    rather than show live options for a question that has expired."""
    fake = FakeService()
    fake.ask()
    app = chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        assert "/question answer N" in panel(app)
        q = fake.pending
        assert q is not None
        fake.clock.now = fake.clock.now + timedelta(hours=24, seconds=1)  # nobody reads
        await until(pilot, lambda: "ended: expired" in panel(app), "the expiry shown")
        assert fake.pending is None and agrees(app, latest(fake))


async def test_after_the_service_is_back_the_tui_is_connected_again_at_once():
    """SPEC section 10: connected again within 1 s of the service coming back. The retry
    schedule never waits longer than 0.8 s, and the first call that succeeds connects: a
    quiet conversation's long poll (25 s) is not waited for."""
    assert max(decide.RETRY_S) < 1.0
    fake = FakeService()
    app = chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        fake.stop()
        await until(pilot, lambda: "disconnected, retrying" in status(app), "the loss")
        tries = len(fake.calls)
        await until(pilot, lambda: len(fake.calls) >= tries + len(decide.RETRY_S) + 1,
                    "the tries to reach their widest spacing")
        fake.start()
        await until(pilot, lambda: app.connected and "disconnected" not in status(app),
                    "connected again", timeout=5)


async def test_a_slash_line_that_is_not_a_command_reaches_the_service_not_at_all():
    """SPEC section 10: text that starts with `/` and is not a command is refused on the
    spot and sent nowhere (issue 19: `/questoin` and `/quit` each started a model run).
    Nor does an answer with no question pending leave the app."""
    fake = FakeService()
    app = chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        before = list(fake.calls)
        for line in ("/questoin", "/quit", "/stop now", "/question answer x", "/exit yes",
                     "/question answer 1"):
            await type_line(app, pilot, line)
        await until(pilot, lambda: "No question is pending; nothing was sent"
                    in app.transcript(), "the last refusal")
        await pilot.pause()
        assert fake.calls == before
        shown = app.transcript()
        for word in ("/questoin", "/quit", "/exit"):
            assert f"{word} is not a command; nothing was sent" in shown


async def test_an_answer_typed_for_one_question_is_never_sent_to_the_next():
    """The panel follows the latest snapshot, so a question can replace another while the
    owner types: the line begun under question A is refused, not sent to B (an answer is
    never taken for the wrong question); begun again under B, it is sent to B."""
    fake = FakeService()
    fake.ask("Tabs or spaces?")
    app = chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        first = fake.pending
        assert first is not None
        app.query_one(Input).value = "/question answer"  # begun under A
        await pilot.pause()
        fake.answer_elsewhere()
        fake.ask("Which licence?")
        await settled(app, pilot, fake, "a new question")
        second = fake.pending
        assert second is not None and "Which licence?" in panel(app)
        before = len(fake.calls)
        app.query_one(Input).value = "/question answer 2"
        await pilot.press("enter")
        await until(pilot, lambda: "changed while you typed" in app.transcript(),
                    "the refusal")
        assert not [op for op, _ in fake.calls[before:] if op == "input_answer"]
        await type_line(app, pilot, "/question answer 2")
        await until(pilot, lambda: "Accepted (receipt" in app.transcript(), "the accept")
        sent = [p for op, p in fake.calls[before:] if op == "input_answer"]
        assert [p["request_id"] for p in sent] == [second["request_id"]]


async def test_the_panel_follows_the_revision_a_chat_message_moves_so_an_answer_is_accepted():
    """Tried as a new user: after a chat message the panel kept the old revision and
    `/question answer 1` was refused `stale_revision` with nothing on screen to warn of
    it. While a question is pending, any event is followed by a read of the snapshot
    (S1), so the panel binds to the current revision; a line begun before the revision
    moved is refused locally, never sent against a state the owner did not see (A6)."""
    fake = FakeService()
    fake.ask("Tabs or spaces?")
    app = chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        fake.say("Tabs are used in the Makefile.")
        await until(pilot, lambda: f"revision {fake.revision}" in panel(app),
                    "the panel at the new revision")
        app.query_one(Input).value = "/question answer"  # begun at this revision
        await pilot.pause()
        fake.say("And spaces in the Python.")
        await until(pilot, lambda: f"revision {fake.revision}" in panel(app),
                    "the panel at the newer revision")
        before = len(fake.calls)
        app.query_one(Input).value = "/question answer 1"
        await pilot.press("enter")
        await until(pilot, lambda: "moved on while you typed" in app.transcript(),
                    "the local refusal")
        assert not [op for op, _ in fake.calls[before:] if op == "input_answer"]
        await type_line(app, pilot, "/question answer 1")
        await until(pilot, lambda: "Accepted (receipt" in app.transcript(), "the accept")
        sent = [p for op, p in fake.calls[before:] if op == "input_answer"]
        assert [p["revision"] for p in sent] == [fake.revision - 1]


async def test_a_revision_moved_unseen_is_a_conflict_said_shown_again_and_never_resent():
    """SPEC A6 and section 10 "Operator TUI": the revision moves where the panel cannot see
    it before the answer lands; the service refuses `stale_revision`, the TUI says so,
    reads the question again and sends nothing by itself; answered again, it is taken."""
    fake = FakeService()
    fake.ask("Tabs or spaces?")
    app = chat(fake)
    async with app.run_test(size=(100, 40)) as pilot:
        await settled(app, pilot, fake, "start")
        assert app.snapshot is not None
        shown = app.snapshot.revision
        fake.revision += 1  # committed with no event the follower has read yet
        before = len(fake.calls)
        await type_line(app, pilot, "/question answer 1")
        await until(pilot, lambda: "The question changed since it was shown"
                    in app.transcript() and app.snapshot.revision == shown + 1,
                    "the conflict said and the question read again")
        assert [p["revision"] for op, p in fake.calls[before:] if op == "input_answer"] == [
            shown]
        assert fake.pending is not None
        await type_line(app, pilot, "/question answer 1")
        await until(pilot, lambda: "Accepted (receipt" in app.transcript(), "the accept")
        assert [p["revision"] for op, p in fake.calls[before:] if op == "input_answer"] == [
            shown, shown + 1]
