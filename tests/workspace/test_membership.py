"""SPEC M1-M4 with real Git repositories and worktrees; nothing is ever written."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from clankie.core.model import WorkspaceIdentity
from clankie.workspace.identity import identify
from clankie.workspace.membership import membership

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                   env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
                        "HOME": str(cwd), "PATH": "/usr/bin:/bin"})


def repository(path: Path) -> Path:
    path.mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=path)
    (path / "README").write_text("hello\n")
    (path / "sub").mkdir()
    git("add", ".", cwd=path)
    git("commit", "-q", "-m", "first", cwd=path)
    return path


def ident(path: Path) -> WorkspaceIdentity:
    found = identify(str(path))
    assert found is not None
    return found


def snapshot(tree: Path) -> dict[str, str]:
    """Every file under `tree` with its content hash, to prove nothing was written."""
    return {str(p.relative_to(tree)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(tree.rglob("*")) if p.is_file()}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return repository(tmp_path / "repo")


def fact(workspace: Path | WorkspaceIdentity, *projects: tuple[str, Path | WorkspaceIdentity]
         ) -> dict:
    ws = workspace if isinstance(workspace, WorkspaceIdentity) else ident(workspace)
    registry = [(pid, root if isinstance(root, WorkspaceIdentity) else ident(root))
                for pid, root in projects]
    return membership(ws, registry, git_timeout=2.0).as_dict()


def test_m2_m4_root_and_subfolder_are_members_and_nothing_is_written(repo: Path, tmp_path: Path):
    before = snapshot(tmp_path)
    assert fact(repo, ("p1", repo)) == {"status": "member", "project_id": "p1", "reason": None}
    assert fact(repo / "sub", ("p1", repo))["status"] == "member"
    assert snapshot(tmp_path) == before


def test_m2_m4_a_linked_worktree_is_a_member_and_nothing_is_written(repo: Path, tmp_path: Path):
    git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature", cwd=repo)
    before = snapshot(tmp_path)
    assert fact(tmp_path / "wt", ("p1", repo)) == {"status": "member", "project_id": "p1",
                                                   "reason": None}
    assert snapshot(tmp_path) == before


def test_m3_a_deleted_worktree_folder_is_prunable_and_unknown(repo: Path, tmp_path: Path):
    git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature", cwd=repo)
    saved = ident(tmp_path / "wt")
    shutil.rmtree(tmp_path / "wt")
    before = snapshot(tmp_path)
    assert fact(saved, ("p1", repo)) == {"status": "unknown", "project_id": None,
                                         "reason": "unverified"}
    assert snapshot(tmp_path) == before  # not pruned


def test_m3_a_folder_in_two_projects_is_ambiguous(repo: Path):
    assert fact(repo / "sub", ("p1", repo), ("p2", repo / "sub")) == {
        "status": "unknown", "project_id": None, "reason": "ambiguous"}


def test_m3_a_repository_replaced_at_the_same_path_is_changed(repo: Path, tmp_path: Path):
    registered = ident(repo)
    repo.rename(tmp_path / "old-repo")  # kept, so its inode cannot be reused at once
    repository(repo)
    assert fact(repo, ("p1", registered)) == {"status": "unknown", "project_id": None,
                                              "reason": "changed"}


def test_m3_a_replaced_workspace_is_changed(repo: Path):
    saved = ident(repo / "sub")
    (repo / "sub").rename(repo / "old-sub")
    (repo / "sub").mkdir()
    assert fact(saved, ("p1", repo))["reason"] == "changed"


def test_m2_worktrees_are_read_without_a_git_program(repo: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    """The worktrees are read from the repository's own files (W7's "no Git program
    runs" holds for the fact too): a `git` on PATH that leaves a marker never runs."""
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", str(worktree), "-b", "feature", cwd=repo)
    fake = tmp_path / "bin"
    fake.mkdir()
    marker = tmp_path / "git-ran"
    (fake / "git").write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    assert fact(worktree, ("p1", repo)) == {"status": "member", "project_id": "p1",
                                            "reason": None}
    assert not marker.exists()


@pytest.mark.parametrize("where", ["worktrees", "worktrees/wt", "worktrees/wt/gitdir"])
def test_m3_a_worktree_record_that_is_a_symlink_is_unverified(repo: Path, tmp_path: Path,
                                                              where: str):
    """A record the confined opener will not follow (a symlink to another repository's
    records) leaves the fact unknown, and nothing it points at is read."""
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", str(worktree), "-b", "feature", cwd=repo)
    target = repo / ".git" / where
    moved = tmp_path / "moved"
    target.rename(moved)
    target.symlink_to(moved)
    assert fact(worktree, ("p1", repo))["reason"] == "unverified"


def test_m3_reading_past_git_timeout_is_unverified(repo: Path, tmp_path: Path):
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", str(worktree), "-b", "feature", cwd=repo)
    result = membership(ident(worktree), [("p1", ident(repo))], git_timeout=0.0).as_dict()
    assert result["reason"] == "unverified"


def test_m2_an_unrelated_folder_is_not_a_member(repo: Path, tmp_path: Path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    assert fact(other, ("p1", repo)) == {"status": "not_member", "project_id": None,
                                         "reason": None}
    assert fact(other) == {"status": "not_member", "project_id": None, "reason": None}


def test_m2_a_plain_directory_project_counts_by_path(tmp_path: Path):
    plain = tmp_path / "plain"
    (plain / "inner").mkdir(parents=True)
    assert fact(plain / "inner", ("p1", plain))["status"] == "member"


def test_m2_an_inherited_git_dir_does_not_answer_for_the_project(repo: Path, tmp_path: Path,
                                                                  monkeypatch):
    """The service's own environment must not choose the repository Git reads: with
    `GIT_DIR` naming another repository (which has a worktree at the workspace), Git would
    list that repository's worktrees instead of the project's (the workspace tools' Git
    drops every inherited `GIT_*` too, W7)."""
    other = repository(tmp_path / "other")
    git("worktree", "add", "-q", str(tmp_path / "wt"), "-b", "feature", cwd=other)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    assert fact(tmp_path / "wt", ("p1", repo)) == {"status": "not_member",
                                                   "project_id": None, "reason": None}


def test_m3_m4_a_project_repository_that_leads_elsewhere_is_unverified_and_runs_nothing(
        repo: Path, tmp_path: Path):
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", str(worktree), cwd=repo)
    marker = tmp_path / "marker"
    with open(repo / ".git" / "config", "a") as config:
        config.write(f"[core]\n\tfsmonitor = touch {marker}; false\n\tworktree = {tmp_path}\n")
    before = snapshot(repo / ".git")
    assert fact(worktree, ("p1", repo)) == {"status": "unknown", "project_id": None,
                                            "reason": "unverified"}
    assert not marker.exists() and snapshot(repo / ".git") == before
