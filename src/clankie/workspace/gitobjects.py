"""A repository's objects, read by us from its own store (SPEC W5, W7): loose and packed.

Owns finding an object by its ID (or the IDs a hex prefix names) and reading its type,
size and bytes: loose objects (`objects/xx/...`, one zlib stream each) and packs (a
`pack-*.idx` looked up with `pread`, its `.pack` read from an offset), with deltas applied
(`OFS_DELTA`, `REF_DELTA`). Every file is opened through the git directory's confined
opener (`gitfiles.GitDir`); nothing any file names is ever followed: no alternates, no
`commondir`, no replace refs, no grafts. An object missing from this store is missing.

Bounds, checked before anything is kept (W5): an object's declared size, and what its
stream inflates to, at most `OBJECT_BYTES` (`repository_too_large`); the compressed input
read for one object bounded by its size; a delta chain at most `DELTA_CHAIN` long; every
offset inside its pack (`unsafe_repository`); the call's deadline checked as bytes stream
in. Memory is counted on the call's account (`bounds.Bounds`) before it is taken: the
object being read (by its declared size, before a byte is inflated; with a delta, its base,
the delta and the result while all three are held), until the next object is read (a
caller that keeps one longer counts it itself), and the recently read objects the store
keeps (a cache that gives way when the account has no room).

No byte of a malformed file is ever quoted: refusals are fixed sentences. Reads only.
"""

from __future__ import annotations

import itertools
import os
import struct
import sys
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

from clankie.core.vocabulary import WorkspaceCode

from .bounds import SLOT, Bounds, Refusal
from .gitfiles import GitDir, chunks, pread_exactly, too_large, unsafe

OBJECT_BYTES = 16 * 1024 * 1024
DELTA_CHAIN = 50
PACKS = 1_000  # pack files looked at (a repository gathers them into a few)
OPEN_PACKS = 32  # packs whose descriptors are open at once (two each: 64 of the usual 1,024)
CACHE_BYTES = 8 * 1024 * 1024  # recently read objects kept (delta bases, trees, commits)
CACHE_ONE = 512 * 1024  # the largest object kept there
PREFIX_CANDIDATES = 16  # objects a short hex prefix may name before it is just ambiguous
_CACHED = 256  # what keeping an object in the cache holds besides its bytes: its key, tuple
# and slot (a loose object's key is its 20-byte ID, a packed one's a tuple of two numbers)
_INPUT_SLACK = 64 * 1024  # compressed bytes an object may take beyond its inflated size
_PIECE = 1024 * 1024  # the most inflated in one step
KINDS = {1: "commit", 2: "tree", 3: "blob", 4: "tag"}
_OFS_DELTA, _REF_DELTA = 6, 7
Data = bytes | bytearray


def corrupt() -> Refusal:
    return unsafe("an object in it is malformed")


@dataclass(frozen=True, slots=True)
class Info:
    kind: str  # commit, tree, blob, tag
    size: int


class ObjectStore:
    """The objects of one git directory, for one tool call. Close it after use."""

    def __init__(self, gitdir: GitDir, hash_size: int, bounds: Bounds) -> None:
        self.gitdir = gitdir
        self.hash_size = hash_size
        self.bounds = bounds
        self._packs: list[_Pack] | None = None
        self._opened = _Open()
        self._found_in: _Pack | None = None  # where the last object was found: looked first
        self._cache: OrderedDict[tuple[int, int] | bytes, tuple[str, Data]] = OrderedDict()
        self._cached = 0  # bytes of the cache, counted on the account
        self._last = 0  # bytes of the object being read, or read last, counted likewise
        self._packs_held = 0  # bytes of the packs' tables (`_Pack.held`), counted likewise

    def close(self) -> None:
        for pack in self._packs or ():
            pack.close()
        self._packs = []
        self.bounds.give(self._packs_held)
        self._packs_held = 0
        self._let_go()
        self.bounds.give(self._cached)
        self._cached = 0
        self._cache.clear()

    def _let_go(self) -> None:
        """The object read last is no longer counted: its reader has let it go (or
        counts it itself)."""
        self.bounds.give(self._last)
        self._last = 0

    def _reading(self, size: int) -> None:
        """Count an object about to be read, by its declared size, before it is: its
        buffer grows as it is inflated, and CPython's `bytearray` then holds up to an
        eighth more (`PyByteArray_Resize`)."""
        if size <= OBJECT_BYTES:  # (larger is refused by its own bound, with its size)
            held = size + (size >> 3)
            self.bounds.take(held, f"an object of {size} bytes")
            self._last += held

    def __enter__(self) -> ObjectStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def check_time(self) -> None:
        self.bounds.check_time()

    # --- what callers ask ------------------------------------------------------------------

    def info(self, oid: bytes) -> Info | None:
        """An object's type and size, without reading all of it; None if it is missing."""
        found = self._locate(oid)
        if found is None:
            return None
        if isinstance(found, _Loose):
            found.close()
            return found.info
        pack, offset = found
        return self._packed_info(pack, offset)

    def read(self, oid: bytes, limit: int | None = None) -> tuple[str, Data] | None:
        """An object's type and bytes; None if it is missing, or larger than `limit` when
        one is given; `repository_too_large` past `OBJECT_BYTES`."""
        cached = self._cache.get(oid)
        if cached is not None:
            self._cache.move_to_end(oid)
            return cached
        found = self._locate(oid)
        if found is None:
            return None
        self._let_go()
        if isinstance(found, _Loose):
            if limit is not None and found.info.size > limit:
                found.close()
                return None
            try:
                self._reading(found.info.size)
            except BaseException:
                found.close()
                raise
            loose = found.info.kind, found.rest(self)
            self._keep(oid, *loose)
            return loose
        if limit is not None and self._packed_info(*found).size > limit:
            return None
        packed = self._unpack(*found)
        self._keep(oid, *packed)  # found again by its ID without looking in every pack
        return packed

    def expand(self, prefix: str) -> list[bytes]:
        """The IDs of the objects whose hex ID starts with `prefix` (4 or more lowercase hex
        digits): at most `PREFIX_CANDIDATES` + 1 of them, in no particular order."""
        found: set[bytes] = set()
        rest = prefix[2:]
        for looked, name in enumerate(self.gitdir.each_name(f"objects/{prefix[:2]}", 1 << 20)):
            if looked % 1024 == 0:
                self.check_time()
            if len(name) == 2 * self.hash_size - 2 and name.startswith(rest) and _hex(name):
                found.add(bytes.fromhex(prefix[:2] + name))
                if len(found) > PREFIX_CANDIDATES:
                    return list(found)
        for pack in self._all_packs():
            found.update(pack.with_prefix(prefix, PREFIX_CANDIDATES + 1 - len(found)))
            if len(found) > PREFIX_CANDIDATES:
                break
        return list(found)

    # --- where an object is ---------------------------------------------------------------

    def _locate(self, oid: bytes) -> _Loose | tuple[_Pack, int] | None:
        if len(oid) != self.hash_size:
            return None
        last = self._found_in
        packs = self._all_packs()
        for n, pack in enumerate(itertools.chain([last] if last is not None else [], packs)):
            if (n and pack is last) or not pack.holds(oid[0]):
                continue  # (looked at first already), or its fan-out says it holds none
            offset = pack.find(oid)
            if offset is not None:
                self._found_in = pack
                return pack, offset
        return self._loose(oid)

    def _loose(self, oid: bytes) -> _Loose | None:
        hexed = oid.hex()
        fd = self.gitdir.open_file(f"objects/{hexed[:2]}/{hexed[2:]}")
        if fd is None:
            return None
        try:
            return _Loose.open(fd, self)
        except BaseException:
            os.close(fd)
            raise

    def _all_packs(self) -> list[_Pack]:
        if self._packs is None:
            self._packs = []
            names = set(self.gitdir.names("objects/pack", 4 * PACKS))
            for name in sorted(names):
                if not (name.startswith("pack-") and name.endswith(".idx")):
                    continue
                if name[:-4] + ".pack" not in names:
                    continue
                if len(self._packs) == PACKS:
                    raise too_large(f"it has more than {PACKS} pack files")
                self.check_time()
                pack = _Pack.open(self.gitdir, f"objects/pack/{name[:-4]}", self.hash_size,
                                  len(self._packs), self._opened)
                if pack is not None:
                    self._packs.append(pack)
                    held = pack.held()  # kept for the call, its descriptors open or not
                    try:
                        self.bounds.take(held, f"the tables of {len(self._packs)} packs")
                    except BaseException:
                        pack.close()
                        self._packs.pop()
                        raise
                    self._packs_held += held
        return self._packs

    # --- packed objects -------------------------------------------------------------------

    def _packed_info(self, pack: _Pack, offset: int) -> Info:
        """The type at the chain's end and the size the top delta declares."""
        head = pack.header(offset)
        if head.kind in KINDS:
            return Info(KINDS[head.kind], head.size)
        size = _delta_sizes(self._inflate_some(pack, head, 32))[1]
        for _ in range(DELTA_CHAIN + 1):
            base = self._base(pack, head)
            if isinstance(base, _Loose):
                kind = base.info.kind
                base.close()
                return Info(kind, size)
            pack, offset = base
            head = pack.header(offset)
            if head.kind in KINDS:
                return Info(KINDS[head.kind], size)
        raise too_large(f"a delta chain is longer than {DELTA_CHAIN}")

    def _base(self, pack: _Pack, head: _Header) -> _Loose | tuple[_Pack, int]:
        if head.kind == _OFS_DELTA:
            return pack, head.base_offset
        found = self._locate(head.base_oid)
        if found is None:
            raise Refusal(WorkspaceCode.NOT_FOUND,
                          "an object the repository needs is missing from its "
                          "own store")
        return found

    def _unpack(self, pack: _Pack, offset: int) -> tuple[str, Data]:
        chain: list[tuple[_Pack, _Header]] = []
        while True:
            cached = self._cache.get((pack.number, offset))
            if cached is not None:
                kind, data = cached
                break
            head = pack.header(offset)
            if head.kind in KINDS:
                if head.size > OBJECT_BYTES:
                    raise too_large(f"an object is over {OBJECT_BYTES} bytes")
                self._reading(head.size)
                kind, data = KINDS[head.kind], self._inflate(pack, head, head.size)
                self._keep((pack.number, offset), kind, data)
                break
            if len(chain) == DELTA_CHAIN:
                raise too_large(f"a delta chain is longer than {DELTA_CHAIN}")
            chain.append((pack, head))
            base = self._base(pack, head)
            if isinstance(base, _Loose):
                try:
                    self._reading(base.info.size)
                except BaseException:
                    base.close()
                    raise
                kind, data = base.info.kind, base.rest(self)
                break
            pack, offset = base
        if chain and not self._last:  # a cached base: counted while the chain is applied
            self._reading(len(data))
        for delta_pack, head in reversed(chain):
            if head.size > OBJECT_BYTES:
                raise too_large(f"a delta is over {OBJECT_BYTES} bytes")
            with self.bounds.holding(head.size, f"a delta of {head.size} bytes"):
                instructions = self._inflate(delta_pack, head, head.size)
                size = _delta_sizes(instructions)[1]
                self._reading(size)  # the result, while its base is still held
                data = apply_delta(data, instructions, self)
            held = size + (size >> 3)
            self.bounds.give(self._last - held)  # the base is let go
            self._last = held
            self._keep((delta_pack.number, head.offset), kind, data)
        return kind, data

    def _inflate(self, pack: _Pack, head: _Header, size: int) -> bytearray:
        # a small object's stream is usually shorter than the object: read about that much
        return inflate(chunks(pack.fd, head.data, size + 64), size, self, exact=True)

    def _inflate_some(self, pack: _Pack, head: _Header, size: int) -> bytearray:
        return inflate(chunks(pack.fd, head.data, 256), min(size, head.size), self,
                       exact=False)

    def _keep(self, key: tuple[int, int] | bytes, kind: str, data: Data) -> None:
        """Keep a recently read object (counted on the account), making room by letting
        the oldest go; not kept when the account has no room for it."""
        size = len(data) + _CACHED
        if len(data) > CACHE_ONE or key in self._cache:
            return
        while self._cache and (self._cached + size > CACHE_BYTES
                               or not self.bounds.room(size)):
            _, (_, old) = self._cache.popitem(last=False)
            self.bounds.give(len(old) + _CACHED)
            self._cached -= len(old) + _CACHED
        if self._cached + size > CACHE_BYTES or not self.bounds.room(size):
            return
        self.bounds.take(size, "the objects kept")
        self._cache[key] = (kind, data)
        self._cached += size


@dataclass(frozen=True, slots=True)
class _Header:
    offset: int
    kind: int
    size: int  # the inflated size: the object's, or the delta's
    data: int  # where the zlib stream starts
    base_offset: int = 0  # OFS_DELTA
    base_oid: bytes = b""  # REF_DELTA


class _Loose:
    """A loose object opened and its header read; `rest` reads the remaining bytes."""

    def __init__(self, fd: int, info: Info, inflater: _Inflater, first: bytes) -> None:
        self.fd, self.info, self.inflater, self.first = fd, info, inflater, first

    @classmethod
    def open(cls, fd: int, store: ObjectStore) -> _Loose:
        inflater = _Inflater(chunks(fd, 0, os.fstat(fd).st_size), store, OBJECT_BYTES + 64)
        head = inflater.take(64)
        nul = head.find(b"\x00")
        kind, _, size = bytes(head[:max(nul, 0)]).partition(b" ")
        if nul < 0 or kind.decode("ascii", "replace") not in KINDS.values() \
                or not size.isdigit() or len(size) > 12:
            raise corrupt()
        info = Info(kind.decode("ascii"), int(size))
        first = bytes(head[nul + 1:])
        if len(first) > info.size:
            raise corrupt()
        size_read = min(info.size, OBJECT_BYTES)
        inflater.max_input = size_read + (size_read >> 6) + _INPUT_SLACK
        return cls(fd, info, inflater, first)

    def rest(self, store: ObjectStore) -> bytearray:
        try:
            if self.info.size > OBJECT_BYTES:  # declared: refused before a byte is inflated
                raise too_large(f"an object is over {OBJECT_BYTES} bytes")
            data = self.inflater.take(self.info.size - len(self.first) + 1,
                                      bytearray(self.first))
            if len(data) != self.info.size or not self.inflater.finished():
                raise corrupt()
            return data
        finally:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class _Inflater:
    """One zlib stream inflated from a source of chunks, output taken in bounded pieces,
    its compressed input bounded and the deadline checked as it streams."""

    def __init__(self, source: Iterator[bytes], store: ObjectStore, max_input: int) -> None:
        self.source, self.store, self.max_input = source, store, max_input
        self.inflate = zlib.decompressobj()
        self.used = 0

    def take(self, size: int, out: bytearray | None = None) -> bytearray:
        """Up to `size` more bytes (fewer only where the stream ends), after `out`'s; each
        piece inflated at most `_PIECE` (never a second copy of the whole object)."""
        out = bytearray() if out is None else out
        size += len(out)
        try:
            while len(out) < size and not self.inflate.eof:
                pending = self.inflate.unconsumed_tail
                if not pending:  # what it inflated, but held back at the last piece's end
                    more = self.inflate.decompress(b"", min(size - len(out), _PIECE))
                    if more:
                        out += more
                        continue
                    pending = next(self.source, b"")
                    if not pending:
                        raise corrupt()  # the file ends inside the stream
                    self.used += len(pending)
                    if self.used > self.max_input:
                        raise corrupt()
                    self.store.check_time()
                out += self.inflate.decompress(pending, min(size - len(out), _PIECE))
        except zlib.error:
            raise corrupt() from None
        return out

    def finished(self) -> bool:
        """Whether the stream ends here (no byte more to inflate)."""
        if not self.inflate.eof and self.take(1):
            return False
        return self.inflate.eof  # (what follows the stream in a pack is the next object)


def inflate(source: Iterator[bytes], size: int, store: ObjectStore, *, exact: bool
            ) -> bytearray:
    """A stream's first `size` bytes; with `exact`, refused unless it holds exactly that."""
    inflater = _Inflater(source, store, size + (size >> 6) + _INPUT_SLACK)
    data = inflater.take(size + 1 if exact else size)
    if exact and (len(data) != size or not inflater.finished()):
        raise corrupt()
    return data


class _Open:
    """The packs whose two descriptors are open, least recently used first: at most
    `OPEN_PACKS` at once, whatever the number of packs (a repository of 701 packs must not
    run the process out of descriptors)."""

    def __init__(self) -> None:
        self.packs: OrderedDict[int, _Pack] = OrderedDict()

    def use(self, pack: _Pack) -> None:
        self.packs[pack.number] = pack
        self.packs.move_to_end(pack.number)
        while len(self.packs) > OPEN_PACKS:
            self.packs.popitem(last=False)[1].close()


class _Pack:
    """A pack and its version-2 index; objects looked up with `pread`. Its descriptors are
    opened when first needed and may be closed to make room (`_Open`); opened again, each
    file must be the very one first opened."""

    def __init__(self, gitdir: GitDir, stem: str, opened: _Open, number: int,
                 hash_size: int, count: int, fanout: tuple[int, ...],
                 ids: tuple[tuple[int, int], tuple[int, int]], pack_size: int) -> None:
        self.gitdir, self.stem, self.opened, self.number = gitdir, stem, opened, number
        self.hash_size, self.count, self.fanout = hash_size, count, fanout
        self.ids, self.pack_size = ids, pack_size
        self._fds: tuple[int, int] | None = None
        self._names = 8 + 1024
        self._offsets = self._names + count * (hash_size + 4)
        self._large = self._offsets + count * 4

    @property
    def idx(self) -> int:
        return self._open()[0]

    @property
    def fd(self) -> int:
        return self._open()[1]

    def _open(self) -> tuple[int, int]:
        if self._fds is None:
            fds = _pair(self.gitdir, self.stem)
            if fds is None or _ids(fds) != self.ids:
                for fd in fds or ():
                    os.close(fd)
                raise unsafe("a pack changed while it was read")
            self._fds = fds
        self.opened.use(self)
        return self._fds

    def held(self) -> int:
        """What it keeps while the call runs, as CPython measures it: above all its fan-out
        table (256 numbers), looked at for every lookup without a read."""
        return (sys.getsizeof(self) + sys.getsizeof(self.__dict__) + SLOT
                + sys.getsizeof(self.fanout)
                + sum(sys.getsizeof(n) for n in self.fanout if n > 256)  # (smaller: shared)
                + sys.getsizeof(self.stem) + 3 * sys.getsizeof(self.ids))

    def holds(self, first: int) -> bool:
        """Whether it may hold an object whose ID begins with this byte (no file read)."""
        return self._bounds(first)[0] < self._bounds(first)[1]

    @classmethod
    def open(cls, gitdir: GitDir, stem: str, hash_size: int, number: int, opened: _Open
             ) -> _Pack | None:
        fds = _pair(gitdir, stem)
        if fds is None:
            return None  # removed meanwhile (a repack)
        idx, pack = fds
        try:
            head = pread_exactly(idx, 8 + 1024, 0)
            if len(head) != 8 + 1024 or head[:8] != b"\xfftOc\x00\x00\x00\x02":
                raise unsafe("a pack index is not in a format these tools read")
            fanout = struct.unpack(">256I", head[8:])
            count = fanout[255]
            idx_size, pack_size = os.fstat(idx).st_size, os.fstat(pack).st_size
            least = 8 + 1024 + count * (hash_size + 8) + 2 * hash_size
            if any(a > b for a, b in itertools.pairwise(fanout)) \
                    or idx_size < least or idx_size > least + count * 8:
                raise unsafe("a pack index is malformed")
            if pread_exactly(pack, 12, 0)[:8] not in (b"PACK\x00\x00\x00\x02",
                                                      b"PACK\x00\x00\x00\x03"):
                raise unsafe("a pack is not in a format these tools read")
            found = cls(gitdir, stem, opened, number, hash_size, count, fanout, _ids(fds),
                        pack_size)
        except BaseException:
            os.close(idx)
            os.close(pack)
            raise
        found._fds = fds
        opened.use(found)
        return found

    def close(self) -> None:
        if self._fds is not None:
            os.close(self._fds[0])
            os.close(self._fds[1])
            self._fds = None

    def _name(self, i: int) -> bytes:
        return pread_exactly(self.idx, self.hash_size, self._names + i * self.hash_size)

    def _bounds(self, first: int) -> tuple[int, int]:
        return (self.fanout[first - 1] if first else 0), self.fanout[first]

    def _lower(self, key: bytes) -> int:
        """The position of the first name >= `key` (bounded by the fan-out table)."""
        lo, hi = self._bounds(key[0])
        while lo < hi:
            mid = (lo + hi) // 2
            if self._name(mid) < key:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def find(self, oid: bytes) -> int | None:
        """The object's offset in the pack, or None if the pack does not hold it."""
        i = self._lower(oid)
        if i >= self.fanout[oid[0]] or self._name(i) != oid:
            return None
        return self._offset(i)

    def with_prefix(self, prefix: str, most: int) -> list[bytes]:
        low = bytes.fromhex(prefix + "0" * (len(prefix) % 2))
        i = self._lower(low)
        found: list[bytes] = []
        while i < self.count and len(found) < most:
            name = self._name(i)
            if not name.hex().startswith(prefix):
                break
            found.append(name)
            i += 1
        return found

    def _offset(self, i: int) -> int:
        offset = int.from_bytes(pread_exactly(self.idx, 4, self._offsets + i * 4), "big")
        if offset & 0x80000000:
            where = self._large + (offset & 0x7FFFFFFF) * 8
            large = pread_exactly(self.idx, 8, where)
            if len(large) != 8:
                raise unsafe("a pack index is malformed")
            offset = int.from_bytes(large, "big")
        self._check(offset)
        return offset

    def _check(self, offset: int) -> None:
        if not 12 <= offset < self.pack_size - self.hash_size:
            raise unsafe("a pack names an offset outside itself")

    def header(self, offset: int) -> _Header:
        """The object header at `offset`: its type, size and where its data starts."""
        self._check(offset)
        raw = pread_exactly(self.fd, 32 + self.hash_size, offset)
        try:
            byte = raw[0]
            kind, size, shift, at = (byte >> 4) & 7, byte & 15, 4, 1
            while byte & 0x80:
                byte = raw[at]
                size |= (byte & 0x7F) << shift
                shift, at = shift + 7, at + 1
                if shift > 70:
                    raise corrupt()
            if kind in KINDS:
                return _Header(offset, kind, size, offset + at)
            if kind == _OFS_DELTA:
                byte = raw[at]
                back = byte & 0x7F
                at += 1
                while byte & 0x80:
                    byte = raw[at]
                    back = ((back + 1) << 7) | (byte & 0x7F)
                    at += 1
                    if at > 16:
                        raise corrupt()
                base = offset - back
                if back <= 0 or base < 12:
                    raise unsafe("a pack names an offset outside itself")
                return _Header(offset, kind, size, offset + at, base_offset=base)
            if kind == _REF_DELTA:
                base_oid = raw[at:at + self.hash_size]
                if len(base_oid) != self.hash_size:
                    raise corrupt()
                return _Header(offset, kind, size, offset + at + self.hash_size,
                               base_oid=base_oid)
        except IndexError:
            raise corrupt() from None
        raise corrupt()


def _pair(gitdir: GitDir, stem: str) -> tuple[int, int] | None:
    """A pack's index and pack files, opened; None when either is gone."""
    idx = gitdir.open_file(stem + ".idx")
    if idx is None:
        return None
    try:
        pack = gitdir.open_file(stem + ".pack")
    except BaseException:
        os.close(idx)
        raise
    if pack is None:
        os.close(idx)
        return None
    return idx, pack


def _ids(fds: tuple[int, int]) -> tuple[tuple[int, int], tuple[int, int]]:
    first, second = os.fstat(fds[0]), os.fstat(fds[1])
    return (first.st_dev, first.st_ino), (second.st_dev, second.st_ino)


def _delta_sizes(delta: Data) -> tuple[int, int, int]:
    """A delta's declared base size and result size, and where its instructions start."""
    base, at = _varint(delta, 0)
    result, at = _varint(delta, at)
    return base, result, at


def _varint(data: Data, at: int) -> tuple[int, int]:
    value = shift = 0
    try:
        while True:
            byte = data[at]
            at += 1
            value |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return value, at
            if shift > 63:
                raise corrupt()
    except IndexError:
        raise corrupt() from None


def apply_delta(base: Data, delta: Data, store: ObjectStore) -> bytearray:
    """Git's delta format applied to `base`: copy and insert instructions, every one
    checked against both sides' sizes; the result at most `OBJECT_BYTES`."""
    base_size, size, at = _delta_sizes(delta)
    if base_size != len(base):
        raise corrupt()
    if size > OBJECT_BYTES:
        raise too_large(f"an object is over {OBJECT_BYTES} bytes")
    out = bytearray(size)  # filled in place: never grown, so never copied while growing
    written = 0
    source = memoryview(base)
    end = len(delta)
    steps = 0
    try:
        while at < end:
            op = delta[at]
            at += 1
            if op & 0x80:
                offset = length = 0
                for bit, shift in ((1, 0), (2, 8), (4, 16), (8, 24)):
                    if op & bit:
                        offset |= delta[at] << shift
                        at += 1
                for bit, shift in ((0x10, 0), (0x20, 8), (0x40, 16)):
                    if op & bit:
                        length |= delta[at] << shift
                        at += 1
                length = length or 0x10000
                if offset + length > len(base) or written + length > size:
                    raise corrupt()
                out[written:written + length] = source[offset:offset + length]
            elif op:
                length = op
                if at + length > end or written + length > size:
                    raise corrupt()
                out[written:written + length] = delta[at:at + length]
                at += length
            else:
                raise corrupt()
            written += length
            steps += 1
            if steps % 65536 == 0:
                store.check_time()
    except IndexError:
        raise corrupt() from None
    finally:
        source.release()
    if written != size:
        raise corrupt()
    return out


def _hex(text: str) -> bool:
    return all(c in "0123456789abcdef" for c in text)
