"""SPEC D15, the pure part: a reply being written becomes the rows of the chat log update by
update (`clankie.tui.live.Growing`), each complete row given once, and they are the rows
the log makes of the whole message written at once, however the text was cut into updates;
control and invisible format characters are made visible from the whole text, so a
sequence split across updates is never shown raw or in another form."""

from __future__ import annotations

import io
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.segment import Segment
from rich.text import Text

from clankie.text import continued, visible
from clankie.tui.live import Growing

STAMP = ("14:05 ", "dim")
PIECES = ["a", "b", "word", " ", "  ", "\n", "\t", "\x1b", "[2J", "\u200d", "\u200c", "é", "漢",
          "\r", "\r\n", "\u202e", "x" * 20, "👍", "\u0301", "\x85", "\ud800"]


def whole(text: str, width: int, suffix: str = "") -> list[str]:
    """The rows of the message written at once, as the chat log renders a line (its
    `say`: the stamp, then `visible(...)`, tabs expanded, wrapped at the width)."""
    line = Text.assemble(STAMP, visible("clankie: " + continued(text) + suffix))
    line.expand_tabs()
    console = Console(width=width, file=io.StringIO(), color_system=None)
    rendered = console.render(line, console.options.update_width(width))
    return ["".join(s.text for s in row).rstrip() for row in Segment.split_lines(rendered)]


def growing(pieces: list[str], width: int, suffix: str = "") -> list[str]:
    grow = Growing(Text.assemble(STAMP, "clankie: "), width)
    rows: list[Text] = []
    for piece in pieces:
        rows += grow.add(piece)
    rows += grow.close(suffix)
    assert grow.received == "".join(pieces)
    return [row.plain.rstrip() for row in rows]


def cut(text: str, at: list[int]) -> list[str]:
    points = sorted({0, len(text), *(a % (len(text) + 1) for a in at)})
    return [text[a:b] for a, b in itertools.pairwise(points)] or [""]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=40), st.lists(st.integers(0, 400),
       max_size=8), st.integers(2, 40), st.sampled_from(["", " (stopped by you)"]))
def test_d15_rows_given_update_by_update_are_the_rows_of_the_whole_message(
        parts: list[str], at: list[int], width: int, suffix: str):
    text = "".join(parts)
    assert growing(cut(text, at), width, suffix) == whole(text, width, suffix)


def test_d15_an_escape_sequence_split_across_updates_is_shown_escaped_not_sent_raw():
    rows = growing(["red: \x1b", "[31mhot\r", "\nnext\u200d", "x"], 80)
    assert rows == whole("red: \x1b[31mhot\r\nnext\u200dx", 80)
    assert rows == ["14:05 clankie: red: \\x1b[31mhot", "  | next\\u200dx"]
    assert not any("\x1b" in row or "\r" in row for row in rows)


def test_d15_a_joiner_between_two_emoji_stays_when_they_come_in_three_updates():
    family = "\U0001f468\u200d\U0001f469"
    assert growing(["\U0001f468", "\u200d", "\U0001f469"], 80) == [f"14:05 clankie: {family}"]


def test_d15_a_complete_row_is_given_once_and_only_the_last_row_stays_unfinished():
    text = "one two three four five six seven eight nine ten " * 3
    grow = Growing(Text.assemble(STAMP, "clankie: "), 20)
    rows: list[str] = []
    for word in text.split(" ")[:-1]:
        rows += [row.plain.rstrip() for row in grow.add(word + " ")]
        assert grow.line.cell_len <= 21  # the unfinished row, redrawn, never the reply
    rows += [row.plain.rstrip() for row in grow.close()]
    assert rows == whole(text, 20)


def test_d15_a_long_word_with_no_space_is_given_in_rows_as_it_grows():
    grow = Growing(Text("clankie: "), 10)
    given_rows = []
    for _ in range(100):
        given_rows += grow.add("x" * 7)
        assert grow.line.cell_len <= 10
    assert len(given_rows) >= 60 and all(row.plain == "x" * 10 for row in given_rows[1:])
