"""Opening paths beneath a workspace's directory handle, by the kernel (SPEC W2-W4, W8).

Owns the one way a workspace tool reaches a file: a relative path string, checked as
given (never a normalised copy), opened relative to the workspace's directory descriptor
with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)` on Linux, or one component at a
time with `O_NOFOLLOW` elsewhere (every symlink refused there). Nothing is judged by a
string prefix or by a `realpath` computed before opening. It opens with `O_PATH` first so
that a FIFO, socket or device is never opened for reading, and refuses what lies in
clankie's own home (known by identity) before anything is read. It never writes.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from clankie.core.model import WorkspaceIdentity
from clankie.core.vocabulary import WorkspaceCode

from .bounds import CALL_SECONDS as CALL_SECONDS
from .bounds import Bounds
from .bounds import Refusal as Refusal
from .identity import same_directory

MAX_PATH_BYTES = 4_096
O_PATH = getattr(os, "O_PATH", 0)
_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_NO_SYMLINKS = 0x04
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every Linux architecture

FileId = tuple[int, int]  # (st_dev, st_ino): a file or folder as the kernel knows it


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                ("resolve", ctypes.c_uint64)]


def _load_openat2() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    syscall = libc.syscall
    syscall.restype = ctypes.c_long
    syscall.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p,
                        ctypes.c_size_t]
    return syscall


_syscall = _load_openat2()
_use_openat2 = _syscall is not None


@functools.cache
def _how(flags: int, no_symlinks: bool) -> Any:
    how = _OpenHow(flags, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS
                   | (_RESOLVE_NO_SYMLINKS if no_symlinks else 0))
    return ctypes.pointer(how)


def openat2_in_use() -> bool:
    return _use_openat2


def use_openat2(enabled: bool) -> bool:
    """Choose the kernel's openat2 (where present) or the portable walk; returns the old
    choice. The walk is what non-Linux platforms get; tests exercise both."""
    global _use_openat2
    old = _use_openat2
    _use_openat2 = enabled and _syscall is not None
    return old


def check_path(path: str) -> str:
    """The path as given, if it is an acceptable relative path; else `invalid_path`."""
    if not path:
        raise Refusal(WorkspaceCode.INVALID_PATH, "the path is empty; use \".\" for the workspace")
    if "\x00" in path:
        raise Refusal(WorkspaceCode.INVALID_PATH, "the path contains a NUL byte")
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise Refusal(WorkspaceCode.INVALID_PATH, "the path is not valid UTF-8") from None
    if size > MAX_PATH_BYTES:
        raise Refusal(WorkspaceCode.INVALID_PATH, f"the path is over {MAX_PATH_BYTES} bytes")
    if path.startswith("/"):
        raise Refusal(WorkspaceCode.INVALID_PATH,
                      "absolute paths are refused; give a path relative "
                      "to the workspace")
    if ".." in path.split("/"):
        raise Refusal(WorkspaceCode.INVALID_PATH, "a '..' component is refused; paths stay in the "
                      "workspace")
    return path


def shown(path: str) -> str:
    """The path as a refusal names it: tidy, and short (a refusal is about 100 bytes)."""
    path = tidy(path)
    return path if len(path) <= 60 else f"{path[:28]}…{path[-28:]}"


def tidy(path: str) -> str:
    """The path's display form: no empty or '.' components ('.' for the workspace)."""
    return "/".join(p for p in path.split("/") if p not in ("", ".")) or "."


@dataclass(frozen=True, slots=True)
class Opened:
    fd: int
    st: os.stat_result
    via_symlink: bool  # a symlink (inside the workspace) was followed to get here


class Beneath:
    """An open directory and the one way to open paths beneath it: by the kernel
    (`openat2` with `RESOLVE_BENEATH`), or one component at a time with `O_NOFOLLOW` where
    the platform has no `openat2` (every symlink refused there). With `symlinks=False`
    no symlink is followed at all, even one that stays beneath (the git directory)."""

    def __init__(self, fd: int, *, symlinks: bool = True) -> None:
        self.fd = fd
        self.symlinks = symlinks

    def close(self) -> None:
        os.close(self.fd)

    def open(self, path: str, *, directory: bool = False) -> Opened:
        """Open `path` (already checked) beneath the directory with `O_PATH`: it never
        blocks and never opens a device for reading. The caller closes `fd`."""
        # Without O_PATH (not Linux) a FIFO must not block the open: O_NONBLOCK.
        flags = (O_PATH or os.O_NONBLOCK) | os.O_CLOEXEC | (os.O_DIRECTORY if directory else 0)
        if tidy(path) == ".":
            fd = os.open(".", flags, dir_fd=self.fd)
            return Opened(fd, os.fstat(fd), False)
        if not _use_openat2:
            fd = self._walk(path, flags)
            return Opened(fd, os.fstat(fd), False)
        try:  # the common case first: no symlink on the way
            fd = self._openat2(path, flags, no_symlinks=True)
            return Opened(fd, os.fstat(fd), False)
        except Refusal as refusal:
            if refusal.code != WorkspaceCode.OUTSIDE_WORKSPACE or not self.symlinks:
                raise
        fd = self._openat2(path, flags)
        return Opened(fd, os.fstat(fd), True)

    @staticmethod
    def reopen(opened: Opened, flags: int) -> int:
        """An `O_PATH` descriptor reopened for reading: the same file (the kernel's magic
        link names the open file itself, not a path), never another. Refused
        `permission_denied` when the user may not read it."""
        if not O_PATH:
            return os.dup(opened.fd)  # without O_PATH it was opened for reading already
        try:
            return os.open(f"/proc/self/fd/{opened.fd}", flags | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise Refusal(WorkspaceCode.PERMISSION_DENIED, "it cannot be read (permission "
                              "denied)") from None
            raise

    def _openat2(self, path: str, flags: int, *, no_symlinks: bool = False) -> int:
        assert _syscall is not None
        how = _how(flags, no_symlinks)
        fd = _syscall(_SYS_OPENAT2, self.fd, path.encode("utf-8", "surrogateescape"), how,
                      ctypes.sizeof(_OpenHow))  # type: ignore[operator]
        if fd >= 0:
            return int(fd)
        code = ctypes.get_errno()
        if code == errno.ENOSYS:  # an older kernel, or a sandbox that hides the call
            use_openat2(False)
            return self._walk(path, flags)
        raise _refusal(code, path)

    def without_symlinks(self, path: str) -> None:
        """Refuse `path` unless it resolves with no symlink at all (used where the kernel
        cannot tell us where a symlink led)."""
        if _use_openat2:
            os.close(self._openat2(path, O_PATH | os.O_CLOEXEC, no_symlinks=True))
        else:
            os.close(self._walk(path, O_PATH | os.O_CLOEXEC))

    def lstat(self, path: str) -> os.stat_result | None:
        """The status of `path` itself (a symlink is not followed), reached through real
        folders only; None if there is no such entry."""
        folder, _, name = tidy(path).rpartition("/")
        try:
            if _use_openat2 and folder:
                parent = self._openat2(folder, O_PATH | os.O_DIRECTORY | os.O_CLOEXEC,
                                       no_symlinks=True)
            else:
                parent = self._walk(folder or ".", O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except Refusal:
            return None
        try:
            return os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError:
            return None
        finally:
            os.close(parent)

    def _walk(self, path: str, flags: int) -> int:
        parts = [p for p in path.split("/") if p not in ("", ".")]
        current = os.dup(self.fd)
        try:
            for index, name in enumerate(parts):
                last = index == len(parts) - 1
                step = (flags if last else O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) \
                    | os.O_NOFOLLOW
                try:
                    following = os.open(name, step, dir_fd=current)
                except OSError as exc:
                    raise _walk_refusal(exc.errno or 0, name, current, path) from None
                if stat.S_ISLNK(os.fstat(following).st_mode):  # O_PATH|O_NOFOLLOW opens links
                    os.close(following)
                    raise Refusal(WorkspaceCode.OUTSIDE_WORKSPACE,
                                  f"{shown(path)}: symbolic links are refused "
                                  "on this platform")
                os.close(current)
                current = following
            result, current = current, -1
            return result
        finally:
            if current >= 0:
                os.close(current)


def replaced() -> Refusal:
    return Refusal(WorkspaceCode.WORKSPACE_REPLACED, "the workspace directory was replaced "
                   "since this conversation was bound to it; nothing was read")


class Root(Beneath):
    """The workspace directory, opened once per tool call and checked against the identity
    the conversation saved (W8): every path below is opened relative to this handle.

    Clankie's own home (`home`, by identity) is denied inside it whatever the patterns say
    (W4): a workspace in the home is refused whole, and whatever `open` opens is looked at,
    once the kernel has opened it, folder by folder up to the workspace by `..`, so that no
    way in (a symlink, a bind mount, the home's own folder) reaches a file there. `in_home`
    says the same of a path a tool names without opening it (the Git tools)."""

    def __init__(self, saved: WorkspaceIdentity, seconds: float = CALL_SECONDS, *,
                 home: FileId | None = None,
                 home_files: frozenset[FileId] = frozenset()) -> None:
        self.saved = saved
        self.home = home
        self.home_files = home_files  # the files in the home, by identity (hard links too)
        self.bounds = Bounds(seconds)  # the call's deadline and memory account (W5)
        self._chain: list[_Step] = []  # the home check's folders of the last path asked
        try:
            fd = os.open(saved.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
                         | os.O_NOFOLLOW)
        except OSError as exc:  # a symlink or a file there now (W8) is not the directory
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.lexists(saved.path):
                raise replaced() from None
            raise Refusal(WorkspaceCode.WORKSPACE_MISSING, "the workspace directory is gone; "
                          "nothing was read") from None
        super().__init__(fd)
        if not same_directory(saved, self.fd):
            os.close(self.fd)
            raise replaced()
        self.top = file_id(os.fstat(self.fd))
        if home is not None and _up_to_home(self.fd, home, None) is not False:  # and above
            os.close(self.fd)
            raise Refusal(WorkspaceCode.DENIED_PATH,
                          "the workspace lies in clankie's own home; nothing "
                          "there is read")

    def open(self, path: str, *, directory: bool = False) -> Opened:
        """As `Beneath.open`; refused `denied_path` if what was opened lies in the home, or
        is one of the home's files by identity (a hard link or a bind mount of it)."""
        opened = super().open(path, directory=directory)
        try:
            found = file_id(opened.st) in self.home_files or self._in_home(opened, path)
        except BaseException:
            os.close(opened.fd)
            raise
        if found is not False:
            os.close(opened.fd)
            if found is None:  # fail closed, as the race it is
                raise Refusal(WorkspaceCode.NOT_FOUND,
                              f"{shown(path)} changed while it was opened; it "
                              "was not read")
            raise Refusal(WorkspaceCode.DENIED_PATH,
                          f"{shown(path)} lies in clankie's own home; it is "
                          "never read")
        return opened

    def lstat(self, path: str) -> os.stat_result | None:
        """As `Beneath.lstat`; None for the home and what lies in it (never looked at)."""
        st = super().lstat(path)
        return None if st is not None and self.in_home(path) else st

    def folder_in_home(self, folder: str) -> bool:
        """Whether a folder a path of the index or a commit names (relative, '/'-separated)
        is the home or lies in it, as Git would reach it: through real folders, never past
        a symlink. Only the folders of the last one asked are remembered (`_chain`, one
        step a component): paths come in Git's order, where those beneath one folder are
        together, so each folder is looked at once (one `lstat`) while its paths are
        asked and memory follows one path, not all of them (W5). An `lstat` starts from the
        nearest folder held open on the chain (one every `_ANCHOR_EVERY` levels), so its
        cost does not grow with the depth either."""
        if self.home is None:
            return False
        parts = [p for p in folder.split("/") if p not in ("", ".")]
        chain = self._chain
        same = 0
        while same < len(chain) and same < len(parts) and chain[same].name == parts[same]:
            same += 1
        while len(chain) > same:
            step = chain.pop()
            if step.anchor >= 0:
                os.close(step.anchor)
        for part in parts[same:]:
            self.check_time()
            above = chain[-1] if chain else None
            step = _Step(part, above is not None and above.inside,
                         above is None or above.reachable)
            if step.reachable and not step.inside:
                at = next((i for i in range(len(chain) - 1, -1, -1)
                           if chain[i].anchor >= 0), -1)
                beneath = Beneath(chain[at].anchor if at >= 0 else self.fd, symlinks=False)
                where = "/".join([*(s.name for s in chain[at + 1:]), part])
                st = Beneath.lstat(beneath, where)
                step.inside = st is not None and self.is_home(st)
                step.reachable = st is not None and stat.S_ISDIR(st.st_mode)
                if step.reachable and (len(chain) + 1) % _ANCHOR_EVERY == 0:
                    try:
                        step.anchor = beneath.open(where, directory=True).fd
                    except Refusal:
                        step.reachable = False  # changed since: nothing more below
            chain.append(step)
        return bool(chain) and chain[-1].inside

    def close(self) -> None:
        for step in self._chain:
            if step.anchor >= 0:
                os.close(step.anchor)
        self._chain = []
        super().close()

    def is_home(self, st: os.stat_result) -> bool:
        """Whether a folder entry's status is the home's own folder (the walk's test)."""
        return self.home is not None and file_id(st) == self.home

    def in_home(self, path: str) -> bool:
        """Whether the entry `path` (checked, relative) names is the home or lies in it, as
        the kernel finds it now: the folder holding it, reached as `open` reaches it, every
        folder above, and the entry itself (a final symlink is not followed: the Git tools
        never follow one). A path the opener refuses (it leaves the workspace, say) reaches
        nothing, so nothing of the home; a missing one is looked for in the folders above
        it; True when it cannot be told (fail closed). For tools that name a path without
        opening it: the Git tools, and every path argument."""
        if self.home is None:
            return False
        where = tidy(path)
        while where != ".":
            self.check_time()
            folder, _, name = where.rpartition("/")
            try:
                parent = Beneath.open(self, folder or ".", directory=True)
            except Refusal as refusal:
                if refusal.code != WorkspaceCode.NOT_FOUND:
                    return False
                where = folder or "."  # gone: the folder it would be in, and above
                continue
            try:
                entry = os.stat(name, dir_fd=parent.fd, follow_symlinks=False)
            except OSError:
                entry = None
            try:
                return (entry is not None and self.is_home(entry)) or \
                    _up_to_home(parent.fd, self.home, self.top) is not False
            finally:
                os.close(parent.fd)
        return False  # the root itself: looked at when it was opened

    def _in_home(self, opened: Opened, path: str) -> bool | None:
        """Whether an opened file or folder lies in the home (None: it cannot be told, it
        changed meanwhile). A folder is looked at itself, a file by the folder holding it:
        found again by its resolved path, no symlink followed, and checked to hold that
        very file."""
        if self.home is None:
            return False
        if stat.S_ISDIR(opened.st.st_mode):
            return _up_to_home(opened.fd, self.home, self.top)
        where = self.resolved(opened) if opened.via_symlink else tidy(path)
        if where is None:
            self.without_symlinks(path)  # where it led is unknown: allow none
            where = tidy(path)
        folder, _, name = where.rpartition("/")
        try:
            parent = self._plain(folder or ".")
        except Refusal:
            return None
        try:
            if file_id(os.stat(name, dir_fd=parent, follow_symlinks=False)) != \
                    file_id(opened.st):
                return None
            return _up_to_home(parent, self.home, self.top)
        except OSError:
            return None
        finally:
            os.close(parent)

    def _plain(self, folder: str) -> int:
        """A folder beneath the root reached through real folders only (no symlink)."""
        flags = O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
        if _use_openat2 and folder != ".":
            return self._openat2(folder, flags, no_symlinks=True)
        return self._walk(folder, flags)

    @property
    def deadline(self) -> float:
        return self.bounds.deadline

    def out_of_time(self) -> bool:
        return self.bounds.out_of_time()

    def check_time(self) -> None:
        """Refuse `time_limit` once the call's time is up (W5)."""
        self.bounds.check_time()

    def __enter__(self) -> Root:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def resolved(self, opened: Opened) -> str | None:
        """Where the kernel actually opened (relative to the root), or None if unknown."""
        try:
            target = os.readlink(f"/proc/self/fd/{opened.fd}")
            root = os.readlink(f"/proc/self/fd/{self.fd}")
        except OSError:
            return None
        if target == root:
            return "."
        if target.startswith(root.rstrip("/") + "/"):
            return target[len(root.rstrip("/")) + 1:]
        return None

    def open_file(self, path: str, denied: Callable[[str], bool]) -> tuple[int, os.stat_result]:
        """A regular file beneath the root, opened for reading (W3), unless a symlink led
        to a path that `denied` refuses (W4): (descriptor, status). The caller closes it."""
        handle = self.open(path)
        try:
            mode = handle.st.st_mode
            if stat.S_ISDIR(mode):
                raise Refusal(WorkspaceCode.IS_DIRECTORY,
                              f"{shown(path)} is a directory; use list_files")
            if not stat.S_ISREG(mode):
                raise Refusal(WorkspaceCode.NOT_REGULAR_FILE,
                              f"{shown(path)} is not a regular file (a "
                              "FIFO, socket or device); it was not opened")
            if handle.via_symlink:
                resolved = self.resolved(handle)
                if resolved is None:
                    self.without_symlinks(path)  # where it led is unknown: allow none
                elif denied(resolved):
                    raise Refusal(WorkspaceCode.DENIED_PATH,
                                  f"{shown(path)} leads to a secret-like path; "
                                  "it is never read (setting workspace_deny)")
            try:
                return self.reopen(handle, os.O_RDONLY | os.O_NONBLOCK), handle.st
            except Refusal as refusal:  # the reason names the path
                raise Refusal(refusal.code, f"{shown(path)} cannot be read (permission "
                              "denied)") from None
        finally:
            os.close(handle.fd)


_ANCHOR_EVERY = 64  # levels of the home check's chain between two folders held open


@dataclass(slots=True)
class _Step:
    """One folder of the path the home check looked at last."""

    name: str
    inside: bool  # it is the home or lies in it
    reachable: bool  # a real folder, as Git would reach it (else nothing below it is)
    anchor: int = -1  # the folder held open (O_PATH), on every `_ANCHOR_EVERY`th level


def file_id(st: os.stat_result) -> FileId:
    return st.st_dev, st.st_ino


_MAX_UP = 4_096  # folders above anything: more than any path the kernel resolves


def _up_to_home(fd: int, home: FileId, stop: FileId | None) -> bool | None:
    """Whether the open folder `fd`, or a folder above it, is `home`, going up by `..` (as
    the kernel does, out of a mount too) until `stop` (a folder already known to be clear,
    with all above it), or the top. None when the way up cannot be followed (a folder on
    it went away meanwhile)."""
    current = fd
    try:
        here = file_id(os.fstat(fd))
        for _ in range(_MAX_UP):
            if here == home:
                return True
            if here == stop:
                return False
            parent = os.open("..", (O_PATH or os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC,
                             dir_fd=current)
            if current != fd:
                os.close(current)
            current = parent
            above = file_id(os.fstat(current))
            if above == here:  # `..` of the top is itself
                return False
            here = above
        return None
    except OSError:
        return None
    finally:
        if current != fd:
            os.close(current)


def _walk_refusal(code: int, name: str, parent: int, path: str) -> Refusal:
    try:
        if stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode):
            return Refusal(WorkspaceCode.OUTSIDE_WORKSPACE,
                           f"{shown(path)}: symbolic links are refused on "
                           "this platform")
    except OSError:
        pass
    return _refusal(code, path)


def _refusal(code: int, path: str) -> Refusal:
    if code == errno.EXDEV:
        return Refusal(WorkspaceCode.OUTSIDE_WORKSPACE,
                       f"{shown(path)} leads outside the workspace; nothing "
                       "outside is read")
    if code == errno.ELOOP:
        return Refusal(WorkspaceCode.OUTSIDE_WORKSPACE,
                       f"{shown(path)}: a symbolic link loops or leads "
                       "outside the workspace")
    if code in (errno.ENOENT, errno.ENOTDIR):
        return Refusal(WorkspaceCode.NOT_FOUND, f"{shown(path)} does not exist")
    if code in (errno.EACCES, errno.EPERM):
        return Refusal(WorkspaceCode.PERMISSION_DENIED,
                       f"{shown(path)} cannot be read (permission denied)")
    if code == errno.ENAMETOOLONG:
        return Refusal(WorkspaceCode.INVALID_PATH, "a path component is too long")
    name = errno.errorcode.get(code, str(code))
    return Refusal(WorkspaceCode.NOT_FOUND, f"{shown(path)} cannot be opened ({name})")


def open_listed(folder: int, name: str, refused: frozenset[FileId] = frozenset()
                ) -> int | None:
    """`name` in an open folder, which a walk has just seen (`lstat`) as a regular file,
    opened for reading in one step: without following a symlink, without blocking (a
    FIFO swapped in since is opened and closed at once, never read), never as our
    terminal; None unless it is still a regular file, and not one of `refused` (the
    home's files, by identity). One open instead of `open_regular`'s two: a search opens
    every file of the workspace."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_NOCTTY
                     | os.O_CLOEXEC, dir_fd=folder)
    except OSError:
        return None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or file_id(st) in refused:
        os.close(fd)
        return None
    return fd


def open_regular(folder: int, name: str) -> int | None:
    """`name` in an open folder, opened for reading only if it is a regular file (looked at
    through `O_PATH` first, so a FIFO or device is never opened); None if it is not one."""
    try:
        handle = os.open(name, (O_PATH or os.O_NONBLOCK) | os.O_NOFOLLOW | os.O_CLOEXEC,
                         dir_fd=folder)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(handle).st_mode):
            return None
        if not O_PATH:
            handle, kept = -1, handle  # opened for reading already, without blocking
            return kept
        return os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        if handle >= 0:
            os.close(handle)


@contextmanager
def opened(root: Root, path: str, *, directory: bool = False) -> Iterator[Opened]:
    handle = root.open(path, directory=directory)
    try:
        yield handle
    finally:
        os.close(handle.fd)
