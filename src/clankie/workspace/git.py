"""The tools `git_status`, `git_log` and `git_diff` (SPEC W1, W5, W7), Git on objects only.

Owns what each Git tool says. Git (through `gitrepo`) only resolves revisions, lists trees
and commits and reads blobs; the index is parsed by `gitindex`; every working-tree byte is
read by the confined opener (W2). Whether a tracked file changed is told as Git tells it:
unchanged when its stat data matches the index (and is not racy), else by hashing its
bytes as a blob. Diffs are ours (`textdiff`). A file whose attributes name a filter is
`filtered` and never diffed; gitlinks are `submodule`, never entered; a secret-like path
(W4) is named, never quoted. Every result names only paths beneath the workspace.
"""

from __future__ import annotations

import hashlib
import heapq
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

from clankie.tool_dto import (
    Commit,
    GitDiffArgs,
    GitDiffResult,
    GitLogArgs,
    GitLogResult,
    GitStatusResult,
    StatusEntry,
)

from .confine import Refusal, Root, check_path, tidy
from .deny import DenyList
from .gitindex import MODE_GITLINK, MODE_SYMLINK, IndexEntry
from .gitrepo import Objects, Repository, find_repository
from .textdiff import DIFF_LINES, bounded, header, patch, too_many_lines
from .worktree import Seen, Worktree, kind_of

STATUS_ENTRIES = 200
DIFF_SIDE_BYTES = 1024 * 1024  # a larger version is named with its size, not diffed
LOG_BYTES = 1024 * 1024
_CHUNK = 256 * 1024


def repository(root: Root, git_timeout: float) -> Repository | None:
    """The workspace's checked repository, or None outside Git."""
    return find_repository(root.fd, root.saved.path, git_timeout, root.deadline)


def _required(root: Root, git_timeout: float) -> Repository:
    repo = repository(root, git_timeout)
    if repo is None:
        raise Refusal("not_a_repository", "the workspace is not in a Git repository")
    return repo


@dataclass
class _Tree:
    """One tool call's Git state: the repository, its objects, the walk and the files."""

    root: Root
    repo: Repository
    objects: Objects
    view: Worktree
    files: dict[str, Seen]  # the tracked files the walk found
    others: list[tuple[str, str]]  # the first untracked files ('??') and nested
    # repositories ('submodule') by path, at most STATUS_ENTRIES + 1 of them

    @classmethod
    def read(cls, root: Root, repo: Repository, objects: Objects) -> _Tree:
        view = Worktree.of(root, repo, objects)
        files: dict[str, Seen] = {}
        others: list[tuple[str, str]] = []
        for seen in view.walk():
            if seen.path in view.tracked:
                if seen.kind != "directory":
                    files[seen.path] = seen
            elif seen.state == "submodule" or (seen.state == "untracked"
                                               and seen.kind != "directory"):
                others.append((seen.path, "??" if seen.state == "untracked" else "submodule"))
                if len(others) > 4 * STATUS_ENTRIES:  # keep the first ones only
                    others = heapq.nsmallest(STATUS_ENTRIES + 1, others)
        tree = cls(root, repo, objects, view, files,
                   heapq.nsmallest(STATUS_ENTRIES + 1, others))
        if view.partial:  # tracked files the walk did not reach are looked up one by one
            for path, entry in view.tracked.items():
                if path not in files and entry.mode != MODE_GITLINK:
                    root.check_time()
                    st = root.lstat(path)
                    if st is not None and not stat.S_ISDIR(st.st_mode):
                        files[path] = Seen(path, kind_of(st.st_mode), st, "tracked", 0,
                                           view.filtered(path))
        return tree

    def stage0(self) -> dict[str, IndexEntry]:
        return {path: entry for path, entry in self.view.tracked.items() if entry.stage == 0}

    def unchanged_quick(self, entry: IndexEntry, seen: Seen) -> bool:
        """Whether the file is the index's by its stat data alone (no byte read): same
        mode, same stat data, written before the index was (else it may be racy)."""
        return (_mode(seen.st.st_mode) == entry.mode and _stat_matches(entry, seen.st)
                and entry.mtime_ns < self.repo.index_mtime_ns)

    def unchanged(self, entry: IndexEntry, seen: Seen) -> bool:
        """Whether the working tree's file is the index's, as Git would decide it."""
        if _mode(seen.st.st_mode) != entry.mode:
            return False
        return self.unchanged_quick(entry, seen) or self.blob_id(seen) == entry.oid

    def blob_id(self, seen: Seen) -> str | None:
        """The object ID the file's bytes would have as a blob (None: unreadable)."""
        digest = hashlib.sha256() if self.repo.hash_size == 32 else hashlib.sha1()
        if seen.kind == "symlink":
            target = self.link_target(seen.path)
            if target is None:
                return None
            digest.update(b"blob %d\x00" % len(target) + target)
            return digest.hexdigest()
        try:
            fd, st = self.root.open_file(seen.path, lambda _: False)
        except Refusal:
            return None
        try:
            digest.update(b"blob %d\x00" % st.st_size)
            read = 0
            while chunk := os.read(fd, _CHUNK):
                digest.update(chunk)
                read += len(chunk)
                self.root.check_time()
            return digest.hexdigest() if read == st.st_size else None
        finally:
            os.close(fd)

    def link_target(self, path: str) -> bytes | None:
        folder, _, name = path.rpartition("/")
        try:
            parent = self.root.open(folder or ".", directory=True)
        except Refusal:
            return None
        try:
            return os.fsencode(os.readlink(name, dir_fd=parent.fd))
        except OSError:
            return None
        finally:
            os.close(parent.fd)

    def content(self, path: str, deny: DenyList) -> bytes | None:
        """The working tree's bytes of a file, None when larger than a diff reads; refused
        when it cannot be read (gone, or a symlink to a secret-like path since the walk)."""
        seen = self.files.get(path)
        if seen is not None and seen.kind == "symlink":
            return self.link_target(path)
        fd, st = self.root.open_file(path, deny.denies)
        try:
            if st.st_size > DIFF_SIDE_BYTES:
                return None
            return os.read(fd, DIFF_SIDE_BYTES + 1)[:DIFF_SIDE_BYTES]
        finally:
            os.close(fd)


# One version of a file in a diff: (mode, object ID) for a blob or a gitlink in a commit or
# the index, (mode, None) for the working tree's file, None when absent.
Side = tuple[int, str | None] | None


@dataclass
class _Commit:
    """A commit's files compared with the index as they stream by from Git: only what
    differs is kept, so memory follows the changes, not the size of the tree."""

    present: set[str]  # index paths the commit has, the same or not
    differ: dict[str, tuple[int, str]]  # the commit's version where it is not the index's
    only: dict[str, tuple[int, str]]  # paths the commit has and the index has not

    @classmethod
    def of(cls, repo: Repository, commit: str | None, index: dict[str, IndexEntry]) -> _Commit:
        compared = cls(set(), {}, {})
        for path, mode, oid in repo.tree(commit):
            entry = index.get(path)
            if entry is None:
                compared.only[path] = (mode, oid)
                continue
            compared.present.add(path)
            if (entry.mode, entry.oid) != (mode, oid) or entry.stage:
                compared.differ[path] = (mode, oid)
        return compared

    def old(self, path: str, entry: IndexEntry) -> Side:
        """The commit's version of an index path."""
        if path not in self.present:
            return None
        return self.differ.get(path, (entry.mode, entry.oid))


def git_status(root: Root, git_timeout: float) -> GitStatusResult:
    with _required(root, git_timeout) as repo, repo.objects() as objects:
        tree = _Tree.read(root, repo, objects)
        head = _Commit.of(repo, repo.commit("HEAD"), tree.view.tracked)
        entries = heapq.nsmallest(STATUS_ENTRIES + 1, (entry for entry in _status(tree, head)
                                                       if not root.in_home(entry[0])))
        branch = repo.branch()
    shown = [StatusEntry(path=p, status=s) for p, s in entries[:STATUS_ENTRIES]]
    return GitStatusResult(branch=branch, entries=shown, truncated=len(entries) > STATUS_ENTRIES,
                           note=tree.view.partial)


def _status(tree: _Tree, head: _Commit) -> Iterator[tuple[str, str]]:
    for path, entry in tree.view.tracked.items():
        tree.root.check_time()
        if entry.stage != 0:
            yield path, "UU"
            continue
        old = head.old(path, entry)
        if entry.mode == MODE_GITLINK or (old and old[0] == MODE_GITLINK):
            yield path, "submodule"
            continue
        x = " " if old == (entry.mode, entry.oid) or entry.intent_to_add else \
            ("A" if old is None else "M")
        seen = tree.files.get(path)
        if seen is None:
            y = "D"
        elif tree.unchanged_quick(entry, seen):
            y = " "
        elif seen.filtered:
            yield path, "filtered"
            continue
        else:
            y = " " if tree.unchanged(entry, seen) else ("A" if entry.intent_to_add else "M")
        if x + y != "  ":
            yield path, x + y
    for path, (mode, _) in head.only.items():
        yield path, "submodule" if mode == MODE_GITLINK else "D "
    yield from tree.others


def git_log(root: Root, args: GitLogArgs, timeout: float) -> GitLogResult:
    with _required(root, timeout) as repo:
        commit = repo.commit("HEAD")
        if commit is None:
            return GitLogResult(commits=[])
        path = tidy(check_path(args.path)) if args.path is not None else "."
        where = (repo.prefix + path if path != "." else repo.prefix).rstrip("/")
        out = repo.run("rev-list", f"--max-count={args.limit}",
                       "--format=%H%x00%an%x00%aI%x00%s", commit, "--",
                       *([where] if where else []), limit=LOG_BYTES)
    commits = []
    for line in out.decode("utf-8", "replace").split("\n"):
        fields = line.split("\x00", 3)
        if len(fields) == 4 and not line.startswith("commit "):
            commits.append(Commit(commit=fields[0], author=fields[1][:200], date=fields[2],
                                  subject=fields[3][:300]))
    return GitLogResult(commits=commits)


def git_diff(root: Root, args: GitDiffArgs, deny: DenyList, timeout: float) -> GitDiffResult:
    scope = tidy(check_path(args.path)) if args.path is not None else "."
    with _required(root, timeout) as repo, repo.objects() as objects:
        tree = _Tree.read(root, repo, objects)
        base = None
        if args.revision is not None:
            base = repo.commit(args.revision)
            if base is None:
                raise Refusal("invalid_argument", f"{args.revision[:80]!r} is not a commit of "
                              "this repository")
        elif args.staged:
            base = repo.commit("HEAD")
        changes = sorted(change for change in _changes(tree, base, args, repo)
                         if (scope == "." or change[0] == scope
                             or change[0].startswith(scope + "/"))
                         and not root.in_home(change[0]))  # W4: never compared

        def render(change: tuple[str, Side, Side]) -> str:
            root.check_time()
            return _file_diff(tree, *change, deny)

        text, truncated = bounded(changes, render)
    return GitDiffResult(diff=text, truncated=truncated)


def _changes(tree: _Tree, base: str | None, args: GitDiffArgs, repo: Repository
             ) -> Iterator[tuple[str, Side, Side]]:
    index = tree.stage0()
    if args.revision is None and not args.staged:  # the index against the working tree
        for path, entry in index.items():
            if entry.mode == MODE_GITLINK or entry.intent_to_add:
                continue
            seen = tree.files.get(path)
            if seen is None:
                yield path, (entry.mode, entry.oid), None
            elif not tree.unchanged_quick(entry, seen) and (
                    seen.filtered or not tree.unchanged(entry, seen)):
                yield path, (entry.mode, entry.oid), (_mode(seen.st.st_mode), None)
        return
    commit = _Commit.of(repo, base, index)
    for path, gone in commit.only.items():
        yield path, gone, None
    for path, entry in index.items():
        old = commit.old(path, entry)
        if args.staged:  # a commit against the index
            if old != (entry.mode, entry.oid):
                yield path, old, (entry.mode, entry.oid)
            continue
        seen = tree.files.get(path)  # a commit against the working tree
        if entry.mode == MODE_GITLINK:
            if old != (entry.mode, entry.oid):
                yield path, old, (entry.mode, entry.oid)
        elif seen is None:
            if old is not None:
                yield path, old, None
        elif old == (entry.mode, entry.oid) and tree.unchanged_quick(entry, seen):
            continue
        elif old is None or old[0] != _mode(seen.st.st_mode) or \
                seen.filtered or tree.blob_id(seen) != old[1]:
            yield path, old, (_mode(seen.st.st_mode), None)


def _file_diff(tree: _Tree, path: str, old: Side, new: Side, deny: DenyList) -> str:
    head = header(path, old[0] if old else None, new[0] if new else None)
    if deny.denies(path):
        return head + "(a secret-like path: its contents are never shown; setting " \
                      "workspace_deny)\n"
    if (old and old[0] == MODE_GITLINK) or (new and new[0] == MODE_GITLINK):
        lines = [f"-Subproject commit {old[1]}\n" if old else "",
                 f"+Subproject commit {new[1]}\n" if new else ""]
        return head + "(a nested repository: never entered)\n" + "".join(lines)
    if new is not None and new[1] is None and tree.files.get(path) is not None and \
            tree.files[path].filtered:
        return head + "(filtered: its attributes name a filter, which is never run; not " \
                      "diffed)\n"
    try:
        before = _side(tree, path, old, deny)
        after = _side(tree, path, new, deny)
    except Refusal as refusal:
        if refusal.code == "time_limit":
            raise
        return head + f"(not read: {refusal.reason})\n"
    if (old and before is None) or (new and after is None):
        sizes = " -> ".join(str(_size(tree, path, side)) for side in (old, new) if side)
        return head + (f"(not diffed: {sizes} bytes, more than the {DIFF_SIDE_BYTES} a "
                       "diff reads; use read_file)\n")
    if too_many_lines(before) or too_many_lines(after):
        return head + (f"(not diffed: more than {DIFF_LINES} lines; use read_file or "
                       "search_text)\n")
    return head + "".join(patch(path, before, after, tree.root.check_time))


def _side(tree: _Tree, path: str, side: Side, deny: DenyList) -> bytes | None:
    if side is None:
        return None
    if side[1] is None:
        return tree.content(path, deny)
    return tree.objects.read(side[1], DIFF_SIDE_BYTES)


def _size(tree: _Tree, path: str, side: Side) -> int | str:
    if side is None:
        return 0
    if side[1] is None:
        seen = tree.files.get(path)
        return seen.st.st_size if seen else "?"
    found = tree.objects.size(side[1])
    return found if found is not None else "?"


def _mode(st_mode: int) -> int:
    if stat.S_ISLNK(st_mode):
        return MODE_SYMLINK
    if stat.S_ISDIR(st_mode):
        return MODE_GITLINK
    return 0o100755 if st_mode & 0o100 else 0o100644


def _stat_matches(entry: IndexEntry, st: os.stat_result) -> bool:
    return (entry.mtime_ns == st.st_mtime_ns and entry.ctime_ns == st.st_ctime_ns
            and entry.ino == st.st_ino & 0xFFFFFFFF and entry.uid == st.st_uid
            and entry.gid == st.st_gid and entry.size == st.st_size & 0xFFFFFFFF)
