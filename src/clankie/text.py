r"""Text from others, made fit for a terminal (SPEC section 10, "Text from others").

Owns one decision: which characters of text that came from a model, a workspace, a room
or any other party would act on a terminal, or would hide or reorder what it shows, and
the visible form each of them takes instead. Pure, no I/O; it knows nothing of markup
(the surfaces never interpret any) and decides nothing about what is shown.

Shown as escapes:
- control characters (Cc) except newline and tab: C0 (ESC, BEL, CR, backspace, ...), DEL
  and C1 (CSI U+009B, OSC U+009D, NEL U+0085, ...);
- format characters (Cf): bidirectional embeddings, overrides, isolates and marks,
  zero-width space, word joiner, soft hyphen, byte order mark, tag characters (they can
  carry a whole hidden text), ... A zero-width joiner or non-joiner stays only between
  two shown, non-ASCII, non-space characters: emoji sequences (a family, a profession
  with a skin tone) and scripts such as Persian and Devanagari need it there; anywhere
  else it only hides a difference between two words;
- line and paragraph separators (Zl, Zp), which some terminals and widgets break lines on;
- lone surrogates (Cs), which cannot even be written to a UTF-8 terminal.

The escape is Python's notation: `\x1b` for a code point up to U+00FF, `\u202e` up to
U+FFFF, `\U000e0041` beyond; always the number, so each names exactly one code point and
reads back with Python's `unicode_escape` codec. A backslash in the text is left as it is,
so paths and code stay readable: the literal four characters `\x1b` look like an escaped
ESC, and neither does anything to the terminal.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any, Final

__all__ = ["continued", "continued_part", "settled", "visible", "visible_json", "visible_part"]

HIDDEN_CATEGORIES: Final = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
SHOWN_CONTROLS: Final = frozenset("\n\t")
JOINERS: Final = frozenset("\u200c\u200d")  # zero-width non-joiner, zero-width joiner


def visible(text: str) -> str:
    """`text` with every character that would act on a terminal, or hide or reorder text,
    written as its Python escape; everything else unchanged."""
    return _replace(text, _python_escape)


def visible_part(text: str, before: str = "", after: str = "") -> str:
    """`text` as it is shown within `before + text + after`: the same characters escaped as
    `visible` escapes them in the whole (a joiner's form depends on the characters around
    it). For text shown piece by piece, a reply being written (SPEC D15): `before` and
    `after` need only the character on each side."""
    whole = before + text + after
    if whole.isprintable():
        return text
    start = len(before)
    return "".join(_python_escape(ch) if _hidden_at(whole, start + i) else ch
                   for i, ch in enumerate(text))


def continued(text: str, indent: str = "  ") -> str:
    """Text from others that a surface embeds in a line of its own: every line after the
    first led by `indent` and a bar, so that no line of it can pose as one of the
    surface's own (a fake event, option or owner message)."""
    return text.replace("\r\n", "\n").replace("\n", f"\n{indent}| ")


def visible_json(value: Any, indent: int | None = 2) -> str:
    """`value` as indented JSON (`indent` None: on one line), with the same characters
    written as JSON escapes: it parses back to `value`, and nothing in it acts on a
    terminal."""
    return _replace(json.dumps(value, indent=indent, ensure_ascii=False), _json_escape)


def _replace(text: str, escape: Callable[[str], str]) -> str:
    if text.isprintable():  # the common case: nothing to look at twice
        return text
    return "".join(escape(ch) if _hidden_at(text, i) else ch for i, ch in enumerate(text))


def _hidden(ch: str) -> bool:
    return ch not in SHOWN_CONTROLS and unicodedata.category(ch) in HIDDEN_CATEGORIES


def _hidden_at(text: str, i: int) -> bool:
    ch = text[i]
    if ch.isprintable() or not _hidden(ch):
        return False
    if ch in JOINERS:
        return not (0 < i < len(text) - 1 and _joinable(text[i - 1]) and
                    _joinable(text[i + 1]))
    return True


def _joinable(ch: str) -> bool:
    return ord(ch) > 0x7F and not _hidden(ch) and unicodedata.category(ch) != "Zs"


def _python_escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def _json_escape(ch: str) -> str:
    code = ord(ch)
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # a UTF-16 surrogate pair, as JSON writes characters beyond the BMP
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


# ---------------------------------------------------------- text that grows (SPEC D15, D16)


def settled(text: str) -> int:
    """How much of `text`, a reply still being written, already shows as it will when the
    whole is known: all but a last character whose shown form depends on the next one (a
    carriage return that may begin a CRLF, a joiner that may stand between two letters)."""
    return len(text) - 1 if text and (text[-1] == "\r" or text[-1] in JOINERS) else len(text)


def continued_part(text: str, start: int, end: int, indent: str = "  ") -> str:
    """`text[start:end]` as `visible(continued(text, indent))` shows it, each character
    judged in the whole `text`: parts up to `settled(text)`, printed one after another as
    the text grows, read exactly as the whole text printed at once (a sequence split across
    two deltas is never sent raw)."""
    part = text[start:end]
    if part.isprintable():  # the common case
        return part
    shown: list[str] = []
    for i in range(start, end):
        ch = text[i]
        if ch == "\n":
            shown.append(f"\n{indent}| ")
        elif ch == "\r" and text[i + 1:i + 2] == "\n":
            continue  # `continued` reads CRLF as one line break
        else:
            shown.append(_python_escape(ch) if _hidden_at(text, i) else ch)
    return "".join(shown)
