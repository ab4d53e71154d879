"""Proof that nothing outside a workspace was opened: an inotify watch on outside files.

`Watch(paths)` asks the kernel to report every open and read of those files (and of the
files in those folders); `opened()` drains what it saw. Linux only, through ctypes.
"""

from __future__ import annotations

import ctypes
import os
import struct
from pathlib import Path

_IN_ACCESS = 0x001
_IN_OPEN = 0x020
_IN_NONBLOCK = os.O_NONBLOCK
_libc = ctypes.CDLL(None, use_errno=True)


class Watch:
    def __init__(self, *paths: Path) -> None:
        self.fd = _libc.inotify_init1(_IN_NONBLOCK | os.O_CLOEXEC)
        assert self.fd >= 0, "inotify is not available"
        self.names: dict[int, str] = {}
        for path in paths:
            wd = _libc.inotify_add_watch(self.fd, str(path).encode(), _IN_OPEN | _IN_ACCESS)
            assert wd >= 0, f"cannot watch {path}"
            self.names[wd] = str(path)

    def opened(self) -> list[str]:
        """What was opened or read since the last call: 'PATH[/NAME] open|access'."""
        seen = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return seen
            offset = 0
            while offset < len(data):
                wd, mask, _, size = struct.unpack_from("iIII", data, offset)
                name = data[offset + 16:offset + 16 + size].rstrip(b"\0").decode()
                offset += 16 + size
                kind = "open" if mask & _IN_OPEN else "access"
                seen.append(f"{self.names.get(wd, wd)}{'/' + name if name else ''} {kind}")

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
