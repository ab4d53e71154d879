"""`search_text` (SPEC W1, W4, W5, W6): lines matching a pattern in the workspace's files.

Owns searching. The confined walk (`worktree`) names the candidate files as Git would see
them (tracked and untracked, not ignored unless asked); each file is opened beneath the
workspace and read by us, in chunks, so no byte outside the workspace can reach a result.
Secret-like paths and clankie's own home (W4) are never opened (counted in
`skipped_denied`), binary files are
skipped (counted), nested repositories are not entered. Patterns are RE2 regular
expressions (linear time: a pattern chosen by a model cannot make a search run away) that
never match across a newline. One call of the matcher sees at most `CHUNK` bytes and a
pattern's compiled program at most `MAX_PROGRAM` instructions, so each call is short and
the 10 s deadline is checked between calls, even within one long line. Bounds:
`max_results` matches, 20 a file, 500 characters a line, 32 KiB, 10 s.
"""

from __future__ import annotations

import os
import time

import re2

from clankie.core.vocabulary import WorkspaceCode
from clankie.tool_dto import Match, SearchTextArgs, SearchTextResult

from .confine import CALL_SECONDS, Refusal, Root, check_path, tidy
from .deny import DenyList
from .listing import must_be_directory, worktree
from .reading import BINARY_PROBE, LINE_CHARS, decode

PER_FILE = 20
RESULT_BYTES = 32 * 1024
SECONDS = CALL_SECONDS
CHUNK = 128 * 1024  # a matcher call sees at most twice this: a longer line is searched in
# pieces (a match across two pieces of one line longer than this is not found)
MAX_PROGRAM = 5_000  # RE2 instructions; e.g. `\w{1000}` alone is over 3,000


def compile_pattern(pattern: str, fixed: bool) -> re2._Regexp:
    options = re2.Options()
    options.log_errors = False
    options.never_nl = True
    options.literal = fixed
    try:  # (?m): ^ and $ match at each line, as in grep
        compiled = re2.compile(pattern.encode("utf-8") if fixed else b"(?m)" +
                           pattern.encode("utf-8"), options=options)
    except (re2.error, UnicodeEncodeError) as exc:
        detail = str(exc.args[0] if exc.args else exc).strip("b'\"")[:120]
        raise Refusal(WorkspaceCode.INVALID_ARGUMENT, f"pattern is not an RE2 regular expression "
                      f"({detail}); lookaround and backreferences are not supported") from None
    if compiled.programsize > MAX_PROGRAM:
        raise Refusal(WorkspaceCode.INVALID_PATTERN,
                      f"the pattern is too complex to search with in "
                      f"bounded time ({compiled.programsize} instructions, at most "
                      f"{MAX_PROGRAM}); use smaller repetition counts")
    return compiled


class _Budget:
    def __init__(self, max_results: int, deadline: float) -> None:
        self.max_results = max_results
        self.matches: list[Match] = []
        self.used = 0
        self.truncated = False
        self.deadline = deadline
        self.timed_out = False

    def full(self) -> bool:
        return self.truncated or self.timed_out

    def add(self, path: str, line: int, raw: bytes) -> None:
        text, _ = decode(raw[:LINE_CHARS * 4])
        if len(text) > LINE_CHARS:
            text = text[:LINE_CHARS] + "…"
        size = len(path) + len(text.encode("utf-8")) + 16
        if len(self.matches) == self.max_results or self.used + size > RESULT_BYTES:
            self.truncated = True  # one more match exists than is shown
            return
        self.matches.append(Match(path=path, line=line, text=text))
        self.used += size


def search_text(root: Root, args: SearchTextArgs, deny: DenyList) -> SearchTextResult:
    regex = compile_pattern(args.pattern, args.fixed)
    literal = args.pattern.encode("utf-8") if args.fixed else None
    path = tidy(check_path(args.path))
    must_be_directory(root, path)
    budget = _Budget(args.max_results, root.deadline)
    skipped_denied = skipped_binary = hidden = 0
    unreadable = 0
    with worktree(root) as (view, plain):
        files = view.walk(path, into_ignored=args.include_ignored, statuses=False)
        try:
            for seen in files:
                if budget.full():
                    break
                if seen.state == "ignored" and not args.include_ignored:
                    hidden += 1
                    continue
                if seen.home:  # clankie's own home (W4): not entered, said as denied
                    skipped_denied += 1
                    continue
                if seen.kind != "file":
                    continue
                if deny.denies(seen.path):
                    skipped_denied += 1
                    continue
                fd = view.open_seen(seen)
                if fd is None:  # gone since it was listed, or no longer a regular file
                    unreadable += 1
                    continue
                try:
                    skipped_binary += not _search_file(fd, seen.path, regex, literal, budget)
                finally:
                    os.close(fd)
        except Refusal as refusal:
            if refusal.code != WorkspaceCode.TIME_LIMIT:
                raise
            budget.timed_out = True
        finally:
            files.close()
        said = [plain, view.partial]
        rules_skipped = view.rules_skipped
    if unreadable:
        said.append(f"{unreadable} file(s) could not be opened")
    if budget.timed_out:
        said.append(f"the search stopped after {SECONDS:g} s; narrow it with a path")
    note = "; ".join(n for n in said if n) or None
    return SearchTextResult(pattern=args.pattern, matches=budget.matches,
                            truncated=budget.truncated or budget.timed_out,
                            skipped_denied=skipped_denied, hidden_by_ignore=hidden,
                            skipped_binary=skipped_binary, note=note,
                            rules_skipped=rules_skipped)


def _search_file(fd: int, path: str, regex: re2._Regexp, literal: bytes | None,
                 budget: _Budget) -> bool:
    """Search one open file; False if it is binary (a NUL in its first 8 KiB)."""
    chunk = os.read(fd, CHUNK)
    if chunk.find(b"\x00", 0, BINARY_PROBE) >= 0:
        return False
    if len(chunk) < CHUNK and literal is not None and literal not in chunk:
        return True  # the common case, first: the whole file, and no match
    found = 0
    line_base = 1  # the line number of the first line of `region`
    carry = b""
    first = True
    while True:
        if not first:
            chunk = os.read(fd, CHUNK)
        first = False
        if time.monotonic() > budget.deadline:
            budget.timed_out = True
            return True
        last = len(chunk) < CHUNK  # a short read of a regular file: its end
        data = carry + chunk if carry else chunk
        region, carry = data, b""
        if not last:
            cut = data.rfind(b"\n") + 1
            if cut == 0 and len(data) < CHUNK:
                carry = data
                continue
            if cut:
                region, carry = data[:cut], data[cut:]
        position = counted = 0
        if literal is not None and literal not in region:
            position = -1  # a plain literal: the bytes' own search rules it out, quicker
        while position >= 0 and (match := regex.search(region, position)) is not None:
            start = region.rfind(b"\n", 0, match.start()) + 1
            end = region.find(b"\n", match.start())
            end = len(region) if end < 0 else end
            line_base += region.count(b"\n", counted, start)
            counted = start
            budget.add(path, line_base, region[start:end])
            found += 1
            if found == PER_FILE or budget.full() or end >= len(region):
                break
            position = end + 1
        if last or found == PER_FILE or budget.full():
            return True
        line_base += region.count(b"\n", counted)
