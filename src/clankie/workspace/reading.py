"""`read_file` (SPEC W3, W4, W5): a window of lines of one regular file, streamed, bounded.

Owns reading: the file is opened beneath the workspace (confine.py), refused unless it is
a regular file, refused if it is a secret-like path (checked on the path asked for and on
where the kernel actually opened), refused as binary when its first 8 KiB hold a NUL, and
otherwise read in chunks from the open descriptor: at most 1,000 lines, 500 characters a
line, 32 KiB of content, and never more than 8 MiB scanned. Every cut is said with numbers.
"""

from __future__ import annotations

import os

from clankie.core.vocabulary import WorkspaceCode
from clankie.tool_dto import ReadFileArgs, ReadFileResult

from .confine import Refusal, Root, check_path, shown, tidy
from .deny import DenyList

LINE_CHARS = 500
CONTENT_BYTES = 32 * 1024
SCAN_BYTES = 8 * 1024 * 1024
BINARY_PROBE = 8 * 1024
CHUNK = 256 * 1024
_LINE_KEEP = LINE_CHARS * 4 + 4  # bytes of a line kept: enough for 500 characters


def decode(data: bytes) -> tuple[str, int]:
    """UTF-8 text, with every invalid byte replaced; returns the text and how many bytes
    were replaced."""
    try:
        return data.decode("utf-8"), 0
    except UnicodeDecodeError:
        pass
    parts: list[str] = []
    replaced = 0
    while data:
        try:
            parts.append(data.decode("utf-8"))
            break
        except UnicodeDecodeError as exc:
            parts.append(data[:exc.start].decode("utf-8"))
            parts.append("\ufffd")
            replaced += exc.end - exc.start
            data = data[exc.end:]
    return "".join(parts), replaced


def denied(path: str, deny: DenyList) -> None:
    if deny.denies(tidy(path)):
        raise Refusal(WorkspaceCode.DENIED_PATH,
                      f"{shown(path)} matches the secret-path deny list; it is "
                      "never read (setting workspace_deny)")


def read_file(root: Root, args: ReadFileArgs, deny: DenyList) -> ReadFileResult:
    path = check_path(args.path)
    denied(path, deny)
    fd, st = root.open_file(path, deny.denies)
    try:
        return _window(fd, tidy(path), args.offset, args.limit, st.st_size)
    finally:
        os.close(fd)


class Scanner:
    """Lines of an open file, read in chunks, never more than `budget` bytes in all; the
    start of a line kept is bounded (`_LINE_KEEP`), so memory is too."""

    def __init__(self, fd: int, budget: int = SCAN_BYTES) -> None:
        self.fd, self.budget = fd, budget
        self.buf, self.pos, self.scanned = b"", 0, 0
        self.eof = False  # the whole file was seen; else the budget stopped the scan

    def _fill(self) -> bool:
        if self.eof or self.scanned >= self.budget:
            return False
        chunk = os.read(self.fd, min(CHUNK, self.budget - self.scanned))
        if not chunk:
            self.eof = True
            return False
        self.scanned += len(chunk)
        self.buf, self.pos = chunk, 0
        return True

    def line(self) -> tuple[bytes, int] | None:
        """The next line's kept start and its full length in bytes; None at the end of the
        file or of the budget (a line cut by the budget is not returned)."""
        kept, length = b"", 0
        while True:
            end = self.buf.find(b"\n", self.pos)
            piece = self.buf[self.pos:end if end >= 0 else len(self.buf)]
            if len(kept) < _LINE_KEEP:
                kept += piece[:_LINE_KEEP - len(kept)]
            length += len(piece)
            if end >= 0:
                self.pos = end + 1
                return kept, length
            self.buf, self.pos = b"", 0
            if not self._fill():
                return (kept, length) if self.eof and length else None

    def count_rest(self) -> int:
        """How many more lines there are (scanning on within the budget)."""
        count, last = 0, b"\n"
        rest = self.buf[self.pos:]
        while True:
            if rest:
                count += rest.count(b"\n")
                last = rest[-1:]
            self.buf, self.pos = b"", 0
            if not self._fill():
                break
            rest = self.buf
        return count + (last != b"\n")


def _window(fd: int, path: str, offset: int, limit: int, size: int) -> ReadFileResult:
    head = os.pread(fd, BINARY_PROBE, 0)
    if b"\x00" in head:
        raise Refusal(WorkspaceCode.BINARY_FILE,
                      f"{path} looks binary (a NUL byte in its first 8 KiB); "
                      f"size {size} bytes; it was not read")
    scan = Scanner(fd)
    shown: list[str] = []
    used = replaced = cut = 0
    number = 0
    next_offset: int | None = None
    while (line := scan.line()) is not None:
        number += 1
        if number < offset:
            continue
        kept, length = line
        text, bad = decode(kept)
        if len(text) > LINE_CHARS or length > len(kept):
            more = length - len(text[:LINE_CHARS].encode("utf-8"))
            text = f"{text[:LINE_CHARS]}… [line cut: {more} more bytes]"
            cut += 1
        encoded = len(text.encode("utf-8")) + 1
        if len(shown) == limit or (used + encoded > CONTENT_BYTES and shown):
            next_offset = number
            number += scan.count_rest()
            break
        shown.append(text)
        used += encoded
        replaced += bad
    complete = scan.eof
    end_line = offset + len(shown) - 1
    note = None
    if not shown and offset > 1:
        note = (f"line {offset} is past the end of the file ({number} lines)" if complete
                else f"line {offset} lies beyond the first {SCAN_BYTES // (1024 * 1024)} MiB, "
                "which is as far as read_file scans; use search_text to find it")
    return ReadFileResult(
        path=path, content="\n".join(shown), start_line=offset, end_line=end_line,
        total_lines=number if complete else None,
        truncated=next_offset is not None or not complete,
        next_offset=next_offset, replaced_bytes=replaced, cut_lines=cut, note=note)
