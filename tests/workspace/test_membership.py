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


def test_m3_no_git_on_path_is_unverified(repo: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert fact(repo, ("p1", repo)) == {"status": "unknown", "project_id": None,
                                        "reason": "unverified"}


def test_m3_git_failing_is_unverified(repo: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\necho broken >&2\nexit 128\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    assert fact(repo, ("p1", repo))["reason"] == "unverified"


def test_m3_git_timing_out_is_unverified(repo: Path, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "git").write_text("#!/bin/sh\nexec sleep 30\n")
    (fake / "git").chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    result = membership(ident(repo), [("p1", ident(repo))], git_timeout=0.2).as_dict()
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
