"""The workspace's files as Git sees them, found by our own confined walk (SPEC W2, W6, W7).

Owns walking a workspace folder by folder, each opened beneath its parent's descriptor
with `O_NOFOLLOW` (a symlink is an entry, never followed), and telling what each entry is
to Git: `tracked` (in the index, or a folder holding tracked files), `untracked`, `ignored`
(by the ignore files; everything inside an ignored folder is ignored too, tracked files
aside) or `submodule` (a gitlink, or a folder with its own `.git`: listed, never entered).
Git never walks the working tree: the index is read from the git directory, the ignore and
attribute files beneath the workspace by this walk, those above it from the index's blobs,
and one the working tree lacks from the index as Git reads it then.
Outside Git every entry is `untracked` and `.git` is skipped. Clankie's own home (W4) is an
entry marked `home`, never opened, let alone entered. The walk is linear in the
entries it looks at (ignored ones included), stops with `time_limit` at the call's
deadline, and holds bounded memory: of each folder on its way down it keeps the names
and types of its entries only (never their status), counted on the call's memory account
while it is held (`bounds.Bounds`: past it, `repository_too_large`); it looks at most at
`FOLDER_ENTRIES` entries of one folder and goes `MAX_LEVELS` folders deep (`partial` says
what it left). The rules of a file the walk did not reach are found down the folders of
its path, and only those of the last path asked are kept (counted), never one a folder.
"""

from __future__ import annotations

import bisect
import os
import stat
import sys
from collections.abc import Generator
from dataclasses import dataclass, field

from .bounds import SLOT, Bounds
from .confine import Refusal, Root, file_id, open_listed, open_regular
from .gitconvert import clean_action
from .gitindex import MODE_GITLINK, Index, as_bytes
from .gitrepo import Repository
from .gitrules import RULE_FILE_BYTES, Rules

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_RULE_FILES = (".gitignore", ".gitattributes")
FOLDER_ENTRIES = 50_000  # entries of one folder looked at (W5: its time; memory is counted)
MAX_LEVELS = 256  # folders deep below where a walk starts (W5: memory and descriptors)
UNREADABLE = 1_000  # folders the walk could not read that it names (W5: memory)


def kind_of(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def join(folder: str, name: str) -> str:
    return name if folder == "." else f"{folder}/{name}"


@dataclass(frozen=True, slots=True)
class Seen:
    path: str  # relative to the workspace
    kind: str  # file, directory, symlink, other
    found: _Listed | os.stat_result  # its own (lstat) status, or how to ask
    state: str  # tracked, untracked, ignored, submodule
    level: int  # 1 for the entries of the folder the walk started in
    filtered: bool  # the attributes name a filter for it (which is never run)
    at: int | None = None  # its (first) index entry, when it is tracked
    home: bool = False  # clankie's own home (W4): shown, never entered

    @property
    def st(self) -> os.stat_result:
        """Its own status. For an entry the walk found, asked through its folder: only
        while the walk is at it (as `open_seen`), the answer kept."""
        if isinstance(self.found, os.stat_result):
            return self.found
        return self.found.stat(follow_symlinks=False)


@dataclass(frozen=True, slots=True)
class _Listed:
    """An entry of a folder the walk holds open, whose status is asked only if needed."""

    folder: int
    name: str

    def stat(self, *, follow_symlinks: bool) -> os.stat_result:
        return os.stat(self.name, dir_fd=self.folder, follow_symlinks=follow_symlinks)


_KINDS = ("file", "directory", "symlink", "other")


@dataclass
class _Folder:
    fd: int
    path: str
    rules: Rules
    ignored: bool
    level: int
    names: list[str]  # its entries' names, sorted
    kinds: bytes  # and their types (an index in `_KINDS`), as the folder tells them
    held: int  # what the two hold, counted on the call's account
    next: int = 0


@dataclass(slots=True)
class _Step:
    """One folder of the last path whose rules were asked: the rules from above it, whether
    it (or a folder above it) is ignored, and the rules for its files once asked."""

    name: str
    above: Rules
    ignored: bool
    inside: Rules | None = None
    held: int = 0  # counted on the call's account while it is kept


_STEP_BYTES = sys.getsizeof(_Step("", Rules(), False)) + SLOT  # one, with its slot


@dataclass
class Worktree:
    """One tool call's view of the workspace: the index entries beneath it, the rules in
    force at its top, and the walk."""

    root: Root
    repo: Repository | None
    index: Index | None = None
    rules: Rules = field(default_factory=Rules)
    _chain: list[_Step] = field(default_factory=list)  # the folders of the last path asked
    looked: int = 0
    folder_fd: int = -1  # while the walk has just yielded an entry: its folder, open
    cut_folders: int = 0  # folders holding more than FOLDER_ENTRIES entries
    unreadable: set[str] = field(default_factory=set)  # folders whose entries it could not read
    not_entered: int = 0  # folders deeper than MAX_LEVELS below the start

    @property
    def partial(self) -> str | None:
        """What the walk did not look at, in words, or None when it saw everything."""
        said = []
        if self.cut_folders:
            said.append(f"{self.cut_folders} folder(s) hold more than {FOLDER_ENTRIES} "
                        f"entries: only {FOLDER_ENTRIES} of each were looked at")
        if self.not_entered:
            said.append(f"{self.not_entered} folder(s) deeper than {MAX_LEVELS} levels were "
                        "not entered")
        if self.unreadable:
            said.append(f"{len(self.unreadable)} folder(s) could not be read (permission "
                        "denied): what they hold is not said")
        return "; ".join(said) or None

    @property
    def rules_skipped(self) -> int:
        """Rule lines of the rule files this call read that it did not match with (W5)."""
        return self.rules.skipped

    @classmethod
    def of(cls, root: Root, repo: Repository | None) -> Worktree:
        view = cls(root, repo)
        if repo is None:
            return view
        view.index = repo.index()
        rules = Rules(repo.gitdir.read("info/exclude", RULE_FILE_BYTES),
                      repo.gitdir.read("info/attributes", RULE_FILE_BYTES), root.check_time,
                      root.bounds)
        parts = repo.prefix.split("/")[:-1]
        for end in range(len(parts)):  # the folders above the workspace, from the top down
            base = "".join(f"{p}/" for p in parts[:end])
            blobs = [view._indexed(base + name) for name in _RULE_FILES]
            rules = rules.below(base, blobs[0], blobs[1])
        view.rules = rules
        return view

    def _indexed(self, top_path: str, skip_worktree_only: bool = False) -> bytes | None:
        """A rule file as the index has it ("ours" in a conflict, as Git reads it): for the
        folders above the workspace, and for a rule file the working tree lacks."""
        assert self.repo is not None and self.index is not None
        i = self.index.find(as_bytes(top_path))
        if i is not None and self.index.stage(i) != 0:
            i = self.index.ours(i)
        if i is None or (skip_worktree_only and not self.index.skip_worktree(i)):
            return None
        found = self.repo.store.read(self.index.oid(i), RULE_FILE_BYTES)
        return bytes(found[1]) if found is not None and found[0] == "blob" else None

    def _or_indexed(self, folder: str, found: list[bytes | None]) -> list[bytes | None]:
        """A folder's rule files as read from it, each one missing (or not a regular file)
        as Git then reads it from the index: a `.gitattributes` whatever its flags (one the
        user deleted still applies), a `.gitignore` only when skip-worktree (outside a
        sparse checkout)."""
        if self.index is None:
            return found
        return [data if data is not None else
                self._indexed(self._base(folder) + name, name == ".gitignore")
                for data, name in zip(found, _RULE_FILES, strict=True)]

    def unread(self, path: str) -> bool:
        """Whether a workspace-relative path lies in a folder the walk could not read."""
        if not self.unreadable:
            return False
        folder = path.rpartition("/")[0]
        while folder:
            if folder in self.unreadable:
                return True
            folder = folder.rpartition("/")[0]
        return "." in self.unreadable

    def position(self, path: str) -> int | None:
        """Where a workspace-relative path's (first) index entry is, or None."""
        return self.index.find(as_bytes(self.top(path))) if self.index is not None else None

    def tracked_dir(self, path: str) -> bool:
        """Whether a workspace-relative folder holds tracked files."""
        return self.index is not None and self.index.holds_folder(as_bytes(self.top(path)))

    def top(self, path: str) -> str:
        """A workspace-relative path as Git names it (relative to the top)."""
        prefix = self.repo.prefix if self.repo is not None else ""
        return prefix if path == "." else prefix + path

    def walk(self, start: str = ".", depth: int | None = None, into_ignored: bool = False,
             statuses: bool = True) -> Generator[Seen, None, None]:
        """The entries below `start` (a folder, already checked), folder by folder in name
        order, each before what is inside it; at most `depth` levels; ignored folders are
        entered only when `into_ignored`. Without `statuses`, an entry but a folder has
        its status asked only if `Seen.st` is read (a search needs only types)."""
        rules, ignored = self._rules_down_to(start)
        with_handle = self.root.open(start, directory=True)
        try:
            fd = self.root.reopen(with_handle, os.O_RDONLY | os.O_DIRECTORY)
        finally:
            os.close(with_handle.fd)
        stack = [self._enter(fd, start, rules, ignored, 1)]
        try:
            while stack:
                folder = stack[-1]
                if folder.next == len(folder.names):
                    os.close(stack.pop().fd)
                    self.root.bounds.give(folder.held)
                    continue
                name, kind = folder.names[folder.next], _KINDS[folder.kinds[folder.next]]
                entry = _Listed(folder.fd, name)
                folder.next += 1
                self.looked += 1
                if self.looked % 256 == 0:
                    self.root.check_time()
                path = join(folder.path, name)
                st = None
                if kind == "directory" or statuses:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue  # gone since the folder was listed
                state, at = self._state(path, kind, folder)
                child = None
                home = st is not None and kind == "directory" and self.root.is_home(st)
                if st is not None and kind == "directory" and state != "submodule" \
                        and not home:  # W4: the home is never entered
                    descend = ((depth is None or folder.level < depth)
                               and (state != "ignored" or into_ignored))
                    if descend and folder.level >= MAX_LEVELS:
                        descend = False
                        self.not_entered += 1
                    if descend or (self.repo is not None and state != "ignored"):
                        child = self._open(folder.fd, name, st)
                        if child is None and descend and not os.access(
                                name, os.R_OK | os.X_OK, dir_fd=folder.fd,
                                follow_symlinks=False) and len(self.unreadable) < UNREADABLE:
                            self.unreadable.add(path)  # its entries cannot be read
                    if child is not None and self.repo is not None and state != "ignored" \
                            and not self.tracked_dir(path) and _has_git(child):
                        state = "submodule"
                    if child is not None and not (descend and state != "submodule"):
                        os.close(child)
                        child = None
                filtered = kind != "directory" and folder.rules.filtered(self.top(path))
                self.folder_fd = folder.fd
                yield Seen(path, kind, st or entry, state, folder.level, filtered, at, home)
                if child is not None:
                    stack.append(self._enter(child, path, folder.rules, state == "ignored"
                                             or (state == "tracked" and self.excluded(
                                                 path, kind, folder)), folder.level + 1))
        finally:
            for folder in stack:
                os.close(folder.fd)
                self.root.bounds.give(folder.held)

    def open_seen(self, seen: Seen) -> int | None:
        """The file the walk has just yielded, opened for reading through its folder's
        descriptor (no path resolved again, no symlink followed), if it is still a regular
        file; the caller closes it."""
        return open_listed(self.folder_fd, seen.path.rpartition("/")[2], self.root.home_files)

    def _state(self, path: str, kind: str, folder: _Folder) -> tuple[str, int | None]:
        """What the entry is to Git, and where its index entry is if it has one."""
        if self.index is None:
            return "untracked", None
        i = self.position(path)
        if i is not None:
            return ("submodule" if self.index.mode(i) == MODE_GITLINK else "tracked"), i
        if kind == "directory" and self.tracked_dir(path):
            return "tracked", None
        if self.excluded(path, kind, folder):
            return "ignored", None
        return "untracked", None

    def excluded(self, path: str, kind: str, folder: _Folder) -> bool:
        """Git's `is_excluded`: the path lies in an excluded folder, or the rules exclude
        it itself (an excluded folder stays so whatever a rule says of what is in it, and
        whether it holds tracked files)."""
        return folder.ignored or folder.rules.ignored(self.top(path), kind == "directory")

    def _enter(self, fd: int, path: str, rules: Rules, ignored: bool, level: int) -> _Folder:
        self.root.check_time()
        try:
            names, kinds, held, more = _scan(fd, self.root.bounds)
        except OSError:
            names, kinds, held, more = [], b"", 0, False
            if len(self.unreadable) < UNREADABLE:
                self.unreadable.add(path)
        except BaseException:
            os.close(fd)
            raise
        self.cut_folders += more
        try:
            if self.repo is not None and (not ignored or self.tracked_dir(path)):  # (attributes
                # apply to tracked files in an excluded folder)
                found = self._or_indexed(path, [_rule_file(fd, n) if _holds(names, n)
                                                else None for n in _RULE_FILES])
                rules = rules.below(self._base(path), found[0], found[1])
        except BaseException:
            os.close(fd)
            self.root.bounds.give(held)
            raise
        return _Folder(fd, path, rules, ignored, level, names, kinds, held)

    def filtered(self, path: str) -> bool:
        """Whether the attributes name a filter for a file the walk did not reach."""
        return self._rules_for(path).filtered(self.top(path))

    def conversion(self, path: str) -> str | None:
        """How Git converts the file's line endings on the way into the repository
        (`gitconvert.clean_action`): from its attributes and `core.autocrlf`."""
        rules = self._rules_for(path)
        if not rules.any_attribute and self.repo is not None and self.repo.autocrlf == "false":
            return None  # the common case: nothing to look up
        return clean_action(rules.attributes(self.top(path)),
                            self.repo.autocrlf if self.repo is not None else "false")

    def _rules_for(self, path: str) -> Rules:
        """The rules in force for the files of the folder holding `path`."""
        folder = path.rpartition("/")[0] or "."
        return self._inside(self._step(folder), folder)

    def _inside(self, step: _Step, folder: str) -> Rules:
        """The rules for the files of `folder`, whose step is `step`."""
        if step.inside is None:
            found = self._or_indexed(folder, [self._read_rule_file(join(folder, name))
                                              for name in _RULE_FILES])
            step.inside = step.above.below(self._base(folder), found[0], found[1])
        return step.inside

    def _rules_down_to(self, folder: str) -> tuple[Rules, bool]:
        """The rules in force in `folder` (workspace-relative) from the folders above it,
        and whether it, or a folder above it within the workspace, is ignored."""
        if self.repo is None:
            return self.rules, False
        step = self._step(folder)
        return step.above, step.ignored

    def _step(self, folder: str) -> _Step:
        """The last step of `_chain` down to `folder`, the steps the last folder asked
        shares with it kept (paths come in Git's order, or the walk's: a folder's files
        are asked together, so its rules are found once)."""
        parts = [p for p in folder.split("/") if p not in ("", ".")]
        chain = self._chain
        if not chain:
            chain.append(_Step(".", self.rules, False))
        keep = 1
        while keep < len(chain) and keep <= len(parts) and chain[keep].name == parts[keep - 1]:
            keep += 1
        for gone in chain[keep:]:
            self.root.bounds.give(gone.held)
        del chain[keep:]
        here = "/".join(parts[:keep - 1]) or "."
        for part in parts[keep - 1:]:
            parent = chain[-1]
            rules = self._inside(parent, here)
            here = join(here, part)
            step = _Step(part, rules, parent.ignored or rules.ignored(self.top(here), True))
            # (an ignored folder's rules still count: attributes apply to its tracked files)
            step.held = sys.getsizeof(part) + _STEP_BYTES
            self.root.bounds.take(step.held, "the rules of the folders of a path")
            chain.append(step)
        return chain[-1]

    def _base(self, folder: str) -> str:
        return self.top(folder) if folder == "." else self.top(folder) + "/"

    def _read_rule_file(self, path: str) -> bytes | None:
        try:
            fd, _ = self.root.open_file(path, lambda _: False)
        except Refusal:
            return None
        try:
            return os.read(fd, RULE_FILE_BYTES)
        finally:
            os.close(fd)

    @staticmethod
    def _open(parent: int, name: str, st: os.stat_result) -> int | None:
        """The folder `name` as it was listed (`st`), or None: a folder put there since (the
        home, say) is not the one the walk looked at, and is not entered."""
        try:
            fd = os.open(name, _DIR, dir_fd=parent)
        except OSError:
            return None
        if file_id(os.fstat(fd)) != file_id(st):
            os.close(fd)
            return None
        return fd


def _scan(fd: int, bounds: Bounds) -> tuple[list[str], bytes, int, bool]:
    """An open folder's entries but `.git`, sorted by name: their names and types (as the
    folder tells them, no status asked: a search needs only types), at most
    `FOLDER_ENTRIES` of them, and whether there were more; what they hold is counted on
    the call's account (and the count returned, to be given back when they are let go)."""
    found: list[tuple[str, int]] = []
    held = 0
    more = False
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.name == ".git":
                    continue
                if len(found) == FOLDER_ENTRIES:
                    more = True
                    break
                size = sys.getsizeof(entry.name) + 2 * SLOT + 1  # (and its place as sorted)
                bounds.take(size, "the folders the walk holds on its way down")
                held += size
                found.append((entry.name, _kind_of_entry(entry)))
        found.sort()
    except BaseException:
        bounds.give(held)
        raise
    return [name for name, _ in found], bytes(kind for _, kind in found), held, more


def _holds(names: list[str], name: str) -> bool:
    at = bisect.bisect_left(names, name)
    return at < len(names) and names[at] == name


def _kind_of_entry(entry: os.DirEntry[str]) -> int:
    """An entry's type as its folder tells it (no status asked where the file system says
    it in the listing): its index in `_KINDS`."""
    try:
        if entry.is_symlink():
            return 2
        if entry.is_dir(follow_symlinks=False):
            return 1
        if entry.is_file(follow_symlinks=False):
            return 0
    except OSError:
        pass
    return 3


def _has_git(fd: int) -> bool:
    try:
        os.stat(".git", dir_fd=fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _rule_file(folder: int, name: str) -> bytes | None:
    fd = open_regular(folder, name)
    if fd is None:
        return None
    try:
        return os.read(fd, RULE_FILE_BYTES)
    finally:
        os.close(fd)
