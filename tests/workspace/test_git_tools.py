"""SPEC W7 and W10 with real Git: a hostile repository's configuration never makes a tool run
a command (a marker file must never appear), revisions cannot become options, no Git
program is ever started, and every tool leaves the workspace and its `.git` byte-identical."""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from pathlib import Path

import pytest

from clankie.workspace.gitrepo import config_refusal
from clankie.workspace.identity import identify
from tests.workspace.tooling import Place, git, make_place
from tests.workspace.watch import Watch

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Place:
    place = make_place(tmp_path)
    ws = place.ws
    (ws / "app.py").write_text("print('one')\n")
    (ws / "notes.txt").write_text("first\n")
    git("init", "-q", "-b", "main", cwd=ws)
    git("add", ".", cwd=ws)
    git("commit", "-q", "-m", "first commit", cwd=ws)
    (ws / "app.py").write_text("print('two')\n")
    (ws / "staged.txt").write_text("staged\n")
    git("add", "staged.txt", cwd=ws)
    (ws / "untracked.txt").write_text("new\n")
    return place


def test_w1_git_status_log_and_diff_say_what_git_says(repo: Place):
    status = repo.ok("git_status")
    assert status["branch"] == "main" and status["truncated"] is False
    assert {(e["path"], e["status"]) for e in status["entries"]} == {
        ("app.py", " M"), ("staged.txt", "A "), ("untracked.txt", "??")}
    log = repo.ok("git_log")
    assert [c["subject"] for c in log["commits"]] == ["first commit"]
    assert len(log["commits"][0]["commit"]) == 40
    diff = repo.ok("git_diff")["diff"]
    assert "-print('one')" in diff and "+print('two')" in diff and "staged" not in diff
    staged = repo.ok("git_diff", staged=True)["diff"]
    assert "+staged" in staged and "app.py" not in staged
    head = repo.ok("git_diff", revision="HEAD", path="app.py")["diff"]
    assert "+print('two')" in head


def test_w7_git_tools_in_a_subfolder_of_a_repository_speak_of_the_workspace(repo: Place):
    sub = repo.ws / "pkg"
    sub.mkdir()
    (sub / "mod.py").write_text("x = 1\n")
    outcome = repo.call("git_status", identity=identify(str(sub)))
    assert {e["path"] for e in outcome.result["entries"]} == {"mod.py"}


def test_w4_w7_a_diff_never_shows_a_secret_file(repo: Place):
    (repo.ws / ".env").write_text("TOKEN=one\n")
    git("add", "-f", ".env", cwd=repo.ws)
    git("commit", "-q", "-m", "oops", cwd=repo.ws)
    (repo.ws / ".env").write_text("TOKEN=two\n")
    for args in ({}, {"revision": "HEAD~1"}, {"path": ".env"}):
        assert "TOKEN" not in repo.ok("git_diff", **args)["diff"]


HOSTILE = {
    "fsmonitor": ("core.fsmonitor", "touch {marker}; false"),
    "pager": ("core.pager", "touch {marker}; cat"),
    "diff_command": ("diff.evil.command", "touch {marker}"),
    "textconv": ("diff.evil.textconv", "sh -c 'touch {marker}; cat \"$1\"' -"),
    "filter_clean": ("filter.evil.clean", "sh -c 'touch {marker}; cat'"),
    "filter_process": ("filter.evil.process", "sh -c 'touch {marker}'"),
    "external_diff": ("diff.external", "sh -c 'touch {marker}'"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_w7_a_hostile_git_config_never_runs_a_command(repo: Place, name: str):
    marker = repo.root / f"marker-{name}"
    key, value = HOSTILE[name]
    git("config", key, value.format(marker=marker), cwd=repo.ws)
    (repo.ws / ".gitattributes").write_text("* diff=evil filter=evil\n")
    os.utime(repo.ws / "app.py", (1, 1))  # stat data no longer matches the index
    for tool, args in (("git_status", {}), ("git_diff", {}), ("git_diff", {"staged": True}),
                       ("git_diff", {"revision": "HEAD"}), ("git_log", {}),
                       ("list_files", {}), ("search_text", {"pattern": "print"})):
        outcome = repo.call(tool, **args)
        assert outcome.status in ("ok", "refused"), outcome.result
    assert not marker.exists(), f"{key} ran a command"


def test_w7_a_configuration_that_includes_files_is_refused_before_git_reads_it(
        repo: Place):
    marker = repo.root / "marker-include"
    extra = repo.root / "extra.gitconfig"
    extra.write_text(f"[core]\n\tfsmonitor = touch {marker}; false\n")
    git("config", "include.path", str(extra), cwd=repo.ws)
    os.utime(repo.ws / "app.py", (1, 1))
    with Watch(extra) as watch:
        for tool in ("git_status", "git_log", "git_diff"):
            assert repo.refused(tool) == "unsafe_repository"
        assert watch.opened() == []
    assert not marker.exists()


@pytest.mark.parametrize("config", [
    "[core] worktree = /", "[CORE]\n\tWorkTree=/x", "[core]\nbare", "[core]\n bare = yes",
    "[include]\n\tpath = x", '[includeIf "gitdir:/"]\n\tpath = x',
    '[IncludeIf "onbranch:m"]\npath=x',
    "[core]\n\tfoo = bar \\\n\tworktree = /"])
def test_w7_the_configuration_is_read_cautiously_before_git_reads_it(config: str):
    assert config_refusal(config.encode()) is not None


@pytest.mark.parametrize("config", [
    "[core]\n\tbare = false\n\tfilemode = true", '[remote "origin"]\n\tpath = x',
    "[core]\n# worktree = /\n; bare = true", '[core "x"]\n\tname = worktree'])
def test_w7_an_ordinary_configuration_passes_the_cautious_read(config: str):
    assert config_refusal(config.encode()) is None


@pytest.mark.parametrize("revision", ["--output=/tmp/clankie-marker", "-p", "--", "-",
                                      "HEAD --output=x", "no-such-rev", "HEAD:app.py"])
def test_w7_a_revision_is_never_an_option_and_must_be_a_commit(repo: Place, revision: str):
    assert repo.refused("git_diff", revision=revision) == "invalid_argument"
    assert not Path("/tmp/clankie-marker").exists()


def test_w7_inherited_git_variables_are_ignored(repo: Place, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch):
    other = tmp_path / "other"
    other.mkdir()
    git("init", "-q", cwd=other)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='touch {tmp_path}/m'")
    assert repo.ok("git_log")["commits"][0]["subject"] == "first commit"
    repo.ok("git_status")
    assert not (tmp_path / "m").exists()


def test_w7_no_git_program_ever_runs(repo: Place, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch):
    """SPEC W7: "No Git program runs": a `git` first on PATH that leaves a marker is never
    started by any tool, and every tool still answers (it reads the repository itself)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "git-ran"
    fake = bin_dir / "git"
    fake.write_text(f"#!/bin/sh\necho \"$@\" >> {marker}\nexit 1\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ.get('PATH', '')}")
    os.utime(repo.ws / "notes.txt", (1, 1))  # stat data no longer matches: hashed by us
    assert {e["path"] for e in repo.ok("git_status")["entries"]} == {
        "app.py", "staged.txt", "untracked.txt"}
    assert repo.ok("git_log", path="app.py")["commits"][0]["subject"] == "first commit"
    assert "+print('two')" in repo.ok("git_diff")["diff"]
    assert "+staged" in repo.ok("git_diff", staged=True)["diff"]
    assert "+print('two')" in repo.ok("git_diff", revision="HEAD")["diff"]
    repo.ok("list_files", depth=3)
    repo.ok("search_text", pattern="print")
    assert not marker.exists(), marker.read_text()


def test_w7_not_a_repository(tmp_path: Path):
    place = make_place(tmp_path)
    for tool in ("git_status", "git_log", "git_diff"):
        assert place.refused(tool) == "not_a_repository"


def _fingerprint(root: Path) -> str:
    digest = hashlib.sha256()
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files) + dirs:
            path = Path(folder) / name
            st = path.lstat()
            digest.update(f"{path.relative_to(root)} {st.st_mode} {st.st_size} "
                          f"{st.st_mtime_ns}".encode())
            if stat.S_ISREG(st.st_mode):
                digest.update(path.read_bytes())
    return digest.hexdigest()


def test_w10_every_tool_leaves_a_dirty_workspace_and_its_git_byte_identical(repo: Place):
    os.utime(repo.ws / "app.py", (1, 1))  # a stale index that git status would refresh
    before = _fingerprint(repo.ws)
    for tool, args in (("list_files", {"depth": 3}), ("read_file", {"path": "app.py"}),
                       ("search_text", {"pattern": "print"}),
                       ("search_text", {"pattern": "x", "include_ignored": True}),
                       ("git_status", {}), ("git_log", {"path": "app.py"}), ("git_diff", {}),
                       ("git_diff", {"staged": True}), ("git_diff", {"revision": "HEAD"}),
                       ("read_file", {"path": ".git/index"})):
        repo.call(tool, **args)
    assert _fingerprint(repo.ws) == before


def test_w1_a_file_name_that_is_not_utf8_is_shown_as_text_by_every_tool(repo: Place):
    """Such a name reaches Python as lone surrogates; every result (and its summary) can
    still be stored and sent: the bytes become U+FFFD."""
    name = b"caf\xe9.txt"
    with open(os.path.join(os.fsencode(repo.ws), name), "wb") as odd:
        odd.write(b"needle\n")
    git("add", "-A", cwd=repo.ws)
    with open(os.path.join(os.fsencode(repo.ws), name), "wb") as odd:
        odd.write(b"needle changed\n")
    for tool, args in (("list_files", {}), ("search_text", {"pattern": "needle"}),
                       ("git_status", {}), ("git_diff", {}), ("git_diff", {"staged": True})):
        outcome = repo.call(tool, **args)
        assert outcome.status == "ok", outcome.result
        assert "caf\ufffd.txt" in outcome.text, (tool, outcome.text)
        (outcome.text + outcome.summary).encode("utf-8")


@pytest.mark.parametrize("args", [{"revision": "HEAD~1", "path": ".env"}, {"revision": "HEAD~1"},
                                  {"path": ".env"}, {}, {"staged": True}])
def test_w4_git_diff_is_no_oracle_on_a_denied_path(repo: Place, args: dict[str, object]):
    """SPEC W4: `git_diff` never compares a denied path's content against anything, so
    its answer is the same whether the secret equals a revision's, the index's or not."""
    (repo.ws / ".env").write_text("TOKEN=first\n")
    git("add", "-f", ".env", cwd=repo.ws)
    git("commit", "-q", "-m", "env", cwd=repo.ws)
    git("commit", "-q", "--allow-empty", "-m", "later", cwd=repo.ws)
    answers = []
    for text in ("TOKEN=first\n", "TOKEN=other\n"):  # equal to HEAD~1's, then not
        (repo.ws / ".env").write_text(text)
        git("add", "-f", ".env", cwd=repo.ws)
        (repo.ws / ".env").write_text(text.replace("TOKEN", "TOKEN2"))  # and the tree moves
        answers.append(repo.ok("git_diff", **args))
    assert answers[0] == answers[1]
    assert ".env" not in answers[0]["diff"] and answers[0]["skipped_denied"] == 1
