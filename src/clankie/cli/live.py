"""The reply being written, printed by the CLI as it arrives (SPEC D16), and how a reply
that did not end reads there.

Owns, for `conversations send --wait` and `conversations events --follow` on a terminal:

- `Live`: one live reply at a time (D2, D4) printed as its text grows, after a head of the
  caller's (`Clankie: `, or an event line's `#… TIME clankie: `). The whole text so far is
  kept and only what follows the printed part is written, each character judged in the
  whole text (`clankie.text.continued_part`, up to `settled`): a control sequence, a CRLF
  or a joiner split across two deltas is never sent raw, and the printed parts read
  exactly as the whole message printed at once. Printed text cannot be taken back: when
  its message is stored only the rest is printed, on the line it continues (`stored`);
  when that line was ended by another (a restart's notes), the message is printed again,
  whole, rather than its rest on a line that would read as a break in its text; when its
  try is withdrawn (D8) the line is ended, so the next try starts on a new line
  (`withdrawn`).
- the lines a partial message ends with (`cut_off`, D6, D16): `[cut off: stopped by
  you]`, `[cut off: REASON]`, `[cut off when clankie restarted; what followed TIME was
  lost]`; and the withdrawal's `[withdrawn: N characters: REASON; asking again]`
  (`withdrawal`);
- a reply gone quiet (D11: content stopped): `(no text from the model for 10 s; giving up
  at 60 s)`, once for each silence, on a line of its own; the text then goes on, on a line
  marked as a continuation.

It decides nothing: what was published, stored or withdrawn is the service's word.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

from clankie import when, wording
from clankie.text import continued_part, settled, visible

if TYPE_CHECKING:
    from clankie import dto

FAILED_REASON = "the model call failed"  # a failed partial whose run's error is not at hand


def cut_off(message: dto.MessageEvent, reason: str | None = None, shown: int = 0) -> str | None:
    """The line a partial message ends with (None for a whole one). `reason`: why a failed
    reply was cut off (its run's error), when known; `shown`: how many characters of it
    were printed live: when the message holds fewer (a restart keeps its last checkpoint; a
    publish may race a stop), the line says how many were kept, so no shown text passes for
    stored."""
    partial = message.partial
    if partial is None:
        return None
    kept = len(message.text)
    lost = (f"; {kept:,} of the {shown:,} characters shown were kept" if shown > kept
            else "")
    if partial == "stopped":
        return f"[cut off: stopped by you{lost}]"
    if partial == "failed":
        return f"[cut off: {visible(reason or FAILED_REASON)}{lost}]"
    at = when.parse(message.at).astimezone().strftime("%H:%M:%S")
    return f"[cut off when clankie restarted; what followed {at} was lost{lost}]"


def withdrawal(event: dto.RunActivityEvent) -> str | None:
    """`[withdrawn: N characters: REASON; asking again]` for a retry that withdrew a try's
    published text (D8), else None. REASON is the event's summary without the words that
    count the characters (said once, at the front)."""
    taken = event.withdrawn
    if taken is None:
        return None
    n = taken.length
    counted = f" after {n:,} {'character; it is' if n == 1 else 'characters; they are'} withdrawn"
    reason = event.summary.replace(counted, "", 1)
    return (f"[withdrawn: {n:,} character{'' if n == 1 else 's'}: {visible(reason)}; "
            "asking again]")


def reason_after(events: Sequence[dto.Event]) -> str | None:
    """Why a run failed, from the `run_status` event among `events` (those after a failed
    partial message: its run fails in the transaction that stores it, D8), in words."""
    from clankie import dto

    for event in events:
        if isinstance(event, dto.RunStatusEvent) and event.status == "failed" and event.error:
            return wording.run_ended(event.error) or event.error
    return None


def live_of(page: dto.EventsOut) -> dto.LiveReply | None:
    """The page's live reply; None when there is none, or none was asked for (D4)."""
    from clankie import dto

    return page.live if isinstance(page.live, dto.LiveReply) else None


@dataclass
class _Reply:
    reply_id: str
    head: str
    text: str = ""
    printed: int = 0  # characters of `text` printed so far
    quiet: bool = False  # its silence (state `quiet`, D11) has been said


class Live:
    """The live replies of a conversation (of one run, given `run_id`), each printed as it
    arrives after the head `head(live)` gives it, its later lines led by `indent` and a bar
    (as `clankie.text.continued`). `write` prints without a newline."""

    def __init__(self, head: Callable[[dto.LiveReply], str], indent: str = "  ",
                 run_id: str | None = None, write: Callable[[str], None] | None = None,
                 note: Callable[[str], None] | None = None,
                 stall_s: Callable[[], float | None] = lambda: None) -> None:
        self.head, self.indent, self.run_id = head, indent, run_id
        self.note, self.stall_s = note, stall_s
        self.write = write or (lambda text: click.echo(text, nl=False))
        self.reply: _Reply | None = None
        self.ended: set[str] = set()  # replies whose message was stored or that were withdrawn
        self.open = False  # a line of reply text is printed and not yet ended

    def show(self, live: dto.LiveReply | None) -> None:
        """Print what `live` (an `events_tail` page's, processed after the page's events)
        adds to the reply printed so far."""
        if live is None or live.reply_id in self.ended or (
                self.run_id is not None and live.run_id != self.run_id):
            return
        reply = self.reply
        if reply is None or reply.reply_id != live.reply_id:
            self.end_line()  # D5 says why the last one went; its line ends here anyway
            reply = self.reply = _Reply(live.reply_id, self.head(live))
        if live.offset > len(reply.text):
            return  # after text it never had: cannot be (D4), and never guessed at
        text = reply.text + live.text if live.offset == len(reply.text) else \
            reply.text[:live.offset] + live.text  # work in proportion to the delta, mostly
        if live.offset >= reply.printed or text.startswith(reply.text[:reply.printed]):
            reply.text = text  # never what contradicts the printed
            self._print(reply, settled(text))
        if live.state != "quiet":
            reply.quiet = False
        elif not reply.quiet and self.note is not None:  # D11: a stall is shown before it ends
            reply.quiet = True
            stall = self.stall_s()
            self.end_line()
            self.note(f"(no text from the model for {live.idle_ms // 1000} s" + (
                f"; giving up at {stall:g} s)" if stall else ")"))

    def stored(self, message: dto.MessageEvent) -> int | None:
        """`message` stores the reply being printed: print the rest of it and end the line;
        how many characters of it had been printed live. None when none were, or when it
        has a rest and the line printed live was ended by another (a note of a lost
        service or a restart, a silence, an event): the caller prints the message whole.
        Its rest goes on the line it continues or nowhere: on a line of its own, marked as
        a continuation, it would read as a line break its text does not have
        (docs/decisions.md, "Issue 40: the fixes after a new user's trial")."""
        self.ended.add(message.message_id)  # a page's live, read before its events, is stale
        reply = self.reply
        if reply is None or reply.reply_id != message.message_id or not reply.printed:
            return None
        shown = reply.printed
        if not self.open and len(message.text) > shown and \
                message.text.startswith(reply.text[:shown]):
            self.reply = None
            return None
        if message.text.startswith(reply.text[:shown]):
            reply.text = message.text
            self._print(reply, len(message.text))
        self.end_line()
        self.reply = None
        return shown

    def withdrawn(self, reply_id: str) -> bool:
        """The try `reply_id` was withdrawn (D8): end its line; whether any of it was
        printed."""
        self.ended.add(reply_id)
        reply = self.reply
        if reply is None or reply.reply_id != reply_id:
            return False
        self.end_line()
        self.reply = None
        return reply.printed > 0

    def end_line(self) -> None:
        """End the line of reply text being printed, if one is."""
        if self.open:
            self.write("\n")
            self.open = False

    def _print(self, reply: _Reply, end: int) -> None:
        if end <= reply.printed:
            return
        if not reply.printed:
            self.end_line()
            self.write(reply.head)
        elif not self.open:  # another line came between: this one goes on, marked so
            self.write(f"{self.indent}| ")
        self.write(continued_part(reply.text, reply.printed, end, self.indent))
        reply.printed, self.open = end, True
