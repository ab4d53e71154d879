"""`clankie.cli.live` alone (SPEC D16, D14 "live text is text from others"): the reply
printed as its deltas arrive, against a fake terminal (a list of writes). The real
`clankie serve` and the CLI in a pty are tests/e2e/test_cli_streaming.py."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from clankie import dto
from clankie.cli.live import Live, cut_off, withdrawal
from clankie.text import continued, continued_part, settled, visible

R1 = "11111111-0000-4000-8000-000000000001"
R2 = "22222222-0000-4000-8000-000000000002"
RUN = "33333333-0000-4000-8000-000000000003"
AT = "2026-12-06T15:00:00Z"


def live(text: str, offset: int = 0, reply_id: str = R1, run_id: str = RUN) -> dto.LiveReply:
    return dto.LiveReply(type="reply_delta", conversation_id=R2, run_id=run_id,
                         reply_id=reply_id, attempt=1, state="writing", offset=offset,
                         text=text, length=offset + len(text), calling=[], idle_ms=0,
                         started_at=AT, at=AT)


def message(text: str, reply_id: str = R1, partial: Any = None) -> dto.MessageEvent:
    return dto.MessageEvent(type="message", seq=9, conversation_id=R2, message_id=reply_id,
                            author="clankie", text=text, at=AT, partial=partial)


def printer(**kwargs: Any) -> tuple[Live, list[str]]:
    out: list[str] = []
    return Live(lambda _: "Clankie: ", write=out.append, **kwargs), out


HOSTILE = st.text(st.sampled_from(["a", "é", "\u200d", "\r", "\n", "\x1b", "[", "\u202e",
                                   "\x9b", "\t", "👩", "\\", " ", "\u2028"]), max_size=40)


@given(HOSTILE, st.lists(st.integers(0, 40), max_size=8))
def test_d16_d14_a_reply_printed_delta_by_delta_reads_as_the_whole_printed_at_once(
        text: str, cuts: list[int]):
    """Live text is made visible from the whole text: however the deltas split it (a CRLF,
    an escape sequence, a joiner between two letters), what was printed, piece by piece,
    is what the whole message printed at once would be, and nothing raw."""
    shown, out = printer()
    for cut in sorted({min(c, len(text)) for c in cuts}):
        shown.show(live(text[:cut]))
    assert shown.stored(message(text)) in (None, *range(len(text) + 1))
    printed = "".join(out)
    if printed:  # something was printed live: with the rest, it is the whole message
        assert printed == visible(continued(f"Clankie: {text}")) + "\n"
        assert visible(printed) == printed  # nothing in it acts on the terminal


@given(HOSTILE, st.integers(0, 40))
def test_d16_the_settled_parts_of_a_growing_text_join_into_the_whole(text: str, cut: int):
    grown = text[:cut]
    first = continued_part(grown, 0, settled(grown))
    assert first + continued_part(text, settled(grown), len(text)) == \
        visible(continued(text))


def test_d16_deltas_are_printed_once_and_the_stored_message_adds_only_the_rest():
    shown, out = printer()
    shown.show(live("Hello"))
    shown.show(live(" wor", offset=5))
    shown.show(live("Hello wor"))  # a snapshot again (a reconnect): nothing printed twice
    assert "".join(out) == "Clankie: Hello wor"
    assert shown.stored(message("Hello world")) == 9
    assert "".join(out) == "Clankie: Hello world\n"
    shown.show(live("Hello world"))  # the page's live read before its events: stale
    assert "".join(out) == "Clankie: Hello world\n"


def test_d16_a_message_never_printed_live_is_left_to_the_caller():
    shown, out = printer()
    assert shown.stored(message("Hi")) is None and out == []
    shown.show(live("Hi"))  # the same page's live, read before its events (D5): stale
    shown.show(live("", reply_id=R2))  # waiting: nothing yet, not even the head
    assert out == []


def test_d16_a_withdrawn_try_ends_its_line_and_the_next_starts_a_new_one():
    shown, out = printer()
    shown.show(live("First try"))
    assert shown.withdrawn(R1) is True
    shown.show(live("First try and more"))  # withdrawn: never printed again
    shown.show(live("Second", reply_id=R2))
    assert "".join(out) == "Clankie: First try\nClankie: Second"


def test_d16_another_runs_reply_is_not_printed_by_send_wait():
    shown, out = printer(run_id=RUN)
    shown.show(live("not ours", run_id=R2))
    assert out == []


def test_d16_a_line_broken_by_another_goes_on_marked_as_a_continuation():
    shown, out = printer()
    shown.show(live("Hel"))
    shown.end_line()  # an event's line came between
    shown.show(live("lo", offset=3))
    assert "".join(out) == "Clankie: Hel\n  | lo"


def test_d16_d9_a_stored_rest_goes_on_its_open_line_or_the_message_is_printed_again():
    """The rest of a stored message continues the line printed live; once that line was
    ended by another (a restart's notes), a rest on a continuation line would read as a line
    break its text does not have, so the caller prints the message whole (None)."""
    shown, out = printer()
    shown.show(live("w32 w33"))
    shown.end_line()  # "(lost clankie ...)", "(clankie restarted ...)"
    stored = message("w32 w33 w34", partial="interrupted")
    assert shown.stored(stored) is None
    assert "".join(out) == "Clankie: w32 w33\n"  # nothing more on it, nor under it
    assert shown.reply is None
    shown, out = printer()  # no rest: only its cut off line follows (D16)
    shown.show(live("w32 w33"))
    shown.end_line()
    assert shown.stored(message("w32 w33", partial="interrupted")) == 7


def test_d16_d6_each_partial_message_ends_with_its_cut_off_line():
    assert cut_off(message("x")) is None
    assert cut_off(message("x", partial="stopped")) == "[cut off: stopped by you]"
    assert cut_off(message("x", partial="failed"), "openai: 500\x1b") == \
        r"[cut off: openai: 500\x1b]"
    assert cut_off(message("x", partial="failed")) == "[cut off: the model call failed]"
    assert cut_off(message("xy", partial="stopped"), shown=4) == \
        "[cut off: stopped by you; 2 of the 4 characters shown were kept]"
    interrupted = cut_off(message("abc", partial="interrupted"), shown=10)
    assert interrupted is not None
    assert interrupted.startswith("[cut off when clankie restarted; what followed ")
    assert interrupted.endswith(" was lost; 3 of the 10 characters shown were kept]")


def test_d16_d8_a_withdrawal_says_how_many_characters_and_why():
    event = dto.RunActivityEvent(
        type="run_activity", seq=3, conversation_id=R2, run_id=RUN, activity="model_retry",
        summary="openai: the connection dropped after 1,312 characters; they are withdrawn; "
                "try 2 of 5 in 2 s", retry_at=AT, at=AT,
        withdrawn=dto.Withdrawn(reply_id=R1, length=1312))
    assert withdrawal(event) == ("[withdrawn: 1,312 characters: openai: the connection "
                                 "dropped; try 2 of 5 in 2 s; asking again]")
    assert withdrawal(event.model_copy(update={"withdrawn": None})) is None


def test_d11_d16_a_reply_gone_quiet_is_said_once_and_the_text_goes_on_marked():
    """D11: "A stall is shown before it ends ... each surface says how long the model has
    been silent and when clankie gives up"."""
    out: list[str] = []
    notes: list[str] = []
    shown = Live(lambda _: "Clankie: ", write=out.append, note=notes.append,
                 stall_s=lambda: 60)
    shown.show(live("Thinking"))
    quiet = live("", offset=8).model_copy(update={"state": "quiet", "idle_ms": 10_400})
    shown.show(quiet)
    shown.show(quiet.model_copy(update={"idle_ms": 11_000}))  # the same silence: said once
    shown.show(live(" hard", offset=8))
    assert notes == ["(no text from the model for 10 s; giving up at 60 s)"]
    assert "".join(out) == "Clankie: Thinking\n  |  hard"
