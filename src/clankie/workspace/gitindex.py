"""Git's index file, read by us (SPEC W7): its entries, their stat data, and Git's path rules.

Owns parsing the index format (versions 2, 3 and 4, as `gitformat-index` describes it) from
bytes into entries, and the check that every entry's path obeys Git's own rules (not empty,
not absolute, no empty, `.`, `..` or `.git` component in any case). Git does not re-check
these when it reads an index, so a hand-made index could name `../outside/secret`: such an
index makes the Git tools refuse `unsafe_repository`. Pure: bytes in, values out.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

MODE_GITLINK = 0o160000
MODE_SYMLINK = 0o120000
_HEADER = struct.Struct(">4sII")
_EXTENDED = 0x4000
_INTENT_TO_ADD = 0x2000  # in the extended flags
_SKIP_WORKTREE = 0x4000  # in the extended flags
_NS = 1_000_000_000


class IndexError_(Exception):
    """The index cannot be read or breaks Git's path rules; says why."""


@dataclass(frozen=True, slots=True)
class IndexEntry:
    path: str  # relative to the top of the work tree, '/'-separated
    mode: int
    oid: str  # hex
    stage: int  # 0, or 1-3 in a conflict
    ctime_ns: int
    mtime_ns: int
    ino: int
    uid: int
    gid: int
    size: int  # the file's size, truncated to 32 bits as Git stores it
    intent_to_add: bool = False
    skip_worktree: bool = False


# An empty, `.`, `..` or `.git` component (any case) anywhere, or an empty path.
_BAD_COMPONENT = re.compile(r"(?:^|/)(?:\.|\.\.|\.git)?(?:/|$)", re.IGNORECASE)


def path_breaks_git_rules(path: str) -> bool:
    """Whether Git itself would refuse this path in an index or a tree."""
    return "\x00" in path or _BAD_COMPONENT.search(path) is not None


def parse_index(data: bytes, hash_size: int = 20) -> list[IndexEntry]:
    """Every entry of an index file, in the file's order; `IndexError_` if it is malformed
    or any entry's path breaks Git's rules."""
    try:
        signature, version, count = _HEADER.unpack_from(data, 0)
    except struct.error:
        raise IndexError_("the index is truncated") from None
    if signature != b"DIRC" or version not in (2, 3, 4):
        raise IndexError_(f"the index is not in a format these tools read (version {version})")
    entries: list[IndexEntry] = []
    head = struct.Struct(f">10I{hash_size}sH")  # stat data, object ID, flags
    offset = _HEADER.size
    previous = b""
    end = len(data) - hash_size
    try:
        for _ in range(count):
            start = offset
            *fields, raw_oid, flags = head.unpack_from(data, offset)
            offset += head.size
            oid = raw_oid.hex()
            extended = 0
            if flags & _EXTENDED:
                if version < 3:
                    raise IndexError_("an extended entry in a version 2 index")
                (extended,) = struct.unpack_from(">H", data, offset)
                offset += 2
            if version == 4:
                strip, offset = _varint(data, offset)
                if strip > len(previous):
                    raise IndexError_("an entry's path refers past the previous one")
                nul = data.index(b"\x00", offset)
                name = previous[:len(previous) - strip] + data[offset:nul]
                offset = nul + 1
            else:
                length = flags & 0x0FFF
                nul = data.index(b"\x00", offset + length if length < 0x0FFF else offset)
                name = data[offset:nul]
                if length < 0x0FFF and len(name) != length:
                    raise IndexError_("an entry's path length does not match its name")
                offset = start + ((nul + 1 - start + 7) // 8) * 8  # 1-8 NULs of padding
            if offset > end:
                raise IndexError_("the index is truncated")
            previous = name
            path = name.decode("utf-8", "surrogateescape")
            if path_breaks_git_rules(path):
                raise IndexError_(f"the index names a path Git itself refuses: {path[:80]!r}")
            entries.append(IndexEntry(
                path, fields[6], oid, (flags >> 12) & 3, fields[0] * _NS + fields[1],
                fields[2] * _NS + fields[3], fields[5], fields[7], fields[8], fields[9],
                bool(extended & _INTENT_TO_ADD), bool(extended & _SKIP_WORKTREE)))
    except (struct.error, ValueError, IndexError):  # IndexError: a varint cut short
        raise IndexError_("the index is truncated or malformed") from None
    _refuse_split_index(data, offset, end)
    return entries


def _refuse_split_index(data: bytes, offset: int, end: int) -> None:
    """A split index keeps entries in another file, a sparse one collapses directories:
    neither is read here, so neither is mistaken for a complete list."""
    while offset + 8 <= end:
        signature, size = struct.unpack_from(">4sI", data, offset)
        if signature == b"link":
            raise IndexError_("the index is split (core.splitIndex); these tools read only a "
                              "whole index")
        if signature == b"sdir":
            raise IndexError_("the index is sparse (sparse-checkout); these tools read only "
                              "a whole index")
        offset += 8 + size


def _varint(data: bytes, offset: int) -> tuple[int, int]:
    """Git's offset varint (index version 4): value and the offset after it."""
    byte = data[offset]
    offset += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[offset]
        offset += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, offset
