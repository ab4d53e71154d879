"""The tools `git_status`, `git_log` and `git_diff` (SPEC W1, W4, W5, W7), with no Git program.

Owns what each Git tool says. The repository is read by us (`gitrepo`: the index, refs,
objects, trees and commits through the confined opener); every working-tree byte is read
by the confined opener too (W2). Whether a tracked file changed is told as Git tells it:
unchanged when its stat data matches the index (and is not racy), else by hashing its
bytes as a blob. A commit's files and the index are both in Git's order, so they are
compared as two sorted streams: memory follows the changes, not the size of the tree.
Diffs are ours (`textdiff`). A file whose attributes name a filter is `filtered` and never
diffed; gitlinks are `submodule`, never entered; a denied path (W4: the deny list, or
clankie's own home) is never compared with anything, only counted (`skipped_denied`), so
a diff cannot tell whether a secret changed. Every result names only paths beneath the
workspace.
"""

from __future__ import annotations

import bisect
import hashlib
import heapq
import os
import re
import stat
import struct
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import overload

from clankie.core.vocabulary import WorkspaceCode
from clankie.tool_dto import (
    Commit,
    GitDiffArgs,
    GitDiffResult,
    GitLogArgs,
    GitLogResult,
    GitStatusResult,
    StatusEntry,
)

from .confine import Refusal, Root, check_path, open_listed, tidy
from .deny import DenyList
from .gitconvert import CONVERT_BYTES, clean, has_crlf, needs_index
from .gitindex import MODE_GITLINK, MODE_SYMLINK, Index, as_bytes, as_text
from .gitrepo import Repository, repository
from .gittrees import MODE_TREE
from .reading import denied
from .textdiff import DIFF_LINES, bounded, escaped, header, patch, quoted, too_many_lines
from .worktree import Seen, Worktree, kind_of

STATUS_ENTRIES = 200
_STAT = struct.Struct(">10I")
_NS = 1_000_000_000
_LOW = 0xFFFFFFFF
DIFF_SIDE_BYTES = 1024 * 1024  # a larger version is named with its size, not diffed
KEPT_CHANGES = 1_024  # changes kept from each end of a diff: more than its bound shows
_CHUNK = 256 * 1024
_BYTES_HELD = sys.getsizeof(b"")  # what a `bytes` object holds besides its bytes

# One version of a file in a diff: (mode, object ID) for a blob or a gitlink in a commit or
# the index, (mode, None) for the working tree's file, None when absent.
Side = tuple[int, bytes | None] | None


def _required(root: Root) -> Repository:
    """The workspace's repository with its index read: an index that breaks Git's rules
    makes every Git tool refuse (W7), `git_log` too."""
    repo = repository(root)
    if repo is None:
        raise Refusal(WorkspaceCode.NOT_A_REPOSITORY, "the workspace is not in a Git repository")
    try:
        repo.index()
    except BaseException:
        repo.close()
        raise
    return repo


@dataclass(frozen=True, slots=True)
class _File:
    """A working-tree file as a diff needs it: its status and whether a filter is named."""

    path: str
    st: os.stat_result
    filtered: bool


class CannotTell(Exception):
    """A tracked file the user may not look at: whether it changed is not known."""


class _Files:
    """The working tree's tracked files, read as one tool call needs them: stat data
    through the folder each lies in (kept open while its neighbours are looked at), bytes
    through the confined opener (W2). `denied` says which paths are never read (W4)."""

    def __init__(self, root: Root, repo: Repository, view: Worktree,
                 denied: Callable[[str], bool]) -> None:
        self.root, self.repo, self.view, self.denied = root, repo, view, denied
        self._folder: tuple[str, int] | None = None
        self.untold = 0  # tracked files that could not be read or looked at (permission)

    @property
    def note(self) -> str | None:
        if not self.untold:
            return None
        return (f"{self.untold} tracked file(s) could not be read (permission denied): "
                "whether they changed is not said")

    def close(self) -> None:
        if self._folder is not None:
            os.close(self._folder[1])
            self._folder = None

    def lstat(self, path: str) -> os.stat_result | None:
        """A tracked path's own status, reached through real folders only; None if absent
        (or beyond a symlink, where Git sees no file either); `CannotTell` where the user
        may not look (a folder without permission: absent or not is not known)."""
        folder, _, name = path.rpartition("/")
        if self._folder is None or self._folder[0] != folder:
            self.close()
            try:
                handle = self.root.open(folder or ".", directory=True)
            except Refusal as refusal:
                if refusal.code == WorkspaceCode.PERMISSION_DENIED:
                    raise CannotTell from None
                return None
            if handle.via_symlink:
                os.close(handle.fd)
                return None
            self._folder = (folder, handle.fd)
        try:
            return os.stat(name, dir_fd=self._folder[1], follow_symlinks=False)
        except PermissionError:
            raise CannotTell from None
        except OSError:
            return None

    def promised(self, index: Index, i: int, present: bool) -> bool:
        """Whether the user told Git not to look at the entry's working-tree file
        (assume-unchanged, or skip-worktree: outside a sparse checkout), so that Git
        takes it for the index's version. Under `core.sparseCheckout` a skip-worktree file
        that is present again is compared, as Git (2.37 on) does."""
        if index.assume_unchanged(i):
            return True
        return index.skip_worktree(i) and not (present and self.repo.sparse_checkout)

    def unchanged_quick(self, index: Index, i: int, st: os.stat_result) -> bool:
        """Whether the file is the index's by its stat data alone (no byte read): same
        mode, same stat data but the device, written in a second before the index's (else
        it may be racy: Git, built without USE_NSEC as distributions build it, takes the
        index's whole second). Compared as the index stores it: ten 32-bit big-endian
        numbers."""
        ours = _STAT.pack(st.st_ctime_ns // _NS & _LOW, st.st_ctime_ns % _NS,
                          st.st_mtime_ns // _NS & _LOW, st.st_mtime_ns % _NS, 0,
                          st.st_ino & _LOW, _mode(st.st_mode), st.st_uid & _LOW,
                          st.st_gid & _LOW, st.st_size & _LOW)
        theirs = index.stat_data(i)
        return (ours[:16] == theirs[:16] and ours[20:] == theirs[20:]
                and st.st_mtime_ns // _NS < self.repo.index_mtime_ns // _NS)

    def blob_id(self, path: str, st: os.stat_result, walked: Worktree | None = None
                ) -> bytes | None:
        """The object ID the file's bytes would have as a blob (None: unreadable), after
        Git's line-ending conversion when its attributes or `core.autocrlf` ask for one.
        With `walked`, the file the walk has just yielded, read through its folder."""
        digest = hashlib.sha256() if self.repo.hash_size == 32 else hashlib.sha1()
        if stat.S_ISLNK(st.st_mode):
            target = self.link_target(path, walked)
            if target is None:
                return None
            digest.update(b"blob %d\x00" % len(target) + target)
            return digest.digest()
        action = self.view.conversion(path) if st.st_size <= CONVERT_BYTES else None
        fd = self._open(path, walked)
        if fd is None:
            return None
        try:
            size = os.fstat(fd).st_size
            if action is not None and size <= CONVERT_BYTES:
                with self._converting(size):
                    data = self._converted(path, fd, action, size)
                    if data is None:
                        return None
                    digest.update(b"blob %d\x00" % len(data))
                    digest.update(data)
                    return digest.digest()
            digest.update(b"blob %d\x00" % size)
            read = 0
            while chunk := os.read(fd, _CHUNK):
                digest.update(chunk)
                read += len(chunk)
                self.root.check_time()
            return digest.digest() if read == size else None
        finally:
            os.close(fd)

    def _converting(self, size: int) -> AbstractContextManager[None]:
        """A file of `size` bytes counted on the call's account while it is converted: its
        bytes and their converted copy (W5)."""
        return self.root.bounds.holding(2 * (size + _BYTES_HELD),
                                        f"converting the line endings of {size} bytes")

    def _converted(self, path: str, fd: int, action: str, limit: int) -> bytes | None:
        """The open file's bytes as Git would hash them (`gitconvert.clean`); None when it
        holds more than `limit` bytes (the caller counts what this holds: `_converting`)."""
        data = os.read(fd, limit + 1)
        if len(data) > limit:
            return None
        self.root.check_time()
        index_crlf = False
        if needs_index(data, action):
            index = self.view.index
            i = index.find(as_bytes(self.view.top(path))) if index is not None else None
            if index is not None and i is not None and index.stage(i) != 0:
                i = index.ours(i)  # in a merge Git looks at ours (stage 2), if any
            if index is not None and i is not None:
                found = self.repo.store.read(index.oid(i), CONVERT_BYTES)
                index_crlf = found is not None and has_crlf(found[1])  # (counted by the store)
        return clean(data, action, index_crlf)

    def _open(self, path: str, walked: Worktree | None) -> int | None:
        if walked is not None:
            return open_listed(walked.folder_fd, path.rpartition("/")[2],
                               self.root.home_files)
        try:
            return self.root.open_file(path, self.denied)[0]
        except Refusal as refusal:
            if refusal.code == WorkspaceCode.TIME_LIMIT:
                raise
            return None

    def link_target(self, path: str, walked: Worktree | None = None) -> bytes | None:
        folder, _, name = path.rpartition("/")
        if walked is not None:
            try:
                return os.fsencode(os.readlink(name, dir_fd=walked.folder_fd))
            except OSError:
                return None
        try:
            parent = self.root.open(folder or ".", directory=True)
        except Refusal:
            return None
        try:
            return os.fsencode(os.readlink(name, dir_fd=parent.fd))
        except OSError:
            return None
        finally:
            os.close(parent.fd)

    def content(self, path: str, st: os.stat_result) -> bytes | None:
        """The working tree's bytes of a file as Git diffs them (line endings converted as
        its attributes say), None when larger than a diff reads; refused when it cannot be
        read (gone, or a symlink to a denied path since)."""
        if stat.S_ISLNK(st.st_mode):
            return self.link_target(path)
        fd, opened = self.root.open_file(path, self.denied)
        try:
            if opened.st_size > DIFF_SIDE_BYTES:
                return None
            action = self.view.conversion(path)
            if action is not None:
                with self._converting(opened.st_size):
                    return self._converted(path, fd, action, DIFF_SIDE_BYTES)
            return os.read(fd, DIFF_SIDE_BYTES + 1)[:DIFF_SIDE_BYTES]
        finally:
            os.close(fd)


def _paired(index: Index, span: tuple[int, int], top: bytes,
            tree: Iterator[tuple[bytes, int, bytes]]
            ) -> Iterator[tuple[str, int | None, tuple[int, bytes] | None]]:
    """The index's entries in `span` (the first entry of each path, named without `top`)
    and a commit's files (paths named alike), merged by path in Git's order: (path,
    position in the index or None, the commit's (mode, object ID) or None). A folder the
    commit's walk was spared (`MODE_TREE`, its path) comes as itself, its index entries
    passed over."""
    i, end = span
    cut = len(top)
    theirs = next(tree, None)
    while i < end or theirs is not None:
        mine = index.paths[i][cut:] if i < end else None
        if theirs is None or (mine is not None and mine < theirs[0]):
            assert mine is not None
            yield as_text(mine), i, None
            i = _next_path(index, i, end)
        elif theirs[1] == MODE_TREE:
            yield as_text(theirs[0][:-1]), None, (theirs[1], theirs[2])
            i = max(i, index.below(top + theirs[0])[1])
            theirs = next(tree, None)
        elif mine is None or theirs[0] < mine:
            yield as_text(theirs[0]), None, (theirs[1], theirs[2])
            theirs = next(tree, None)
        else:
            yield as_text(mine), i, (theirs[1], theirs[2])
            i = _next_path(index, i, end)
            theirs = next(tree, None)


def _next_path(index: Index, i: int, end: int) -> int:
    path = index.paths[i]
    i += 1
    while i < end and index.paths[i] == path:  # the other stages of a conflict
        i += 1
    return i


def _in_home(root: Root, path: str) -> bool:
    """Whether a path the index or a commit names lies in clankie's own home (W4): by its
    folders, as Git never looks past a symlink or into a nested repository."""
    return root.folder_in_home(path.rpartition("/")[0] or ".")


def _top(repo: Repository) -> bytes:
    """The workspace's folder in the index ('' when it is the top)."""
    return as_bytes(repo.prefix)


def _span(repo: Repository, index: Index, scope: str) -> tuple[int, int]:
    """The index positions a workspace-relative scope may hold entries in."""
    if scope == ".":
        return index.below(_top(repo))
    return index.within(_top(repo) + as_bytes(scope))


# --- git_status ---------------------------------------------------------------------------

def git_status(root: Root, denied: Callable[[str], bool]) -> GitStatusResult:
    with _required(root) as repo:
        view = Worktree.of(root, repo)
        files = _Files(root, repo, view, denied)
        try:
            walked = _walk(view, files)
            head = repo.head()
            entries = heapq.nsmallest(STATUS_ENTRIES + 1, (
                entry for entry in _status(repo, view, files, walked, head)
                if not _in_home(root, entry[0])))
        finally:
            files.close()
        branch = repo.branch()
    shown = [StatusEntry(path=p, status=s) for p, s in entries[:STATUS_ENTRIES]]
    note = "; ".join(n for n in (view.partial, files.note) if n) or None
    return GitStatusResult(branch=branch, entries=shown, truncated=len(entries) > STATUS_ENTRIES,
                           note=note, rules_skipped=view.rules_skipped,
                           skipped_denied=walked.skipped_denied)


@dataclass
class _Walked:
    """What the walk saw: which tracked paths are there, how those that changed differ
    (`M`, `A`, `filtered`), and the first untracked files and nested repositories."""

    seen: bytearray  # per index entry beneath the workspace: 0 when the walk did not find
    # it, else how it differs (`_CODES`: " " not at all), one byte each, never an object
    others: list[tuple[str, str]]
    skipped_denied: int = 0  # denied paths the index or HEAD names (W4): never compared

    def mark(self, at: int, code: str) -> None:
        self.seen[at] = ord(code[0])  # (" ", "M", "A", "T", or "F" for "filtered")

    def code(self, at: int) -> str:
        """How the entry found at `at` differs: " ", "M", "A", "T" or "filtered"."""
        return _CODES[self.seen[at]]


_CODES = {ord(code[0]): code for code in (" ", "M", "A", "T", "filtered")}
_CHANGED = re.compile(rb"[^\x00 ]")  # in `_Walked.seen`: found, and differs


def _walk(view: Worktree, files: _Files) -> _Walked:
    index = view.index
    assert index is not None
    start, end = _span(files.repo, index, ".")
    files.root.bounds.take(sys.getsizeof(bytearray(end - start)), "what the walk found")
    walked = _Walked(bytearray(end - start), [])
    others: list[tuple[str, str]] = []
    for seen in view.walk():
        if seen.state == "tracked" and seen.kind != "directory":
            i = seen.at
            assert i is not None
            walked.mark(i - start, " ")
            if files.denied(seen.path):
                continue  # never hashed: whether it changed is not said (W4)
            walked.mark(i - start, _worktree_code(files, index, i, seen, view))
        elif (seen.state == "submodule" and seen.at is None) or (
                seen.state == "untracked" and seen.kind != "directory"):  # (a gitlink of
            # the index is said from the index)
            others.append((seen.path, "??" if seen.state == "untracked" else "submodule"))
            if len(others) > 4 * STATUS_ENTRIES:  # keep the first ones only
                others = heapq.nsmallest(STATUS_ENTRIES + 1, others)
    walked.others = heapq.nsmallest(STATUS_ENTRIES + 1, others)
    if view.partial:  # tracked files the walk did not reach are looked up one by one
        cut = len(_top(files.repo))
        for i in range(start, end):
            if walked.seen[i - start] or index.mode(i) == MODE_GITLINK:
                continue
            files.root.check_time()
            path = as_text(index.paths[i][cut:])
            if files.denied(path) or view.unread(path):
                continue  # never compared (W4), or beyond a folder that cannot be read
            try:
                st = files.lstat(path)
            except CannotTell:
                walked.mark(i - start, " ")  # not "deleted": not known
                files.untold += 1
                continue
            if st is not None and not stat.S_ISDIR(st.st_mode):
                found = Seen(path, kind_of(st.st_mode), st, "tracked", 0, view.filtered(path))
                walked.mark(i - start, _worktree_code(files, index, i, found, None))
    return walked


def _worktree_code(files: _Files, index: Index, i: int, seen: Seen, walked: Worktree | None
                   ) -> str:
    """The second letter of a tracked file's status (or `filtered`): how the working tree's
    file differs from the index."""
    if index.stage(i) == 0 and files.unchanged_quick(index, i, seen.st):
        return " "  # the common case first: no more is read
    if files.promised(index, i, True):
        return " "
    entry = index.brief(i)
    if entry.stage != 0 or entry.mode == MODE_GITLINK:
        return " "
    if seen.filtered:
        return "filtered"
    if entry.intent_to_add:
        return "A"
    if _kind(_mode(seen.st.st_mode)) != _kind(entry.mode):
        return "T"
    if _mode(seen.st.st_mode) != entry.mode:
        return "M"
    recorded = index.stat_data(i)[36:40]
    if recorded != b"\0\0\0\0" and recorded != (seen.st.st_size & _LOW).to_bytes(4, "big"):
        return "M"  # as Git's `ie_match_stat`: another size is a change, unread (even when
        # its line-ending conversion would give the index's bytes)
    found = files.blob_id(seen.path, seen.st, walked)
    if found is None:  # it cannot be read now: not said either way
        files.untold += 1
        return " "
    return " " if found == entry.oid else "M"


def _status(repo: Repository, view: Worktree, files: _Files, walked: _Walked,
            head: bytes | None) -> Iterator[tuple[str, str]]:
    index = view.index
    assert index is not None
    top, span = _top(repo), _span(repo, index, ".")
    walked.skipped_denied = _denied_entries(index, span, top, files.denied, files.root.check_time)
    for link in _within(index.gitlinks, span):  # nested repositories, whatever changed
        files.root.check_time()
        path = as_text(index.paths[link][len(top):])
        if not files.denied(path) and not view.unread(path):
            yield path, "submodule"
    for path, i, old in _paired(index, span, top, repo.files(head, prune=_pruner(index, top))):
        files.root.check_time()
        if old is not None and old[0] == MODE_TREE:  # a folder as HEAD has it: its files
            yield from _in_worktree(index, view, files, walked, span, top, path)
            continue
        if files.denied(path):
            walked.skipped_denied += i is None  # (the index's are counted already)
            continue
        if view.unread(path):
            continue  # in a folder that could not be read: what it holds is not said
        if i is None:
            assert old is not None
            yield path, "submodule" if old[0] == MODE_GITLINK else "D "
            continue
        entry = index.brief(i)
        if entry.mode == MODE_GITLINK:
            continue  # said above
        if entry.stage != 0:
            yield path, _conflict(index, i)
            continue
        if old and old[0] == MODE_GITLINK:
            yield path, "submodule"
            continue
        x = " " if old == (entry.mode, entry.oid) or entry.intent_to_add else \
            "A" if old is None else "T" if _kind(old[0]) != _kind(entry.mode) else "M"
        y = walked.code(i - span[0]) if walked.seen[i - span[0]] else \
            " " if files.promised(index, i, False) else "D"
        if y == "filtered":
            yield path, "filtered"
        elif x + y != "  ":
            yield path, x + y
    yield from walked.others


_CONFLICTS = {0b111: "UU", 0b110: "AA", 0b011: "UD", 0b101: "DU", 0b010: "AU", 0b100: "UA",
              0b001: "DD"}  # by the stages present (bit 0: the base, 1: ours, 2: theirs)


def _conflict(index: Index, i: int) -> str:
    """A conflicted path's letters as Git's porcelain gives them, from the stages its
    index entries hold (`i` is the first)."""
    present = 0
    for at in range(i, _next_path(index, i, len(index))):
        present |= 1 << (index.stage(at) - 1)
    return _CONFLICTS[present]


def _in_worktree(index: Index, view: Worktree, files: _Files, walked: _Walked,
                 span: tuple[int, int], top: bytes, folder: str) -> Iterator[tuple[str, str]]:
    """The status of the files in a folder whose index entries are what HEAD holds (its
    cache-tree says so): only how the working tree differs, found without a look at
    each entry (the walk's findings, by position)."""
    start = span[0]
    lo, hi = index.below(top + as_bytes(folder) + b"/")
    lo, hi = max(lo, span[0]), min(hi, span[1])
    gone = walked.seen.find(0, lo - start, hi - start)
    while gone >= 0:  # not found by the walk: deleted
        files.root.check_time()
        i = start + gone
        if index.mode(i) != MODE_GITLINK:
            path = as_text(index.paths[i][len(top):])
            if not files.denied(path) and not view.unread(path):
                yield path, " D"
        gone = walked.seen.find(0, gone + 1, hi - start)
    for found in _CHANGED.finditer(walked.seen, lo - start, hi - start):
        files.root.check_time()
        i = start + found.start()
        code = walked.code(i - start)
        yield as_text(index.paths[i][len(top):]), "filtered" if code == "filtered" else " " + code


def _within(positions: list[int], span: tuple[int, int]) -> list[int]:
    """The sorted positions in [start, end)."""
    return positions[bisect.bisect_left(positions, span[0]):bisect.bisect_left(positions,
                                                                                span[1])]


def _pruner(index: Index, top: bytes) -> Callable[[bytes, bytes], bool]:
    """Which folders of a commit need not be read: those Git's cache-tree says the index
    holds as they are (the same tree ID, covering every entry beneath, none an intent to
    add), so that a commit and the index are compared folder by folder, as Git does."""
    def known(path: bytes, oid: bytes) -> bool:
        found = index.cached_tree(top + path)
        if found is None or found[1] != oid:
            return False
        lo, hi = index.below(top + path + b"/")
        return hi - lo == found[0] and index.plain(lo, hi)
    return known


def _denied_entries(index: Index, span: tuple[int, int], top: bytes,
                    denied: Callable[[str], bool], check_time: Callable[[], None]) -> int:
    """How many of the index's paths in `span` are denied: counted whatever changed, so
    that the count says nothing of whether a secret did (W4). The deadline is asked as
    they are looked at."""
    cut = len(top)
    count = 0
    for i in range(*span):
        if i % 1024 == 0:
            check_time()
        if (i == span[0] or index.paths[i] != index.paths[i - 1]) \
                and denied(as_text(index.paths[i][cut:])):
            count += 1
    return count


# --- git_log ------------------------------------------------------------------------------

def git_log(root: Root, args: GitLogArgs, deny: DenyList) -> GitLogResult:
    """The newest commits, of the path if one is given: a denied path's history is
    refused as its content is (W4: `git_diff` never compares it, `read_file` never
    reads it)."""
    path = tidy(check_path(args.path)) if args.path is not None else "."
    with _required(root) as repo:
        denied(path, deny)  # (an unsafe repository is said first, as by git_diff)
        head = repo.head()
        if head is None:
            return GitLogResult(commits=[])
        where = (repo.prefix + path if path != "." else repo.prefix).rstrip("/")
        found = repo.log(head, where, args.limit)
    return GitLogResult(commits=[Commit(commit=c.oid.hex(), author=c.author[:200],
                                        date=c.author_date, subject=c.subject[:300])
                                 for c in found])


# --- git_diff -----------------------------------------------------------------------------

# A change: path, the old and new sides, and the working tree's file when the new side is it
Change = tuple[str, Side, Side, _File | None]


class _Kept(Sequence[Change]):
    """The changes of a diff in order, of which only the first and the last
    `KEPT_CHANGES` are kept: `bounded` never renders more than that from either end."""

    def __init__(self, changes: Iterator[Change]) -> None:
        self.first: list[Change] = []
        self.last: deque[Change] = deque(maxlen=KEPT_CHANGES)
        self.total = 0
        for change in changes:
            if len(self.first) < KEPT_CHANGES:
                self.first.append(change)
            else:
                self.last.append(change)
            self.total += 1

    def __len__(self) -> int:
        return self.total

    @overload
    def __getitem__(self, i: int) -> Change: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Change]: ...

    def __getitem__(self, i: int | slice) -> Change | Sequence[Change]:
        if isinstance(i, slice):
            raise TypeError("changes are read one at a time")
        if i < len(self.first):
            return self.first[i]
        back = self.total - i
        if not 0 < back <= len(self.last):
            raise IndexError("a change in the middle is no longer kept")
        return self.last[-back]


def git_diff(root: Root, args: GitDiffArgs, denied: Callable[[str], bool]) -> GitDiffResult:
    scope = tidy(check_path(args.path)) if args.path is not None else "."
    with _required(root) as repo:
        view = Worktree.of(root, repo)
        files = _Files(root, repo, view, denied)
        try:
            base = None
            if args.revision is not None:
                base = repo.commit(args.revision)
                if base is None:
                    raise Refusal(WorkspaceCode.INVALID_ARGUMENT,
                                  "the revision given is not a commit of "
                                  "this repository")
            elif args.staged:
                base = repo.head()
            skipped: list[int] = [0]
            changes = _Kept(_changes(repo, view, files, base, args, scope, skipped))

            def render(change: Change) -> str:
                root.check_time()
                return _file_diff(repo, files, *change)

            text, truncated = bounded(changes, render)
        finally:
            files.close()
    return GitDiffResult(diff=text, truncated=truncated, skipped_denied=skipped[0],
                         note=files.note)


def _changes(repo: Repository, view: Worktree, files: _Files, base: bytes | None,
             args: GitDiffArgs, scope: str, skipped: list[int]) -> Iterator[Change]:
    index = view.index
    assert index is not None
    top, span = _top(repo), _span(repo, index, scope)
    prune = _pruner(index, top) if args.staged else None  # folders the index has unchanged
    tree = repo.files(base, scope, prune) if args.revision is not None or args.staged \
        else iter(())
    skipped[0] = _denied_entries(index, span, top, files.denied,  # whatever changed (W4)
                                 files.root.check_time)
    for path, i, old in _paired(index, span, top, tree):
        files.root.check_time()
        if old is not None and old[0] == MODE_TREE:
            continue  # the same in the commit and the index: nothing staged there
        if scope != "." and path != scope and not path.startswith(scope + "/"):
            continue  # `scope.txt` lies between `scope` and `scope/x` in Git's order
        if files.denied(path) or _in_home(files.root, path):
            skipped[0] += i is None and files.denied(path)  # (the index's are counted)
            continue  # never compared: whether it changed is not said (W4)
        entry = index.brief(i) if i is not None else None
        if entry is None:
            assert old is not None
            yield path, old, None, None
        elif entry.stage != 0 and (args.staged or args.revision is None):
            yield path, None, None, None  # unmerged: named, its stages never compared
        elif args.staged:  # a commit against the index (an intent to add is not in it)
            if not entry.intent_to_add and old != (entry.mode, entry.oid):
                yield path, old, (entry.mode, entry.oid), None
        elif entry.mode == MODE_GITLINK:
            if args.revision is not None and old != (entry.mode, entry.oid):
                yield path, old, (entry.mode, entry.oid), None
        else:  # the index (or a commit) against the working tree
            if args.revision is None:  # an intent to add: new in the working tree
                old = None if entry.intent_to_add else (entry.mode, entry.oid)
            assert i is not None
            yield from _against_worktree(files, view, path, index, i, old)


def _against_worktree(files: _Files, view: Worktree, path: str, index: Index, i: int,
                      old: tuple[int, bytes] | None) -> Iterator[Change]:
    try:
        st = files.lstat(path)
    except CannotTell:
        files.untold += 1
        return
    there = st is not None and not stat.S_ISDIR(st.st_mode)
    if files.promised(index, i, there):  # Git takes the index's version for it
        if old is not None and old != (index.mode(i), index.oid(i)):
            yield path, old, (index.mode(i), index.oid(i)), None
        return
    if st is None or stat.S_ISDIR(st.st_mode):
        if old is not None:
            yield path, old, None, None
        return
    if old == (index.mode(i), index.oid(i)) and files.unchanged_quick(index, i, st):
        return
    present = _File(path, st, view.filtered(path))
    if old is None or old[0] != _mode(st.st_mode) or present.filtered \
            or files.blob_id(path, st) != old[1]:
        yield path, old, (_mode(st.st_mode), None), present


def _file_diff(repo: Repository, files: _Files, path: str, old: Side, new: Side,
               present: _File | None) -> str:
    named = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace")  # as text
    if old is None and new is None:  # in conflict: Git's own line (its combined diff of
        return f"* Unmerged path {quoted(named)}\n"  # the stages is not made; read_file)
    head = header(named, old[0] if old else None, new[0] if new else None)
    if (old and old[0] == MODE_GITLINK) or (new and new[0] == MODE_GITLINK):
        lines = [f"-Subproject commit {old[1].hex()}\n" if old and old[1] else "",
                 f"+Subproject commit {new[1].hex()}\n" if new and new[1] else ""]
        return head + "(a nested repository: never entered)\n" + "".join(lines)
    if present is not None and present.filtered:
        return head + "(filtered: its attributes name a filter, which is never run; not " \
                      "diffed)\n"
    try:
        before = _side(repo, files, path, old, present)
        after = _side(repo, files, path, new, present)
    except Refusal as refusal:
        if refusal.code == WorkspaceCode.TIME_LIMIT:
            raise
        return head + f"(not read: {escaped(refusal.reason)})\n"
    if (old and before is None) or (new and after is None):
        sizes = " -> ".join(str(_size(repo, side, present)) for side in (old, new) if side)
        return head + (f"(not diffed: {sizes} bytes, more than the {DIFF_SIDE_BYTES} a "
                       "diff reads; use read_file)\n")
    if too_many_lines(before) or too_many_lines(after):
        return head + (f"(not diffed: more than {DIFF_LINES} lines; use read_file or "
                       "search_text)\n")
    return head + "".join(patch(named, before, after, files.root.check_time))


def _side(repo: Repository, files: _Files, path: str, side: Side, present: _File | None
          ) -> bytes | None:
    if side is None:
        return None
    if side[1] is None:
        assert present is not None
        return files.content(path, present.st)
    found = repo.store.read(side[1], DIFF_SIDE_BYTES)
    if found is None:
        if repo.store.info(side[1]) is None:
            raise Refusal(WorkspaceCode.NOT_FOUND,
                          "its object is missing from the repository's own "
                          "store")
        return None
    if found[0] != "blob":
        raise Refusal(WorkspaceCode.UNSAFE_REPOSITORY, "its object is not a file's")
    return bytes(found[1])


def _size(repo: Repository, side: Side, present: _File | None) -> int | str:
    if side is None:
        return 0
    if side[1] is None:
        return present.st.st_size if present else "?"
    found = repo.store.info(side[1])
    return found.size if found is not None else "?"


def _mode(st_mode: int) -> int:
    if stat.S_ISLNK(st_mode):
        return MODE_SYMLINK
    if stat.S_ISDIR(st_mode):
        return MODE_GITLINK
    return 0o100755 if st_mode & 0o100 else 0o100644


def _kind(mode: int) -> int:
    """A mode's type (file, symlink, gitlink), without its permission bits."""
    return mode & 0o170000
