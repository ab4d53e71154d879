"""The read-only project-membership fact of SPEC section 9, from the registry and from Git.

Owns the rule: a workspace is a member of project P when it lies inside P's root, or
inside a worktree that P's repository has registered (what `git worktree list --porcelain`
reports, read by us from the repository's `worktrees/` folder through the confined opener:
no Git program runs). Anything it cannot be sure of is `unknown`: more than one project
(`ambiguous`), an identity that changed (`changed`), a repository that cannot be read or
takes longer than `git_timeout` to read, or a prunable worktree (`unverified`). It only
reads: no enrollment, no Git changes, nothing written anywhere.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clankie.core.model import WorkspaceIdentity

from .bounds import Bounds
from .confine import Refusal
from .gitfiles import GitDir
from .gitrepo import find_repository
from .identity import identify

MembershipStatus = Literal["member", "not_member", "unknown"]
WORKTREES = 10_000  # worktrees a repository may register before the fact is unverified
GITDIR_BYTES = 4_096


@dataclass(frozen=True, slots=True)
class Membership:
    status: MembershipStatus
    project_id: str | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {"status": self.status, "project_id": self.project_id, "reason": self.reason}


NOT_MEMBER = Membership("not_member")


@dataclass(frozen=True, slots=True)
class Worktree:
    path: str
    prunable: bool


class GitUnverified(Exception):
    """The repository's worktrees could not be read, or not in time."""


def membership(saved: WorkspaceIdentity, projects: Sequence[tuple[str, WorkspaceIdentity]],
               git_timeout: float) -> Membership:
    """The fact for the workspace a conversation saved, against the registered projects."""
    members: list[str] = []
    unknown: list[str] = []
    for project_id, root in projects:
        verdict = _against(saved.path, root, git_timeout)
        if verdict == "member":
            members.append(project_id)
        elif verdict != "not_member":
            unknown.append(verdict)
    if len(members) > 1:
        return Membership("unknown", None, "ambiguous")
    if unknown:
        return Membership("unknown", None, unknown[0])
    if not members:
        return NOT_MEMBER
    if not saved.same_directory(identify(saved.path)):
        return Membership("unknown", None, "changed")
    return Membership("member", members[0])


def _against(workspace: str, root: WorkspaceIdentity, git_timeout: float) -> str:
    """`member`, `not_member`, or the reason this project leaves the fact unknown."""
    inside_root = _inside(workspace, root.path)
    if not root.same_directory(identify(root.path)):
        return "changed" if inside_root else "not_member"
    if not (Path(root.path) / ".git").exists():
        return "member" if inside_root else "not_member"
    try:
        worktrees = list_worktrees(root.path, git_timeout)
    except GitUnverified:
        return "unverified"
    if inside_root:
        return "member"
    for worktree in worktrees:
        if _inside(workspace, worktree.path):
            return "unverified" if worktree.prunable else "member"
    return "not_member"


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def list_worktrees(repository: str, timeout: float) -> list[Worktree]:
    """The linked worktrees a repository has registered (its main worktree left out), as
    `git worktree list --porcelain` reports them: each `worktrees/ID/gitdir` names the
    worktree's `.git` file; one whose file is gone (and not `locked`) is prunable."""
    bounds = Bounds(timeout)
    try:
        fd = os.open(repository, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise GitUnverified(exc.strerror) from None
    main = os.path.realpath(repository)
    try:
        repo = find_repository(fd, main, bounds)
        if repo is None or repo.prefix:
            raise GitUnverified("the project root holds no git directory of its own")
        with repo:
            worktrees = []
            for name in repo.gitdir.names("worktrees", WORKTREES):
                if bounds.out_of_time():
                    raise GitUnverified("reading the worktrees took too long")
                found = _registered(repo.gitdir, name, os.path.join(main, ".git"))
                if found is not None and found.path != main:
                    worktrees.append(found)
            return worktrees
    except Refusal as refusal:
        raise GitUnverified(refusal.reason) from None
    finally:
        os.close(fd)


def _registered(gitdir: GitDir, name: str, git_path: str) -> Worktree | None:
    """One entry of `worktrees/`: where its worktree is, and whether it is prunable."""
    folder = f"worktrees/{name}"
    found = gitdir.lstat(folder)
    if found is not None and stat.S_ISLNK(found.st_mode):
        raise GitUnverified("a worktree's record is a symbolic link")  # never followed
    if found is None or not stat.S_ISDIR(found.st_mode):
        return None  # Git finds no record in a file either
    locked = gitdir.exists(f"{folder}/locked")
    text = (gitdir.read(f"{folder}/gitdir", GITDIR_BYTES) or b"").decode("utf-8", "replace")
    target = text.strip()
    if not target:
        return Worktree(os.path.join(git_path, folder), not locked)
    if not os.path.isabs(target):  # `worktree.useRelativePaths`: relative to its folder
        target = os.path.normpath(os.path.join(git_path, folder, target))
    path = target[:-len("/.git")] if target.endswith("/.git") else target
    return Worktree(os.path.realpath(path), not locked and not os.path.exists(target))
