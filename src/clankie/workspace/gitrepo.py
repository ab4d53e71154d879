"""The repository a workspace lies in, checked before Git runs, and the one way Git runs
(SPEC W7).

Owns three things. Finding the repository: the nearest `.git` from the workspace upwards
(on one file system), which must be a real directory; a `.git` file or symlink, a
`commondir`, alternates, a symlinked `objects`/`refs`/`HEAD`/`index`, `core.worktree` or
`core.bare` make it `unsafe_repository`. Reading Git's own files in that directory (the
index, HEAD), opened beneath its descriptor without following symlinks. And running Git:
only the object and ref commands in `ALLOWED`, with the git directory as `GIT_DIR` and
working directory, an environment built from nothing (no inherited `GIT_*`, no global or
system configuration, literal pathspecs, no replace objects, no lazy fetch), output read
as a stream and cut at a bound, each command within `git_timeout` and the call's deadline.
Git is never given a work tree, so nothing a repository configures (filters, drivers,
fsmonitor, hooks, pagers) has anything to act on: no command of its choosing can run, and
Git never writes the index.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from .confine import Refusal, open_regular
from .gitindex import IndexEntry, IndexError_, parse_index, path_breaks_git_rules

ALLOWED = frozenset({"cat-file", "config", "ls-tree", "rev-list", "rev-parse", "worktree"})
# `--bare`: Git has no work tree at all, so nothing can make it look at one (with `GIT_DIR`
# alone it takes its working directory for one: `rev-parse :path` then reads the index and
# runs the repository's fsmonitor). `-c core.bare=true` does not do this; `--bare` does.
GLOBAL_OPTIONS = ("--bare", "--no-pager", "--literal-pathspecs", "--no-replace-objects")
# What a revision may look like: names, `@{...}`, `^`, `~` and numbers. No `:` (an index
# or a path: `:README`, `HEAD:x`, `:/text`), no space, never a leading `-`.
_REVISION = re.compile(r"[A-Za-z0-9_./@{}^~+-]{1,256}")
OUTPUT_BYTES = 8 * 1024 * 1024  # the most any one command's output is read
INDEX_BYTES = 8 * 1024 * 1024  # about 80,000 entries: what W5's 64 MiB holds with room
GIT_FILE_BYTES = 64 * 1024
_ERROR_BYTES = 4 * 1024
_READ = 64 * 1024
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_TRUE = {"", "true", "yes", "on", "1"}


def unsafe(reason: str) -> Refusal:
    return Refusal("unsafe_repository", f"{reason}; the Git tools do not read this repository")


def git_environment() -> dict[str, str]:
    """What a Git child gets: nothing inherited but PATH; no configuration but the
    repository's own; no prompts, protocols, lazy fetches or replace objects."""
    return {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C", "GIT_DIR": ".",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_ATTR_NOSYSTEM": "1", "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_LITERAL_PATHSPECS": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_NO_LAZY_FETCH": "1",
            "GIT_OPTIONAL_LOCKS": "0", "GIT_PROTOCOL_FROM_USER": "0", "GIT_ALLOW_PROTOCOL": ""}


def _git() -> str:
    found = shutil.which("git")
    if found is None:
        raise Refusal("git_unavailable", "git is not installed")
    return found


@dataclass
class Repository:
    """A checked git directory, held open, and where the workspace lies below its top."""

    fd: int
    prefix: str  # '' when the workspace is the top, else 'a/b/'
    timeout: float
    deadline: float
    hash_size: int = 20
    index_mtime_ns: int = 0
    _git: str = field(default_factory=_git)
    _index: list[IndexEntry] | None = None

    def close(self) -> None:
        os.close(self.fd)

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def cwd(self) -> str:
        return f"/proc/self/fd/{self.fd}"

    def run(self, *args: str, limit: int = OUTPUT_BYTES, check: bool = True) -> bytes:
        """Git's output (at most `limit` bytes; the rest is never read)."""
        out, code, error = self._spawn(list(args), limit)
        if check and code != 0:
            raise Refusal("git_unavailable", f"git failed: {error or f'exit {code}'}")
        return out

    def _spawn(self, args: list[str], limit: int) -> tuple[bytes, int, str]:
        assert args[0] in ALLOWED, f"git {args[0]} is not an object or ref command"
        left = self.deadline - time.monotonic()
        timeout = min(self.timeout, left)
        if timeout <= 0:
            raise _out_of_time()
        try:
            child = subprocess.Popen([self._git, *GLOBAL_OPTIONS, *args], cwd=self.cwd,
                                     env=git_environment(), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     pass_fds=(self.fd,), start_new_session=True)
        except OSError as exc:
            raise Refusal("git_unavailable", f"git could not run: {exc.strerror}") from None
        with child:
            out, err, finished = _collect(child, limit, time.monotonic() + timeout)
            if not finished:
                _kill(child)
                if len(out) < limit:
                    if left < self.timeout:
                        raise _out_of_time()
                    raise Refusal("git_unavailable", f"git took longer than {timeout:.3g} s")
            code = child.wait()
        first = err.decode("utf-8", "replace").strip().splitlines()
        return out, 0 if not finished else code, (first[0][:160] if first else "")

    def git_file(self, name: str, limit: int = GIT_FILE_BYTES) -> bytes | None:
        """A regular file in the git directory (no symlink followed), or None if absent."""
        found = self._git_file(name, limit)
        return found[0] if found is not None else None

    def _git_file(self, name: str, limit: int) -> tuple[bytes, os.stat_result] | None:
        if not _exists(self.fd, name):
            return None
        fd = open_regular(self.fd, name)
        if fd is None:
            raise unsafe(f".git/{name} is not a regular file")
        try:
            st = os.fstat(fd)
            if st.st_size > limit:
                raise Refusal("git_unavailable", f".git/{name} is {st.st_size} bytes, more "
                              f"than the {limit} these tools read")
            return _read_all(fd, limit), st
        finally:
            os.close(fd)

    def index(self) -> list[IndexEntry]:
        """Every entry of the index (empty before the first `git add`), read once; sets
        `index_mtime_ns`, when Git wrote it (a file changed in that moment must be hashed)."""
        if self._index is None:
            found = self._git_file("index", INDEX_BYTES)
            if found is None:
                self._index = []
                return self._index
            data, st = found
            self.index_mtime_ns = st.st_mtime_ns
            try:
                self._index = parse_index(data, self.hash_size)
            except IndexError_ as exc:
                raise unsafe(str(exc)) from None
        return self._index

    def branch(self) -> str | None:
        """The checked-out branch's name, or None when HEAD is detached."""
        head = (self.git_file("HEAD") or b"").decode("utf-8", "replace").strip()
        if head.startswith("ref: refs/heads/"):
            return head[len("ref: refs/heads/"):]
        return None

    def commit(self, revision: str) -> str | None:
        """The commit a revision names, as an object ID; None if it names none."""
        if revision.startswith("-") or not _REVISION.fullmatch(revision):
            raise Refusal("invalid_argument", "a revision is a branch, tag or commit, with "
                          "~N, ^N or @{...} if needed; it may not start with '-' or hold ':'")
        out = self.run("rev-parse", "--verify", "--quiet", "--end-of-options",
                       f"{revision}^{{commit}}", limit=1024, check=False).decode().strip()
        return out if len(out) == 2 * self.hash_size and _is_hex(out) else None

    def tree(self, commit: str | None) -> Iterator[tuple[str, int, str]]:
        """The files of a commit beneath the workspace, in Git's order: (path relative to
        the workspace, mode, object ID); gitlinks included, never entered."""
        if commit is None:
            return
        where = f"{commit}:{self.prefix.rstrip('/')}" if self.prefix else f"{commit}^{{tree}}"
        tree = self.run("rev-parse", "--verify", "--quiet", "--end-of-options", where,
                        limit=1024, check=False).decode().strip()
        if not _is_hex(tree) or len(tree) != 2 * self.hash_size:
            return  # the workspace's folder is not in that commit
        out = self.run("ls-tree", "-r", "-z", "--full-tree", tree)
        if len(out) >= OUTPUT_BYTES:
            raise Refusal("git_unavailable", "the commit lists more files than these tools "
                          "read; give a path")
        start = 0
        while (end := out.find(b"\0", start)) >= 0:
            meta, _, name = out[start:end].partition(b"\t")
            start = end + 1
            mode, _, rest = meta.partition(b" ")
            path = name.decode("utf-8", "surrogateescape")
            if path_breaks_git_rules(path):
                raise unsafe(f"a commit names a path Git itself refuses: {path[:80]!r}")
            yield path, int(mode, 8), rest.partition(b" ")[2].decode()

    def objects(self) -> Objects:
        return Objects(self)


class Objects:
    """Blobs read through `git cat-file`: sizes first (`--batch-check`), then only the
    contents wanted (`--batch`), each within the call's deadline. Close it after use."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._pipes: dict[str, _Pipe] = {}

    def _pipe(self, mode: str) -> _Pipe:
        if mode not in self._pipes:
            try:
                child = subprocess.Popen(
                    [self.repo._git, *GLOBAL_OPTIONS, "cat-file", mode], cwd=self.repo.cwd,
                    env=git_environment(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL, pass_fds=(self.repo.fd,),
                    start_new_session=True, bufsize=0)
            except OSError as exc:
                raise Refusal("git_unavailable", f"git could not run: {exc.strerror}") \
                    from None
            self._pipes[mode] = _Pipe(child, self.repo.deadline)
        return self._pipes[mode]

    def size(self, oid: str) -> int | None:
        """A blob's size, or None if there is no such blob."""
        parts = self._ask("--batch-check", oid).split()
        if len(parts) != 3 or parts[1] != b"blob" or not parts[2].isdigit():
            return None
        return int(parts[2])

    def read(self, oid: str, limit: int) -> bytes | None:
        """A blob's bytes if it has at most `limit` of them; None if larger or missing."""
        size = self.size(oid)
        if size is None or size > limit:
            return None
        if len(self._ask("--batch", oid).split()) != 3:
            return None
        return self._pipe("--batch").exactly(size + 1)[:size]

    def _ask(self, mode: str, oid: str) -> bytes:
        if not _is_hex(oid):
            raise Refusal("git_unavailable", "an object ID that is not hexadecimal")
        pipe = self._pipe(mode)
        pipe.send(f"{oid}\n".encode())
        return pipe.line()

    def close(self) -> None:
        for pipe in self._pipes.values():
            pipe.close()
        self._pipes.clear()

    def __enter__(self) -> Objects:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Pipe:
    """A request/response child: lines and byte counts read with a deadline, buffered."""

    def __init__(self, child: subprocess.Popen[bytes], deadline: float) -> None:
        assert child.stdin is not None and child.stdout is not None
        self.child, self.deadline = child, deadline
        self.buffer = bytearray()

    def send(self, data: bytes) -> None:
        assert self.child.stdin is not None
        try:
            self.child.stdin.write(data)
        except OSError:
            raise Refusal("git_unavailable", "git cat-file stopped") from None

    def line(self) -> bytes:
        while (end := self.buffer.find(b"\n")) < 0:
            if len(self.buffer) > 4096:
                raise Refusal("git_unavailable", "git cat-file said something unexpected")
            self._fill()
        line = bytes(self.buffer[:end])
        del self.buffer[:end + 1]
        return line

    def exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            self._fill(size - len(self.buffer))
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data

    def _fill(self, wanted: int = _READ) -> None:
        assert self.child.stdout is not None
        fd = self.child.stdout.fileno()
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            remaining = self.deadline - time.monotonic()
            if remaining <= 0 or not selector.select(remaining):
                raise Refusal("time_limit", "the tool call ran out of time reading Git "
                              "objects")
        chunk = os.read(fd, max(_READ, min(wanted, 1024 * 1024)))
        if not chunk:
            raise Refusal("git_unavailable", "git cat-file stopped")
        self.buffer += chunk

    def close(self) -> None:
        _kill(self.child)
        self.child.wait()
        for stream in (self.child.stdin, self.child.stdout):
            if stream is not None:
                stream.close()


def find_repository(top_fd: int, path: str, timeout: float, deadline: float
                    ) -> Repository | None:
    """The repository of the directory open as `top_fd` (whose canonical path is `path`):
    its own `.git` or the nearest ancestor's, on the same file system; None when there is
    none. Refuses `unsafe_repository` as the module docstring says."""
    names = [p for p in path.split("/") if p]
    current = os.dup(top_fd)
    climbed: list[str] = []
    try:
        while True:
            found = _git_directory(current)
            if found is not None:
                if any(name.lower() == ".git" for name in climbed):
                    os.close(found)
                    raise unsafe("the workspace lies inside a git directory")
                repo = Repository(found, "".join(f"{n}/" for n in reversed(climbed)),
                                  timeout, deadline)
                try:
                    _check(repo)
                except BaseException:
                    repo.close()
                    raise
                return repo
            if not names:
                return None
            parent = os.open("..", _DIR, dir_fd=current)
            here, up = os.fstat(current), os.fstat(parent)
            if up.st_dev != here.st_dev or (up.st_ino == here.st_ino):
                os.close(parent)
                return None  # a mount boundary or the root: Git stops there too
            expected = os.stat("/" + "/".join(names[:-1]))
            if (expected.st_dev, expected.st_ino) != (up.st_dev, up.st_ino):
                os.close(parent)
                raise Refusal("git_unavailable", "the workspace's folders moved while its "
                              "repository was looked for")
            climbed.append(names.pop())
            os.close(current)
            current = parent
    finally:
        os.close(current)


def _git_directory(folder: int) -> int | None:
    """`.git` in this folder, opened, if it is a git directory; refuses any other `.git`."""
    try:
        st = os.stat(".git", dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise unsafe("its .git is a symbolic link")
    if stat.S_ISREG(st.st_mode):
        raise unsafe("its .git is a file pointing elsewhere (a linked worktree or a "
                     "submodule checkout: for Git, open the main checkout)")
    if not stat.S_ISDIR(st.st_mode):
        raise unsafe("its .git is not a directory")
    fd = os.open(".git", _DIR, dir_fd=folder)
    try:
        if not _exists(fd, "HEAD") or not _exists(fd, "objects") or not _exists(fd, "refs"):
            os.close(fd)
            return None  # not a git directory: Git would look further up too
    except BaseException:
        os.close(fd)
        raise
    return fd


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _check(repo: Repository) -> None:
    """Refuse a git directory whose objects, refs, configuration or work tree lead
    elsewhere, or whose index names a path Git itself refuses."""
    link = _symlink_in(repo.fd, repo.deadline)
    if link is not None:
        raise unsafe(f".git/{link[:80]} is a symbolic link (Git would follow it elsewhere)")
    for name in ("HEAD", "index", "config", "config.worktree", "info/exclude",
                 "info/attributes"):  # files these tools read themselves
        try:
            mode = os.stat(name, dir_fd=repo.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            raise unsafe(f".git/{name} is not a regular file")
    for name in ("commondir", "objects/info/alternates", "objects/info/http-alternates"):
        if _exists(repo.fd, name):
            raise unsafe(f".git/{name} makes it read objects or refs from elsewhere")
    for name in ("config", "config.worktree"):  # before Git reads them, which follows includes
        reason = config_refusal(repo.git_file(name, GIT_FILE_BYTES) or b"")
        if reason:
            raise unsafe(reason)
    out = repo.run("config", "--null", "--list", limit=GIT_FILE_BYTES)
    for item in out.split(b"\0"):  # what Git itself reads, as a second look
        key, _, value = item.decode("utf-8", "replace").partition("\n")
        section, _, option = key.lower().rpartition(".")
        reason = _key_refusal(section, option, value) if "." in key else None
        if reason:
            raise unsafe(reason)
        if key.lower() == "extensions.objectformat" and value.strip().lower() == "sha256":
            repo.hash_size = 32
    repo.index()


_NEVER_READ = frozenset({"hooks", "modules"})  # hooks never run; nested repositories' own


def _symlink_in(gitdir: int, deadline: float) -> str | None:
    """The first symlink anywhere in the git directory but its hooks and nested
    repositories, or None: Git follows a symlink at any depth (an `objects/pack` or a
    ref pointing at another repository's), so none may be there at all."""
    top = os.dup(gitdir)
    stack = [(top, "", os.scandir(top))]
    looked = 0
    try:
        while stack:
            fd, base, entries = stack[-1]
            entry = next(entries, None)
            if entry is None:
                entries.close()
                os.close(fd)
                stack.pop()
                continue
            looked += 1
            if looked % 1024 == 0 and time.monotonic() > deadline:
                raise _out_of_time()
            if entry.is_symlink():
                return base + entry.name
            if entry.is_dir(follow_symlinks=False) and not (not base and entry.name in
                                                              _NEVER_READ):
                try:
                    child = os.open(entry.name, _DIR, dir_fd=fd)
                except FileNotFoundError:
                    continue  # gone meanwhile (Git packing its objects, say)
                except OSError:
                    return base + entry.name  # a folder swapped for a symlink meanwhile
                stack.append((child, f"{base}{entry.name}/", os.scandir(child)))
        return None
    finally:
        for fd, _, entries in stack:
            entries.close()
            os.close(fd)


def config_refusal(data: bytes) -> str | None:
    """Why a configuration file makes a repository unsafe, read without Git: it includes
    other files, or names a work tree or says it is bare. Cautious where Git's syntax is
    subtle: a key is looked for on every line, continuation lines included."""
    section = ""
    for raw in data.decode("utf-8", "replace").splitlines():
        line = raw.strip()
        if line.startswith("["):
            header, _, line = line[1:].partition("]")
            section = header.strip().split(None, 1)[0].split(".", 1)[0].lower() \
                if header.strip() else ""
            line = line.strip()
        if not line or line[0] in "#;":
            continue
        key, _, value = line.partition("=")
        reason = _key_refusal(section, key.strip().lower(), value)
        if reason:
            return reason
    return None


def _key_refusal(section: str, key: str, value: str) -> str | None:
    if section.startswith("include") and key == "path":
        return "its configuration includes other files (include.path, includeIf)"
    if section == "core" and key == "worktree":
        return "its configuration sets core.worktree (a work tree elsewhere)"
    if section == "core" and key == "bare" and value.strip().strip('"').lower() in _TRUE:
        return "its configuration says it is bare (core.bare)"
    return None


def _out_of_time() -> Refusal:
    return Refusal("time_limit", "the tool call ran out of time; narrow it with a path")


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)


def _read_all(fd: int, limit: int) -> bytes:
    chunks, size = [], 0
    while size <= limit:
        chunk = os.read(fd, min(_READ * 16, limit + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)[:limit]


def _collect(child: subprocess.Popen[bytes], limit: int, deadline: float
             ) -> tuple[bytes, bytes, bool]:
    """Read a child's stdout (up to `limit`) and stderr (a little) until both end, the
    limit is reached or the deadline passes; whether it ended by itself."""
    assert child.stdout is not None and child.stderr is not None
    out: list[bytes] = []
    err = b""
    size = 0
    with selectors.DefaultSelector() as selector:
        selector.register(child.stdout, selectors.EVENT_READ)
        selector.register(child.stderr, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return b"".join(out), err, False
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, _READ)
                if not chunk:
                    selector.unregister(key.fileobj)
                elif key.fileobj is child.stdout:
                    out.append(chunk[:limit - size])
                    size += len(out[-1])
                    if size >= limit:
                        return b"".join(out), err, False
                elif len(err) < _ERROR_BYTES:
                    err += chunk[:_ERROR_BYTES - len(err)]
    return b"".join(out), err, True


def _kill(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
