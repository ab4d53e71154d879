"""The read-only project-membership fact of SPEC section 9, from the registry and from Git.

Owns the rule: a workspace is a member of project P when it lies inside P's root, or
inside a worktree that P's repository has registered (`git worktree list --porcelain`).
Anything it cannot be sure of is `unknown`: more than one project (`ambiguous`), an
identity that changed (`changed`), Git missing, failing, slow or a prunable worktree
(`unverified`). It only reads: no enrollment, no Git changes, nothing written anywhere;
Git runs as the workspace tools run it (`gitrepo`: the repository checked first, Git on
its git directory only, never on a work tree, with an environment built from nothing).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clankie.core.model import WorkspaceIdentity

from .confine import Refusal
from .gitrepo import find_repository
from .identity import identify

MembershipStatus = Literal["member", "not_member", "unknown"]


@dataclass(frozen=True, slots=True)
class Membership:
    status: MembershipStatus
    project_id: str | None = None
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "project_id": self.project_id, "reason": self.reason}


NOT_MEMBER = Membership("not_member")


@dataclass(frozen=True, slots=True)
class Worktree:
    path: str
    prunable: bool


class GitUnverified(Exception):
    """Git is missing, failed or timed out."""


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
    """The linked worktrees a repository has registered (its main worktree left out)."""
    try:
        fd = os.open(repository, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise GitUnverified(exc.strerror) from None
    try:
        repo = find_repository(fd, os.path.realpath(repository), timeout,
                               time.monotonic() + timeout)
        if repo is None or repo.prefix:
            raise GitUnverified("the project root holds no git directory of its own")
        with repo:
            listed = repo.run("worktree", "list", "--porcelain").decode("utf-8", "replace")
    except Refusal as refusal:
        raise GitUnverified(refusal.reason) from None
    finally:
        os.close(fd)
    worktrees = []
    for block in listed.strip().split("\n\n"):
        fields = dict(line.partition(" ")[::2] for line in block.splitlines())
        if "worktree" in fields:
            worktrees.append(Worktree(os.path.realpath(fields["worktree"]), "prunable" in fields))
    main = os.path.realpath(repository)
    return [w for w in worktrees if w.path != main]
