"""A reply being written, as rows of the chat log (SPEC D15). Pure: no Textual, no I/O.

Owns how the live reply's text becomes the rows the log shows at its width, one update at
a time, with work proportional to the new text, never to the reply so far:

- `Growing.add(delta)` returns the rows that are now complete. The log writes each once and
  never again. The unfinished row, `Growing.line`, is the only one redrawn; the log shows
  it with `…` after it while the reply is written.
- `Growing.close(suffix)` ends the reply (its message was stored, or it was cut off): the
  unfinished row, with `suffix` after it, as complete rows.

The rows are the ones the log would make of the whole message written at once: the text
after `head` is `visible(continued(text))` (`clankie.text`: control and invisible format
characters made visible, each line after the first led by a bar), wrapped as Rich wraps a
`Text` (its `divide_line`, greedy, here resumable: `divide`, so a row before the last
word never changes as text is added after it), tabs expanded to the columns of the whole
line. Characters whose shown form depends on the
next one (a carriage return before a newline, a joiner) are held until it comes, so a
sequence split across two updates is shown as it would be in one, never sent raw.
"""

from __future__ import annotations

import re
from typing import Final

from rich.cells import cell_len, chop_cells
from rich.text import Text

from clankie.text import JOINERS, visible_part

ELLIPSIS: Final = "…"  # after the unfinished row while the reply is written
CONTINUED: Final = "  | "  # leads each line after the first, as `clankie.text.continued`
TAB: Final = 8  # Rich's tab stops
HELD: Final = frozenset("\r") | JOINERS  # shown only once the next character is known
WORD: Final = re.compile(r"\s*\S+\s*")  # a word as Rich wraps it, with the spaces after it
REST: Final = re.compile(r"\S*\s*")  # the rest of a word folded across rows


class Growing:
    """One live reply's rows at `width` cells: `head` (the stamp and `clankie: `), then its
    text as it arrives. `received`: every character taken so far (what the reply said,
    for comparing with the message that stores it)."""

    def __init__(self, head: Text, width: int) -> None:
        self.width = max(width, 1)
        self.line = head.copy()  # the unfinished line from its first row not complete
        self.folding = False  # whether `line` starts inside a word folded across rows
        self.column = head.cell_len  # the unfinished line's cells, whole (for tab stops)
        self.held = ""
        self.before = ""  # the last character shown: a joiner's context
        self.taken: list[str] = []

    @property
    def received(self) -> str:
        return "".join(self.taken) + self.held

    def add(self, delta: str) -> list[Text]:
        """Take `delta`; the rows it completed (written once, in order)."""
        text = self.held + delta
        self.held = text[-1] if text and text[-1] in HELD else ""
        return self._show(text[:len(text) - len(self.held)], self.held)

    def close(self, suffix: str = "") -> list[Text]:
        """No more text: the rest, with `suffix` after it, as complete rows."""
        rows = self._show(self.held, "")
        self.held = ""
        if suffix:
            self._extend(suffix)
        breaks, _, _ = divide(self.line.plain, self.width, self.folding)
        return rows + _rows(self.line, [at for at, _ in breaks], self.width)

    def _show(self, text: str, after: str) -> list[Text]:
        if not text:
            return []
        self.taken.append(text)
        shown = visible_part(text.replace("\r\n", "\n"), self.before, after)
        self.before = text[-1]
        lines = shown.split("\n")
        rows: list[Text] = []
        for line in lines[:-1]:  # complete lines: every row of each
            self._extend(line)
            breaks, _, _ = divide(self.line.plain, self.width, self.folding)
            rows += _rows(self.line, [at for at, _ in breaks], self.width)
            self.line, self.folding = Text(CONTINUED), False
            self.column = len(CONTINUED)
        self._extend(lines[-1])
        breaks, mark, folding = divide(self.line.plain, self.width, self.folding)
        if mark:
            rows += _rows(self.line[:mark], [at for at, _ in breaks if at < mark], self.width)
            self.line, self.folding = self.line[mark:], folding
        return rows

    def _extend(self, shown: str) -> None:
        """Add shown text to the unfinished line, its tabs expanded at its columns."""
        if "\t" not in shown:
            self.column += cell_len(shown)
            self.line.append(shown)
            return
        parts = shown.split("\t")
        out: list[str] = []
        for n, part in enumerate(parts):
            out.append(part)
            self.column += cell_len(part)
            if n < len(parts) - 1:
                spaces = TAB - self.column % TAB
                out.append(" " * spaces)
                self.column += spaces
        self.line.append("".join(out))


def divide(text: str, width: int, folding: bool = False
           ) -> tuple[list[tuple[int, bool]], int, bool]:
    """Rich's `divide_line(text, width, fold=True)` (how a `Text` wraps), resumable: `text`
    is a line from the start of a row on (its start, or inside a word folded across rows
    when `folding`). Returns the breaks (each with whether it falls inside a folded word),
    and where the part that more text may change begins (`mark`, a break or 0) with its
    `folding`: every row before `mark` is final."""
    breaks: list[tuple[int, bool]] = []
    offset = 0
    settled = 0  # the last word's start (of its last row, when folded): rows end here
    position = 0
    if folding:  # the rest of the folded word goes on in rows of its own
        rest = REST.match(text)
        word = rest.group(0) if rest else ""
        offset, settled = _fold(word, 0, width, breaks, first=False)
        position = len(word)
    for match in WORD.finditer(text, position):
        start, word = match.start(), match.group(0)
        settled = start
        length = cell_len(word.rstrip())
        if width - offset >= length:
            offset += cell_len(word)
        elif length > width:
            offset, settled = _fold(word, start, width, breaks, first=True)
        elif offset and start:
            breaks.append((start, False))
            offset = cell_len(word)
    mark, inside = 0, folding
    for at, fold in breaks:
        if at <= settled:
            mark, inside = at, fold
    return breaks, mark, inside


def _fold(word: str, start: int, width: int, breaks: list[tuple[int, bool]],
          first: bool) -> tuple[int, int]:
    """A word longer than a row, in rows of `width` cells from `start` (a row of its own
    unless `first` is False: it goes on from one). Returns the cells of its last row and
    where that row starts."""
    chunks = chop_cells(word, width)
    for n, chunk in enumerate(chunks):
        if start:
            breaks.append((start, n > 0 or not first))
        if n == len(chunks) - 1:
            return cell_len(chunk), start
        start += len(chunk)
    return 0, start


def _rows(line: Text, breaks: list[int], width: int) -> list[Text]:
    """`line` cut at `breaks`, each row as Rich shows it: spaces past the width dropped,
    the rest cut to it."""
    rows = list(line.divide(breaks))
    for row in rows:
        row.rstrip_end(width)
        row.truncate(width, overflow="fold")
    return rows
