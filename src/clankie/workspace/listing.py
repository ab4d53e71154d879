"""`list_files` (SPEC W1, W4, W6) and the set of files a search looks at.

Owns which files of a workspace are visible: in a Git workspace, what
`git ls-files --cached --others --exclude-standard` lists (ignored entries are counted,
not shown); elsewhere every file, skipping `.git`. Directories are walked through
descriptors opened beneath the workspace with `O_NOFOLLOW`, so a walk never follows a
symlink or leaves the workspace. Secret-like paths are shown, marked `denied`.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterator

from clankie.tool_dto import Entry, ListFilesArgs, ListFilesResult

from .confine import Refusal, Root, check_path, opened, shown, tidy
from .deny import DenyList
from .git import Git, is_repository

MAX_ENTRIES = 200
WALK_FILES = 100_000  # a search outside Git looks at no more files than this


def _join(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _scan(fd: int) -> list[tuple[str, os.stat_result]]:
    """The entries of an open directory, sorted by name, with their own (lstat) status."""
    found = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.name == ".git":
                continue
            try:
                found.append((entry.name, entry.stat(follow_symlinks=False)))
            except OSError:
                continue
    return sorted(found)


def _open_child(parent: int, name: str) -> int | None:
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                       dir_fd=parent)
    except OSError:
        return None


class _Ignored:
    """Git's ignored entries below a folder: files, and whole directories ('dir/')."""

    def __init__(self, git: Git | None, path: str) -> None:
        self.files: set[str] = set()
        self.dirs: tuple[str, ...] = ()
        if git is not None:
            listed = git.ls_files("--others", "--ignored", "--exclude-standard", "--directory",
                                  path=path)
            self.files = {p for p in listed if not p.endswith("/")}
            self.dirs = tuple(p for p in listed if p.endswith("/"))

    def __contains__(self, path: str) -> bool:
        return path in self.files or any((path + "/").startswith(d) for d in self.dirs)


def list_files(root: Root, args: ListFilesArgs, deny: DenyList, git_timeout: float
               ) -> ListFilesResult:
    path = tidy(check_path(args.path))
    git = is_repository(root, git_timeout)
    ignored = _Ignored(git, path)
    entries: list[Entry] = []
    hidden = 0
    truncated = False

    def walk(fd: int, folder: str, level: int) -> None:
        nonlocal hidden, truncated
        for name, st in _scan(fd):
            if truncated:
                return
            child = _join(folder, name)
            if child in ignored:
                hidden += 1
                continue
            if len(entries) == MAX_ENTRIES:
                truncated = True
                return
            kind = _kind(st.st_mode)
            entries.append(Entry(path=child, type=kind,
                                 size=st.st_size if kind == "file" else None,
                                 denied=deny.denies(child)))
            if kind == "directory" and level < args.depth:
                sub = _open_child(fd, name)
                if sub is not None:
                    try:
                        walk(sub, child, level + 1)
                    finally:
                        os.close(sub)

    with opened(root, path, directory=True) as handle:
        fd = root.reopen(handle, os.O_RDONLY | os.O_DIRECTORY)
        try:
            walk(fd, path, 1)
        finally:
            os.close(fd)
    return ListFilesResult(entries=entries, truncated=truncated, hidden_by_ignore=hidden)


def visible_files(root: Root, path: str, include_ignored: bool, git_timeout: float,
                  deadline: float) -> tuple[list[str], int]:
    """The files a search looks at below `path`, sorted, and how many entries ignore rules
    hid from it (0 when they are included)."""
    git = is_repository(root, git_timeout)
    if git is not None:
        files = set(git.ls_files("--cached", "--others", "--exclude-standard", path=path))
        if include_ignored:
            files |= set(git.ls_files("--others", "--ignored", "--exclude-standard",
                                      path=path))
            return sorted(files), 0
        hidden = git.ls_files("--others", "--ignored", "--exclude-standard", "--directory",
                              path=path)
        return sorted(files), len(hidden)
    return list(_walk_files(root, path, deadline)), 0


def _walk_files(root: Root, path: str, deadline: float) -> Iterator[str]:
    """Every regular file below `path`, folder by folder in name order, each folder opened
    beneath the workspace (never through a symlink), at most `WALK_FILES` files and only
    until `deadline`."""
    count = 0
    folders = [path]
    while folders:
        folder = folders.pop()
        try:
            with opened(root, folder, directory=True) as handle:
                fd = root.reopen(handle, os.O_RDONLY | os.O_DIRECTORY)
        except Refusal:
            continue
        try:
            children = _scan(fd)
        finally:
            os.close(fd)
        folders += [_join(folder, n) for n, st in reversed(children) if stat.S_ISDIR(st.st_mode)]
        for name, st in children:
            if stat.S_ISREG(st.st_mode):
                count += 1
                if count > WALK_FILES or time.monotonic() > deadline:
                    return
                yield _join(folder, name)


def must_be_directory(root: Root, path: str) -> None:
    with opened(root, path) as handle:
        if not stat.S_ISDIR(handle.st.st_mode):
            raise Refusal("invalid_path", f"{shown(path)} is not a directory")
