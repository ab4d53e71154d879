"""SPEC W1, W6, W7: the Git tools, which read the repository themselves (no Git program
runs), still tell the truth on ordinary repositories. Generated repositories (files in
folders, executable bits, symlinks, CRLF and binary content, ignore rules, several
commits, branches and merges, loose objects or packs with deltas, a workspace at the top
or in a subfolder), then a working tree changed every way (edited, deleted, added,
staged, staged and edited again, unstaged, intent to add, stat data touched), and what
each tool says is compared with what `git` says on a copy:

- `git_status` with `git status --porcelain=v1 --untracked-files=all --no-renames`;
- `git_diff` (the index against the working tree; `staged`; a revision against the
  working tree) with `git diff --name-status --no-renames` of the same kind, and the
  unstaged diff applied with `git apply` to the index's files gives the working tree;
- `git_log` (with and without a path) with `git log --format=%H`.

The default run is derandomized (the same repositories every time);
`CLANKIE_AGREEMENT_EXAMPLES=500` runs that many fresh ones.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st

from clankie.workspace.identity import identify
from tests.workspace.tooling import Place, git, make_place

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

LONG_RUN = os.environ.get("CLANKIE_AGREEMENT_EXAMPLES")
AGREEMENT = settings(
    max_examples=int(LONG_RUN) if LONG_RUN else 60,
    derandomize=not LONG_RUN,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)

NAMES = ("a.txt", "b.py", "README.md", "x y.txt", "ünï.txt", "dir/c.txt", "dir/d.txt",
         "dir/sub/e.md", "dir.txt", "dir0/f.txt", "deep/er/still/g.txt", "Makefile",
         "run.sh", "z-last.txt", "dir/sub/x.bin")


def _content(rng: random.Random, path: str, version: int) -> bytes:
    """Text that shares most lines with other versions (so packs hold deltas)."""
    lines = [f"{path} line {n}\n" for n in range(rng.randint(0, 60))]
    for _ in range(version):
        if lines and rng.random() < 0.5:
            lines[rng.randrange(len(lines))] = f"changed {version} {rng.random()}\n"
        else:
            lines.insert(rng.randint(0, len(lines)), f"added {version}\n")
    text = "".join(lines)
    if rng.random() < 0.1:
        text = text.replace("\n", "\r\n")
    data = text.encode()
    if path.endswith(".bin"):
        data = b"\x00\x01" + data
    return data


def _write(rng: random.Random, top: Path, path: str, version: int) -> None:
    target = top / path
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.is_symlink() or target.exists():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    if rng.random() < 0.08:
        target.symlink_to(rng.choice(["a.txt", "../README.md", "nowhere", "dir"]))
        return
    target.write_bytes(_content(rng, path, version))
    if rng.random() < 0.15:
        target.chmod(0o755)


def _remove(top: Path, path: str) -> None:
    target = top / path
    if target.is_symlink() or target.is_file():
        target.unlink()


def build(seed: int, root: Path) -> tuple[Place, str, list[str]]:
    """A repository from `seed` at `root/ws`; returns the place, where the workspace lies
    below the repository's top ('' or 'ws/'), and what was done (for the failure note)."""
    rng = random.Random(seed)
    place = make_place(root)
    subfolder = rng.random() < 0.25
    top = place.ws
    done = [f"seed {seed}", f"subfolder {subfolder}"]
    git("init", "-q", "-b", "main", cwd=top)
    if rng.random() < 0.5:
        (top / ".gitignore").write_text(rng.choice(["*.log\nbuild/\n", "dir/sub/\n",
                                                    "*.txt\n!a.txt\n", "/z-*\n"]))
    names = [("ws/" if subfolder else "") + n for n in NAMES]
    version = 0
    for commit in range(rng.randint(1, 4)):
        version += 1
        for path in rng.sample(names, rng.randint(1, len(names))):
            if rng.random() < 0.15 and commit:
                _remove(top, path)
            else:
                _write(rng, top, path, version)
        git("add", "-A", cwd=top)
        git("commit", "-q", "--allow-empty", "-m", f"commit {commit}\n\nbody {seed}", cwd=top)
        done.append(f"commit {commit}")
        if rng.random() < 0.2:  # a branch, merged back
            git("checkout", "-q", "-b", f"side{commit}", cwd=top)
            _write(rng, top, rng.choice(names), version + 100)
            git("add", "-A", cwd=top)
            git("commit", "-q", "--allow-empty", "-m", f"side {commit}", cwd=top)
            git("checkout", "-q", "main", cwd=top)
            git("merge", "-q", "--no-ff", "--no-edit", "-s", "ours", f"side{commit}", cwd=top)
            done.append(f"merge side{commit}")
    if rng.random() < 0.5:
        git("repack", "-q", "-a", "-d", "--depth=10", "--window=10", cwd=top)
        done.append("repacked")
        if rng.random() < 0.5:
            git("pack-refs", "--all", cwd=top)
            done.append("packed refs")
    for path in rng.sample(names, rng.randint(0, len(names))):  # the working tree moves on
        move = rng.random()
        if move < 0.25:
            _write(rng, top, path, version + 1)
        elif move < 0.35:
            _remove(top, path)
        elif move < 0.5:
            _write(rng, top, path, version + 2)
            git("add", "-A", "-f", "--", path, cwd=top)
            done.append(f"staged {path}")
            if rng.random() < 0.5:
                _write(rng, top, path, version + 3)
        elif move < 0.55 and (top / path).exists():
            git("rm", "-q", "--cached", "--ignore-unmatch", "--", path, cwd=top)
            done.append(f"unstaged {path}")
        elif move < 0.6 and not (top / path).exists():
            _write(rng, top, path, version + 4)
            git("add", "-N", "-f", "--", path, cwd=top)
            done.append(f"intent {path}")
        elif move < 0.7 and (top / path).is_file() and not (top / path).is_symlink():
            os.utime(top / path, (1, 1))  # stat data only
    for extra in rng.sample(["new.txt", "dir/new.py", "build/out.o", "x.log", "dir/sub/y"],
                            rng.randint(0, 3)):
        _write(rng, top, ("ws/" if subfolder else "") + extra, 7)
    return place, "ws/" if subfolder else "", done


class _Git:
    """Git's answers, asked on one copy of the repository (Git refreshes the index it
    reads; the workspace's own `.git` must stay as it is)."""

    def __init__(self, top: Path, scratch: Path, prefix: str) -> None:
        self.copy = scratch / "copy"
        shutil.copytree(top, self.copy, symlinks=True)
        self.prefix = prefix

    def status(self) -> set[tuple[str, str]]:
        out = git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
                  "--", self.prefix or ".", cwd=self.copy)
        return {(item[3 + len(self.prefix):], item[:2]) for item in out.split("\0") if item}

    def changed(self, *args: str) -> set[str]:
        out = git("diff", "--name-only", "--no-renames", "-z", *args, "--",
                  self.prefix or ".", cwd=self.copy)
        return {p[len(self.prefix):] for p in out.split("\0") if p}

    def log(self, *pathspec: str) -> list[str]:
        return git("log", "--format=%H", "-n", "20", *pathspec, cwd=self.copy).split()


class _Calls:
    """The tools called on the workspace (the repository's top, or its `ws` folder)."""

    def __init__(self, place: Place, prefix: str) -> None:
        self.place = place
        self.identity = identify(str(place.ws / prefix)) if prefix else None

    def ok(self, tool: str, **args: object) -> dict[str, Any]:
        outcome = self.place.call(tool, identity=self.identity, **args)
        assert outcome.status == "ok", outcome.result
        return outcome.result


def _named(diff: str) -> set[str]:
    return {line[len("diff --git a/"):].split(" b/", 1)[0] for line in diff.splitlines()
            if line.startswith("diff --git a/")}


@AGREEMENT
@given(seed=st.integers(0, 2**32 - 1))
def test_w1_w7_the_git_tools_agree_with_git_on_generated_repositories(seed: int):
    with tempfile.TemporaryDirectory() as scratch:
        place, prefix, done = build(seed, Path(scratch))
        note("\n".join(done))
        top, tools = place.ws, _Calls(place, prefix)
        ours = {tool: tools.ok(tool) for tool in ("git_status", "git_diff")}
        staged = tools.ok("git_diff", staged=True)
        commits = git("log", "--format=%H", cwd=top).split()
        revisions = {r: tools.ok("git_diff", revision=r)
                     for r in {commits[-1], commits[-1][:7], "HEAD", "main"}}
        logs = {p: [c["commit"] for c in tools.ok("git_log", limit=20,
                                                  **({"path": p} if p else {}))["commits"]]
                for p in ("", "a.txt", "dir", "dir/sub/e.md")}
        theirs = _Git(top, Path(scratch), prefix)
        assert not ours["git_status"]["truncated"]
        assert {(e["path"], e["status"]) for e in ours["git_status"]["entries"]} == \
            theirs.status()
        assert _named(ours["git_diff"]["diff"]) == theirs.changed()
        assert _named(staged["diff"]) == theirs.changed("--cached")
        for revision, diff in revisions.items():
            assert _named(diff["diff"]) == theirs.changed(revision), revision
        for path, log in logs.items():
            where = prefix + path
            assert log == theirs.log(*(["--", where] if where else [])), path
        _patch_reaches_the_working_tree(ours["git_diff"], top, Path(scratch), prefix)


def _created(diff: str) -> list[str]:
    lines = diff.splitlines()
    return [line[len("diff --git a/"):].split(" b/", 1)[0]
            for line, after in zip(lines, [*lines[1:], ""], strict=True)
            if line.startswith("diff --git a/") and after.startswith("new file mode")]


def _patch_reaches_the_working_tree(diff: dict[str, Any], top: Path, scratch: Path,
                                    prefix: str) -> None:
    """The unstaged diff, applied to the index's files, gives the working tree's text
    files (binary files and symlinks are named, not patched)."""
    if diff["truncated"] or not diff["diff"] or "Binary" in diff["diff"] \
            or "120000" in diff["diff"] or "not diffed" in diff["diff"]:
        return
    copy = scratch / "patched"
    shutil.copytree(top, copy, symlinks=True)
    git("checkout", "-q", "--", ".", cwd=copy)  # the working tree as the index has it
    for created in _created(diff["diff"]):  # intents to add: not in the index yet
        (copy / prefix / created).unlink(missing_ok=True)
    patch = scratch / "ours.patch"
    patch.write_text(diff["diff"])
    args = [f"--directory={prefix.rstrip('/')}"] if prefix else []
    done = subprocess.run(["git", "apply", *args, str(patch)], cwd=copy,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for path in _named(diff["diff"]):
        mine, theirs = top / prefix / path, copy / prefix / path
        if mine.is_file() and not mine.is_symlink():
            assert theirs.read_bytes() == mine.read_bytes(), path
        else:
            assert not theirs.exists() or theirs.is_symlink(), path


# --- issue 41: ignore rules, attributes and line endings, conflicts, sparse checkouts ---

_RULE_PARTS = ("a", "b", "ba", "src", "build", "x.o", "*", "**", "?", "[!a]", "[a-c]",
               "[[:alpha:]]", "[]a]", "\\!", "*.o", "b*", "*a", "[^b]?", "\\*", "a\\ ")
_TREE = ("a/b/x.o", "src/build/out.o", "ba/x", "b/ab", "build/keep", "a/x.o", "bb/c/d",
         "c/ba/b", "src/a", "!x", "*y", "a b", "a /z", "x.o", "src/b/build/q", "ab", "aa/b")


def _rule(rng: random.Random) -> str:
    parts = [rng.choice(_RULE_PARTS) for _ in range(rng.randint(1, 3))]
    rule = "/".join(parts)
    if rng.random() < 0.2:
        rule = "/" + rule
    if rng.random() < 0.25:
        rule += "/"
    if rng.random() < 0.3:
        rule = "!" + rule
    if rng.random() < 0.05:
        rule += "  "
    return rule


def build_ignores(seed: int, root: Path) -> tuple[Place, list[str], list[str]]:
    """A repository with random ignore files (the top's, a folder's, `info/exclude`), a
    few tracked files and a tree of untracked ones."""
    rng = random.Random(seed)
    place = make_place(root)
    top = place.ws
    git("init", "-q", "-b", "main", cwd=top)
    paths = rng.sample(_TREE, rng.randint(4, len(_TREE)))
    for path in paths:
        (top / path).parent.mkdir(parents=True, exist_ok=True)
        (top / path).write_text(f"{path}\n")
    tracked = rng.sample(paths, rng.randint(0, 3))
    if tracked:
        git("add", "-f", "--", *tracked, cwd=top)
    git("commit", "-q", "--allow-empty", "-m", "first", cwd=top)
    done = [f"seed {seed}", f"tracked {tracked}"]
    for where in ("", "src/", "a/", ".git/info/exclude"):
        if rng.random() < (0.9 if not where else 0.4):
            text = "\n".join(_rule(rng) for _ in range(rng.randint(1, 6))) + "\n"
            target = top / where if where.endswith("exclude") else top / where / ".gitignore"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            done.append(f"{where or '.gitignore'}: {text!r}")
    return place, paths, done


@AGREEMENT
@given(seed=st.integers(0, 2**32 - 1))
def test_issue41_w6_ignore_rules_agree_with_git_check_ignore(seed: int):
    with tempfile.TemporaryDirectory() as scratch:
        place, paths, done = build_ignores(seed, Path(scratch))
        note("\n".join(done))
        theirs = _Git(place.ws, Path(scratch), "")
        assert {(e["path"], e["status"]) for e in place.ok("git_status")["entries"]} == \
            theirs.status()
        hidden = set(subprocess.run(["git", "check-ignore", "--stdin"], cwd=theirs.copy,
                                    input="\n".join(paths) + "\n", capture_output=True,
                                    text=True).stdout.splitlines())
        listed = {e["path"] for e in place.ok("list_files", depth=3)["entries"]}
        tracked = set(git("ls-files", cwd=theirs.copy).splitlines())
        shallow = [p for p in paths if p.count("/") < 3]  # what a listing of depth 3 reaches
        assert {p for p in shallow if p in listed} == {p for p in shallow if p not in hidden
                                                       or p in tracked}
