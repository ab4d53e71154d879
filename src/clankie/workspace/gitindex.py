"""Git's index file, read by us (SPEC W5, W7): its entries, their stat data, Git's path rules.

Owns parsing the index format (versions 2, 3 and 4, as `gitformat-index` describes it),
read as a stream in chunks, into a compact `Index`: each entry's path as bytes, in the
file's order, and its fixed fields packed in one byte array (unpacked only for the entry
asked for), so an index of many entries costs about a hundred bytes an entry besides its
path; what it holds, the cache-tree too, is counted on the call's memory account as it is
built (`bounds.Bounds`: past it, `repository_too_large`). Every path must obey Git's own
rules (not empty, not absolute, no empty, `.`, `..` or `.git` component in any case) and
the entries must be in
Git's order: Git does not re-check these when it reads an index, so a hand-made one could
name `../outside/secret`; such an index is `unsafe_repository`. A split or sparse index is
refused too (its entries live elsewhere). Refusals are fixed sentences. Pure but for the
reading of the descriptor it is given.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import re
import struct
import sys
from dataclasses import dataclass
from typing import NamedTuple

from .bounds import SLOT, Bounds, Held, Refusal
from .gitfiles import READ, pread_exactly, too_large, unsafe

MODE_GITLINK = 0o160000
MODE_SYMLINK = 0o120000
INDEX_BYTES = 128 * 1024 * 1024  # the most of an index file read (and hashed) by one call
_EMPTY_PATH = sys.getsizeof(b"")  # what a path's bytes object holds besides its bytes
PATH_BYTES = 4_096  # the longest path an entry may name (W2's bound on a path)
_HEADER = struct.Struct(">4sII")
_STAT = struct.Struct(">10I")
_EXTENDED = 0x4000
_INTENT_TO_ADD = 0x2000  # in the extended flags
_SKIP_WORKTREE = 0x4000  # in the extended flags
_ASSUME_VALID = 0x8000  # in the flags: `update-index --assume-unchanged`
_NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class IndexEntry:
    path: str  # relative to the top of the work tree, '/'-separated
    mode: int
    oid: bytes
    stage: int  # 0, or 1-3 in a conflict
    ctime_ns: int
    mtime_ns: int
    ino: int
    uid: int
    gid: int
    size: int  # the file's size, truncated to 32 bits as Git stores it
    intent_to_add: bool = False
    skip_worktree: bool = False


# A NUL, or an empty, `.`, `..` or `.git` component (any case) anywhere, or an empty path:
# what Git itself refuses in an index or a tree.
_BAD_BYTES = re.compile(rb"\x00|(?:^|/)(?:\.|\.\.|\.git)?(?:/|$)", re.IGNORECASE)


def _maybe_bad(name: bytes) -> bool:
    """Whether `_BAD_BYTES` may find something in `name` (a quicker test, first: only a
    path with a NUL, a leading or doubled `/`, a `.` after one or at the start, or a
    trailing `/` can break Git's rules)."""
    return (not name or b"\x00" in name or name[0] in b"/." or name[-1:] == b"/"
            or b"//" in name or b"/." in name)


def as_bytes(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def as_text(path: bytes) -> str:
    return path.decode("utf-8", "surrogateescape")


class Brief(NamedTuple):
    """What the Git tools compare of an entry (cheaper than a whole `IndexEntry`)."""

    mode: int
    oid: bytes
    stage: int
    intent_to_add: bool


class Index:
    """The entries of an index: `paths` in Git's order (bytes), the rest on demand from
    each entry's fixed fields as the file has them (stat data, object ID, flags)."""

    def __init__(self, hash_size: int) -> None:
        self.hash_size = hash_size
        self.paths: list[bytes] = []
        self._fixed = bytearray()
        self._size = 40 + hash_size + 2
        self._extended = bytearray()  # per entry: 1 intent to add, 2 skip worktree, 4 a
        # stage, 8 assume unchanged
        self.gitlinks: list[int] = []  # the positions of nested repositories' entries
        # Git's cache-tree (the TREE extension), where it is valid, one step a folder: its
        # parent's number and its name -> its own number, how many entries it covers and
        # the tree ID they make (`cached_tree`); the top is number 0. A folder is never
        # kept by its whole path: a deep tree would cost the square of its depth.
        self._trees: dict[bytes, bytes] = {}

    def __len__(self) -> int:
        return len(self.paths)

    def entry(self, i: int) -> IndexEntry:
        at = i * self._size
        fields = _STAT.unpack_from(self._fixed, at)
        extended = self._extended[i]
        return IndexEntry(as_text(self.paths[i]), fields[6], self.oid(i), self.stage(i),
                          fields[0] * _NS + fields[1], fields[2] * _NS + fields[3], fields[5],
                          fields[7], fields[8], fields[9], bool(extended & 1),
                          bool(extended & 2))

    def brief(self, i: int) -> Brief:
        return Brief(self.mode(i), self.oid(i), self.stage(i), self.intent_to_add(i))

    def stat_data(self, i: int) -> bytes:
        """The entry's stat data as the file has it: ten 32-bit big-endian numbers."""
        return bytes(self._fixed[i * self._size:i * self._size + 40])

    def mode(self, i: int) -> int:
        return int.from_bytes(self._fixed[i * self._size + 24:i * self._size + 28], "big")

    def oid(self, i: int) -> bytes:
        at = i * self._size + 40
        return bytes(self._fixed[at:at + self.hash_size])

    def stage(self, i: int) -> int:
        return (self._fixed[i * self._size + 40 + self.hash_size] >> 4) & 3

    def intent_to_add(self, i: int) -> bool:
        return bool(self._extended[i] & 1)

    def skip_worktree(self, i: int) -> bool:
        return bool(self._extended[i] & 2)

    def assume_unchanged(self, i: int) -> bool:
        return bool(self._extended[i] & 8)

    def plain(self, start: int, end: int) -> bool:
        """Whether the entries in [start, end) are all plain: no intent to add, no
        skip-worktree, no conflict stage, none assumed unchanged."""
        return not self._extended[start:end].strip(b"\x00")

    def find(self, path: bytes) -> int | None:
        """The position of the first entry for `path` (any stage), or None."""
        i = bisect.bisect_left(self.paths, path)
        return i if i < len(self.paths) and self.paths[i] == path else None

    def ours(self, i: int) -> int | None:
        """The stage-2 entry ("ours") of the conflicted path whose first entry is `i`."""
        path = self.paths[i]
        while i < len(self.paths) and self.paths[i] == path:
            if self.stage(i) == 2:
                return i
            i += 1
        return None

    def below(self, folder: bytes) -> tuple[int, int]:
        """The positions [start, end) of the entries beneath `folder` (b'' for all;
        else ending in b'/')."""
        if not folder:
            return 0, len(self.paths)
        start = bisect.bisect_left(self.paths, folder)
        # '/' + 1 is '0': every path beneath the folder sorts before folder[:-1] + b'0'
        return start, bisect.bisect_left(self.paths, folder[:-1] + b"0", start)

    def within(self, path: bytes) -> tuple[int, int]:
        """Positions [start, end) that hold every entry that is `path` or lies beneath it
        (and, between them, the likes of `path.txt`, which the caller skips)."""
        return bisect.bisect_left(self.paths, path), self.below(path + b"/")[1]

    def cached_tree(self, folder: bytes) -> tuple[int, bytes] | None:
        """What the cache-tree says of a folder (b'' for the top, else b'a/b'): how many
        entries it covers and the tree ID they make; None where it says nothing valid."""
        found = self._trees.get(_TOP)
        for name in folder.split(b"/") if folder else ():
            if found is None:
                return None
            number = int.from_bytes(found[:4], "big")
            found = self._trees.get(number.to_bytes(4, "big") + name)
        if found is None or found[4:8] == _INVALID:
            return None
        return int.from_bytes(found[4:8], "big"), found[8:]

    def holds_folder(self, folder: bytes) -> bool:
        """Whether any entry lies beneath `folder` (no trailing '/')."""
        start, end = self.below(folder + b"/")
        return start < end


class _Reader:
    """The index file's bytes from a descriptor, a window at a time, each byte before the
    trailing checksum hashed as it is read."""

    def __init__(self, fd: int, hash_size: int) -> None:
        self.fd, self.data, self.at, self.read = fd, b"", 0, 0
        self.end = os.fstat(fd).st_size - hash_size  # where the checksum starts
        self.digest = hashlib.sha256() if hash_size == 32 else hashlib.sha1()
        if self.end < _HEADER.size:
            raise truncated()

    @property
    def position(self) -> int:
        return self.read - (len(self.data) - self.at)

    def need(self, size: int) -> None:
        """At least `size` bytes from `at` in the window, all before the checksum; else
        `unsafe_repository`."""
        if self.position + size > self.end:
            raise truncated()
        if len(self.data) - self.at >= size:
            return
        more = [self.data[self.at:]]
        have = len(more[0])
        while have < size:
            chunk = os.pread(self.fd, min(max(READ * 16, size - have), self.end - self.read),
                             self.read)
            if not chunk:
                raise truncated()
            self.digest.update(chunk)
            self.read += len(chunk)
            more.append(chunk)
            have += len(chunk)
        self.data, self.at = b"".join(more), 0

    def until_nul(self, start: int) -> int:
        """Where the next NUL is, from `start` bytes past `at` (the window grows to it)."""
        while (nul := self.data.find(b"\x00", self.at + start)) < 0:
            if len(self.data) - self.at > 64 * 1024:
                raise unsafe("its index is malformed")
            self.need(len(self.data) - self.at + 1)
        return nul - self.at

    def skip(self, size: int) -> None:
        """Go past `size` bytes (hashed, not kept)."""
        while size > 0:
            step = min(size, READ * 16)
            self.need(step)
            self.at += step
            size -= step

    def checked(self) -> None:
        """The file ends with the checksum of what came before (or zeros, when Git was
        told to skip it): an index cut short or changed meanwhile is refused."""
        if self.position != self.end:
            raise truncated()
        trailer = pread_exactly(self.fd, self.digest.digest_size, self.end)
        if trailer != self.digest.digest() and trailer.strip(b"\x00"):
            raise truncated()


_GITLINK = MODE_GITLINK.to_bytes(4, "big")
_TREE_DEPTH = 1_024  # folders deep a cache-tree may go (as a commit's trees)
_TOP = b"\xff\xff\xff\xff"  # the cache-tree's key of the top folder
_INVALID = b"\xff\xff\xff\xff"  # a folder whose entries Git marked invalid (-1)


def _long_path() -> Refusal:
    return too_large(f"its index names a path longer than {PATH_BYTES} bytes")


def truncated() -> Refusal:
    return unsafe("its index is truncated or malformed")


def read_index(fd: int, hash_size: int = 20, bounds: Bounds | None = None) -> Index:
    """Every entry of the index file open as `fd`, in its order; `unsafe_repository` if it
    is malformed, out of Git's order, split or sparse, or names a path Git refuses;
    `repository_too_large` past a path of `PATH_BYTES` or past the call's memory account
    (`bounds`: what the entries hold is counted as they are read, its deadline asked)."""
    bounds = bounds or Bounds()
    reader = _Reader(fd, hash_size)
    if reader.end > INDEX_BYTES:
        raise too_large(f"its index is more than the {INDEX_BYTES} bytes these tools read")
    reader.need(_HEADER.size)
    signature, version, count = _HEADER.unpack_from(reader.data, 0)
    reader.at = _HEADER.size
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise unsafe("its index is not in a format these tools read")
    fixed = 40 + hash_size + 2
    least = _EMPTY_PATH + 1 + SLOT + fixed + 1  # what an entry holds at the least
    if count * least > bounds.memory - bounds.held:  # said at once, before any is read
        raise too_large(f"its index holds {count} entries, {count * least} bytes at the "
                        f"least; a tool call may hold {bounds.memory}")
    index = Index(hash_size)
    held = Held(bounds, f"its index ({count} entries)")
    previous = (b"", -1)
    for number in range(count):
        if number % 1024 == 0:
            bounds.check_time()
        at, data = reader.at, reader.data
        if len(data) - at < fixed + 2:  # (the window is checked here, not per call: fast)
            reader.need(fixed + 2)
            at, data = reader.at, reader.data
        head = data[at:at + fixed]
        flags = (head[-2] << 8) | head[-1]
        used = fixed
        extended = 0
        if flags & _EXTENDED:
            if version < 3:
                raise unsafe("its index is malformed")
            (extended,) = struct.unpack_from(">H", data, at + used)
            used += 2
        if version == 4:
            strip, used = _varint(reader, used)
            if strip > len(previous[0]):
                raise truncated()
            nul = reader.until_nul(used)
            if len(previous[0]) - strip + nul - used > PATH_BYTES:  # before it is built
                raise _long_path()
            name = previous[0][:len(previous[0]) - strip] + reader.data[reader.at + used:
                                                                         reader.at + nul]
            used = nul + 1
        else:
            length = flags & 0x0FFF
            nul = reader.until_nul(used + (length if length < 0x0FFF else 0))
            name = reader.data[reader.at + used:reader.at + nul]
            if length < 0x0FFF and len(name) != length:
                raise truncated()
            used = ((nul + 1 + 7) // 8) * 8  # 1-8 NULs of padding
            if len(reader.data) - reader.at < used:
                reader.need(used)
        stage = (flags >> 12) & 3
        if len(name) > PATH_BYTES:
            raise _long_path()
        held.take(sys.getsizeof(name) + SLOT + fixed + 1)  # its path, fields and flags
        if _maybe_bad(name) and _BAD_BYTES.search(name) is not None:
            raise unsafe("its index names a path Git itself refuses")
        if (name, stage) <= previous:
            raise unsafe("its index is not in Git's order")
        previous = (name, stage)
        if head[24:28] == _GITLINK:
            index.gitlinks.append(len(index.paths))
        index.paths.append(name)
        index._fixed += head
        index._extended.append((1 if extended & _INTENT_TO_ADD else 0)
                               | (2 if extended & _SKIP_WORKTREE else 0) | (4 if stage else 0)
                               | (8 if flags & _ASSUME_VALID else 0))
        reader.at += used
    _extensions(reader, index, held)
    return index


def _extensions(reader: _Reader, index: Index, held: Held) -> None:
    """Go past the extensions to the checksum, reading the cache-tree on the way. A split
    index keeps entries in another file, a sparse one collapses directories: neither is
    read here, so neither is mistaken for a complete list."""
    while reader.position < reader.end:
        reader.need(8)
        signature, size = struct.unpack_from(">4sI", reader.data, reader.at)
        if signature == b"link":
            raise unsafe("its index is split (core.splitIndex); these tools read only a "
                         "whole index")
        if signature == b"sdir":
            raise unsafe("its index is sparse (sparse-checkout); these tools read only "
                         "a whole index")
        reader.at += 8
        if signature == b"TREE":
            with held.bounds.holding(size, "its index's cache-tree"):
                reader.need(size)
                _cache_tree(reader.data, reader.at, reader.at + size, index, held)
            reader.at += size
        else:
            reader.skip(size)
    reader.checked()


def _cache_tree(data: bytes, at: int, stop: int, index: Index, held: Held) -> None:
    """The folders of Git's cache-tree, kept in `index` (`Index.cached_tree`), each
    counted on the call's account: depth first, each `name NUL entries SP subtrees LF`
    then its tree ID when `entries` is not -1, then its subtrees. A malformed one, or one
    larger than the index can need (more folders than entries, deeper or with longer
    paths than an entry may have), is left out whole: it only ever saves work."""
    trees = index._trees
    before = sys.getsizeof(trees)
    # (the parent folder's number, its path's length, its subtrees still to read)
    stack = [(-1, 0, 1)]
    taken = 0
    try:
        while at < stop:
            if len(stack) > _TREE_DEPTH or len(trees) > len(index.paths):
                raise ValueError
            while stack and stack[-1][2] == 0:
                stack.pop()
            if not stack:
                raise ValueError  # more than the tree says it holds
            parent, length, left = stack.pop()
            stack.append((parent, length, left - 1))
            nul = data.index(b"\x00", at, stop)
            end = data.index(b"\n", nul, stop)
            counts = data[nul + 1:end].split(b" ")
            entries, subtrees = int(counts[0]), int(counts[1])
            name = data[at:nul]
            length += (1 if length and name else 0) + len(name)
            if length > PATH_BYTES or entries < -1 or subtrees < 0:
                raise ValueError
            at = end + 1
            number = len(trees)
            value = number.to_bytes(4, "big") + (
                _INVALID if entries < 0 else entries.to_bytes(4, "big"))
            if entries >= 0:
                if at + index.hash_size > stop:
                    raise ValueError
                value += data[at:at + index.hash_size]
                at += index.hash_size
            key = _TOP if parent < 0 else parent.to_bytes(4, "big") + name
            if key in trees:
                raise ValueError
            trees[key] = value
            grown = sys.getsizeof(trees) - before
            held.take(sys.getsizeof(key) + sys.getsizeof(value) + grown)
            taken += sys.getsizeof(key) + sys.getsizeof(value) + grown
            before += grown
            stack.append((number, length, subtrees))
    except (ValueError, IndexError, OverflowError):
        trees.clear()
        held.give(taken)


def _varint(reader: _Reader, used: int) -> tuple[int, int]:
    """Git's offset varint (index version 4): value and the offset after it."""
    reader.need(used + 1)
    byte = reader.data[reader.at + used]
    used += 1
    value = byte & 0x7F
    while byte & 0x80:
        reader.need(used + 1)
        byte = reader.data[reader.at + used]
        used += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
        if value > 1 << 32:
            raise truncated()
    return value, used
