"""Unified diffs written by us (SPEC W5, W7): Git never diffs the working tree for a tool.

Owns turning two versions of a file (bytes, or absent) into the text of a `git diff`-style
patch, and keeping a whole diff within its bound: the head and the tail, with the number
of bytes cut between them. Lines are matched in linear-ish time whatever the input: common
head and tail first, then lines that occur once on each side as anchors (patience diff),
Python's `difflib` only inside small regions, and a region left over once the work budget
is spent is shown as removed and added whole (correct, only not minimal). Binary files
(a NUL byte in the first 8 KiB) are named, never shown. Pure: no I/O.
"""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

DIFF_BYTES = 32 * 1024
BINARY_PROBE = 8 * 1024
CONTEXT = 3
DIFF_LINES = 50_000  # a version with more lines is named, not diffed (W5's memory)
_SMALL = 40_000  # difflib is used on regions of at most this many line pairs
_BUDGET = 10_000_000  # line pairs (difflib) and lines (the rest) a file's matching may cost
T = TypeVar("T")


def bounded(items: Sequence[T], render: Callable[[T], str], limit: int = DIFF_BYTES
            ) -> tuple[str, bool]:
    """The diffs of `items`, kept within `limit` bytes: at most the first half and the last
    half, each rendered from its own end, with what was cut said between them. Only as
    many items are rendered as those halves need, however many there are."""
    half = limit // 2
    first: list[str] = []
    size = done = 0
    while done < len(items) and size <= half:
        first.append(render(items[done]))
        size += _size(first[-1])
        done += 1
    last: list[str] = []
    back = len(items)
    size = 0
    while back > done and size <= half:
        back -= 1
        last.append(render(items[back]))
        size += _size(last[-1])
    skipped = back - done
    head = "".join(first).encode("utf-8", "replace")
    tail = "".join(reversed(last)).encode("utf-8", "replace")
    if not skipped and len(head) + len(tail) <= limit:
        return (head + tail).decode("utf-8", "replace"), False
    if not skipped:  # one run of text: its start and its end
        whole = head + tail
        head, tail, cut = whole[:half], whole[-half:], len(whole) - 2 * half
    else:
        cut = max(0, len(head) - half) + max(0, len(tail) - half)
        head, tail = head[:half], tail[-half:]
    files = f"{skipped} changed files and " if skipped else ""
    return (f"{head.decode('utf-8', 'ignore')}… [diff cut: {files}{cut} bytes omitted; give a "
            f"path to see less] …\n{tail.decode('utf-8', 'ignore')}"), True


def _size(text: str) -> int:
    return len(text.encode("utf-8", "replace"))


_ESCAPES = {"\a": "\\a", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\v": "\\v",
            "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def escaped(text: str) -> str:
    """Text put on a line of its own in a diff (a refusal's reason, which may name a
    file), its control characters written as C escapes: it stays one line."""
    return "".join(_ESCAPES.get(c) or f"\\{ord(c):03o}" if c < " " or c == "\x7f" else c
                   for c in text)


def quoted(name: str) -> str:
    """A path as Git's diff writes it (`core.quotePath=false`): as it is, or, when it holds
    a control character, a quote or a backslash, in quotes with C escapes, so that a file
    name can never start a line of the diff of its own (`a\ndiff --git ...`)."""
    if not any(c < " " or c in '"\\\x7f' for c in name):
        return name
    return '"' + "".join(_ESCAPES.get(c) or (f"\\{ord(c):03o}" if c < " " or c == "\x7f"
                                             else c) for c in name) + '"'


def header(path: str, old_mode: int | None, new_mode: int | None) -> str:
    lines = [f"diff --git {quoted('a/' + path)} {quoted('b/' + path)}\n"]
    if old_mode is None and new_mode is not None:
        lines.append(f"new file mode {new_mode:o}\n")
    elif new_mode is None and old_mode is not None:
        lines.append(f"deleted file mode {old_mode:o}\n")
    elif old_mode != new_mode:
        lines.append(f"old mode {old_mode:o}\nnew mode {new_mode:o}\n")
    return "".join(lines)


def is_binary(data: bytes | None) -> bool:
    return data is not None and b"\x00" in data[:BINARY_PROBE]


def too_many_lines(data: bytes | None) -> bool:
    return data is not None and data.count(b"\n") > DIFF_LINES


def patch(path: str, old: bytes | None, new: bytes | None,
          tick: Callable[[], None] = lambda: None) -> Iterator[str]:
    """The `---`/`+++` lines and hunks between two versions (None: the file is absent);
    `tick` is called now and then while matching (it may raise to stop)."""
    if is_binary(old) or is_binary(new):
        yield (f"Binary files {quoted('a/' + path) if old is not None else '/dev/null'} and "
               f"{quoted('b/' + path) if new is not None else '/dev/null'} differ\n")
        return
    a = _lines(old)
    b = _lines(new)
    if a == b:
        return
    yield f"--- {quoted('a/' + path) if old is not None else '/dev/null'}\n"
    yield f"+++ {quoted('b/' + path) if new is not None else '/dev/null'}\n"
    for group in _groups(_opcodes(matching_blocks(a, b, tick), len(a), len(b))):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        yield f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n"
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                yield from (_shown(" ", line) for line in a[a1:a2])
                continue
            yield from (_shown("-", line) for line in a[a1:a2])
            yield from (_shown("+", line) for line in b[b1:b2])


def _lines(data: bytes | None) -> list[str]:
    """The lines as Git's diff sees them: ended by `\n` only (a `\r`, a form feed or a
    U+2028 is part of its line), each keeping its end."""
    if not data:
        return []
    pieces = data.decode("utf-8", "replace").split("\n")
    lines = [piece + "\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def _shown(sign: str, line: str) -> str:
    if line.endswith("\n"):
        return sign + line
    return f"{sign}{line}\n\\ No newline at end of file\n"


def _range(start: int, stop: int) -> str:
    length = stop - start
    first = start + 1 if length else start
    return str(first) if length == 1 else f"{first},{length}"


def matching_blocks(a: Sequence[str], b: Sequence[str],
                    tick: Callable[[], None] = lambda: None) -> list[tuple[int, int, int]]:
    """Runs of equal lines `(i, j, n)`, increasing in both, found within a work budget;
    `tick` is called between regions."""
    ids: dict[str, int] = {}
    x = [ids.setdefault(line, len(ids)) for line in a]
    y = [ids.setdefault(line, len(ids)) for line in b]
    found: list[tuple[int, int, int]] = []
    budget = _BUDGET
    work: list[tuple[int, int, int, int] | tuple[int, int, int]] = [(0, len(x), 0, len(y))]
    while work:
        item = work.pop()
        if len(item) == 3:
            found.append(item)
            continue
        alo, ahi, blo, bhi = item
        tick()
        start = alo
        while alo < ahi and blo < bhi and x[alo] == y[blo]:
            alo, blo = alo + 1, blo + 1
        head = (start, blo - (alo - start), alo - start)
        end = ahi
        while ahi > alo and bhi > blo and x[ahi - 1] == y[bhi - 1]:
            ahi, bhi = ahi - 1, bhi - 1
        tail = (ahi, bhi, end - ahi)
        budget -= (ahi - alo) + (bhi - blo)
        inner: list[tuple[int, int, int]] = []
        regions: list[tuple[int, int, int, int]] = []
        if alo < ahi and blo < bhi and budget > 0:
            anchors = _anchors(x, y, alo, ahi, blo, bhi)
            if anchors:
                i0, j0 = alo, blo
                for i, j in anchors:
                    regions.append((i0, i, j0, j))
                    inner.append((i, j, 1))
                    i0, j0 = i + 1, j + 1
                regions.append((i0, ahi, j0, bhi))
            elif (ahi - alo) * (bhi - blo) <= _SMALL:
                matcher = difflib.SequenceMatcher(None, x[alo:ahi], y[blo:bhi], autojunk=False)
                inner = [(alo + i, blo + j, n) for i, j, n in matcher.get_matching_blocks() if n]
                budget -= (ahi - alo) * (bhi - blo)
        # pushed in reverse: the head first out, then each region and anchor, then the tail
        work.append(tail)
        if regions:
            for index in range(len(regions) - 1, -1, -1):
                work.append(regions[index])
                if index:
                    work.append(inner[index - 1])
        else:
            work.extend(reversed(inner))
        work.append(head)
    return _merged([block for block in found if block[2]])


def _anchors(x: list[int], y: list[int], alo: int, ahi: int, blo: int, bhi: int
             ) -> list[tuple[int, int]]:
    """Lines occurring exactly once on each side of a region, the longest run of them in
    the same order on both sides (patience sorting)."""
    count_a: dict[int, int] = {}
    for i in range(alo, ahi):
        count_a[x[i]] = count_a.get(x[i], 0) + 1
    where_b: dict[int, int] = {}
    count_b: dict[int, int] = {}
    for j in range(blo, bhi):
        if count_a.get(y[j]) == 1:
            count_b[y[j]] = count_b.get(y[j], 0) + 1
            where_b[y[j]] = j
    pairs = [(i, where_b[x[i]]) for i in range(alo, ahi)
             if count_a[x[i]] == 1 and count_b.get(x[i]) == 1]
    if not pairs:
        return []
    tops: list[int] = []  # the smallest last j of an increasing run of each length
    links: list[int] = []  # per pair: the pair before it in the best run
    ends: list[int] = []  # per length: the index of the pair ending it
    for index, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(tops, j)
        if length == len(tops):
            tops.append(j)
            ends.append(index)
        else:
            tops[length] = j
            ends[length] = index
        links.append(ends[length - 1] if length else -1)
    run = []
    index = ends[-1]
    while index >= 0:
        run.append(pairs[index])
        index = links[index]
    return run[::-1]


def _merged(blocks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    merged: list[tuple[int, int, int]] = []
    for i, j, n in blocks:
        if merged and merged[-1][0] + merged[-1][2] == i and merged[-1][1] + merged[-1][2] == j:
            merged[-1] = (merged[-1][0], merged[-1][1], merged[-1][2] + n)
        else:
            merged.append((i, j, n))
    return merged


def _opcodes(blocks: list[tuple[int, int, int]], size_a: int, size_b: int
             ) -> list[tuple[str, int, int, int, int]]:
    codes = []
    i = j = 0
    for ai, bj, n in [*blocks, (size_a, size_b, 0)]:
        if i < ai or j < bj:
            codes.append(("replace", i, ai, j, bj))
        if n:
            codes.append(("equal", ai, ai + n, bj, bj + n))
        i, j = ai + n, bj + n
    return codes


def _groups(codes: list[tuple[str, int, int, int, int]]
            ) -> Iterator[list[tuple[str, int, int, int, int]]]:
    """Changes with `CONTEXT` lines around them, as difflib groups them."""
    if not codes:
        return
    if codes[0][0] == "equal":
        _, i1, i2, j1, j2 = codes[0]
        codes[0] = ("equal", max(i1, i2 - CONTEXT), i2, max(j1, j2 - CONTEXT), j2)
    if codes[-1][0] == "equal":
        _, i1, i2, j1, j2 = codes[-1]
        codes[-1] = ("equal", i1, min(i2, i1 + CONTEXT), j1, min(j2, j1 + CONTEXT))
    group: list[tuple[str, int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in codes:
        if tag == "equal" and i2 - i1 > 2 * CONTEXT:
            group.append(("equal", i1, i1 + CONTEXT, j1, j1 + CONTEXT))
            yield group
            group = []
            i1, j1 = max(i1, i2 - CONTEXT), max(j1, j2 - CONTEXT)
        group.append((tag, i1, i2, j1, j2))
    if group and not (len(group) == 1 and group[0][0] == "equal"):
        yield group
