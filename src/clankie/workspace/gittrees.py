"""Trees and commits, parsed by us from the object store (SPEC W5, W7).

Owns reading a tree's entries (mode, name, object ID) as they stream by, a commit's
fields (tree, parents, author, dates, subject), the files of a tree flattened in Git's
order beneath a folder, one path's entry in a tree, and the history walk `git_log` shows
(`rev-list`'s default: newest commit date first, a path limiting it as Git's default
history simplification does). Every name a tree gives must obey Git's path rules, else
`unsafe_repository`. Memory follows the depth of the walk, not the size of the tree: the
trees a walk holds at once, and the history walk's queue of commits (their IDs and dates,
never the parsed commits), are counted on the call's memory account (`bounds.Bounds`).
The deadline is checked as entries and lines stream by, at every step of a lookup and of
the history. A cycle, which only objects whose names lie can make (a tree that holds
itself, a commit that is its own ancestor), is found, not walked: `unsafe_repository`.
"""

from __future__ import annotations

import heapq
import re
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

from clankie.core.vocabulary import WorkspaceCode

from .bounds import Held, Refusal, size_of
from .gitfiles import too_large, unsafe
from .gitobjects import Data, ObjectStore

MODE_TREE = 0o040000
MODE_GITLINK = 0o160000
MODE_SYMLINK = 0o120000
MAX_DEPTH = 1_024  # folders deep a tree may nest
PARENTS = 1_000  # parents a commit may name (an octopus merge has tens)
SUBJECT_BYTES = 16 * 1024  # of a commit's message read for its subject (300 characters)
AUTHOR_BYTES = 1_024  # of an author's name kept (200 characters are shown)
_BAD_NAMES = frozenset({b"", b".", b"..", b".git"})  # and `.git` in any case


def canonical_mode(mode: int) -> int:
    """A tree entry's mode as Git reads it (`canon_mode`): 100644 or 100755 for a file."""
    if stat.S_ISREG(mode):
        return 0o100755 if mode & 0o100 else 0o100644
    if stat.S_ISLNK(mode):
        return MODE_SYMLINK
    if stat.S_ISDIR(mode):
        return MODE_TREE
    return MODE_GITLINK


_PARENT_LINES = {size: re.compile(rb"(?:parent [0-9a-f]{%d}\n)+" % (2 * size))
                 for size in (20, 32)}  # (a fixed pattern: linear, nothing to backtrack)
_LINES_BETWEEN_CHECKS = 4_096  # a commit's header lines read between two looks at the clock
_STEP_HELD = 512  # a walk's step besides its tree and path: its tuple and entries' iterator


def cycle() -> Refusal:
    return unsafe("its objects form a cycle (a tree that holds itself or a commit that is "
                  "its own ancestor), which only objects whose names lie can make")


def missing() -> Refusal:
    return Refusal(WorkspaceCode.NOT_FOUND,
                   "an object the repository names is missing from its own "
                   "store (an object of another repository is never read)")


def tree_entries(data: Data, hash_size: int) -> Iterator[tuple[bytes, int, bytes]]:
    """A tree's entries in their stored order: (name, canonical mode, object ID)."""
    at, end = 0, len(data)
    while at < end:  # the data itself is searched, never copied whole (a tree may be 16 MiB)
        space = data.find(b" ", at, at + 8)
        nul = data.find(b"\x00", space + 1) if space > at else -1
        if nul < 0 or nul + 1 + hash_size > end:
            raise unsafe("a tree in it is malformed")
        text = bytes(data[at:space])
        mode = _MODES.get(text)
        if mode is None:
            mode = _mode(text)
        name = bytes(data[space + 1:nul])
        if name in _BAD_NAMES or b"/" in name or (len(name) == 4 and name.lower() == b".git"):
            raise unsafe("a commit names a path Git itself refuses")
        yield name, mode, bytes(data[nul + 1:nul + 1 + hash_size])
        at = nul + 1 + hash_size


def _mode(text: bytes) -> int:
    if not text.isdigit() or b"8" in text or b"9" in text:
        raise unsafe("a tree in it is malformed")
    return canonical_mode(int(text, 8))


_MODES = {text: canonical_mode(int(text, 8))
          for text in (b"100644", b"100755", b"40000", b"120000", b"160000")}


@dataclass(frozen=True, slots=True)
class Commit:
    oid: bytes
    tree: bytes
    parents: tuple[bytes, ...]
    author: str
    author_date: str  # strict ISO 8601 in the author's zone, as `%aI`
    committed: int  # the committer's time stamp (seconds), which orders the walk
    subject: str


def parse_commit(oid: bytes, data: Data, hash_size: int,
                 check_time: Callable[[], None] | None = None) -> Commit:
    """A commit's fields, its lines read one by one in place (a commit may be 16 MiB):
    the header up to the first blank line, then only as much of the message as the
    subject needs; of an identity line, only its name's start and its time stamp. The
    call's deadline (`check_time`) is asked every few thousand lines."""
    view = data
    tree = name = b""
    parents: list[bytes] = []
    committed = when = zone = 0
    authored = False
    at = 0
    lines = 0
    while (end := view.find(b"\n", at)) > at:  # a blank line ends the header
        lines += 1
        if check_time is not None and lines % _LINES_BETWEEN_CHECKS == 0:
            check_time()
        space = view.find(b" ", at, end)
        key = bytes(view[at:space]) if space > 0 else b""
        if key == b"tree" and not tree:
            tree = _oid(bytes(view[space + 1:end]), hash_size)
        elif key == b"parent":
            block = _PARENT_LINES[hash_size].match(view, at)
            if block is not None:  # the common case: a run of well-formed lines, at once
                found = bytes.fromhex(bytes(view[at:block.end()]).replace(b"parent ", b"")
                                      .replace(b"\n", b"").decode("ascii"))
                if len(parents) + len(found) // hash_size > PARENTS:
                    raise too_large(f"a commit in it names more than {PARENTS} parents")
                parents += [found[i:i + hash_size] for i in range(0, len(found), hash_size)]
                at = block.end()
                continue
            if len(parents) == PARENTS:
                raise too_large(f"a commit in it names more than {PARENTS} parents")
            parents.append(_oid(bytes(view[space + 1:end]), hash_size))
        elif key == b"author" and not authored:
            authored = True
            lt = view.find(b"<", space + 1, end)
            name = bytes(view[space + 1:min(lt if lt > 0 else end,
                                            space + 1 + AUTHOR_BYTES)]).strip()
            when, zone = _stamp(bytes(view[max(space + 1, end - 64):end]))
        elif key == b"committer":
            committed = _stamp(bytes(view[max(space + 1, end - 64):end]))[0]
        at = end + 1
    if not tree:
        raise unsafe("a commit in it is malformed")
    message = bytes(view[at + 1:at + 1 + SUBJECT_BYTES]) if end == at else b""
    return Commit(oid, tree, tuple(parents), name.decode("utf-8", "replace"),
                  _iso(when, zone), committed, _subject(message))


def _oid(text: bytes, hash_size: int) -> bytes:
    try:
        oid = bytes.fromhex(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        raise unsafe("a commit in it is malformed") from None
    if len(oid) != hash_size:
        raise unsafe("a commit in it is malformed")
    return oid


def _stamp(ident: bytes) -> tuple[int, int]:
    """The time stamp and zone (minutes east) at the end of an ident line; (0, 0) if it
    has none that reads (Git shows such a commit at the epoch too)."""
    fields = ident[ident.rfind(b">") + 1:].split()
    try:
        when = int(fields[0])
        zone = int(fields[1]) if len(fields) > 1 else 0
    except (IndexError, ValueError):
        return 0, 0
    minutes = (abs(zone) // 100) * 60 + abs(zone) % 100
    return when, (-minutes if zone < 0 else minutes)


def _iso(when: int, minutes: int) -> str:
    try:
        zone = timezone(timedelta(minutes=minutes))
        return datetime.fromtimestamp(when, zone).isoformat()
    except (ValueError, OverflowError, OSError):
        return datetime.fromtimestamp(0, UTC).isoformat()


def _subject(message: bytes) -> str:
    """Git's `%s`: the message's first paragraph, its lines joined by spaces."""
    lines = message.split(b"\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    kept = []
    for line in lines:
        if not line.strip():
            break
        kept.append(line.rstrip())
    return b" ".join(kept).decode("utf-8", "replace")[:300]


class History:
    """Trees and commits of one object store."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self.hash_size = store.hash_size
        self.bounds = store.bounds

    def object(self, oid: bytes, kind: str) -> Data:
        found = self.store.read(oid)
        if found is None:
            raise missing()
        if found[0] != kind:
            raise unsafe(f"an object in it is not the {kind} it should be")
        return found[1]

    def commit(self, oid: bytes) -> Commit:
        return parse_commit(oid, self.object(oid, "commit"), self.hash_size,
                            self.bounds.check_time)

    def entry(self, tree: bytes, parts: list[bytes]) -> tuple[int, bytes] | None:
        """The (mode, object ID) at a path below a tree, or None if nothing is there; the
        deadline asked at each folder and as a folder's entries are looked through."""
        found = (MODE_TREE, tree)
        trees = {tree}  # the trees on the way: one met again is a cycle
        for part in parts:
            self.bounds.check_time()
            if found[0] != MODE_TREE:
                return None
            entries = tree_entries(self.object(found[1], "tree"), self.hash_size)
            for looked, (name, mode, oid) in enumerate(entries):
                if looked % 1024 == 1023:
                    self.bounds.check_time()
                if name == part:
                    found = (mode, oid)
                    break
            else:
                return None
            if found[0] == MODE_TREE:
                if found[1] in trees:
                    raise cycle()
                trees.add(found[1])
        return found

    def files(self, tree: bytes, base: bytes = b"",
              prune: Callable[[bytes, bytes], bool] | None = None
              ) -> Iterator[tuple[bytes, int, bytes]]:
        """The files (blobs, symlinks, gitlinks) below a tree, depth first in Git's order,
        named `base` + their path below it (bytes, as Git orders them). A subtree that
        `prune(path, tree ID)` says is known already is not read: it is yielded as itself
        (its path and `/`, `MODE_TREE`, its ID). The trees on the walk's stack, and their
        paths, are counted on the call's memory account while they are held."""
        held = Held(self.bounds, "the trees of a commit held at once")
        try:
            yield from self._files(tree, base, prune, held)
        finally:
            held.release()

    def _files(self, tree: bytes, base: bytes,
               prune: Callable[[bytes, bytes], bool] | None, held: Held
               ) -> Iterator[tuple[bytes, int, bytes]]:
        data = self.object(tree, "tree")
        size = size_of(data) + size_of(base) + _STEP_HELD
        held.take(size)
        stack = [(base, tree_entries(data, self.hash_size), size, tree)]
        on_stack = {tree}  # a tree met again below itself is a cycle
        looked = 0
        while stack:
            folder, entries, size, oid = stack[-1]
            found = next(entries, None)
            if found is None:
                stack.pop()
                on_stack.discard(oid)
                held.give(size)
                continue
            looked += 1
            if looked % 1024 == 0:
                self.bounds.check_time()
            name, mode, oid = found
            path = folder + name
            if mode != MODE_TREE:
                yield path, mode, oid
                continue
            if prune is not None and prune(path, oid):
                yield path + b"/", MODE_TREE, oid
                continue
            if oid in on_stack:
                raise cycle()
            if len(stack) == MAX_DEPTH:
                raise too_large(f"its trees nest more than {MAX_DEPTH} folders deep")
            data = self.object(oid, "tree")
            path += b"/"
            size = size_of(data) + size_of(path) + _STEP_HELD
            held.take(size)
            on_stack.add(oid)
            stack.append((path, tree_entries(data, self.hash_size), size, oid))

    def log(self, start: bytes, parts: list[bytes], limit: int) -> list[Commit]:
        """Up to `limit` commits from `start`, newest commit date first (ties in the order
        they were found); with `parts`, only those that changed that path, following only a
        merge's first parent that did not change it (the others are not even looked at),
        as `git rev-list -- PATH` does. The queue
        keeps each commit waiting by its date and ID only (a commit is read again when its
        turn comes: an octopus merge's thousand parents, each a merge of a thousand, are
        never all held parsed), and the queue and the commits seen are counted on the
        call's memory account."""
        held = Held(self.bounds, "the commits of the history walk")
        try:
            return self._log(start, parts, limit, held)
        finally:
            held.release()

    def _log(self, start: bytes, parts: list[bytes], limit: int, held: Held) -> list[Commit]:
        shown: list[Commit] = []
        queue: list[tuple[int, int, bytes]] = []
        seen: set[bytes] = set()
        seen_size = sys.getsizeof(seen)
        held.take(seen_size)
        order = 0

        def wait(oid: bytes, committed: int) -> None:
            nonlocal order, seen_size
            order += 1
            entry = (-committed, order, oid)
            held.take(_queued(entry))
            heapq.heappush(queue, entry)
            seen.add(oid)
            held.take(size_of(oid) + sys.getsizeof(seen) - seen_size)
            seen_size = sys.getsizeof(seen)

        first = self._commit_or_none(start)
        if first is None:
            raise missing()
        wait(start, first.committed)
        while queue and len(shown) < limit:
            self.bounds.check_time()
            entry = heapq.heappop(queue)
            held.give(_queued(entry))
            commit = self.commit(entry[2])
            parents = list(commit.parents)
            show = True
            if parts:  # Git's default simplification: the first parent that did not change
                # the path is the only one followed, and the commit is not shown
                mine = self.entry(commit.tree, parts)
                same = next((p for p in parents if self._path_at(p, parts) == mine), None)
                show = same is None if parents else mine is not None
                if same is not None:
                    parents = [same]
            if show:
                shown.append(commit)
            for parent in parents:
                self.bounds.check_time()  # a commit may name very many parents
                if parent in seen:
                    continue
                found = self._commit_or_none(parent)
                if found is None:
                    seen.add(parent)
                    continue  # beyond a shallow clone's edge: its history ends there
                wait(parent, found.committed)
        return shown

    def _commit_or_none(self, oid: bytes) -> Commit | None:
        if self.store.info(oid) is None:
            return None
        return self.commit(oid)

    def _path_at(self, oid: bytes, parts: list[bytes]) -> tuple[int, bytes] | bool | None:
        self.bounds.check_time()
        commit = self._commit_or_none(oid)
        if commit is None:
            return False  # a missing parent is never the same
        return self.entry(commit.tree, parts)


def _queued(entry: tuple[int, int, bytes]) -> int:
    """What one commit waiting in the history walk's queue holds: its tuple, date, order
    and ID, and its slot in the queue."""
    return size_of(entry) + sum(sys.getsizeof(part) for part in entry)
