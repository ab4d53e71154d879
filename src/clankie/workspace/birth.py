"""A directory's birth time in nanoseconds, where the platform reports one (SPEC section 2).

Owns reading it: Linux `statx(..., STATX_BTIME)` through ctypes (Python 3.11 has no
`os.statx`), `st_birthtime` on macOS and the BSDs, else None. A file system that keeps
no birth time gives None too; identities then compare as `(path, dev, ino)` alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

_AT_EMPTY_PATH = 0x1000
_STATX_BTIME = 0x800


class _Timestamp(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_int64), ("tv_nsec", ctypes.c_uint32),
                ("reserved", ctypes.c_int32)]


class _Statx(ctypes.Structure):
    _fields_ = [("mask", ctypes.c_uint32), ("blksize", ctypes.c_uint32),
                ("attributes", ctypes.c_uint64), ("nlink", ctypes.c_uint32),
                ("uid", ctypes.c_uint32), ("gid", ctypes.c_uint32),
                ("mode", ctypes.c_uint16), ("spare0", ctypes.c_uint16),
                ("ino", ctypes.c_uint64), ("size", ctypes.c_uint64),
                ("blocks", ctypes.c_uint64), ("attributes_mask", ctypes.c_uint64),
                ("atime", _Timestamp), ("btime", _Timestamp), ("ctime", _Timestamp),
                ("mtime", _Timestamp), ("rest", ctypes.c_uint8 * 128)]


def _load_statx() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        statx = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):  # a libc without statx (glibc < 2.28, musl < 1.2.5)
        return None
    statx.restype = ctypes.c_int
    statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                      ctypes.POINTER(_Statx)]
    return statx


_statx = _load_statx()


def birth_of_fd(fd: int, st: os.stat_result | None = None) -> int | None:
    """The birth time (ns) of the open file `fd`, or None where none is reported."""
    if _statx is not None:
        buf = _Statx()
        if _statx(fd, b"", _AT_EMPTY_PATH, _STATX_BTIME, ctypes.byref(buf)) != 0:  # type: ignore[operator]
            return None
        if not buf.mask & _STATX_BTIME:
            return None
        return int(buf.btime.tv_sec) * 1_000_000_000 + int(buf.btime.tv_nsec)
    birth = getattr(st or os.fstat(fd), "st_birthtime", None)
    return None if birth is None else round(birth * 1_000_000_000)
