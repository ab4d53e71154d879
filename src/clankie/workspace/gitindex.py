"""Git's index file, read by us (SPEC W5, W7): its entries, their stat data, Git's path rules.

Owns parsing the index format (versions 2, 3 and 4, as `gitformat-index` describes it),
read as a stream in chunks, into a compact `Index`: each entry's path as bytes, in the
file's order, and its fixed fields packed in one byte array (unpacked only for the entry
asked for), so an index of many entries costs about a hundred bytes an entry, counted as
it is built (`INDEX_ENTRIES`). Every path must obey Git's own rules (not empty, not
absolute, no empty, `.`, `..` or `.git` component in any case) and the entries must be in
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from .confine import Refusal
from .gitfiles import READ, pread_exactly, too_large, unsafe

MODE_GITLINK = 0o160000
MODE_SYMLINK = 0o120000
INDEX_ENTRIES = 250_000  # about 40 MiB held: W5's 64 MiB with room for the rest of a call
INDEX_BYTES = 128 * 1024 * 1024  # the most of an index file read (and hashed) by one call
INDEX_HELD = 40 * 1024 * 1024  # what its entries may hold in memory, counted as they are read
ENTRY_BYTES = 110  # an entry's memory besides its path's bytes (measured: list slot, bytes
# object header, fixed fields)
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
        # Git's cache-tree (the TREE extension), where it is valid: a folder ('' for the
        # top, else 'a/b') -> (how many entries it covers, the tree ID they make)
        self.trees: dict[bytes, tuple[int, bytes]] = {}

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
TREE_BYTES = 16 * 1024 * 1024  # a cache-tree larger than this is not read (it only saves work)
_TREE_DEPTH = 1_024  # folders deep a cache-tree may go (as a commit's trees)
_TREE_FOLDERS = 65_536  # folders it may name (about 10 MiB; a repository of 100,000 files
# has a few thousand)


def _long_path() -> Refusal:
    return too_large(f"its index names a path longer than {PATH_BYTES} bytes")


def truncated() -> Refusal:
    return unsafe("its index is truncated or malformed")


def read_index(fd: int, hash_size: int = 20,
               check_time: Callable[[], None] = lambda: None) -> Index:
    """Every entry of the index file open as `fd`, in its order; `unsafe_repository` if it
    is malformed, out of Git's order, split or sparse, or names a path Git refuses;
    `repository_too_large` past `INDEX_ENTRIES` entries, a path past `PATH_BYTES` or
    `INDEX_HELD` bytes held; `check_time` asked as entries are read."""
    reader = _Reader(fd, hash_size)
    if reader.end > INDEX_BYTES:
        raise too_large(f"its index is more than the {INDEX_BYTES} bytes these tools read")
    reader.need(_HEADER.size)
    signature, version, count = _HEADER.unpack_from(reader.data, 0)
    reader.at = _HEADER.size
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise unsafe("its index is not in a format these tools read")
    if count > INDEX_ENTRIES:
        raise too_large(f"its index holds {count} entries, more than the {INDEX_ENTRIES} "
                        "these tools hold")
    index = Index(hash_size)
    fixed = 40 + hash_size + 2
    previous = (b"", -1)
    held = 0
    for number in range(count):
        if number % 1024 == 0:
            check_time()
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
        held += len(name) + ENTRY_BYTES
        if held > INDEX_HELD:
            raise too_large(f"its index needs more than the {INDEX_HELD} bytes of memory these "
                            f"tools give it ({number + 1} of {count} entries read)")
        if _BAD_BYTES.search(name) is not None:
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
    _extensions(reader, index)
    return index


def _extensions(reader: _Reader, index: Index) -> None:
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
        if signature == b"TREE" and size <= TREE_BYTES:
            reader.need(size)
            index.trees = _cache_tree(reader.data[reader.at:reader.at + size], index)
            reader.at += size
        else:
            reader.skip(size)
    reader.checked()


def _cache_tree(data: bytes, index: Index) -> dict[bytes, tuple[int, bytes]]:
    """The valid folders of Git's cache-tree: depth first, each `name NUL entries SP
    subtrees LF` then its tree ID when `entries` is not -1, then its subtrees. A
    malformed one, or one larger than the index can need (more folders than entries,
    deeper or with longer paths than an entry may have), is left out whole: it only ever
    saves work, and it costs no more than the index itself."""
    trees: dict[bytes, tuple[int, bytes]] = {}
    at, stack = 0, [(b"", 1)]  # (the parent folder's path, its subtrees still to read)
    try:
        while at < len(data):
            if len(stack) > _TREE_DEPTH or len(trees) > min(len(index.paths), _TREE_FOLDERS):
                return {}
            while stack and stack[-1][1] == 0:
                stack.pop()
            if not stack:
                return {}  # more than the tree says it holds
            parent, left = stack.pop()
            stack.append((parent, left - 1))
            nul = data.index(b"\x00", at)
            end = data.index(b"\n", nul)
            counts = data[nul + 1:end].split(b" ")
            entries, subtrees = int(counts[0]), int(counts[1])
            name = data[at:nul]
            path = parent + b"/" + name if parent and name else parent or name
            if len(path) > PATH_BYTES:
                return {}
            at = end + 1
            if entries >= 0:
                trees[path] = (entries, data[at:at + index.hash_size])
                at += index.hash_size
            stack.append((path, subtrees))
    except (ValueError, IndexError):
        return {}
    return trees


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
