"""Following a conversation's events from the CLI, across a restart of the service.

Owns the long-poll loop that `conversations events --follow` and `conversations send --wait`
share (SPEC section 10 "Finding what waits": it survives a service restart like the TUI,
says so, and goes on from the event it had reached). A read that finds the service gone
(`ServiceUnreachable`, or `Uncertain`: an `events_tail` is a read, safe to ask again) is
asked again after 0.2 s, 0.5 s, then every 0.8 s (the TUI's spacing), for at most
`GIVE_UP_S` (10 minutes) from the loss; then the command says how to follow again and exits
1 (a caller with a deadline of its own, `send --wait --timeout S`, is told at that
deadline instead: `Gone`). Once the service answers (the first read after a loss does not
wait, so this is said at once), it says whether it restarted (its `started_at` moved) and
goes on from the event it had reached, so no event is shown twice.
A restart between two reads (the old service ends a long poll at once as it stops) is told
the same way: whenever a read came over a new connection, `service_info` says whether
`started_at` moved. Every other failure is `call`'s.

With `live` (SPEC D4, D16) each read asks for the reply being written too, sending back the
`reply_id` and `length` it last received (never a count of its own); after a restart it
asks again with a null `reply_id`, so the new service answers with the text so far, if any.
A long-poll that comes back with a new live reply is an answer, not an empty page.
It decides nothing and sends nothing but reads.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from clankie import when

from .common import OTHER, call, exit_with, print_json, problem_document, warn

if TYPE_CHECKING:
    from clankie import dto
    from clankie.client import Client

FOLLOW_WAIT_MS: Final = 25_000
RETRY_S: Final = (0.2, 0.5, 0.8)  # as the TUI's (SPEC section 10 "Operator TUI")
GIVE_UP_S: Final = 600.0  # docs/decisions.md, issue 31: a restart, or a reboot and a start
PAGE: Final = 500


class Gone(Exception):
    """The service was lost and did not come back before the caller's own deadline."""

    def __init__(self, cause: Exception, fix: str | None) -> None:
        super().__init__(str(cause))
        self.fix = fix


class Follower:
    """The events of one conversation after `after`, page by page, across restarts."""

    def __init__(self, client: Client, conversation_id: str, after: int, *, as_json: bool,
                 note: Callable[[str], None], live: bool = False) -> None:
        self.client, self.conversation_id, self.after = client, conversation_id, after
        self.as_json, self.note = as_json, note
        # The live reply last received (reply_id, length, state), sent back with each read;
        # None: not asked for. (None, 0, "") asks for a snapshot (D4).
        self.live: tuple[str | None, int, str] | None = (None, 0, "") if live else None
        self.waited = True  # the last read was a long-poll (not the first after a loss)
        self.started_at = self._started_at()

    def _started_at(self) -> str:
        from clankie import dto

        info = call(self.client, dto.SERVICE_INFO, as_json=self.as_json)
        stall = info.settings.get("model_stall_timeout")
        self.stall_s = stall if isinstance(stall, int | float) else None  # D11, for `Live`
        return info.started_at

    def page(self, wait_ms: int = FOLLOW_WAIT_MS, until: float | None = None) -> dto.EventsOut:
        """The next page (waiting up to `wait_ms` for one); `after` moves past it. With
        `until` (a `time.monotonic()` deadline), a service lost and not back by then is
        `Gone`, rather than waited for up to `GIVE_UP_S`."""
        from clankie import dto
        from clankie.client import EMPTY_AT_ONCE_S, PAUSE_AFTER_EMPTY_S

        asked, sent = time.monotonic(), self.live
        page = self._read(wait_ms, until)
        live = page.live  # absent from a page cut short by `limit` (D4): kept as it was
        if isinstance(live, dto.LiveReply):
            self.live = (live.reply_id, live.length, live.state)
        elif live is None and self.live is not None:
            self.live = (None, 0, "")
        new = self.live != sent and self.live is not None and self.live[0] is not None
        if wait_ms and self.waited and not page.events and not new and \
                time.monotonic() - asked < EMPTY_AT_ONCE_S:
            time.sleep(PAUSE_AFTER_EMPTY_S)  # no long-poll slot was free (V5): not a spin
        self.after = page.next_after
        return page

    def to_the_end(self) -> None:
        """Move `after` past every event there is now, without showing them."""
        while len(self.page(0).events) == PAGE:
            pass

    def _read(self, wait_ms: int, until: float | None = None) -> dto.EventsOut:
        from clankie import dto
        from clankie.client import ServiceUnreachable, Uncertain

        lost: float | None = None
        tries = 0
        while True:
            connections = self.client.connections
            try:
                live = None if self.live is None else dto.LiveAt(
                    reply_id=self.live[0], offset=self.live[1])
                # Once back after a loss, the first read does not wait: the owner learns at
                # once that clankie is back (and whether it restarted), not at the next event.
                page = call(self.client, dto.EVENTS_TAIL, dto.EventsTail(
                    conversation_id=self.conversation_id, after=self.after, limit=PAGE,
                    wait_ms=wait_ms if lost is None else 0,
                    **({} if live is None else {"live": live})),
                    as_json=self.as_json, reconnecting=True)
                self.waited = lost is None
                # A new connection: the service may have restarted between two reads too
                # (its old one ended a long poll at once as it stopped), not only during one.
                if lost is not None or self.client.connections != connections:
                    self._back(lost is not None)
                return page
            except (ServiceUnreachable, Uncertain) as exc:
                now = time.monotonic()
                if self.live is not None:  # a service that comes back may be a new one (D16)
                    self.live = (None, 0, "")
                if lost is None:
                    lost = now
                    # A read: nothing was carried out, whatever the connection said
                    self.note(f"(lost clankie, which may be restarting; trying again for up "
                              f"to {GIVE_UP_S / 60:.0f} min; the events wait there)")
                elif until is not None and now >= until:
                    raise Gone(exc, exc.fix) from None
                elif now - lost >= GIVE_UP_S and self.as_json:
                    print_json(problem_document(
                        "service_unreachable", f"the service has not come back within "
                        f"{GIVE_UP_S / 60:.0f} min: {exc}", fix=exc.fix, sent="no",
                        after=self.after))
                    exit_with(OTHER)
                elif now - lost >= GIVE_UP_S:
                    warn(f"clankie: the service has not come back within "
                         f"{GIVE_UP_S / 60:.0f} min: {exc}")
                    if exc.fix:
                        warn(f"  fix: {exc.fix}")
                    warn(f"Then follow again from here with: clankie conversations events "
                         f"{self.conversation_id} --after {self.after} --follow")
                    exit_with(OTHER)
                time.sleep(RETRY_S[min(tries, len(RETRY_S) - 1)])
                tries += 1

    def _back(self, lost: bool) -> None:
        """Say that the service restarted (or, after a loss, that it answers again)."""
        started_at, self.started_at = self.started_at, self._started_at()
        where = f"following again after #{self.after}" if self.after else "following again"
        if started_at != self.started_at:
            if self.live is not None:  # the new service knows no reply of the old one (D16)
                self.live = (None, 0, "")
            self.note(f"(clankie restarted at {when.shown_now(self.started_at)}; {where})")
        elif lost:
            self.note(f"(reached clankie again; {where})")
