"""SPEC W7 as an attacker tries it: each way a hostile repository turned the Git tools
(found by a review against the old design, which ran Git on the working tree), rebuilt
here and checked from the outside: nothing outside the workspace or denied appears in a
result, no marker file is written by any command the repository names, and every file
under `.git`, the index included, is byte-identical after every call. Plus: what the Git
tools say agrees with what `git` itself says, run on a copy."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from clankie.workspace.identity import identify
from tests.workspace.hostile import HOOKS, index_bytes, index_entries
from tests.workspace.test_git_tools import _fingerprint
from tests.workspace.tooling import SECRET, Place, git, make_place
from tests.workspace.watch import Watch

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ALL_CALLS = (("git_status", {}), ("git_diff", {}), ("git_diff", {"staged": True}),
             ("git_diff", {"revision": "HEAD"}), ("git_log", {}), ("list_files", {"depth": 3}),
             ("search_text", {"pattern": "SECRET|secret|print"}),
             ("search_text", {"pattern": "x", "include_ignored": True}))
GIT_TOOLS = ("git_status", "git_log", "git_diff")


@pytest.fixture
def repo(tmp_path: Path) -> Place:
    place = make_place(tmp_path)
    ws = place.ws
    (ws / "app.py").write_text("print('one')\n")
    git("init", "-q", "-b", "main", cwd=ws)
    git("add", ".", cwd=ws)
    git("commit", "-q", "-m", "first", cwd=ws)
    return place


def _markers(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("marker*"))


def _every_call_stays_inside(place: Place, identity: object = None,
                             calls: tuple[tuple[str, dict[str, object]], ...] = ALL_CALLS
                             ) -> dict[str, str]:
    """Each call: ok or refused, nothing secret in it, no marker, `.git` unchanged; returns
    each tool's status or refusal code."""
    gitdirs = [p for p in place.root.rglob(".git") if p.is_dir()]
    before = {str(d): _fingerprint(d) for d in gitdirs}
    seen = {}
    for tool, args in calls:
        outcome = place.call(tool, identity=identity, **args)  # type: ignore[arg-type]
        text = json.dumps({k: v for k, v in outcome.result.items() if k != "pattern"})
        assert outcome.status in ("ok", "refused"), (tool, args, outcome.result)
        assert SECRET not in text, (tool, args, outcome.result)
        assert "TOKEN=" not in text, (tool, args, outcome.result)
        seen[f"{tool} {json.dumps(args)}"] = outcome.code or "ok"
    assert _markers(place.root) == [], "a command the repository named ran"
    assert {str(d): _fingerprint(d) for d in gitdirs} == before, ".git changed"
    return seen


def _nothing_opened(place: Place, *folders: Path) -> None:
    """Every call, made while the kernel watches `folders`: nothing in them is opened."""
    with Watch(*folders) as watch:
        for tool, args in ALL_CALLS:
            place.call(tool, **args)  # type: ignore[arg-type]
        assert watch.opened() == []


def _hostile_index(place: Place, *names: bytes) -> None:
    secret = git("hash-object", "-w", str(place.outside / "secret.txt"), cwd=place.ws).strip()
    entries = index_entries(place.ws) + [(0o100644, secret, name) for name in names]
    (place.ws / ".git" / "index").write_bytes(index_bytes(entries))


@pytest.mark.parametrize("name", [b"../outside/secret.txt", b"/etc/passwd",
                                  b"a/../../outside/secret.txt", b".git/config",
                                  b".GIT/hooks/pre-commit", b"a//b", b"./a", b""])
def test_w7_an_index_entry_that_breaks_gits_path_rules_makes_git_tools_refuse(
        repo: Place, name: bytes):
    _hostile_index(repo, name)
    said = _every_call_stays_inside(repo)
    for tool in GIT_TOOLS:
        assert repo.refused(tool) == "unsafe_repository"
    assert said['list_files {"depth": 3}'] == "ok"  # listing still works, as a plain folder
    assert "plain folder" in repo.ok("list_files")["note"]


def test_w7_pathspec_magic_in_a_path_is_a_literal_path_beneath_the_workspace(repo: Place):
    (repo.ws / ".env").write_text("TOKEN=top-secret\n")
    (repo.ws / "top.txt").write_text("outside the workspace\n")
    sub = repo.ws / "sub"
    sub.mkdir()
    (sub / "mod.py").write_text("x = 1\n")
    git("add", "-f", ".", cwd=repo.ws)
    git("commit", "-q", "-m", "second", cwd=repo.ws)
    (repo.ws / ".env").write_text("TOKEN=changed\n")
    (repo.ws / "top.txt").write_text("changed outside\n")
    inside = identify(str(sub))
    for path in (":(top)", ":/.env", ":(glob)**", ":(top).env", ":/", ":!mod.py", "*"):
        for tool, args in (("git_diff", {"path": path}), ("git_log", {"path": path}),
                           ("git_diff", {"path": path, "revision": "HEAD~1"})):
            outcome = repo.call(tool, identity=inside, **args)
            text = json.dumps(outcome.result)
            assert "TOKEN" not in text and "outside the workspace" not in text, (path, text)
            if outcome.code != "denied_path":  # (which names the model's own path)
                assert ".env" not in text and "top.txt" not in text, (path, text)
        logged = repo.call("git_log", identity=inside, path=path)
        assert logged.code == "denied_path" or logged.result.get("commits") == []
    whole = repo.call("git_diff", identity=inside, revision="HEAD~1").result["diff"]
    assert "mod.py" in whole and "top.txt" not in whole and "TOKEN" not in whole


@pytest.mark.parametrize("where", ["outside", "/"])
def test_w7_core_worktree_makes_every_git_tool_refuse(repo: Place, where: str):
    target = str(repo.outside) if where == "outside" else "/"
    git("config", "core.worktree", target, cwd=repo.ws)
    _every_call_stays_inside(repo)
    for tool in GIT_TOOLS:
        assert repo.refused(tool) == "unsafe_repository"


def test_w7_core_worktree_from_an_included_file_is_seen_too(repo: Place):
    extra = repo.root / "extra.gitconfig"
    extra.write_text(f"[core]\n\tworktree = {repo.outside}\n")
    git("config", "include.path", str(extra), cwd=repo.ws)
    for tool in GIT_TOOLS:
        assert repo.refused(tool) == "unsafe_repository"


def _victim(place: Place) -> Path:
    """A repository outside the workspace whose file and commit subject are the secret."""
    victim = place.outside / "victim"
    victim.mkdir()
    (victim / "secret.txt").write_text(f"{SECRET}\n")
    git("init", "-q", "-b", "main", cwd=victim)
    git("add", ".", cwd=victim)
    git("commit", "-q", "-m", f"PRIVATE {SECRET}", cwd=victim)
    return victim


def test_w7_a_dot_git_file_never_leads_to_another_repository(tmp_path: Path):
    place = make_place(tmp_path)
    victim = _victim(place)
    (place.ws / ".git").write_text(f"gitdir: {victim / '.git'}\n")
    said = _every_call_stays_inside(place)
    for tool in GIT_TOOLS:
        assert place.refused(tool) == "unsafe_repository"
    assert said["list_files {\"depth\": 3}"] == "ok"


def test_w7_alternates_and_commondir_are_never_followed(tmp_path: Path):
    """SPEC W7: `objects/info/alternates` and `commondir` are never followed: an object
    missing from the repository's own store is reported missing. The workspace's HEAD
    names the victim's commit, which lives only in the victim's store."""
    place = make_place(tmp_path)
    victim = _victim(place)
    ws = place.ws
    git("init", "-q", "-b", "main", cwd=ws)
    foreign = git("rev-parse", "HEAD", cwd=victim).strip()
    gitdir = ws / ".git"
    (gitdir / "refs" / "heads" / "main").write_text(f"{foreign}\n")
    for name, text in (("objects/info/alternates", f"{victim / '.git' / 'objects'}\n"),
                       ("commondir", f"{victim / '.git'}\n")):
        (gitdir / name).write_text(text)
        _nothing_opened(place, victim / ".git", victim / ".git" / "objects")
        said = _every_call_stays_inside(place)
        assert said["git_log {}"] == "not_found"
        assert place.call("git_diff", revision=foreign[:12]).code == "invalid_argument"
        (gitdir / name).unlink()


def test_w7_a_symlinked_dot_git_makes_git_tools_refuse(repo: Place):
    gitdir = repo.ws / ".git"
    shutil.move(gitdir, repo.root / "real.git")
    (repo.ws / ".git").symlink_to(repo.root / "real.git")
    for tool in GIT_TOOLS:
        assert repo.refused(tool) == "unsafe_repository"


def test_w7_core_bare_makes_git_tools_refuse(repo: Place):
    git("config", "core.bare", "true", cwd=repo.ws)
    for tool in GIT_TOOLS:
        assert repo.refused(tool) == "unsafe_repository"


def test_w7_no_hook_runs_and_the_index_is_never_rewritten(repo: Place):
    hooks = repo.ws / ".git" / "hooks"
    for name in HOOKS:
        hook = hooks / name
        hook.write_text(f"#!/bin/sh\ntouch {repo.root}/marker-{name}\n")
        hook.chmod(0o755)
    (repo.ws / "app.py").write_text("print('two')\n")
    os.utime(repo.ws / "app.py", (1, 1))  # stat-dirty: Git would refresh and rewrite
    said = _every_call_stays_inside(repo)
    assert set(said.values()) == {"ok"}
    assert repo.ok("git_status")["entries"] == [{"path": "app.py", "status": " M"}]


def test_w7_a_filter_named_with_an_equals_sign_never_runs(repo: Place):
    (repo.ws / ".gitattributes").write_text("*.py filter=a=b\n")
    git("add", ".gitattributes", cwd=repo.ws)
    git("commit", "-q", "-m", "attributes", cwd=repo.ws)
    with open(repo.ws / ".git" / "config", "a") as config:
        config.write(f'[filter "a=b"]\n\tclean = touch {repo.root}/marker-clean\n'
                     f'\tsmudge = touch {repo.root}/marker-smudge\n'
                     f'\tprocess = touch {repo.root}/marker-process\n')
    (repo.ws / "app.py").write_text("print('three')\n")
    os.utime(repo.ws / "app.py", (1, 1))
    _every_call_stays_inside(repo)
    assert repo.ok("git_status")["entries"] == [{"path": "app.py", "status": "filtered"}]
    assert "filtered" in repo.ok("git_diff")["diff"]
    assert "three" not in repo.ok("git_diff")["diff"]


def _nested(place: Place, as_gitlink: bool) -> Path:
    nested = place.ws / "nested"
    nested.mkdir()
    (nested / ".env").write_text("TOKEN=nested-secret\n")
    (nested / "code.py").write_text(f"# {SECRET}\n")
    git("init", "-q", "-b", "main", cwd=nested)
    git("add", "-f", ".", cwd=nested)
    git("commit", "-q", "-m", "nested", cwd=nested)
    if as_gitlink:
        git("add", "nested", cwd=place.ws)
        git("commit", "-q", "-m", "add nested", cwd=place.ws)
        (nested / ".env").write_text("TOKEN=changed-nested\n")
        git("commit", "-qam", "move nested", cwd=nested)
    with open(nested / ".git" / "config", "a") as config:  # armed once Git is done here
        config.write(f'[filter "x"]\n\tclean = touch {place.root}/marker-nested\n'
                     f'[diff]\n\tsubmodule = diff\n')
    (nested / ".gitattributes").write_text("* filter=x\n")
    os.utime(nested / "code.py", (1, 1))
    return nested


@pytest.mark.parametrize("as_gitlink", [False, True], ids=["untracked", "gitlink"])
def test_w7_a_nested_repository_is_a_submodule_entry_never_entered(
        repo: Place, as_gitlink: bool, monkeypatch: pytest.MonkeyPatch):
    _nested(repo, as_gitlink)
    git("config", "diff.submodule", "diff", cwd=repo.ws)
    home = repo.root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[diff]\n\tsubmodule = diff\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    said = _every_call_stays_inside(repo, calls=ALL_CALLS[:5])
    assert set(said.values()) == {"ok"}
    status = repo.ok("git_status")["entries"]
    assert {"path": "nested", "status": "submodule"} in status
    assert not any(e["path"].startswith("nested/") for e in status)
    listed = {e["path"]: e["type"] for e in repo.ok("list_files", depth=3)["entries"]}
    assert listed["nested"] == "submodule" and "nested/code.py" not in listed
    assert repo.ok("search_text", pattern="nested-secret|OUTSIDE")["matches"] == []


@pytest.mark.parametrize("key,value", [
    ("core.fsmonitor", "touch {root}/marker-fsmonitor; false"),
    ("core.hooksPath", "{root}/hooks"),
    ("core.pager", "touch {root}/marker-pager; cat"),
    ("pager.log", "touch {root}/marker-pager-log; cat"),
    ("diff.external", "touch {root}/marker-external"),
    ("gpg.program", "touch {root}/marker-gpg"),
    ("log.showSignature", "true"),
    ("core.alternateRefsCommand", "touch {root}/marker-alternate"),
    ("uploadpack.packObjectsHook", "touch {root}/marker-pack"),
    ("core.sshCommand", "touch {root}/marker-ssh"),
])
def test_w7_no_command_a_repository_names_runs_with_a_global_config_too(
        repo: Place, key: str, value: str, monkeypatch: pytest.MonkeyPatch):
    hooks = repo.root / "hooks"
    hooks.mkdir()
    for name in HOOKS:
        (hooks / name).write_text(f"#!/bin/sh\ntouch {repo.root}/marker-hook-{name}\n")
        (hooks / name).chmod(0o755)
    git("config", key, value.format(root=repo.root), cwd=repo.ws)
    git("config", "gpg.program", f"touch {repo.root}/marker-gpg-too", cwd=repo.ws)
    home = repo.root / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\tfsmonitor = touch {repo.root}/marker-global\n")
    monkeypatch.setenv("HOME", str(home))
    (repo.ws / ".gitattributes").write_text("* diff=evil filter=evil\n")
    os.utime(repo.ws / "app.py", (1, 1))
    _every_call_stays_inside(repo)


def _copy_and_ask_git(place: Place, *args: str) -> str:
    """What `git` itself says, run on a copy (git status refreshes the index it reads)."""
    copy = place.root / "copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(place.ws, copy, symlinks=True)
    return git(*args, cwd=copy)


def test_w1_w7_status_agrees_with_git_status_on_a_copy(repo: Place):
    ws = repo.ws
    (ws / "keep.txt").write_text("keep\n")
    (ws / "gone.txt").write_text("gone\n")
    (ws / "staged.txt").write_text("staged\n")
    (ws / "both.txt").write_text("both\n")
    (ws / "run.sh").write_text("echo\n")
    (ws / "build").mkdir()
    (ws / "build" / "tracked.o").write_text("forced\n")
    (ws / ".gitignore").write_text("build/\n*.log\n")
    (ws / "link").symlink_to("keep.txt")
    git("add", "-A", cwd=ws)
    git("add", "-f", "build/tracked.o", cwd=ws)
    git("commit", "-q", "-m", "second", cwd=ws)
    (ws / "gone.txt").unlink()
    (ws / "staged.txt").write_text("staged two\n")
    git("add", "staged.txt", cwd=ws)
    (ws / "both.txt").write_text("both two\n")
    git("add", "both.txt", cwd=ws)
    (ws / "both.txt").write_text("both three\n")
    (ws / "run.sh").chmod(0o755)
    (ws / "new.txt").write_text("new\n")
    (ws / "debug.log").write_text("ignored\n")
    (ws / "build" / "out.o").write_text("ignored\n")
    (ws / "build" / "tracked.o").write_text("changed\n")
    (ws / "dir").mkdir()
    (ws / "dir" / "deep.txt").write_text("untracked\n")
    (ws / "link").unlink()
    (ws / "link").symlink_to("app.py")
    (ws / "intent.txt").write_text("intent\n")
    git("add", "-N", "intent.txt", cwd=ws)
    git("rm", "-q", "--cached", "keep.txt", cwd=ws)
    os.utime(ws / "app.py", (1, 1))  # stat-dirty only: unchanged
    ours = {(e["path"], e["status"]) for e in repo.ok("git_status")["entries"]}
    theirs = set()
    for item in _copy_and_ask_git(repo, "status", "--porcelain=v1", "-z",
                                  "--untracked-files=all", "--no-renames").split("\0"):
        if item:
            theirs.add((item[3:], item[:2]))
    assert ours == theirs


def test_w1_w7_our_diff_applies_as_a_patch_to_reach_the_working_tree(repo: Place):
    ws = repo.ws
    lines = [f"line {n}\n" for n in range(200)]
    (ws / "long.txt").write_text("".join(lines))
    (ws / "old.txt").write_text("old\n")
    (ws / "tail.txt").write_text("no newline")
    git("add", "-A", cwd=ws)
    git("commit", "-q", "-m", "second", cwd=ws)
    lines[3] = "changed 3\n"
    lines[100:105] = ["inserted\n"]
    lines.append("appended\n")
    (ws / "long.txt").write_text("".join(lines))
    (ws / "old.txt").unlink()
    (ws / "tail.txt").write_text("no newline, still")
    diff = repo.ok("git_diff")["diff"]
    assert "deleted file mode 100644" in diff and "\\ No newline at end of file" in diff
    copy = repo.root / "copy"
    shutil.copytree(ws, copy, symlinks=True)
    git("checkout", "-q", "--", ".", cwd=copy)
    patch = repo.root / "ours.patch"
    patch.write_text(diff)
    subprocess.run(["git", "apply", str(patch)], cwd=copy, check=True, capture_output=True)
    for name in ("long.txt", "tail.txt"):
        assert (copy / name).read_bytes() == (ws / name).read_bytes()
    assert not (copy / "old.txt").exists()
    staged = repo.ok("git_diff", staged=True)["diff"]
    assert staged == ""
    git("add", "-A", cwd=ws)
    assert repo.ok("git_diff", staged=True)["diff"] == diff
    assert repo.ok("git_diff", revision="HEAD")["diff"] == diff


@pytest.mark.parametrize("revision", [":README.md", ":0:README.md", ":2:app.py", "HEAD:app.py",
                                      ":/first", "HEAD :x", "main~1:x", "main@{0}",
                                      "HEAD^{commit}", "HEAD..main", "@", "HEAD^{/x}"])
def test_w7_a_revision_never_makes_git_read_the_index_or_a_work_tree(
        repo: Place, revision: str):
    git("config", "core.fsmonitor", f"touch {repo.root}/marker-fsmonitor; echo", cwd=repo.ws)
    os.utime(repo.ws / "app.py", (1, 1))
    assert repo.refused("git_diff", revision=revision) == "invalid_argument"
    full = git("rev-parse", "HEAD", cwd=repo.ws).strip()
    for revision_ok in ("HEAD", "main", "HEAD~0", "HEAD^0", "main^0~0", full, full[:4]):
        repo.ok("git_diff", revision=revision_ok)
    _every_call_stays_inside(repo)


@pytest.mark.parametrize("link", ["objects/pack", "refs/heads/steal", "objects/info",
                                  "logs", "packed-refs", "objects/xx", "HEAD", "index"])
def test_w7_a_symlink_anywhere_in_dot_git_is_never_followed(tmp_path: Path, link: str):
    """SPEC W7: every file in the git directory is opened without following a symlink:
    a tool that needs what a symlink stands for refuses `unsafe_repository`, one that does
    not answers; no byte of the repository it points at is ever opened or shown."""
    place = make_place(tmp_path)
    private = _victim(place)
    git("gc", "-q", cwd=private)  # packed: objects/pack and packed-refs
    git("init", "-q", "-b", "main", cwd=place.ws)
    git("add", ".", cwd=place.ws)
    git("commit", "-q", "-m", "first", cwd=place.ws)
    if link == "objects/xx":  # the folder of the workspace's own HEAD commit
        head = git("rev-parse", "HEAD", cwd=place.ws).strip()
        link = f"objects/{head[:2]}"
    ours, theirs = place.ws / ".git" / link, private / ".git" / link
    if link == "refs/heads/steal":
        theirs = private / ".git" / "refs" / "heads" / "main"
        git("update-ref", "refs/heads/main", git("rev-parse", "HEAD", cwd=private).strip(),
            cwd=private)
        (place.ws / ".git" / "HEAD").write_text("ref: refs/heads/steal\n")
    if ours.is_dir():
        shutil.rmtree(ours)
    else:
        ours.unlink(missing_ok=True)
    ours.symlink_to(os.path.relpath(theirs, ours.parent))
    _nothing_opened(place, *[p for p in (private / ".git").rglob("*") if p.is_dir()])
    said = _every_call_stays_inside(place)
    assert set(said.values()) <= {"ok", "unsafe_repository"}, said
    if link not in ("objects/info", "logs", "packed-refs"):  # what git_log needs
        assert said["git_log {}"] == "unsafe_repository"


def test_w7_a_symlinked_hook_is_no_reason_to_refuse(repo: Place):
    (repo.root / "pre-commit").write_text(f"#!/bin/sh\ntouch {repo.root}/marker-hook\n")
    (repo.root / "pre-commit").chmod(0o755)
    (repo.ws / ".git" / "hooks" / "pre-commit").symlink_to(repo.root / "pre-commit")
    assert set(_every_call_stays_inside(repo).values()) == {"ok"}


@pytest.mark.parametrize("ignore,attributes", [
    ("[z-a]\n", ""), ("*.[[:digit:]]\n", ""), ("x" * 100_000 + "\n", ""),
    ("".join(f"file{n}.txt\n" for n in range(10_000)), ""), ("", "[z-a] filter=x\n"),
    ("", "*.[[:digit:]] filter=x\n"), ("", "".join(f"f{n} filter=x\n" for n in range(5_000)))])
def test_w5_w6_any_ignore_or_attribute_file_is_read_never_fails_a_call(
        repo: Place, ignore: str, attributes: str):
    (repo.ws / "sub").mkdir()
    for folder in (repo.ws, repo.ws / "sub"):
        (folder / ".gitignore").write_text(ignore)
        (folder / ".gitattributes").write_text(attributes)
    (repo.ws / "sub" / "file7.txt").write_text("seven\n")
    os.utime(repo.ws / "app.py", (1, 1))
    assert set(_every_call_stays_inside(repo).values()) == {"ok"}


def test_w7_an_index_cut_short_anywhere_is_unsafe_never_an_error(repo: Place):
    (repo.ws / "more.txt").write_text("more\n")
    git("add", "more.txt", cwd=repo.ws)
    git("update-index", "--index-version", "4", cwd=repo.ws)
    whole = (repo.ws / ".git" / "index").read_bytes()
    for cut in range(12, len(whole) - 20):
        (repo.ws / ".git" / "index").write_bytes(whole[:cut])
        outcome = repo.call("git_status")
        assert outcome.status == "refused", (cut, outcome.result)


def test_w3_w7_a_device_or_fifo_named_as_a_rule_or_git_file_is_never_opened(repo: Place):
    nodes = [repo.ws / ".gitignore", repo.ws / ".gitattributes",
             repo.ws / ".git" / "info" / "exclude", repo.ws / ".git" / "info" / "attributes"]
    (repo.ws / ".git" / "info").mkdir(exist_ok=True)
    for number, node in enumerate(nodes):
        node.unlink(missing_ok=True)
        if number % 2:
            os.mkfifo(node)
        else:
            os.mknod(node, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
    with Watch(*nodes) as watch:
        said = _every_call_stays_inside(repo, calls=ALL_CALLS[:7])
        assert watch.opened() == []
    assert said['list_files {"depth": 3}'] == "ok"  # the workspace's own: skipped
    assert set(said.values()) <= {"ok", "unsafe_repository"}  # in .git: not Git's kind
