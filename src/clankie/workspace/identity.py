"""A directory's canonical identity `(realpath, st_dev, st_ino)`, read from the file system.

Owns the one place where a workspace is looked at. It only reads: `identify` stats the
directory; it never creates, changes or enrolls anything.
"""

from __future__ import annotations

import os
import stat

from clankie.core.model import WorkspaceIdentity


def identify(path: str) -> WorkspaceIdentity | None:
    """The identity of the existing directory at `path` now, or None if there is none."""
    try:
        real = os.path.realpath(path, strict=True)
        st = os.stat(real)
    except (OSError, ValueError):
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    return WorkspaceIdentity(real, st.st_dev, st.st_ino)


def identify_saved(saved: WorkspaceIdentity) -> WorkspaceIdentity | None:
    """The identity now of the directory a conversation saved; replacement shows as a change."""
    return identify(saved.path)


def same_directory(saved: WorkspaceIdentity, fd: int) -> bool:
    """Whether the open directory `fd` is the directory the conversation saved."""
    st = os.fstat(fd)
    return stat.S_ISDIR(st.st_mode) and (st.st_dev, st.st_ino) == (saved.dev, saved.ino)
