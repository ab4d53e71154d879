"""Hostile object stores for the W5/W7 tests: loose objects and packs written by hand, so
that what a repository declares (sizes, offsets, delta bases) can lie.

`loose(gitdir, header, chunks)` writes a loose object from a header and a stream of
chunks (compressed as they come, so a 512 MiB bomb costs no memory to make); `Pack`
builds a version-2 pack and its index entry by entry, deltas included; `delta(...)`
writes Git's delta format; `tree_of(...)` and `commit_of(...)` the objects around them.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path

KINDS = {"commit": 1, "tree": 2, "blob": 3, "tag": 4}
OFS_DELTA, REF_DELTA = 6, 7


def zeros(size: int, chunk: int = 1024 * 1024) -> Iterable[bytes]:
    while size > 0:
        yield b"\0" * min(chunk, size)
        size -= chunk


def compressed(chunks: Iterable[bytes]) -> bytes:
    """A zlib stream of `chunks`, compressed as they come."""
    squeeze = zlib.compressobj(9)
    out = [squeeze.compress(chunk) for chunk in chunks]
    out.append(squeeze.flush())
    return b"".join(out)


def loose(gitdir: Path, oid: str, header: bytes, chunks: Iterable[bytes]) -> None:
    """A loose object at `oid` (the name may lie: nothing checks it) whose stream is the
    header (`b"commit 123\\0"`) and then the chunks."""
    path = gitdir / "objects" / oid[:2] / oid[2:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(compressed([header, *chunks]))


def object_id(kind: str, data: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(data)}".encode() + b"\0" + data).hexdigest()


def write(gitdir: Path, kind: str, data: bytes) -> str:
    """An honest loose object; its ID."""
    oid = object_id(kind, data)
    loose(gitdir, oid, f"{kind} {len(data)}".encode() + b"\0", [data])
    return oid


def tree_of(entries: Iterable[tuple[str, str, str]]) -> bytes:
    """A tree's bytes from (mode, name, hex ID), in the order given."""
    return b"".join(f"{mode} {name}".encode() + b"\0" + bytes.fromhex(oid)
                    for mode, name, oid in entries)


def commit_of(tree: str, *parents: str, subject: str = "bomb", when: int = 1_700_000_000
              ) -> bytes:
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents),
             f"author a <a@example.invalid> {when} +0000",
             f"committer a <a@example.invalid> {when} +0000", "", subject, ""]
    return "\n".join(lines).encode()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def delta(base_size: int, result_size: int, ops: Iterable[bytes]) -> bytes:
    """Git's delta format: the sizes it declares, then its instructions."""
    return _varint(base_size) + _varint(result_size) + b"".join(ops)


def copy(offset: int, size: int) -> bytes:
    """A copy instruction (offset and size in full four and three bytes)."""
    return bytes([0x80 | 0x0F | 0x70]) + struct.pack("<I", offset) + struct.pack("<I", size)[:3]


def insert(data: bytes) -> bytes:
    assert 0 < len(data) < 128
    return bytes([len(data)]) + data


class Pack:
    """A version-2 pack built entry by entry; `save` writes it and its index."""

    def __init__(self) -> None:
        self.body = bytearray(b"PACK" + struct.pack(">II", 2, 0))
        self.names: list[tuple[bytes, int]] = []

    def _header(self, kind: int, size: int) -> bytes:
        byte = (kind << 4) | (size & 15)
        size >>= 4
        out = bytearray()
        while size:
            out.append(byte | 0x80)
            byte = size & 0x7F
            size >>= 7
        out.append(byte)
        return bytes(out)

    def raw(self, oid: str, kind: int, declared: int, stream: bytes, extra: bytes = b"") -> int:
        """An entry as given (its declared size may lie); its offset."""
        offset = len(self.body)
        self.body += self._header(kind, declared) + extra + stream
        self.names.append((bytes.fromhex(oid), offset))
        return offset

    def add(self, kind: str, data: bytes, oid: str | None = None) -> tuple[str, int]:
        oid = oid or object_id(kind, data)
        return oid, self.raw(oid, KINDS[kind], len(data), zlib.compress(data))

    def ofs_delta(self, oid: str, base_offset: int, data: bytes, declared: int | None = None
                  ) -> int:
        offset = len(self.body)
        back = offset - base_offset
        encoded = bytearray([back & 0x7F])
        back >>= 7
        while back:
            back -= 1
            encoded.insert(0, 0x80 | (back & 0x7F))
            back >>= 7
        return self.raw(oid, OFS_DELTA, len(data) if declared is None else declared,
                        zlib.compress(data), bytes(encoded))

    def ref_delta(self, oid: str, base: str, data: bytes) -> int:
        return self.raw(oid, REF_DELTA, len(data), zlib.compress(data), bytes.fromhex(base))

    def save(self, gitdir: Path, name: str = "bomb", offsets: dict[str, int] | None = None
             ) -> None:
        """The pack and its index; `offsets` overrides where the index says objects are."""
        body = bytes(self.body[:8]) + struct.pack(">I", len(self.names)) + bytes(self.body[12:])
        body += hashlib.sha1(body).digest()
        folder = gitdir / "objects" / "pack"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"pack-{name}.pack").write_bytes(body)
        names = sorted(self.names)
        fanout = [0] * 256
        for oid, _ in names:
            fanout[oid[0]] += 1
        for i in range(1, 256):
            fanout[i] += fanout[i - 1]
        overrides = {bytes.fromhex(k): v for k, v in (offsets or {}).items()}
        idx = b"\xfftOc" + struct.pack(">I", 2) + struct.pack(">256I", *fanout)
        idx += b"".join(oid for oid, _ in names)
        idx += b"\0\0\0\0" * len(names)
        idx += b"".join(struct.pack(">I", overrides.get(oid, offset) & 0x7FFFFFFF)
                        for oid, offset in names)
        idx += body[-20:]
        idx += hashlib.sha1(idx).digest()
        (folder / f"pack-{name}.idx").write_bytes(idx)
