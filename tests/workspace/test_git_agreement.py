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

Issue 41 adds two generators: random ignore files compared with `git check-ignore`, and
attributes with `core.autocrlf`, sparse checkouts (cone or not), skip-worktree and
assume-unchanged flags and real merges stopped on every kind of conflict, compared with
`git status`, `git diff`, `git log` and `git check-ignore` on the repository itself.

The default run is derandomized (the same repositories every time, a few of each);
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
from tests.workspace.tooling import Place, git, git_run, make_place

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

LONG_RUN = os.environ.get("CLANKIE_AGREEMENT_EXAMPLES")


def agreement(examples: int) -> settings:
    """`examples` derandomized repositories in the normal run (few: the whole module
    stays within about 20 s on two busy cores), or as many fresh ones as
    `CLANKIE_AGREEMENT_EXAMPLES` says."""
    return settings(
        max_examples=int(LONG_RUN) if LONG_RUN else examples,
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

    def __init__(self, top: Path, scratch: Path, prefix: str, *, copy: bool = True) -> None:
        self.copy = scratch / "copy" if copy else top  # (asked on `top` once ours are done)
        if copy:
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
    """The paths a diff names: `diff --git` headers and Git's `* Unmerged path` lines."""
    return {line[len("diff --git a/"):].split(" b/", 1)[0] for line in diff.splitlines()
            if line.startswith("diff --git a/")} | \
        {line[len("* Unmerged path "):] for line in diff.splitlines()
         if line.startswith("* Unmerged path ")}


@agreement(12)
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


@agreement(25)
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


# --- issue 41: attributes and line endings, sparse checkouts, flags, real conflicts ---

_EOL_FILES = ("a.txt", "b.md", "c.py", "d.bin", "in/e.txt", "in/f.md", "out/g.txt",
              "out/deep/h.py", "run.sh")
_ATTRIBUTE_PATTERNS = ("*", "*.txt", "*.md", "*.bin", "in/*", "out/**", "c.py", "*.py",
                       "*.sh")
_ATTRIBUTES = ("text", "-text", "text=auto", "eol=crlf", "eol=lf", "binary", "!text",
               "text eol=crlf", "text=auto eol=lf", "-text eol=crlf", "crlf", "-crlf",
               "crlf=input", "text eol=lf")
_SPARSE_PATTERNS = ("/*", "!/out/", "*.txt", "!/in/f.md", "/in/", "out/deep/", "!*.md")
_CONFLICTS = ("UU", "AA", "UD", "DU", "renamed both ways")  # the last: DD, AU and UA


def _eol_content(rng: random.Random, path: str, version: int) -> bytes:
    """Text (or not) whose line endings vary: LF, CRLF, mixed, a lone CR, a NUL, none."""
    lines = [f"{path} {version} line {n}" for n in range(rng.randint(0, 6))]
    kind = rng.choice(("lf", "lf", "crlf", "crlf", "mixed", "lone cr", "nul", "no end"))
    if kind == "crlf":
        return "".join(line + "\r\n" for line in lines).encode()
    if kind == "mixed":
        return "".join(line + rng.choice(("\n", "\r\n")) for line in lines).encode()
    if kind == "lone cr":
        return ("\r".join(lines) + "\r\n").encode()
    if kind == "nul":
        return b"\x00" + "\r\n".join(lines).encode()
    if kind == "no end":
        return "\r\n".join(lines).encode()
    return "".join(line + "\n" for line in lines).encode()


def _attributes(rng: random.Random) -> str:
    return "".join(f"{rng.choice(_ATTRIBUTE_PATTERNS)} {rng.choice(_ATTRIBUTES)}\n"
                   for _ in range(rng.randint(1, 4)))


def _put(top: Path, path: str, data: bytes) -> None:
    (top / path).parent.mkdir(parents=True, exist_ok=True)
    (top / path).unlink(missing_ok=True)
    (top / path).write_bytes(data)


def _commit(top: Path, message: str) -> None:
    git("add", "-A", "--sparse", cwd=top)  # (a sparse checkout's files too, as Git advises)
    git("commit", "-q", "--allow-empty", "--no-verify", "-m", message, cwd=top)


def _merge_with_conflicts(rng: random.Random, top: Path, kinds: list[str],
                          done: list[str]) -> None:
    """A side branch and the main one that change the same files each its own way, then
    a real `git merge` that stops on the conflicts `kinds` names."""
    base = {"k-uu.txt": "UU", "k-ud.txt": "UD", "k-du.txt": "DU", "k-r.txt":
            "renamed both ways"}
    text = {name: "".join(f"{name} line {n}\n" for n in range(6)) for name in base}
    for name, kind in base.items():
        if kind in kinds:
            _put(top, name, text[name].encode())
    _commit(top, "before the branches")
    for branch in ("side", "main"):
        if branch == "side":
            git("checkout", "-q", "-b", "side", cwd=top)
        else:
            git("checkout", "-q", "main", cwd=top)
        ending = rng.choice(("\n", "\r\n"))
        for kind in kinds:
            if kind == "UU":
                _put(top, "k-uu.txt", (text["k-uu.txt"] + branch + ending).encode())
            elif kind == "AA":
                _put(top, "k-aa.txt", f"added on {branch}{ending}".encode())
            elif kind == "UD" or kind == "DU":
                name = f"k-{kind.lower()}.txt"
                if (kind == "UD") == (branch == "main"):
                    _put(top, name, (text[name] + branch + ending).encode())
                else:
                    (top / name).unlink()
            else:
                git("mv", "k-r.txt", f"k-r-{branch}.txt", cwd=top)
        _commit(top, f"on {branch}")
    merged = git_run("merge", "-q", "--no-edit", "side", cwd=top)
    done.append(f"merged side with conflicts {kinds}: exit {merged.returncode}")


def build_answers(seed: int, root: Path) -> tuple[Place, list[str], list[str]]:
    """A repository from `seed` with `.gitattributes` (`text`, `-text`, `text=auto`,
    `eol`, `binary`, the old `crlf`) and `core.autocrlf`, files whose line endings vary,
    maybe a sparse checkout (cone or not), files marked skip-worktree or assume-unchanged
    and then edited, and maybe a real merge stopped on conflicts of every kind; then the
    working tree touched, rewritten with other line endings, edited and added to.
    Returns the place, the paths to ask `git check-ignore` about, and what was done."""
    rng = random.Random(seed)
    place = make_place(root)
    top = place.ws
    done = [f"seed {seed}"]
    git("init", "-q", "-b", "main", cwd=top)
    autocrlf = rng.choice((None, "true", "input", "false"))
    early = rng.random() < 0.5
    if autocrlf and early:
        git("config", "core.autocrlf", autocrlf, cwd=top)
    attributes = _attributes(rng) if rng.random() < 0.8 else ""
    when = rng.choice(("first", "second", "last"))
    done.append(f"autocrlf {autocrlf} ({'early' if early else 'late'}); "
                f"attributes {when}: {attributes!r}")
    if rng.random() < 0.3:
        (top / ".gitignore").write_text(rng.choice(("*.o\nout/deep/\n", "in/\n!in/e.txt\n",
                                                    "*.md\n")))
    if attributes and when == "first":
        (top / ".gitattributes").write_text(attributes)
    for path in _EOL_FILES:
        _put(top, path, _eol_content(rng, path, 1))
    _commit(top, "first")
    if autocrlf and not early:
        git("config", "core.autocrlf", autocrlf, cwd=top)
    if attributes and when == "second":
        (top / ".gitattributes").write_text(attributes)
    if rng.random() < 0.3:
        (top / "in" / ".gitattributes").write_text(_attributes(rng))
        done.append(f"in/.gitattributes: {(top / 'in' / '.gitattributes').read_text()!r}")
    for path in rng.sample(_EOL_FILES, rng.randint(1, 4)):
        _put(top, path, _eol_content(rng, path, 2))
    _commit(top, "second")
    if rng.random() < 0.3:
        cone = rng.random() < 0.5
        patterns = ["in"] if cone else [*rng.sample(_SPARSE_PATTERNS, rng.randint(1, 3)),
                                         "/k-*"]  # (the conflicts' files stay checked out)
        git("sparse-checkout", "set", "--cone" if cone else "--no-cone", *patterns, cwd=top)
        done.append(f"sparse checkout {'cone' if cone else 'no cone'} {patterns}")
    kinds = [k for k in _CONFLICTS if rng.random() < 0.5]
    if kinds:
        _merge_with_conflicts(rng, top, kinds, done)
    for path in rng.sample(_EOL_FILES, 2):
        if not (top / path).exists() and rng.random() < 0.5:  # outside, present again
            _put(top, path, _eol_content(rng, path, 3))
            done.append(f"outside the sparse area (or deleted), written again: {path}")
    merged = {line.split("\t", 1)[1] for line in git("ls-files", "-s", cwd=top).splitlines()
              if line.split("\t", 1)[0].endswith(" 0")}  # tracked, not in conflict
    tracked = [p for p in _EOL_FILES if p in merged and (top / p).exists()]
    for path in rng.sample(tracked, min(len(tracked), rng.randint(0, 2))):
        flag = rng.choice(("--assume-unchanged", "--skip-worktree"))
        git("update-index", flag, "--", path, cwd=top)
        done.append(f"{flag} {path}")
    if attributes and when == "last":
        (top / ".gitattributes").write_text(attributes)
    for path in rng.sample(tracked, rng.randint(0, len(tracked))):
        data, move = (top / path).read_bytes(), rng.random()
        if move < 0.3:
            _put(top, path, data)  # the same bytes, new stat data
            what = "touched"
        elif move < 0.55:
            flipped = data.replace(b"\r\n", b"\n")
            _put(top, path, flipped.replace(b"\n", b"\r\n") if flipped == data else flipped)
            what = "line endings flipped"
        elif move < 0.75:
            _put(top, path, _eol_content(rng, path, 4))
            what = "rewritten"
        elif move < 0.85:
            (top / path).unlink()
            what = "deleted"
        else:
            _put(top, path, data)
            git("add", "--sparse", "--", path, cwd=top)
            what = "touched and staged"
        done.append(f"{what} {path}")
    for extra in rng.sample(("new.txt", "in/new.md", "x.o", "out/deep/n.py"),
                            rng.randint(0, 2)):
        _put(top, extra, _eol_content(rng, extra, 5))
    asked = [p for p in (*_EOL_FILES, "new.txt", "in/new.md", "x.o", "out/deep/n.py")
             if (top / p).exists()]
    return place, asked, done


@agreement(20)
@given(seed=st.integers(0, 2**32 - 1))
def test_issue41_w6_w7_attributes_sparse_checkouts_and_conflicts_agree_with_git(seed: int):
    """`git_status`, `git_diff` (unstaged, staged, against HEAD), `git_log` and the
    listing, compared with `git status --porcelain`, `git diff --name-only`, `git log` and
    `git check-ignore` asked on the repository itself once our tools have read it."""
    with tempfile.TemporaryDirectory() as scratch:
        place, asked, done = build_answers(seed, Path(scratch))
        note("\n".join(done))
        top = place.ws
        status = place.ok("git_status")
        diffs = {flags: place.ok("git_diff", **args) for flags, args in (
            ((), {}), (("--cached",), {"staged": True}), (("HEAD",), {"revision": "HEAD"}))}
        logs = {p: [c["commit"] for c in place.ok("git_log", limit=20,
                                                  **({"path": p} if p else {}))["commits"]]
                for p in ("", "a.txt", "in", "k-uu.txt")}
        listed = {e["path"] for e in place.ok("list_files", depth=3)["entries"]}
        theirs = _Git(top, Path(scratch), "", copy=False)
        assert {(e["path"], e["status"]) for e in status["entries"]} == theirs.status()
        for flags, diff in diffs.items():
            assert _named(diff["diff"]) == theirs.changed(*flags), flags
        for path, log in logs.items():
            assert log == theirs.log(*(["--", path] if path else [])), path
        hidden = set(subprocess.run(["git", "check-ignore", "--stdin"], cwd=top,
                                    input="\n".join(asked) + "\n", capture_output=True,
                                    text=True).stdout.splitlines())
        tracked = set(git("ls-files", cwd=top).splitlines())
        assert {p for p in asked if p in listed} == {p for p in asked if p not in hidden
                                                     or p in tracked}
