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

What a typed line means (which request, incarnation and revision an answer binds to, or
why nothing is sent) and the follow loop's step (read the snapshot again, wait, say the
service was lost) are `decide`'s, pure; the app wires widgets and I/O to them. Replies are
typed `clankie.dto` models (`dto.Snapshot`, the events), read by attribute.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from rich.console import RenderableType
from rich.measure import measure_renderables
from rich.segment import Segment
from rich.text import Text
from textual import events, work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.notifications import SeverityLevel
from textual.reactive import reactive, var
from textual.strip import Strip
from textual.widgets import Footer, Input, RichLog, Static

from clankie import dto, eventtext, when, wording
from clankie.client import (
    ApiError,
    NotClankie,
    NotYours,
    ServiceUnreachable,
    Uncertain,
    typed,
)
from clankie.core.vocabulary import Code
from clankie.dto import OutT
from clankie.text import continued, visible

from . import decide, live, render
from .commands import ShowQuestion, Stop, parse

TAIL_WAIT_MS = 25_000
NOT_YOURS_EXIT = 5  # the CLI's exit for a refused listener (SPEC section 10, T2)
EPOCH = datetime.min.replace(tzinfo=UTC)  # a reactive clock's value before it is set
PLACEHOLDER = "Message Clankie, or /question, /help"
BELOW = "↓ New text below. Scroll down, or click here, to follow it."


class Api(Protocol):
    """What the app needs of `clankie.client.AsyncClient`."""

    async def call(self, op: str, payload: Mapping[str, Any] | None = None
                   ) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


@dataclass
class Writing:
    """The reply being written, as the log's last lines (SPEC D15): from `start` on, its
    complete rows, then `tail` lines of its unfinished row (with `…`). `stamp`: the local
    time its call began, before `clankie: `."""

    reply_id: str
    stamp: str
    growing: live.Growing
    start: int
    tail: int = 0


@dataclass(frozen=True)
class LiveSeen:
    """The live reply as last read (SPEC D4), and when by this app's clock: the status
    line counts on from its `idle_ms`."""

    reply: dto.LiveReply
    at: datetime


class ChatLog(RichLog):
    """The conversation's lines. A RichLog wraps a line once, at the width it has when the
    line is written: when the terminal's width changes, every line is written again at the
    new one (none cut at the right edge).

    The reply being written (`writing`, SPEC D15) is the log's last lines: its complete rows
    are written once, its unfinished row alone is redrawn (`clankie.tui.live`), so an
    update costs what its new text costs, not the reply so far; a line said meanwhile goes
    above it. The log follows its end, unless the owner has scrolled up: then nothing
    moves the view, and `unseen` says that new text is below it."""

    unseen: var[bool] = var(False)
    BINDINGS: ClassVar[list[Binding | tuple[str, str] | tuple[str, str, str]]] = [
        Binding("ctrl+end", "scroll_end", "Scroll End", show=False),
        Binding("ctrl+home", "scroll_home", "Scroll Home", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.said: list[Text] = []
        self.wrapped_at = 0
        self.writing: Writing | None = None
        self.following = True  # the view is at the end, and stays there
        self.follows = False  # going to the end once the new lines are laid out

    def say(self, line: Text) -> None:
        self.said.append(line)
        if self.writing is None:
            self.write(line, scroll_end=False)
            self._moved()
            return
        strips = self._strips(self._make_renderable(line))
        self._splice(self.writing.start, 0, strips)
        self.writing.start += len(strips)

    # -------------------------------------------------------------- the reply written

    def begin(self, reply_id: str, stamp: str) -> None:
        """A reply is being written: its lines start at the end."""
        head = Text.assemble((f"{stamp} ", "dim"), "clankie: ")
        self.writing = Writing(reply_id, stamp, live.Growing(head, self._width()),
                               len(self.lines))

    def grow(self, text: str) -> None:
        """More of the reply: its rows now complete are written, its unfinished row drawn
        again with `…`. If the log's width changed since it began (its first lines came
        before the log was laid out), it is all written again at the width it has now."""
        shown = self.writing
        if shown is not None and shown.growing.width != self._width():
            text = shown.growing.received + text
            self._splice(shown.start, len(self.lines) - shown.start, [])
            self.begin(shown.reply_id, shown.stamp)
            shown = self.writing
        if shown is None or not text:
            return
        strips = self._rows(shown.growing.add(text))
        tail = self._strips(shown.growing.line + live.ELLIPSIS)
        self._splice(len(self.lines) - shown.tail, shown.tail, strips + tail)
        shown.tail = len(tail)

    def end(self, rest: str, suffix: str, line: Text) -> None:
        """Its message was stored (`rest`: what it had beyond the text shown) or it was cut
        off: its lines stay where they are, the last one ending with `suffix` (its own
        space first, if any: `render.ending`); `line`, the
        message as the log says it, is what a new width writes again."""
        shown = self.writing
        if shown is None:
            return
        rows = shown.growing.add(rest)
        strips = self._rows(rows + shown.growing.close(suffix))
        self._splice(len(self.lines) - shown.tail, shown.tail, strips)
        self.writing = None
        self.said.append(line)

    def drop(self) -> None:
        """Its lines go (withdrawn, or replaced by its message)."""
        if self.writing is not None:
            self._splice(self.writing.start, len(self.lines) - self.writing.start, [])
            self.writing = None

    def _width(self) -> int:
        return max(self.scrollable_content_region.width, 1)

    def _rows(self, rows: list[Text]) -> list[Strip]:
        return [strip for row in rows for strip in self._strips(row)]

    def _strips(self, line: RenderableType) -> list[Strip]:
        """`line`'s strips, as `write` makes them."""
        console = self.app.console
        options = console.options
        most = self.scrollable_content_region.width
        measured = line.cell_len if isinstance(line, Text) and "\n" not in line.plain \
            else measure_renderables(console, options, [line]).maximum  # a row: its cells
        width = max(min(measured, most), self.min_width)
        rendered = list(Segment.split_lines(console.render(line, options.update_width(width))))
        strips = Strip.from_lines(rendered) if rendered else [Strip.blank(width)]
        for strip in strips:
            strip.adjust_cell_length(width)
        return strips

    def _splice(self, at: int, count: int, strips: list[Strip]) -> None:
        """`count` lines from `at` replaced by `strips`: only those lines are drawn again
        (and the ones after them, when their number changed)."""
        stale = range(at, at + count) if len(strips) == count else range(at, len(self.lines))
        key = (self.scroll_offset.x, self.scrollable_content_region.width,
               self._widest_line_width)
        for y in stale:
            self._line_cache.discard((y + self._start_line, *key))
        self.lines[at:at + count] = strips
        if strips:
            self._widest_line_width = max(self._widest_line_width,
                                          max(strip.cell_length for strip in strips))
        if len(strips) != count or self.virtual_size.width != self._widest_line_width:
            self.virtual_size = Size(self._widest_line_width, len(self.lines))
        self.refresh()
        self._moved()

    # ---------------------------------------------------------------- where the view is

    def _moved(self) -> None:
        """New lines: followed at the end once they are laid out (`_follow`), or said to be
        below a view scrolled up."""
        if not self.following:
            self.unseen = True
        elif not self.follows:
            self.follows = True
            self.call_after_refresh(self._follow)

    def _follow(self) -> None:
        """Show the end, unless the owner scrolled up meanwhile."""
        self.follows = False
        if self.following:
            self.scroll_end(animate=False, immediate=True, x_axis=False)
        else:
            self.unseen = True

    def to_end(self) -> None:
        """The owner goes to the end (End, ctrl+End, PageDown that reaches it, a click on
        the line below): the log follows the reply again, at once. Textual's own keys
        animate towards the end as it was when pressed, and the reply growing meanwhile
        left the view short of it, not following (D15)."""
        self.following = True
        self.unseen = False
        self.scroll_end(animate=False, immediate=True, x_axis=False)

    def action_scroll_end(self) -> None:
        if not self.allow_vertical_scroll:
            raise SkipAction()
        self.to_end()

    def action_page_down(self) -> None:
        if self.allow_vertical_scroll and (
                self.scroll_y + self.scrollable_content_region.height >= self.max_scroll_y):
            self.to_end()
        else:
            super().action_page_down()

    def action_page_up(self) -> None:
        self._leave_end()
        super().action_page_up()

    def action_scroll_up(self) -> None:
        self._leave_end()
        super().action_scroll_up()

    def action_scroll_home(self) -> None:
        self._leave_end()
        super().action_scroll_home()

    def _leave_end(self) -> None:
        """The owner scrolls up by a key: Textual animates it, and until its first step
        the view is still at the end, where a new line would follow (`_follow`), cancelling
        the owner's scroll. So the log stops following at once."""
        if self.allow_vertical_scroll and self.scroll_y > 0:
            self.following = False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self.following = round(new_value) >= self.max_scroll_y
        if self.following:
            self.unseen = False

    def on_resize(self, event: events.Resize) -> None:
        if self.wrapped_at and event.size.width != self.wrapped_at:
            self.call_after_refresh(self._rewrap)
        elif self.wrapped_at and self.following:  # only higher or lower: the end is
            self.call_after_refresh(self.scroll_end, animate=False, immediate=True)  # kept
        self.wrapped_at = event.size.width

    def _rewrap(self) -> None:
        shown = self.writing
        self.clear()
        for line in self.said:
            self.write(line, scroll_end=False)
        if shown is not None:  # written again from its text, at the new width
            received = shown.growing.received
            self.begin(shown.reply_id, shown.stamp)
            self.grow(received)
        self.scroll_end(animate=False, immediate=True)


class Below(Static):
    """The line under the log while the owner has scrolled up and new text came below
    (SPEC D15); a click on it goes to the end."""

    def on_click(self) -> None:
        self.app.query_one(ChatLog).to_end()


class HeaderLine(Static):
    """Which model answers (or, in an agent's conversation, which agent asks) and where the
    conversation works (`render.header`), cut to the width it has now: drawn again when
    any is read and when the screen is resized."""

    workspace: reactive[str | None] = reactive(None)
    model: reactive[dto.ModelOut | None] = reactive(None)
    asker: reactive[dto.AskerOut | None] = reactive(None)

    def render(self) -> Content:
        return Content(visible(render.header(self.workspace, self.model,
                                             self.content_region.width, self.asker)))


class QuestionPanel(Static):
    """The question panel: the latest snapshot's question, pending (prompt, numbered
    options, how to answer, times, the IDs an answer binds to) or the one that ended, in
    `render.question_panel`'s words, its relative times from `now`. Drawn again whenever
    either changes (the app binds both to its own)."""

    snapshot: reactive[dto.Snapshot | None] = reactive(None, layout=True)
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

    snapshot: var[dto.Snapshot | None] = var(None)

    def watch_snapshot(self, snapshot: dto.Snapshot | None) -> None:
        self.set_class(render.panel_shown(snapshot), "shown")


class StatusLine(Static):
    """The status line, from the app's state: connection, Clankie at work (or its wait to
    ask the model again, counting down), the question in the snapshot's words (the same
    snapshot as the panel), the conversation and the address. Marked `expiring` in the
    last tenth of a pending question's time."""

    snapshot: reactive[dto.Snapshot | None] = reactive(None)
    now: reactive[datetime] = reactive(EPOCH)
    connected: reactive[bool] = reactive(True)
    refused: reactive[NotYours | None] = reactive(None)
    running: reactive[frozenset[str]] = reactive(frozenset())
    doing: reactive[str | None] = reactive(None)
    waiting: reactive[dto.RunActivityEvent | None] = reactive(None)
    live: reactive[LiveSeen | None] = reactive(None)
    stall: reactive[float | None] = reactive(None)
    expiring: var[bool] = var(False)

    def __init__(self, service: str, conversation_id: str, **kwargs: Any) -> None:
        super().__init__(markup=False, **kwargs)
        self.service = service
        self.conversation_id = conversation_id

    def render(self) -> Content:
        seen = self.live
        writing = None if seen is None or self.waiting is not None else render.live_status(
            seen.reply, (self.now - seen.at).total_seconds(), self.stall)
        return Content(visible(render.status_line(
            self.service, self.conversation_id,
            render.question_state(self.snapshot, self.now), bool(self.running),
            self.connected,
            render.retry_status(self.waiting, self.now) if self.waiting else self.doing,
            refused=self.refused is not None, writing=writing)))

    def compute_expiring(self) -> bool:
        q = self.snapshot.pending if self.snapshot else None
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
    snapshot: var[dto.Snapshot | None] = var(None)
    now: var[datetime] = var(EPOCH)  # the clock, read each second and with each snapshot
    connected: var[bool] = var(True)
    refused: var[NotYours | None] = var(None)  # the tail stopped: the listener is not ours
    running: var[frozenset[str]] = var(frozenset())  # runs queued or running
    doing: var[str | None] = var(None)  # the latest tool activity of a running run
    waiting: var[dto.RunActivityEvent | None] = var(None)  # its wait to ask the model again (R6)
    live: var[LiveSeen | None] = var(None)  # the reply being written, as last read (D4)
    stall: var[float | None] = var(None)  # the service's `model_stall_timeout` (D11)
    # The header's, read on start and after a reconnect: the conversation's workspace
    # and, in an agent's conversation, who asks there (`conversation_get`, SPEC P3), and
    # `service_info`'s `model`.
    workspace: var[str | None] = var(None)
    model: var[dto.ModelOut | None] = var(None)
    asker: var[dto.AskerOut | None] = var(None)
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
        self.after = 0  # the tail's cursor (V1): the last page's `next_after`
        # What the panel showed when the input line was begun: an answer typed for one
        # question is never sent to another that replaced it meanwhile.
        self.typed_against: decide.Shown | None = None
        # A chat line that looked like an answer is said to be chat on the line after it
        # (SPEC section 10 "Operator TUI"): its hint by message ID until the log shows the
        # message, and the owner's messages the log showed last (the tail may be first).
        self.hints: dict[str, str] = {}
        self.logged: deque[str] = deque(maxlen=64)
        # The live reply (SPEC D4): what the tail sends back (the `reply_id` and `length`
        # last received, never a count of its own), and the replies whose message or
        # withdrawal the log showed (a live answer about one of them shows nothing).
        self.live_at: dict[str, Any] = {"reply_id": None, "offset": 0}
        self.settled: deque[str] = deque(maxlen=64)
        self.live_shown = 0  # the `length` of the last live answer shown

    def compose(self) -> ComposeResult:
        yield HeaderLine(id="where", markup=False).data_bind(ChatApp.workspace, ChatApp.model,
                                                             ChatApp.asker)
        yield StatusLine(self.service, self.conversation_id, id="status").data_bind(
            ChatApp.snapshot, ChatApp.now, ChatApp.connected, ChatApp.refused,
            ChatApp.running, ChatApp.doing, ChatApp.waiting, ChatApp.live, ChatApp.stall)
        yield ChatLog(id="log", wrap=True, markup=False, min_width=1)  # not RichLog's 78
        yield Below(BELOW, id="below", markup=False)
        with QuestionBox(id="question-box").data_bind(ChatApp.snapshot):
            yield QuestionPanel(id="question", markup=False).data_bind(
                ChatApp.snapshot, ChatApp.now, ChatApp.workspace, ChatApp.rows)
        yield Input(placeholder=PLACEHOLDER, id="input")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)  # the expiry countdown
        self.query_one(Input).focus()
        log = self.query_one(ChatLog)
        self.watch(log, "unseen", self._unseen)
        for note in self.notes:
            self.say(note, style="bold")
        self.about()
        self.tail()

    def on_resize(self, event: events.Resize) -> None:
        self.rows = event.size.height

    def _unseen(self, unseen: bool) -> None:
        self.query_one(Below).set_class(unseen, "shown")

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

    def _take(self, snapshot: dto.Snapshot) -> None:
        """Keep `snapshot` if it is not older than the one kept (`decide.newer`); the panel
        and the status line, bound to it, show it at once, with the clock read now."""
        self._read_clock()
        if decide.newer(self.snapshot, snapshot):
            self.snapshot = snapshot

    def _tick(self) -> None:
        """Each second: the countdown and the panel's relative times follow the clock; a
        shown question past its expiry is read again (S5 commits the expiry on use) rather
        than shown live."""
        self._read_clock()
        if self.connected and decide.expired(self.snapshot, self.now):
            self.read_again()

    async def _op(self, spec: dto.Op[Any, OutT], payload: Mapping[str, object] | None = None
                  ) -> OutT:
        """One call, its result typed by the op's row of the op table; one that does not fit
        is `NotClankie` (which every worker says in a line), never a
        traceback later. The request goes out as the JSON object `payload`, as from any
        client, for the service to validate: what a person typed, or an ID a service sent,
        is refused by the service (`invalid_request`, said like any refusal), never by a
        local validation error."""
        return typed(spec, await self.api.call(spec.name, payload), self.service)

    async def _read(self, request_id: str | None = None) -> dto.Snapshot:
        """Read the snapshot with the question the panel is about (or `request_id`, a newer
        one an event named), so a question that ended is shown as ended; one evicted
        meanwhile (A3) is left out."""
        payload = {"conversation_id": self.conversation_id}
        about = request_id or render.shown_request(self.snapshot)
        try:
            snapshot = await self._op(dto.INPUT_GET,
                                      {**payload, "request_id": about} if about else payload)
        except ApiError as exc:
            if exc.code != Code.UNKNOWN_REQUEST or about is None:
                raise
            snapshot = await self._op(dto.INPUT_GET, payload)
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
        self.asker = _part(dto.AskerOut, got.get("asker"))

    def watch_asker(self, asker: dto.AskerOut | None) -> None:
        self.query_one(Input).placeholder = (
            "Answer the agent with /question answer N or /question text WORDS; /help"
            if asker else PLACEHOLDER)

    @work(exclusive=True, group="about")
    async def about(self) -> None:
        """The header's model, read on start and after a reconnect (a restarted service may
        run another model)."""
        # Read as far as it goes, checked here: the header is only words. If it fails, it
        # is shown as `?`; the tail says what is wrong with the service.
        with contextlib.suppress(ApiError, NotClankie, NotYours, ServiceUnreachable, Uncertain):
            info = await self.api.call("service_info")
            self.model = _part(dto.ModelOut, info.get("model"))
            settings = info.get("settings")
            stall = settings.get("model_stall_timeout") if isinstance(settings, dict) else None
            self.stall = float(stall) if isinstance(stall, int | float) \
                and not isinstance(stall, bool) else None

    # ------------------------------------------------------------------------- events

    @work(exclusive=True, group="tail")
    async def tail(self) -> None:
        """Follow the conversation (V1). The snapshot is read first, on start and after a
        reconnect, so the status is known at once, not when a long poll ends (up to 25 s on
        a quiet conversation); then again when `decide.after_page` says (V3). What to do
        after each page or failure is `decide`'s; this loop only does it."""
        state = decide.Follow(after=self.after)
        while True:
            try:
                if state.stale:
                    await self._learn()
                    await self._read()
                    state, back = decide.reconnected(state)
                    if back:
                        self.about()
                    self.connected = True
                asked = time.monotonic()
                sent = dict(self.live_at)
                page = await self._op(dto.EVENTS_TAIL, {
                    "conversation_id": self.conversation_id, "after": state.after,
                    "limit": 500, "wait_ms": TAIL_WAIT_MS, "live": sent})
                if page.service_stopping is True:  # back soon, maybe with another model
                    state = await self._lose(state, "the service stopped")
                    continue
                if (trimmed := decide.trimmed(page)) is not None:
                    self.say(trimmed)
                restarted = await self._restarted(page.events)
                reasons = render.cut_reasons(page.events)
                for event in page.events:
                    self._apply(event, restarted, reasons)
                if page.live is None or isinstance(page.live, dto.LiveReply):
                    self._show_live(page.live)
                if pause := decide.pause_after(page, time.monotonic() - asked,
                                               live=self.live_at != sent):
                    await asyncio.sleep(pause)
                pending = self.snapshot is not None and self.snapshot.pending is not None
                state, step = decide.after_page(state, page, pending)
                self.after = state.after
                if step.read:
                    snapshot = await self._read(step.about)
                    if snapshot.pending is not None and step.announce:
                        self._announce(snapshot.pending)
            except (ServiceUnreachable, Uncertain) as exc:
                state = await self._lose(state, str(exc))
            except (NotClankie, ApiError, NotYours) as exc:
                self._stop_following(exc)
                return
            except NoMatches:  # a page came as the app closed: its screen is gone
                return

    async def _lose(self, state: decide.Follow, why: str) -> decide.Follow:
        """The service is gone (`why`): say so once (`decide.lost`) and wait before trying
        again; on its return the snapshot and the header are read again."""
        self.connected = False
        state, lost = decide.lost(state, why)
        if lost.notice is not None:
            self.notice(lost.notice, severity="warning")
        await asyncio.sleep(lost.wait_s)
        return state

    def _stop_following(self, exc: NotClankie | ApiError | NotYours) -> None:
        """Say why the tail stops (`decide.stopped`); a listener that is not the owner's
        service is kept in `refused`, for the status line and the exit code."""
        stopped = decide.stopped(exc)
        if stopped.disconnected:
            self.connected = False
        if isinstance(exc, NotYours):
            self.refused = exc
        if stopped.say is not None:
            self.say(stopped.say, style="bold")
        self.notice(stopped.notice, title=stopped.title, severity="error")

    def _announce(self, question: dto.QuestionOut) -> None:
        self.bell()  # heard from another window too
        prompt = continued(question.prompt[:200])  # no line of it poses as the toast's
        self.notice(f"{wording.asks(render.plain(question.asker), None)}: {prompt}"
                    "\nThe question panel shows it.", title="A question")

    async def _restarted(self, events: Sequence[dto.Event]) -> eventtext.Restarted:
        """The questions among `events` that a restart cancelled (R9; `eventtext.restarted`
        decides, as for the CLI), each read: an `input_resolved` event carries no reason
        (V2). One evicted since is only said cancelled."""
        read: list[dto.QuestionOut | None] = []
        for request_id in eventtext.to_read(events):
            with contextlib.suppress(ApiError, NotClankie):
                read.append((await self._op(dto.INPUT_GET, {
                    "conversation_id": self.conversation_id,
                    "request_id": request_id})).request)
        return eventtext.restarted(read)

    def _event_line(self, event: dto.Event, restarted: eventtext.Restarted,
                    reasons: Mapping[str, str] | None = None) -> str | None:
        return render.event_line(event, self.asker, restarted, reasons)

    def _apply(self, event: dto.Event,
               restarted: eventtext.Restarted = eventtext.NONE_RESTARTED,
               reasons: Mapping[str, str] | None = None) -> None:
        if isinstance(event, dto.RunStatusEvent):
            if event.status in ("queued", "running"):
                self.running = self.running | {event.run_id}
            else:
                self.running = self.running - {event.run_id}
                self.doing = None
                if self.live is not None and self.live.reply.run_id == event.run_id:
                    self.live = None
        line = self._event_line(event, restarted, reasons)
        at = eventtext.stamp(event, self.clock())
        self.waiting = None  # anything that happens after a wait ends it
        if isinstance(event, dto.RunActivityEvent):
            self._withdraw(event.withdrawn)
            self.waiting = event if event.run_id in self.running else None
            self.say(str(line), style="dim", at=at)
        elif isinstance(event, dto.ToolActivityEvent):
            self.doing = event.summary if event.run_id in self.running else None
            if line is not None:  # None: `ask_question`'s own, said by the question's event
                self.say(line, style="dim", at=at)
        elif isinstance(event, dto.MessageEvent) and line is not None and self._stored(
                event, line, render.ending(event.text, render.partial_end(
                    event.partial, (reasons or {}).get(event.message_id)))
                if event.partial else ""):
            pass  # the reply shown while it was written is its message, where it is
        elif line is not None:
            self.say(line, at=at)
        if isinstance(event, dto.MessageEvent) and event.author == "owner":
            self.logged.append(event.message_id)
            if (hint := self.hints.pop(event.message_id, None)) is not None:
                self.say(hint)

    # ------------------------------------------------------------- the reply written

    def _show_live(self, reply: dto.LiveReply | None) -> None:
        """A live answer (SPEC D4, D15): the reply being written grows in the log where its
        message will be, and the status line says how it goes. Events were shown first: a
        message, a withdrawal or a run's end about this reply is already in the log. A
        shown reply that is no longer live and whose message never came is kept, said to
        be cut off (`_vanished`)."""
        log = self.query_one(ChatLog)
        if log.writing is not None and (reply is None or
                                        reply.reply_id != log.writing.reply_id):
            self._vanished()
        if reply is None:
            self.live, self.live_at = None, {"reply_id": None, "offset": 0}
            return
        self.live_at = {"reply_id": reply.reply_id, "offset": reply.length}
        if reply.reply_id in self.settled:
            self.live = None  # its message is shown; it leaves memory after that commit
            return
        if self.live is None or self.live.reply.reply_id != reply.reply_id:
            self.waiting = None  # a new try: the wait before it is over
        self.live = LiveSeen(reply, self.clock())
        shown = log.writing
        text = reply.text
        if shown is not None and reply.offset == 0:  # the text so far, again (D4)
            received = shown.growing.received
            if text.startswith(received):
                text = text[len(received):]
            else:
                log.drop()
        elif shown is not None and reply.offset != self.live_shown:
            log.drop()  # not what follows the text shown: ask for the text so far
            self.live_at = {"reply_id": None, "offset": 0}
            return
        elif shown is None and reply.offset != 0:
            self.live_at = {"reply_id": None, "offset": 0}
            return
        self.live_shown = reply.length
        if text and log.writing is None:
            log.begin(reply.reply_id, when.brief(reply.started_at, self.clock()))
        log.grow(text)

    def _stored(self, event: dto.MessageEvent, line: str, suffix: str) -> bool:
        """Whether `event` is the message of the reply shown while it was written: then
        its lines stay where they are, completed with what was not shown yet and with how
        it was cut off (`suffix`, the end of `line`), if it was. A message that does not
        continue the text shown (a checkpoint older than it, D9) replaces it: False, and
        it is said as any message."""
        log = self.query_one(ChatLog)
        shown = log.writing
        if shown is None or shown.reply_id != event.message_id:
            return False
        self.settled.append(event.message_id)
        received = shown.growing.received
        if not event.text.startswith(received):
            log.drop()
            return False
        log.end(event.text[len(received):], suffix,
                Text.assemble((f"{shown.stamp} ", "dim"), visible(line)))
        return True

    def _withdraw(self, withdrawn: dto.Withdrawn | None) -> None:
        """A try's reply, withdrawn (D8): its lines go; the event's line says it."""
        if withdrawn is None:
            return
        self.settled.append(withdrawn.reply_id)
        log = self.query_one(ChatLog)
        if log.writing is not None and log.writing.reply_id == withdrawn.reply_id:
            log.drop()
        if self.live is not None and self.live.reply.reply_id == withdrawn.reply_id:
            self.live = None

    def _vanished(self) -> None:
        """The reply shown is no longer written, and neither its message nor a withdrawal
        came (its text was not stored: clankie restarted before its first checkpoint).
        What was shown stays, said to be cut off and not kept; never passed off as
        complete, never dropped in silence."""
        log = self.query_one(ChatLog)
        shown = log.writing
        if shown is None:
            return
        self.settled.append(shown.reply_id)
        received = shown.growing.received
        end = render.ending(received, render.NOT_KEPT_END)
        log.end("", end, Text.assemble((f"{shown.stamp} ", "dim"),
                                       visible(f"clankie: {continued(received)}{end}")))

    # ----------------------------------------------------------------------- commands

    def on_input_changed(self, event: Input.Changed) -> None:
        if not event.value:
            self.typed_against = None
        elif self.typed_against is None:
            self.typed_against = decide.shown(self.snapshot)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Do what `decide.line` says the line means, bound to what the panel showed when
        the line was begun."""
        act = decide.line(parse(event.value), self.snapshot, self.typed_against,
                          agent=self.asker is not None)
        if isinstance(act, decide.Say) and act.keep:  # the owner may turn it into a command
            event.input.select_all()  # kept, yet the next command typed replaces it
            self.say(act.words)
            return
        self.typed_against = None
        event.input.value = ""
        if isinstance(act, decide.Say):
            self.say(act.words)
        elif isinstance(act, decide.SendChat):
            self.send(act.text, act.hint)
        elif isinstance(act, ShowQuestion):
            self.show_question()
        elif isinstance(act, Stop):
            self.stop_runs()
        elif isinstance(act, decide.Resolve):
            self.resolve(act)

    @work(group="send")
    async def send(self, text: str, hint: str | None = None) -> None:
        """Send a chat message; `hint`, said on the line after the message once the log
        shows it: that it was chat, not an answer, and the command that answers."""
        try:
            sent = await self._op(dto.CONVERSATION_SEND, {
                "conversation_id": self.conversation_id, "text": text})
            if hint is not None and sent.message_id in self.logged:
                self.say(hint)  # the tail showed the message first
            elif hint is not None:
                self.hints[sent.message_id] = hint
        except Uncertain:
            self.say("No reply from the service: the message may or may not have been sent.")
        except (ApiError, NotClankie, NotYours, ServiceUnreachable) as exc:
            self.say(f"Not sent: {exc}")

    @work(group="stop")
    async def stop_runs(self) -> None:
        """`/stop` (SPEC R7): stop the running run and the runs queued behind it, as the
        service lists them now; each `run_cancel` is sent once."""
        try:
            got = await self._op(dto.CONVERSATION_GET,
                                 {"conversation_id": self.conversation_id})
            unfinished = got.unfinished_runs or []
            if not unfinished:
                self.say("Nothing to stop: Clankie is not working on this conversation.")
                return
            for run in reversed(unfinished):  # the queued first: none starts meanwhile
                await self._op(dto.RUN_CANCEL, {"run_id": run.run_id})
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
        if snapshot.pending is None and not quiet:
            self.say(f"{wording.NO_QUESTION}.")

    @work(group="answer")
    async def resolve(self, bound: decide.Resolve) -> None:
        """Send one answer or cancel, bound to what was displayed (`decide.bind_answer`);
        never resend it. An agent's question (P3): no run of Clankie follows an answer, the
        agent reads it.

        Not exclusive: cancelling a worker in flight would leave its outcome unknown and
        unsaid. Two answers typed by a person are two requests; the service dedups them.
        """
        try:
            reply = await self._op(bound.op, bound.payload(self.conversation_id))
        except (ApiError, NotClankie) as exc:
            words, again = decide.refused(exc.code, exc.detail, exc.problem.get("receipt"))
            self.say(words)
            if again:
                await self._show()
            return
        except Uncertain:
            self.say("The outcome is uncertain: the service may have received the answer, "
                     "but no reply came. It was not sent again; the panel shows where it "
                     "stands.")
            await self._show()
            return
        except ServiceUnreachable as exc:
            self.say(decide.unsent(bound, str(exc)))
            return
        except NotYours as exc:
            self.say(f"Not sent: {exc}")
            return
        self.say(decide.answered(bound, reply))
        await self._show(quiet=True)


ModelT = TypeVar("ModelT", bound=BaseModel)


def _part(shape: type[ModelT], value: object) -> ModelT | None:
    """A part of a reply read only for its words (the header's model, who asks), read as
    far as it goes: None unless it has `shape`."""
    try:
        return shape.model_validate(value)
    except ValidationError:
        return None
