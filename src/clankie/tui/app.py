"""The chat app: the conversation live, an input line, the `/question` commands, `/stop` and
`/continue` (R9: an ordinary message after a restart; the log and the panel say what a
restart ended). A chat line that looks like an answer to the question shown is sent as chat
and said to be chat, with the command that answers, on the line after it.

Owns the screen and its one piece of question state: `snapshot`, the latest `input_get`
snapshot the app read (on start, when a question starts or ends, after a reset, a
reconnect or a trimmed tail, after an answer or a refusal, when the shown question's
expiry passes, on `/question`). The panel, the status line and the commands all read it,
so an ended question is never shown live (SPEC section 10 "Operator TUI"). `/question
answer N` sends the N-th option the panel shows with its request, incarnation and
revision, once. A conflict is said and the question shown again; an uncertain outcome is
said as uncertain; nothing is ever resubmitted by the app. Network calls run only in
workers (Textual's `@work`). A listener that is not the owner's service (`NotYours`, SPEC
T2) was sent nothing; the app says so with the fix and stops following, rather than
knocking again and again: its status line says "not yours: stopped", and quitting then
exits 5, as the CLI does.

In a coding agent's conversation (kind `agent`, SPEC section 13) the app says who asks (the
agent's name, its MCP client, the workspace) in the header, the log, the toast and the
panel, answers with the same `/question` commands, and sends no chat message: the agent
reads only answers.

The question state and what the status line and header say are reactive attributes of
the app (`snapshot`, `now`, `connected`, `workspace`, ...): setting one redraws, through
Textual's data binding, the widgets that show it, `QuestionPanel` (in its `QuestionBox`),
`StatusLine` and `HeaderLine`, which draw themselves with `render`'s words; nothing is
redrawn by hand.

Whatever the app shows goes through `say`, `HeaderLine`, `StatusLine`, `QuestionPanel` or
`notice`: text from others with its control and invisible format characters made visible
(`clankie.text`), and never interpreted as markup (plain `Text`/`Content`,
`markup=False`), so a model's `[@click=app.quit]` is only words.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import events, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.notifications import SeverityLevel
from textual.reactive import reactive, var
from textual.widgets import Footer, Input, RichLog, Static

from clankie import wording
from clankie.client import (
    EMPTY_AT_ONCE_S,
    PAUSE_AFTER_EMPTY_S,
    ApiError,
    NotClankie,
    NotYours,
    ServiceUnreachable,
    Uncertain,
    fit_shape,
)
from clankie.core.vocabulary import Code
from clankie.text import continued, visible

from . import render
from .commands import (
    AGENT_USAGE,
    USAGE,
    AnswerOption,
    AnswerText,
    CancelQuestion,
    Chat,
    Continue,
    Help,
    ShowQuestion,
    Stop,
    Usage,
    parse,
)

TAIL_WAIT_MS = 25_000
NOT_YOURS_EXIT = 5  # the CLI's exit for a refused listener (SPEC section 10, T2)
# Between tries to reach a lost service: short, so that the TUI is connected again within
# 1 s of the service coming back (SPEC section 10 "Operator TUI"); a try on the home's
# socket costs the service nothing while it is down.
RETRY_S = (0.2, 0.5, 0.8)
# The events after which the snapshot is read again (V3; a reset ends the question too).
QUESTION_EVENTS = ("input_requested", "input_resolved", "conversation_reset")
EPOCH = datetime.min.replace(tzinfo=UTC)  # a reactive clock's value before it is set
PLACEHOLDER = "Message Clankie, or /question, /help"


class Api(Protocol):
    """What the app needs of `clankie.client.AsyncClient`."""

    async def call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


class ChatLog(RichLog):
    """The conversation's lines. A RichLog wraps a line once, at the width it has when the
    line is written: when the terminal's width changes, every line is written again at the
    new one (none cut at the right edge), and the log shows its end (the latest line)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.said: list[Text] = []
        self.wrapped_at = 0

    def say(self, line: Text) -> None:
        self.said.append(line)
        self.write(line)

    def on_resize(self, event: events.Resize) -> None:
        if self.wrapped_at and event.size.width != self.wrapped_at:
            self.call_after_refresh(self._rewrap)
        elif self.wrapped_at:  # only higher or lower: the end is still where to look
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)
        self.wrapped_at = event.size.width

    def _rewrap(self) -> None:
        self.clear()
        for line in self.said:
            self.write(line, scroll_end=False)
        self.scroll_end(animate=False, immediate=True)


class HeaderLine(Static):
    """Which model answers (or, in an agent's conversation, which agent asks) and where the
    conversation works (`render.header`), cut to the width it has now: drawn again when
    any is read and when the screen is resized."""

    workspace: reactive[str | None] = reactive(None)
    model: reactive[dict[str, Any] | None] = reactive(None)
    asker: reactive[dict[str, Any] | None] = reactive(None)

    def render(self) -> Content:
        return Content(visible(render.header(self.workspace, self.model,
                                             self.content_region.width, self.asker)))


class QuestionPanel(Static):
    """The question panel: the latest snapshot's question, pending (prompt, numbered
    options, how to answer, times, the IDs an answer binds to) or the one that ended, in
    `render.question_panel`'s words, its relative times from `now`. Drawn again whenever
    either changes (the app binds both to its own)."""

    snapshot: reactive[dict[str, Any] | None] = reactive(None, layout=True)
    now: reactive[datetime] = reactive(EPOCH, layout=True)
    workspace: reactive[str | None] = reactive(None, layout=True)  # said with an agent's
    rows: reactive[int] = reactive(render.ID_LINE_ROWS, layout=True)  # the window's

    def render(self) -> Content:
        if self.snapshot is None:
            return Content("")
        return Content(visible(render.question_panel(self.snapshot, self.now,
                                                     self.workspace, self.rows)))


class QuestionBox(VerticalScroll):
    """The panel's frame: shown only while the snapshot has a question, pending or ended;
    it scrolls only when the screen is too small for the question."""

    snapshot: var[dict[str, Any] | None] = var(None)

    def watch_snapshot(self, snapshot: dict[str, Any] | None) -> None:
        self.set_class(render.panel_shown(snapshot), "shown")


class StatusLine(Static):
    """The status line, from the app's state: connection, Clankie at work (or its wait to
    ask the model again, counting down), the question in the snapshot's words (the same
    snapshot as the panel), the conversation and the address. Marked `expiring` in the
    last tenth of a pending question's time."""

    snapshot: reactive[dict[str, Any] | None] = reactive(None)
    now: reactive[datetime] = reactive(EPOCH)
    connected: reactive[bool] = reactive(True)
    refused: reactive[NotYours | None] = reactive(None)
    running: reactive[frozenset[str]] = reactive(frozenset())
    doing: reactive[str | None] = reactive(None)
    waiting: reactive[dict[str, Any] | None] = reactive(None)
    expiring: var[bool] = var(False)

    def __init__(self, service: str, conversation_id: str, **kwargs: Any) -> None:
        super().__init__(markup=False, **kwargs)
        self.service = service
        self.conversation_id = conversation_id

    def render(self) -> Content:
        return Content(visible(render.status_line(
            self.service, self.conversation_id,
            render.question_state(self.snapshot, self.now), bool(self.running),
            self.connected,
            render.retry_status(self.waiting, self.now) if self.waiting else self.doing,
            refused=self.refused is not None)))

    def compute_expiring(self) -> bool:
        q = self.snapshot["pending"] if self.snapshot else None
        return q is not None and render.expiry(q, self.now)[1]

    def watch_expiring(self, expiring: bool) -> None:
        self.set_class(expiring, "expiring")


class ChatApp(App[None]):
    CSS_PATH = Path(__file__).with_name("chat.tcss")
    TITLE = "clankie chat"
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    # What the panel and the status line show; each is bound to the widgets that show it.
    # The latest snapshot read (S1), None until the first read: the panel, the status
    # line and the commands read nothing else about the question.
    snapshot: var[dict[str, Any] | None] = var(None)
    now: var[datetime] = var(EPOCH)  # the clock, read each second and with each snapshot
    connected: var[bool] = var(True)
    refused: var[NotYours | None] = var(None)  # the tail stopped: the listener is not ours
    running: var[frozenset[str]] = var(frozenset())  # runs queued or running
    doing: var[str | None] = var(None)  # the latest tool activity of a running run
    waiting: var[dict[str, Any] | None] = var(None)  # its wait to ask the model again (R6)
    # The header's, read on start and after a reconnect: the conversation's workspace
    # and, in an agent's conversation, who asks there (`conversation_get`, SPEC P3), and
    # `service_info`'s `model`.
    workspace: var[str | None] = var(None)
    model: var[dict[str, Any] | None] = var(None)
    asker: var[dict[str, Any] | None] = var(None)
    rows: var[int] = var(render.ID_LINE_ROWS)  # the window's height: the panel's ID line

    def __init__(self, api: Api, conversation_id: str, service: str,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 notes: Sequence[str] = ()) -> None:
        """`notes`: lines said in the log on start (`clankie chat` names the agents whose
        questions wait in the same directory, in conversations of their own)."""
        super().__init__()
        self.api = api
        self.notes = list(notes)
        self.clock = clock
        self.conversation_id = conversation_id
        self.service = service
        self.set_reactive(ChatApp.now, clock())
        self.after = 0
        # What the panel showed when the input line was begun, (request_id, revision): an
        # answer typed for one question is never sent to another that replaced it meanwhile.
        self.typed_against: tuple[str, int] | None = None
        # A chat line that looked like an answer is said to be chat on the line after it
        # (SPEC section 10 "Operator TUI"): its hint by message ID until the log shows the
        # message, and the owner's messages the log showed last (the tail may be first).
        self.hints: dict[str, str] = {}
        self.logged: deque[str] = deque(maxlen=64)

    def compose(self) -> ComposeResult:
        yield HeaderLine(id="where", markup=False).data_bind(ChatApp.workspace, ChatApp.model,
                                                             ChatApp.asker)
        yield StatusLine(self.service, self.conversation_id, id="status").data_bind(
            ChatApp.snapshot, ChatApp.now, ChatApp.connected, ChatApp.refused,
            ChatApp.running, ChatApp.doing, ChatApp.waiting)
        yield ChatLog(id="log", wrap=True, markup=False, min_width=1)  # not RichLog's 78
        with QuestionBox(id="question-box").data_bind(ChatApp.snapshot):
            yield QuestionPanel(id="question", markup=False).data_bind(
                ChatApp.snapshot, ChatApp.now, ChatApp.workspace, ChatApp.rows)
        yield Input(placeholder=PLACEHOLDER, id="input")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)  # the expiry countdown
        self.query_one(Input).focus()
        for note in self.notes:
            self.say(note, style="bold")
        self.about()
        self.tail()

    def on_resize(self, event: events.Resize) -> None:
        self.rows = event.size.height

    async def on_unmount(self) -> None:
        await self.api.aclose()

    async def action_quit(self) -> None:
        """Quit; after a refusal under T2 with the CLI's exit code for it, so a script
        around `clankie chat` can tell."""
        self.exit(return_code=NOT_YOURS_EXIT if self.refused is not None else 0)

    # ------------------------------------------------------------------------ showing

    def say(self, text: str, style: str = "", at: str = "") -> None:
        """A line in the log; `at`: the local time it happened, dim, before it."""
        line = Text(visible(text), style=style)
        if at:
            line = Text.assemble((f"{at} ", "dim"), line)
        self.query_one(ChatLog).say(line)

    def notice(self, message: str, *, title: str = "",
               severity: SeverityLevel = "information") -> None:
        """A toast (`notify`), shown like the log: visible, never markup."""
        self.notify(visible(message), title=title, severity=severity, markup=False)

    def transcript(self) -> str:
        """The chat log as plain text (for tests and for people who copy it)."""
        return "\n".join(line.text for line in self.query_one(RichLog).lines)

    def _read_clock(self) -> None:
        """Read the clock: the status line's countdowns and the panel's relative times,
        bound to `now`, follow it at once."""
        self.now = self.clock()

    def _take(self, snapshot: dict[str, Any]) -> None:
        """Keep `snapshot` if it is not older than the one kept (revisions only grow, S1,
        so a read that raced a newer one is dropped); the panel and the status line, bound
        to it, show it at once, with the clock read now."""
        self._read_clock()
        if self.snapshot is None or snapshot["revision"] >= self.snapshot["revision"]:
            self.snapshot = snapshot

    def _tick(self) -> None:
        """Each second: the countdown and the panel's relative times follow the clock; a
        shown question past its expiry is read again (S5 commits the expiry on use) rather
        than shown live."""
        self._read_clock()
        q = self.snapshot["pending"] if self.snapshot else None
        if q is not None and self.connected and render.expiry(q, self.now)[0] == "expired":
            self.read_again()

    async def _call(self, op: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
        """One call; a result that does not fit the op's shape is `NotClankie` (which
        every worker says in a line), never a traceback later."""
        return fit_shape(op, await self.api.call(op, payload), self.service)

    async def _read(self, request_id: str | None = None) -> dict[str, Any]:
        """Read the snapshot with the question the panel is about (or `request_id`, a newer
        one an event named), so a question that ended is shown as ended; one evicted
        meanwhile (A3) is left out."""
        payload: dict[str, Any] = {"conversation_id": self.conversation_id}
        about = request_id or render.shown_request(self.snapshot)
        try:
            snapshot = await self._call("input_get",
                                           {**payload, "request_id": about} if about else payload)
        except ApiError as exc:
            if exc.code != Code.UNKNOWN_REQUEST or about is None:
                raise
            snapshot = await self._call("input_get", payload)
        self._take(snapshot)
        return snapshot

    @work(exclusive=True, group="read")
    async def read_again(self) -> None:
        with contextlib.suppress(ApiError, NotClankie, NotYours, ServiceUnreachable, Uncertain):
            await self._read()  # if it fails, the tail says what is wrong with the service

    async def _learn(self) -> None:
        """The conversation's workspace and who asks in it (an agent, SPEC P3, or Clankie):
        read by the tail on start and after a reconnect, before the events it shows, so
        that the log says who asked. Each part is checked here: they are only words."""
        got = await self.api.call("conversation_get",
                                  {"conversation_id": self.conversation_id})
        workspace = got.get("workspace")
        path = workspace.get("path") if isinstance(workspace, dict) else None
        self.workspace = path if isinstance(path, str) else None
        asker = got.get("asker")
        self.asker = asker if isinstance(asker, dict) and isinstance(asker.get("name"), str) \
            else None

    def watch_asker(self, asker: dict[str, Any] | None) -> None:
        self.query_one(Input).placeholder = (
            "Answer the agent with /question answer N or /question text WORDS; /help"
            if asker else PLACEHOLDER)

    @work(group="about")
    async def about(self) -> None:
        """The header's model, read on start and after a reconnect (a restarted service may
        run another model)."""
        try:  # read as far as it goes, checked here: the header is only words
            model = (await self.api.call("service_info")).get("model")
            self.model = (model if isinstance(model, dict)
                          and isinstance(model.get("provider"), str) else None)
        except (ApiError, NotClankie, NotYours, ServiceUnreachable, Uncertain):
            pass  # shown as `?`; the tail says what is wrong with the service

    # ------------------------------------------------------------------------- events

    @work(exclusive=True, group="tail")
    async def tail(self) -> None:
        """Follow the conversation (V1). The snapshot is read first, on start and after a
        reconnect, so the status is known at once, not when a long poll ends (up to 25 s on
        a quiet conversation); then again when a question starts or ends, on a reset and
        after a trimmed tail (V3); never because of anything else."""
        failures = 0
        stale = True  # the snapshot must be read before the next long poll
        while True:
            try:
                if stale:
                    await self._learn()
                    await self._read()
                    stale = False
                    if failures:
                        self.about()
                    failures = 0
                    self.connected = True
                asked = time.monotonic()
                page = await self._call("events_tail", {
                    "conversation_id": self.conversation_id, "after": self.after,
                    "limit": 500, "wait_ms": TAIL_WAIT_MS})
                if not page["events"] and time.monotonic() - asked < EMPTY_AT_ONCE_S:
                    await asyncio.sleep(PAUSE_AFTER_EMPTY_S)
                if page["trimmed"]:
                    self.say(f"(events before #{page['oldest_seq']} were trimmed)")
                moved = [e for e in page["events"] if e["type"] in QUESTION_EVENTS]
                restarted = await self._restarted(page["events"])
                for event in page["events"]:
                    self._apply(event, restarted)
                self.after = page["next_after"]
                # While a question is pending, any change moves the revision its answer
                # binds to: the panel is read again, so it never shows a stale one.
                pending = self.snapshot is not None and self.snapshot["pending"] is not None
                if moved or page["trimmed"] or (pending and page["events"]):
                    named = [e["request_id"] for e in moved if "request_id" in e]
                    snapshot = await self._read(named[-1] if named else None)
                    if snapshot["pending"] is not None and any(
                            e["type"] == "input_requested" for e in moved):
                        self._announce(snapshot["pending"])
            except (ServiceUnreachable, Uncertain) as exc:
                self.connected = False
                if failures == 0:
                    self.notice(f"Lost the service: {exc}", severity="warning")
                await asyncio.sleep(RETRY_S[min(failures, len(RETRY_S) - 1)])
                failures += 1
                stale = True
            except NotClankie as exc:
                self.connected = False
                self.say(f"Stopped following: {exc} (fix: {exc.fix})", style="bold")
                self.notice(str(exc), title="Not clankie", severity="error")
                return
            except ApiError as exc:
                self.notice(wording.problem(exc.code, exc.detail), severity="error")
                return
            except NotYours as exc:
                self.connected = False
                self.refused = exc
                self.say(f"Stopped following: {exc}. Fix: {exc.fix}; then start `clankie "
                         "chat` again.", style="bold")
                self.notice(str(exc), title="Not your service", severity="error")
                return

    def _announce(self, question: dict[str, Any]) -> None:
        self.bell()  # heard from another window too
        prompt = continued(question["prompt"][:200])  # no line of it poses as the toast's
        self.notice(f"{wording.asks(question.get('asker'), None)}: {prompt}"
                    "\nThe question panel shows it.", title="A question")

    async def _restarted(self, events: list[dict[str, Any]]) -> frozenset[str]:
        """The questions among `events` that a restart cancelled (R9), each read: an
        `input_resolved` event carries no reason (V2). One evicted since is only said
        cancelled."""
        found = set()
        for e in events:
            if e["type"] == "input_resolved" and e["outcome"] == "cancelled":
                with contextlib.suppress(ApiError, NotClankie):
                    request = (await self._call("input_get", {
                        "conversation_id": self.conversation_id,
                        "request_id": e["request_id"]}))["request"]
                    if request and wording.restarted(request.get("receipt")):
                        found.add(e["request_id"])
        return frozenset(found)

    def _apply(self, event: dict[str, Any], restarted: frozenset[str] = frozenset()) -> None:
        if event["type"] == "run_status":
            if event["status"] in ("queued", "running"):
                self.running = self.running | {event["run_id"]}
            else:
                self.running = self.running - {event["run_id"]}
                self.doing = None
        line = render.event_line(event, self.asker, restarted)
        at = render.stamp(event, self.clock())
        self.waiting = None  # anything that happens after a wait ends it
        if event["type"] == "run_activity":
            self.waiting = event if event["run_id"] in self.running else None
            self.say(str(line), style="dim", at=at)
        elif event["type"] == "tool_activity":
            self.doing = event["summary"] if event["run_id"] in self.running else None
            if line is not None:  # None: `ask_question`'s own, said by the question's event
                self.say(line, style="dim", at=at)
        elif line is not None:
            self.say(line, at=at)
        if event["type"] == "message" and event["author"] == "owner":
            self.logged.append(event["message_id"])
            if (hint := self.hints.pop(event["message_id"], None)) is not None:
                self.say(hint)

    # ----------------------------------------------------------------------- commands

    def on_input_changed(self, event: Input.Changed) -> None:
        if not event.value:
            self.typed_against = None
        elif self.typed_against is None:
            q = self.snapshot["pending"] if self.snapshot else None
            self.typed_against = ((q["request_id"], self.snapshot["revision"])
                                  if q and self.snapshot else ("", 0))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        command = parse(event.value)
        if isinstance(command, Chat) and self.asker is not None:
            # Kept in the input line: the owner may turn it into `/question text ...`.
            self.say("Not sent: the agent reads only your answer to its question, never a "
                     "message. Answer with /question answer N (or /question text WORDS); "
                     "/question shows it.")
            return
        against, self.typed_against = self.typed_against, None
        event.input.value = ""
        if command is None:
            return
        if isinstance(command, Help):
            self.say(AGENT_USAGE if self.asker is not None else USAGE)
        elif isinstance(command, Usage):
            self.say(command.message)
        elif isinstance(command, Continue) and self.asker is not None:
            self.say("Not sent: no run of Clankie works in an agent's conversation; the agent "
                     "reads only your answer.")
        elif isinstance(command, Continue):
            self.send(wording.CONTINUE_MESSAGE)  # an ordinary message, never a replay (R9)
        elif isinstance(command, Stop) and self.asker is not None:
            self.say("No run of Clankie works in an agent's conversation: there is nothing to "
                     "stop. /question cancel cancels the agent's question.")
        elif isinstance(command, Chat):
            pending = self.snapshot["pending"] if self.snapshot else None
            self.send(command.text, render.answer_hint(pending, command.text))
        elif isinstance(command, ShowQuestion):
            self.show_question()
        elif isinstance(command, Stop):
            self.stop_runs()
        else:
            self._answer_displayed(command, against)

    def _answer_displayed(self, command: AnswerOption | AnswerText | CancelQuestion,
                          against: tuple[str, int] | None) -> None:
        """`against`: the question (and revision) the panel showed when the line was
        begun."""
        shown = self.snapshot  # what the panel shows: the answer binds to it
        if shown is None:
            self.say("The question is not read yet (the service has not answered); "
                     "nothing was sent.")
            return
        q = shown["pending"]
        if q is None:
            self.say(f"{wording.NO_QUESTION}; nothing was sent.")
            return
        if against is not None and against[0] != q["request_id"]:
            self.say("The question changed while you typed: read the one shown now and "
                     "answer again; nothing was sent.")
            return
        if against is not None and against[1] != shown["revision"]:
            self.say(f"The conversation moved on while you typed (revision {against[1]} is "
                     f"now {shown['revision']}): read the panel and the log, and answer "
                     "again; nothing was sent.")
            return
        payload = {"conversation_id": self.conversation_id, "request_id": q["request_id"],
                   "incarnation": shown["incarnation"], "revision": shown["revision"]}
        if isinstance(command, AnswerOption):
            if not q["options"]:
                self.say("This question takes words, not an option: /question text WORDS.")
                return
            if command.number > len(q["options"]):
                self.say(f"There is no option {command.number}; the question shows "
                         f"{len(q['options'])}.")
                return
            payload["option_id"] = q["options"][command.number - 1]["option_id"]
        elif isinstance(command, AnswerText):
            if not q["allow_text"]:
                self.say("This question takes one of its options, not text: "
                         "/question answer N.")
                return
            payload["text"] = command.text
        self.resolve("input_cancel" if isinstance(command, CancelQuestion) else "input_answer",
                     payload, agent=q.get("asker") is not None)

    @work(group="send")
    async def send(self, text: str, hint: str | None = None) -> None:
        """Send a chat message; `hint`, said on the line after the message once the log
        shows it: that it was chat, not an answer, and the command that answers."""
        try:
            sent = await self._call("conversation_send", {
                "conversation_id": self.conversation_id, "text": text})
            if hint is not None and sent["message_id"] in self.logged:
                self.say(hint)  # the tail showed the message first
            elif hint is not None:
                self.hints[sent["message_id"]] = hint
        except Uncertain:
            self.say("No reply from the service: the message may or may not have been sent.")
        except (ApiError, NotClankie, NotYours, ServiceUnreachable) as exc:
            self.say(f"Not sent: {exc}")

    @work(group="stop")
    async def stop_runs(self) -> None:
        """`/stop` (SPEC R7): stop the running run and the runs queued behind it, as the
        service lists them now; each `run_cancel` is sent once."""
        try:
            got = await self._call("conversation_get",
                                      {"conversation_id": self.conversation_id})
            unfinished = got.get("unfinished_runs") or []
            if not unfinished:
                self.say("Nothing to stop: Clankie is not working on this conversation.")
                return
            for run in reversed(unfinished):  # the queued first: none starts meanwhile
                await self._call("run_cancel", {"run_id": run["run_id"]})
        except Uncertain:
            self.say("No reply from the service: the run may or may not have been stopped.")
        except (ApiError, NotClankie, NotYours, ServiceUnreachable) as exc:
            self.say(f"Not stopped: {exc}")

    @work(exclusive=True, group="show")
    async def show_question(self) -> None:
        await self._show()

    async def _show(self, quiet: bool = False) -> None:
        """Read the snapshot and show it; say so when no question is pending (unless
        `quiet`: after an answer, the panel says the question ended)."""
        try:
            snapshot = await self._read()
        except (ApiError, NotClankie, NotYours, ServiceUnreachable, Uncertain) as exc:
            self.say(f"Could not read the question: {exc}")
            return
        if snapshot["pending"] is None and not quiet:
            self.say(f"{wording.NO_QUESTION}.")

    @work(group="answer")
    async def resolve(self, op: str, payload: dict[str, Any], agent: bool = False) -> None:
        """Send one answer or cancel, bound to what was displayed; never resend it. `agent`:
        an agent asked it (P3): no run of Clankie follows an answer, the agent reads it.

        Not exclusive: cancelling a worker in flight would leave its outcome unknown and
        unsaid. Two answers typed by a person are two requests; the service dedups them.
        """
        try:
            reply = await self._call(op, payload)
        except (ApiError, NotClankie) as exc:
            await self._refused(exc)
            return
        except Uncertain:
            self.say("The outcome is uncertain: the service may have received the answer, "
                     "but no reply came. It was not sent again; the panel shows where it "
                     "stands.")
            await self._show()
            return
        except ServiceUnreachable as exc:
            if op != "input_answer":
                self.say(f"Not sent: {exc}")
                return
            said = str(exc) if str(exc).endswith("?") else f"{exc}."
            self.say(f"Your answer was not sent: {said} {wording.ANSWER_NOT_SENT}")
            return
        except NotYours as exc:
            self.say(f"Not sent: {exc}")
            return
        receipt = reply["receipt"]
        if receipt["outcome"] == "cancelled":
            self.say("Cancelled the question." if not reply["duplicate"]
                     else "Already cancelled.")
        else:
            then = (f". {wording.accepted(receipt)}" if agent else
                    ": Clankie continues with it.")
            self.say(("Already accepted" if reply["duplicate"] else "Accepted") +
                     f" (receipt {receipt['receipt_id'][:8]}){then}")
        await self._show(quiet=True)

    async def _refused(self, exc: ApiError | NotClankie) -> None:
        if exc.code in wording.READ_AGAIN:
            self.say("The question changed since it was shown (the conversation moved on). "
                     "Here it is now; decide again.")
        elif exc.code in wording.ENDED:
            receipt = exc.problem.get("receipt") or {}
            self.say(f"That question has ended: {wording.outcome(receipt, exc.code)}. "
                     "Here is the current state.")
        else:
            self.say(f"Refused: {wording.problem(exc.code, exc.detail)}")
            return
        await self._show()
