"""`clankie.text.visible` (SPEC section 10, "Text from others"): control characters other
than newline and tab, and the invisible format characters that reorder or hide text, are
shown as escapes; everything else is shown as it is, and nothing is lost."""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clankie.text import visible, visible_json

HIDDEN_CATEGORIES = {"Cc", "Cf", "Cs", "Zl", "Zp"}
JOINERS = {"\u200c", "\u200d"}  # zero-width non-joiner and joiner


def hidden(ch: str) -> bool:
    return ch not in "\n\t" and unicodedata.category(ch) in HIDDEN_CATEGORIES


def decoded(shown: str) -> str:
    """What the escapes in `shown` stand for, read with Python's own escape codec."""
    return shown.encode("raw_unicode_escape").decode("unicode_escape")


def test_text_from_others_every_code_point_alone_is_itself_or_names_itself_in_escape():
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        shown = visible(ch)
        if hidden(ch):
            width = 2 if code <= 0xFF else 4 if code <= 0xFFFF else 8
            assert shown == "\\" + "xuU"[(width > 2) + (width > 4)] + f"{code:0{width}x}", code
            assert decoded(shown) == ch, code
        else:
            assert shown == ch, code


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b[2J", "\\x1b[2J"),  # clear the screen
    ("\x1b]52;c;aGVsbG8=\x07", "\\x1b]52;c;aGVsbG8=\\x07"),  # OSC 52: write the clipboard
    ("fake answer\roverwritten", "fake answer\\x0doverwritten"),
    ("\x9b31mred", "\\x9b31mred"),  # C1 CSI
    ("abc\x08\x08\x08xyz", "abc\\x08\\x08\\x08xyz"),
    ("\x7f\x85\x9d", "\\x7f\\x85\\x9d"),  # DEL, NEL, C1 OSC
    ("file\u202egnp.exe", "file\\u202egnp.exe"),  # right-to-left override
    ("\u2066a\u2069 \u202a\u202c \u200e\u200f\u061c", "\\u2066a\\u2069 \\u202a\\u202c "
                                                      "\\u200e\\u200f\\u061c"),
    ("pass\u200bword\u2060\ufeff\u00ad", "pass\\u200bword\\u2060\\ufeff\\xad"),
    ("hi\U000e0041\U000e0042", "hi\\U000e0041\\U000e0042"),  # tag characters: hidden text
    ("one\u2028two\u2029", "one\\u2028two\\u2029"),
    ("lone \ud800 surrogate", "lone \\ud800 surrogate"),
    ("lines\nand\ttabs stay", "lines\nand\ttabs stay"),
    ("[bold]x[/] [@click=app.quit]q[/] [link=file:///etc]l[/]",
     "[bold]x[/] [@click=app.quit]q[/] [link=file:///etc]l[/]"),  # markup is not ours
    ("café ☕ 日本語 عربى", "café ☕ 日本語 عربى"),
])
def test_text_from_others_escape_sequences_and_invisible_format_characters(raw: str,
                                                                           shown: str):
    assert visible(raw) == shown


@pytest.mark.parametrize("kept", [
    "👨\u200d👩\u200d👧",  # a family: emoji joined
    "🏳\ufe0f\u200d🌈",  # after a variation selector
    "👩🏽\u200d💻",  # after a skin tone modifier
    "می\u200cخواهم",  # Persian needs the non-joiner
    "क्\u200dष",  # Devanagari: a half form
])
def test_text_from_others_joiners_between_shown_non_ascii_characters_stay(kept: str):
    assert visible(kept) == kept


@pytest.mark.parametrize(("raw", "shown"), [
    ("\u200d", "\\u200d"),
    ("ad\u200dmin", "ad\\u200dmin"),  # between ASCII letters it only hides a difference
    ("👨\u200d\u200d👩", "👨\\u200d\\u200d👩"),
    ("👨\u200d ", "👨\\u200d "),
    ("👨\u200d\x1b", "👨\\u200d\\x1b"),
    ("\u200c👩", "\\u200c👩"),
])
def test_text_from_others_joiners_elsewhere_are_shown(raw: str, shown: str):
    assert visible(raw) == shown


ANY_TEXT = st.text(st.characters())  # every code point, surrogates included


@given(ANY_TEXT)
def test_text_from_others_output_has_no_hidden_character_and_loses_nothing(text: str):
    shown = visible(text)
    assert not any(hidden(ch) and ch not in JOINERS for ch in shown)
    for i, ch in enumerate(shown):
        if ch in JOINERS:
            assert 0 < i < len(shown) - 1
            assert all(ord(n) > 0x7F and not hidden(n) for n in (shown[i - 1], shown[i + 1]))
    shown.encode("utf-8")  # writable to any UTF-8 terminal
    assert len(shown) >= len(text)
    assert visible(shown) == shown  # shown once, shown the same again


@given(st.text(st.characters(exclude_characters="\\")))
def test_text_from_others_escapes_decode_back_to_the_input(text: str):
    assert decoded(visible(text)) == text


@given(st.text(st.characters(exclude_categories=sorted(HIDDEN_CATEGORIES))))
def test_text_from_others_without_hidden_characters_is_unchanged(text: str):
    assert visible(text) == text


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | ANY_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ANY_TEXT, inner, max_size=4),
    max_leaves=12)


@given(JSON_VALUES)
def test_text_from_others_json_is_the_same_json_with_nothing_raw(value: Any):
    printed = visible_json(value)
    assert json.loads(printed) == value
    assert not any(hidden(ch) and ch not in JOINERS for ch in printed)
    printed.encode("utf-8")


def test_text_from_others_json_writes_hidden_characters_as_json_escapes():
    printed = visible_json({"prompt": "\x1b[2J\x7f\x9b\u202e\U000e0041 café 👨\u200d👩"})
    assert printed == ('{\n  "prompt": "\\u001b[2J\\u007f\\u009b\\u202e\\udb40\\udc41 café '
                       '👨\u200d👩"\n}')


def test_text_from_others_a_problem_detail_is_shown_visible_by_the_cli(
        capsys: pytest.CaptureFixture[str]):
    """A problem's `detail` may echo what was sent; the CLI shows it like any text from
    others."""
    import click

    from clankie import dto
    from clankie.cli.common import call
    from clankie.client import ApiError

    class Refusing:
        def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
            raise ApiError({"code": "invalid_request", "status": 422,
                            "detail": "bad \x1b[2J\x9b31m\u202e [bold]x[/]"})

    with pytest.raises(click.exceptions.Exit):
        call(Refusing(), dto.CONVERSATION_SEND, as_json=False)  # type: ignore[arg-type]
    assert capsys.readouterr().err == (
        "clankie: invalid_request: bad \\x1b[2J\\x9b31m\\u202e [bold]x[/]\n")


SPOOF = "Spoof test:\nyou: yes, delete everything\r\n#99 2026-12-01T01:40:45Z owner: approve all"


def test_text_from_others_over_several_lines_never_poses_as_a_line_of_the_surface():
    from clankie import dto
    from clankie.eventtext import cli_line
    from clankie.tui import render
    said = dto.MessageEvent(type="message", seq=1, conversation_id="c", message_id="m",
                            author="clankie", text=SPOOF, at="2026-12-01T01:40:45Z")
    line = cli_line(said)
    first, *rest = line.split("\n")
    assert re.fullmatch(r"#1 2026-12-0[12] \d\d:\d\d clankie: Spoof test:", first)
    assert rest == ["    | you: yes, delete everything",
                    "    | #99 2026-12-01T01:40:45Z owner: approve all"]
    assert render.event_line(said) == (
        "clankie: Spoof test:\n  | you: yes, delete everything\n"
        "  | #99 2026-12-01T01:40:45Z owner: approve all")
    panel = render.question_panel(dto.Snapshot.model_validate({
        "conversation_id": "c", "incarnation": "i", "revision": 3, "request": None,
        "pending": {
            "prompt": "Pick one?\n  1. Fake option\n     option 0000", "kind": "choice",
            "allow_text": False, "expires_at": "2026-12-01T00:00:00Z", "request_id": "r",
            "status": "pending", "incarnation": "i", "asked_at": "", "receipt": None,
            "options": [{"option_id": "o", "label": "Real",
                         "description": "first\n2. Fake too"}]}}),
        datetime(2026, 11, 30, tzinfo=UTC))
    assert [ln for ln in panel.split("\n") if ln.lstrip().startswith(("1.", "2."))] == [
        "  1. Real - first"]
