"""A repository's git directory, held open, and the one way its files are read (SPEC W7).

Owns reading the files of a git directory: each is opened by the confined opener
(`confine.Beneath`) beneath the directory's handle with no symlink followed at all, read
only if it is a regular file, and only up to a bound. So however the files change during a
call (a file swapped for a symlink, a folder renamed), nothing outside the git directory
is ever opened. Refusals carry fixed sentences: nothing a file holds, and no name it
gives, is ever quoted in one. It never writes.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator

from clankie.core.vocabulary import WorkspaceCode

from .confine import Beneath, Refusal

READ = 64 * 1024


def unsafe(reason: str) -> Refusal:
    return Refusal(WorkspaceCode.UNSAFE_REPOSITORY,
                   f"{reason}; the Git tools do not read this repository")


def unreadable() -> Refusal:
    return Refusal(WorkspaceCode.PERMISSION_DENIED,
                   "a file or folder in its git directory cannot be read "
                   "(permission denied); the Git tools do not read this repository")


def too_large(what: str) -> Refusal:
    return Refusal(WorkspaceCode.REPOSITORY_TOO_LARGE,
                   f"{what}; the Git tools do not read a repository "
                   "this large")


class GitDir(Beneath):
    """The git directory, open. `name`s are paths beneath it chosen by these tools."""

    def __init__(self, fd: int) -> None:
        super().__init__(fd, symlinks=False)

    def open_file(self, name: str) -> int | None:
        """`name` opened for reading if it is a regular file; None if there is no such
        file; `unsafe_repository` if it is a symlink, a folder or anything else."""
        try:
            handle = self.open(name)
        except Refusal as refusal:
            if refusal.code == WorkspaceCode.NOT_FOUND:
                return None
            raise unsafe("a file in its git directory is a symbolic link or cannot be "
                         "opened") from None
        try:
            if not stat.S_ISREG(handle.st.st_mode):
                raise unsafe("a file in its git directory is not a regular file")
            try:
                return self.reopen(handle, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE):
                    raise  # out of descriptors: said as such (`io_error`), not as a refusal
                raise unreadable() from None
            except Refusal:
                raise unreadable() from None
        finally:
            os.close(handle.fd)

    def read(self, name: str, limit: int) -> bytes | None:
        """The whole of a regular file of at most `limit` bytes; None if absent;
        `repository_too_large` if larger."""
        fd = self.open_file(name)
        if fd is None:
            return None
        try:
            return read_bounded(fd, limit, name)
        finally:
            os.close(fd)

    def exists(self, name: str) -> bool:
        return self.lstat(name) is not None

    def names(self, folder: str, limit: int) -> list[str]:
        """The names in a folder of the git directory, sorted (empty if it is absent);
        `repository_too_large` past `limit` names."""
        return sorted(self.each_name(folder, limit))

    def each_name(self, folder: str, limit: int) -> Iterator[str]:
        """The names in a folder of the git directory as they are read (none if it is
        absent), none kept; `repository_too_large` past `limit` names."""
        try:
            handle = self.open(folder, directory=True)
        except Refusal as refusal:
            if refusal.code == WorkspaceCode.NOT_FOUND:
                return
            raise unsafe("a folder in its git directory is a symbolic link or cannot be "
                         "opened") from None
        try:
            fd = self.reopen(handle, os.O_RDONLY | os.O_DIRECTORY)
        except (OSError, Refusal):
            raise unreadable() from None
        finally:
            os.close(handle.fd)
        try:
            with os.scandir(fd) as entries:
                for count, entry in enumerate(entries):
                    if count == limit:
                        raise too_large(f"a folder of its git directory holds more than "
                                        f"{limit} entries")
                    yield entry.name
        finally:
            os.close(fd)

    def __enter__(self) -> GitDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_bounded(fd: int, limit: int, name: str) -> bytes:
    size = os.fstat(fd).st_size
    if size > limit:
        raise too_large(f"its {name} is {size} bytes, more than the {limit} these tools read")
    chunks = []
    total = 0
    while total <= limit and (chunk := os.read(fd, min(READ * 16, limit + 1 - total))):
        chunks.append(chunk)
        total += len(chunk)
    if total > limit:  # it grew meanwhile
        raise too_large(f"its {name} is more than the {limit} bytes these tools read")
    return b"".join(chunks)


def pread_exactly(fd: int, size: int, offset: int) -> bytes:
    """`size` bytes at `offset`, or fewer only at the file's end."""
    data = os.pread(fd, size, offset)
    while len(data) < size:
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data


def chunks(fd: int, offset: int, first: int = READ) -> Iterator[bytes]:
    """The file from `offset` on: `first` bytes, then chunks of `READ` (read with `pread`:
    the descriptor's position is never used, so one file can be read at several places
    at once)."""
    size = max(1, min(first, READ))
    while chunk := os.pread(fd, size, offset):
        yield chunk
        offset += len(chunk)
        size = READ
