"""The repository a workspace lies in: found, checked, and read by us alone (SPEC W7).

Owns three things. Finding the repository: the nearest `.git` from the workspace upwards
(on one file system), which must be a real directory; a `.git` file or symlink is
`unsafe_repository`. Checking it before anything else is read: its own `config` (read by
us, never a file it includes) must not name a work tree elsewhere (`core.worktree`), say
it is bare (`core.bare`) or include other files, and it must be in a format these tools
read (SHA-1 or SHA-256 objects, files for refs, an index of version 2-4). And
`Repository`: the git directory held open for one tool call (`gitfiles.GitDir`, every
file through the confined opener), its index (`gitindex`), objects (`gitobjects`), refs
(`gitrefs`) and history (`gittrees`). No Git program ever runs: nothing a repository
configures (filters, drivers, fsmonitor, hooks, pagers, alternates) is ever acted on, and
nothing under `.git` is ever written.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from .bounds import Bounds
from .confine import Root
from .gitfiles import GitDir, unsafe
from .gitindex import Index, as_bytes, read_index
from .gitobjects import ObjectStore
from .gitrefs import Refs
from .gittrees import MODE_TREE, Commit, History, missing

CONFIG_BYTES = 64 * 1024
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
# A folder climbed through is only looked in by name, never listed: one its owner made
# traversable but not readable (mode 0711) is climbed through as Git climbs it.
_CLIMB = (getattr(os, "O_PATH", 0) or os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC
_TRUE = {"", "true", "yes", "on", "1"}


@dataclass
class Repository:
    """A checked git directory, held open, and where the workspace lies below its top."""

    gitdir: GitDir
    prefix: str  # '' when the workspace is the top, else 'a/b/'
    bounds: Bounds  # the call's deadline and memory account (W5)
    hash_size: int = 20
    autocrlf: str = "false"  # core.autocrlf of the repository's own config: false, true, input
    sparse_checkout: bool = False  # core.sparseCheckout
    index_mtime_ns: int = 0
    _index: Index | None = None
    _store: ObjectStore | None = field(default=None, repr=False)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        self.gitdir.close()

    def __enter__(self) -> Repository:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def store(self) -> ObjectStore:
        if self._store is None:
            self._store = ObjectStore(self.gitdir, self.hash_size, self.bounds)
        return self._store

    @property
    def history(self) -> History:
        return History(self.store)

    def index(self) -> Index:
        """Every entry of the index (none before the first `git add`), read once; sets
        `index_mtime_ns`, when Git wrote it (a file changed in that moment must be hashed)."""
        if self._index is None:
            fd = self.gitdir.open_file("index")
            if fd is None:
                self._index = Index(self.hash_size)
                return self._index
            try:
                self.index_mtime_ns = os.fstat(fd).st_mtime_ns
                self._index = read_index(fd, self.hash_size, self.bounds)
            finally:
                os.close(fd)
        return self._index

    def branch(self) -> str | None:
        """The checked-out branch's name, or None when HEAD is detached."""
        return Refs(self.gitdir, self.store).head()[0]

    def head(self) -> bytes | None:
        """The commit HEAD names; None before the first commit; `not_found` when it names
        an object missing from the repository's own store."""
        refs = Refs(self.gitdir, self.store)
        oid = refs.head()[1]
        if oid is None:
            return None
        if self.store.info(oid) is None:
            raise missing()
        return refs.peeled(oid)

    def commit(self, revision: str) -> bytes | None:
        """The commit a revision names; None if it names none (`invalid_argument` if it is
        not a revision these tools take)."""
        return Refs(self.gitdir, self.store).commit(revision)

    def files(self, commit: bytes | None, scope: str = ".",
              prune: Callable[[bytes, bytes], bool] | None = None
              ) -> Iterator[tuple[bytes, int, bytes]]:
        """A commit's files beneath the workspace (and beneath `scope`, a workspace-relative
        path), in Git's order: (path relative to the workspace as bytes, mode, object ID);
        gitlinks included, never entered; `prune` as `History.files` has it."""
        if commit is None:
            return
        history = self.history
        where = self.prefix + ("" if scope == "." else scope)
        found = history.entry(history.commit(commit).tree,
                              [as_bytes(p) for p in where.split("/") if p])
        if found is None:
            return
        mode, oid = found
        if mode != MODE_TREE:
            yield as_bytes(scope), mode, oid
            return
        yield from history.files(oid, b"" if scope == "." else as_bytes(scope) + b"/", prune)

    def log(self, start: bytes, path: str, limit: int) -> list[Commit]:
        return self.history.log(start, [as_bytes(p) for p in path.split("/") if p], limit)


def repository(root: Root) -> Repository | None:
    """The workspace's checked repository, or None outside Git."""
    return find_repository(root.fd, root.saved.path, root.bounds)


def find_repository(top_fd: int, path: str, bounds: Bounds) -> Repository | None:
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
                repo = Repository(GitDir(found), "".join(f"{n}/" for n in reversed(climbed)),
                                  bounds)
                try:
                    _check(repo)
                except BaseException:
                    repo.close()
                    raise
                return repo
            if not names:
                return None
            parent = os.open("..", _CLIMB, dir_fd=current)
            here, up = os.fstat(current), os.fstat(parent)
            if up.st_dev != here.st_dev or (up.st_ino == here.st_ino):
                os.close(parent)
                return None  # a mount boundary or the root: Git stops there too
            expected = os.stat("/" + "/".join(names[:-1]))
            if (expected.st_dev, expected.st_ino) != (up.st_dev, up.st_ino):
                os.close(parent)
                raise unsafe("the workspace's folders moved while its repository was "
                             "looked for")
            climbed.append(names.pop())
            os.close(current)
            current = parent
    finally:
        os.close(current)


def _git_directory(folder: int) -> int | None:
    """`.git` in this folder, opened, if it is a git directory; refuses any other `.git`,
    and one that is not the user's own (with the folder it lies in): what Git calls
    "dubious ownership", someone else's repository above a workspace in a shared folder."""
    try:
        st = os.stat(".git", dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError:
        raise unsafe("its .git cannot be looked at") from None
    if stat.S_ISLNK(st.st_mode):
        raise unsafe("its .git is a symbolic link")
    if stat.S_ISREG(st.st_mode):
        raise unsafe("its .git is a file pointing elsewhere (a linked worktree or a "
                     "submodule checkout: for Git, open the main checkout)")
    if not stat.S_ISDIR(st.st_mode):
        raise unsafe("its .git is not a directory")
    try:
        fd = os.open(".git", _DIR, dir_fd=folder)
    except OSError:  # swapped for a symlink or a file since it was looked at
        raise unsafe("its .git changed while it was opened") from None
    me = os.geteuid()
    if os.fstat(fd).st_uid != me or os.fstat(folder).st_uid != me:
        os.close(fd)
        raise unsafe("its .git, or the folder holding it, belongs to another user")
    if not all(_exists(fd, name) for name in ("HEAD", "objects", "refs")):
        os.close(fd)
        return None  # not a git directory: Git would look further up too
    return fd


def _exists(fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def _check(repo: Repository) -> None:
    """Refuse a git directory whose configuration leads elsewhere or is in a format these
    tools do not read. (Its index is read, and checked, when a tool first needs it.)"""
    config = repo.gitdir.read("config", CONFIG_BYTES) or b""
    facts = read_config(config)
    if facts.refusal:
        raise unsafe(facts.refusal)
    repo.hash_size = facts.hash_size
    data = repo.gitdir.read("config.worktree", CONFIG_BYTES) or b""
    reason = read_config(data).refusal
    if reason:
        raise unsafe(reason)
    # (`git sparse-checkout` writes its setting there; read after the shared file, as Git)
    worktree = read_config(config + b"\n" + data)
    repo.autocrlf, repo.sparse_checkout = worktree.autocrlf, worktree.sparse_checkout


@dataclass(frozen=True, slots=True)
class ConfigFacts:
    refusal: str | None  # why the repository is not read, if it is not
    hash_size: int  # 20 (SHA-1) or 32 (SHA-256)
    autocrlf: str = "false"  # core.autocrlf: false, true or input
    sparse_checkout: bool = False  # core.sparseCheckout


def config_refusal(data: bytes) -> str | None:
    """Why a configuration file makes a repository unsafe (see `read_config`)."""
    return read_config(data).refusal


def read_config(data: bytes) -> ConfigFacts:
    """What a configuration file says that matters here, read by us: whether it includes
    other files, names a work tree, says it is bare or is in a format these tools do not
    read; and its object format. Cautious where Git's syntax is subtle: a key is looked
    for on every line, continuation lines included."""
    section = ""
    hash_size = 20
    autocrlf = "false"
    sparse = False
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
        key, value = key.strip().lower(), value.strip().strip('"').lower()
        reason = _key_refusal(section, key, value)
        if reason:
            return ConfigFacts(reason, hash_size)
        if section == "extensions" and key == "objectformat":
            if value not in ("sha1", "sha256"):
                return ConfigFacts("its objects are in a format these tools do not read",
                                   hash_size)
            hash_size = 32 if value == "sha256" else 20
        if section == "core" and key == "autocrlf":
            autocrlf = "input" if value == "input" else "true" if value in _TRUE else "false"
        if section == "core" and key == "sparsecheckout":
            sparse = value in _TRUE
    return ConfigFacts(None, hash_size, autocrlf, sparse)


def _key_refusal(section: str, key: str, value: str) -> str | None:
    if section.startswith("include") and key == "path":
        return "its configuration includes other files (include.path, includeIf)"
    if section == "core" and key == "worktree":
        return "its configuration sets core.worktree (a work tree elsewhere)"
    if section == "core" and key == "bare" and value in _TRUE:
        return "its configuration says it is bare (core.bare)"
    if section == "extensions" and key == "refstorage" and value != "files":
        return "its refs are stored in a format these tools do not read (reftable)"
    if section == "core" and key == "repositoryformatversion" and value not in ("0", "1"):
        return "it is in a repository format these tools do not read"
    return None

