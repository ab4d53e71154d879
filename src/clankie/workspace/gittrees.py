"""Trees and commits, parsed by us from the object store (SPEC W5, W7).

Owns reading a tree's entries (mode, name, object ID) as they stream by, a commit's
fields (tree, parents, author, dates, subject), the files of a tree flattened in Git's
order beneath a folder, one path's entry in a tree, and the history walk `git_log` shows
(`rev-list`'s default: newest commit date first, a path limiting it as Git's default
history simplification does). Every name a tree gives must obey Git's path rules, else
`unsafe_repository`; memory follows the depth of the walk, not the size of the tree, and
the trees held at once are bounded; the deadline is checked as entries stream by.
"""

from __future__ import annotations

import heapq
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

from clankie.core.vocabulary import WorkspaceCode

from .confine import Refusal
from .gitfiles import too_large, unsafe
from .gitobjects import Data, ObjectStore

MODE_TREE = 0o040000
MODE_GITLINK = 0o160000
MODE_SYMLINK = 0o120000
HELD_TREES = 32 * 1024 * 1024  # bytes of trees held at once by one walk (W5's memory)
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


def parse_commit(oid: bytes, data: Data, hash_size: int) -> Commit:
    """A commit's fields, its lines read one by one in place (a commit may be 16 MiB):
    the header up to the first blank line, then only as much of the message as the
    subject needs; of an identity line, only its name's start and its time stamp."""
    view = data
    tree = name = b""
    parents: list[bytes] = []
    committed = when = zone = 0
    authored = False
    at = 0
    while (end := view.find(b"\n", at)) > at:  # a blank line ends the header
        space = view.find(b" ", at, end)
        key = bytes(view[at:space]) if space > 0 else b""
        if key == b"tree" and not tree:
            tree = _oid(bytes(view[space + 1:end]), hash_size)
        elif key == b"parent":
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

    def object(self, oid: bytes, kind: str) -> Data:
        found = self.store.read(oid)
        if found is None:
            raise missing()
        if found[0] != kind:
            raise unsafe(f"an object in it is not the {kind} it should be")
        return found[1]

    def commit(self, oid: bytes) -> Commit:
        return parse_commit(oid, self.object(oid, "commit"), self.hash_size)

    def entry(self, tree: bytes, parts: list[bytes]) -> tuple[int, bytes] | None:
        """The (mode, object ID) at a path below a tree, or None if nothing is there."""
        found = (MODE_TREE, tree)
        for part in parts:
            if found[0] != MODE_TREE:
                return None
            for name, mode, oid in tree_entries(self.object(found[1], "tree"), self.hash_size):
                if name == part:
                    found = (mode, oid)
                    break
            else:
                return None
        return found

    def files(self, tree: bytes, base: bytes = b"",
              prune: Callable[[bytes, bytes], bool] | None = None
              ) -> Iterator[tuple[bytes, int, bytes]]:
        """The files (blobs, symlinks, gitlinks) below a tree, depth first in Git's order,
        named `base` + their path below it (bytes, as Git orders them). A subtree that
        `prune(path, tree ID)` says is known already is not read: it is yielded as itself
        (its path and `/`, `MODE_TREE`, its ID)."""
        data = self.object(tree, "tree")
        held = len(data)
        stack = [(base, tree_entries(data, self.hash_size), len(data))]
        looked = 0
        while stack:
            folder, entries, size = stack[-1]
            found = next(entries, None)
            if found is None:
                stack.pop()
                held -= size
                continue
            looked += 1
            if looked % 1024 == 0:
                self.store.check_time()
            name, mode, oid = found
            path = folder + name
            if mode != MODE_TREE:
                yield path, mode, oid
                continue
            if prune is not None and prune(path, oid):
                yield path + b"/", MODE_TREE, oid
                continue
            if len(stack) == MAX_DEPTH:
                raise too_large(f"its trees nest more than {MAX_DEPTH} folders deep")
            data = self.object(oid, "tree")
            held += len(data)
            if held > HELD_TREES:
                raise too_large(f"its trees need more than {HELD_TREES} bytes at once")
            stack.append((path + b"/", tree_entries(data, self.hash_size), len(data)))

    def log(self, start: bytes, parts: list[bytes], limit: int) -> list[Commit]:
        """Up to `limit` commits from `start`, newest commit date first (ties in the order
        they were found); with `parts`, only those that changed that path, following a
        merge's parent that did not change it, as `git rev-list -- PATH` does."""
        shown: list[Commit] = []
        queue: list[tuple[int, int, bytes]] = []
        seen = {start}
        order = 0
        first = self._commit_or_none(start)
        if first is None:
            raise missing()
        heapq.heappush(queue, (-first.committed, order, start))
        commits = {start: first}
        while queue and len(shown) < limit:
            self.store.check_time()
            _, _, oid = heapq.heappop(queue)
            commit = commits.pop(oid)
            parents = list(commit.parents)
            if parts:
                mine = self.entry(commit.tree, parts)
                same = [p for p in parents if self._path_at(p, parts, commits) == mine]
                if not parents:
                    show = mine is not None
                elif len(parents) == 1:
                    show = not same
                else:
                    show = not same
                    if same:
                        parents = same[:1]
            else:
                show = True
            if show:
                shown.append(commit)
            for parent in parents:
                self.store.check_time()  # a commit may name very many parents
                if parent in seen:
                    continue
                seen.add(parent)
                found = commits.get(parent) or self._commit_or_none(parent)
                if found is None:
                    continue  # beyond a shallow clone's edge: its history ends there
                commits[parent] = found
                order += 1
                heapq.heappush(queue, (-found.committed, order, parent))
        return shown

    def _commit_or_none(self, oid: bytes) -> Commit | None:
        if self.store.info(oid) is None:
            return None
        return self.commit(oid)

    def _path_at(self, oid: bytes, parts: list[bytes], commits: dict[bytes, Commit]
                 ) -> tuple[int, bytes] | bool | None:
        self.store.check_time()
        commit = commits.get(oid) or self._commit_or_none(oid)
        if commit is None:
            return False  # a missing parent is never the same
        commits.setdefault(oid, commit)
        return self.entry(commit.tree, parts)
