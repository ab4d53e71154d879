"""A directory's canonical identity `(realpath, st_dev, st_ino, birth)`, read from the file
system.

Owns the one place where a workspace is looked at. It only reads: `identify` stats the
directory; it never creates, changes or enrolls anything.
"""

from __future__ import annotations

import os
import stat

from clankie.core.model import WorkspaceIdentity

from .birth import birth_of_fd

_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)  # a directory we may not list still has one


def identify(path: str) -> WorkspaceIdentity | None:
    """The identity of the existing directory at `path` now, or None if there is none."""
    try:
        real = os.path.realpath(path, strict=True)
        fd = os.open(real, _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    except (OSError, ValueError):
        return None
    try:
        return _of_fd(real, fd)
    finally:
        os.close(fd)


def _of_fd(path: str, fd: int) -> WorkspaceIdentity | None:
    st = os.fstat(fd)
    if not stat.S_ISDIR(st.st_mode):
        return None
    return WorkspaceIdentity(path, st.st_dev, st.st_ino, birth_of_fd(fd, st))


def identify_saved(saved: WorkspaceIdentity) -> WorkspaceIdentity | None:
    """The identity now of the directory a conversation saved; replacement shows as a change."""
    return identify(saved.path)


def same_directory(saved: WorkspaceIdentity, fd: int) -> bool:
    """Whether the open directory `fd` is the directory the conversation saved."""
    return saved.same_directory(_of_fd(saved.path, fd))
