"""Issue 41, SPEC W4, W6, W7: Git's answers on honest repositories, one shape each, compared
with what `git` itself says on the same repository (`test_git_agreement.py` generates
many): conflict stages as porcelain letters, full ref names, a denied path's history,
Git's ignore rules, line-ending conversion, sparse checkouts, many packs, and a workspace
below a folder that cannot be listed."""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.workspace.tooling import Place, committed, git, git_run, make_place

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def porcelain(top: Path) -> set[tuple[str, str]]:
    """`git status --porcelain` on a copy (Git refreshes the index it reads)."""
    copy = top.parent / (top.name + "-copy")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(top, copy, symlinks=True)
    out = git("status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames",
              cwd=copy)
    shutil.rmtree(copy)
    return {(item[3:], item[:2]) for item in out.split("\0") if item}


def ours(place: Place) -> set[tuple[str, str]]:
    return {(e["path"], e["status"]) for e in place.ok("git_status")["entries"]}


def test_issue41_w7_conflict_stages_are_told_as_git_porcelain_letters(tmp_path: Path):
    place = committed(make_place(tmp_path))
    ws = place.ws
    blobs = [git("hash-object", "-w", "--stdin", cwd=ws, input=f"v{n}\n").strip()
             for n in range(3)]
    lines, expected = [], {}
    letters = {(1, 2, 3): "UU", (2, 3): "AA", (1, 2): "UD", (1, 3): "DU", (2,): "AU",
               (3,): "UA", (1,): "DD"}
    for stages in itertools.chain.from_iterable(
            itertools.combinations((1, 2, 3), n) for n in (1, 2, 3)):
        name = "c" + "".join(map(str, stages)) + ".txt"
        lines += [f"100644 {blobs[s - 1]} {s}\t{name}" for s in stages]
        if 2 in stages:
            (ws / name).write_text("ours\n")
        expected[name] = letters[stages]
    git("update-index", "--index-info", cwd=ws, input="\n".join(lines) + "\n")
    theirs = porcelain(ws)
    assert {(p, s) for p, s in theirs if p.startswith("c")} == set(expected.items())
    assert ours(place) == theirs


def _diffed(diff: str) -> set[str]:
    """The paths a diff names: `diff --git` headers and Git's `* Unmerged path` lines."""
    return {line.split(" b/")[0][len("diff --git a/"):] for line in diff.splitlines()
            if line.startswith("diff --git")} | \
        {line[len("* Unmerged path "):] for line in diff.splitlines()
         if line.startswith("* Unmerged path ")}


def test_issue41_w7_a_merge_stopped_on_conflicts_is_told_and_diffed_as_git_does(
        tmp_path: Path):
    """A real `git merge` stopped on a conflict of every kind (UU, AA, UD, DU, and a file
    renamed both ways: DD, AU, UA): `git_status` says Git's letters; `git_diff` and
    `git_diff {staged}` name every unmerged path as Git's `* Unmerged path` does (never
    comparing its stages), and `git_diff {revision}` compares the working tree's file
    with the commit, as `git diff HEAD` does."""
    place = make_place(tmp_path)
    ws = place.ws
    for name in ("k1", "k3", "k4", "r"):
        (ws / name).write_text("".join(f"{name} line {n}\n" for n in range(5)))
    committed(place)
    git("checkout", "-q", "-b", "side", cwd=ws)
    for branch in ("side", "main"):
        if branch == "main":
            git("checkout", "-q", "main", cwd=ws)
        with (ws / "k1").open("a") as k1:
            k1.write(f"{branch}\r\n")
        (ws / "k2").write_text(f"added on {branch}\n")
        if branch == "side":
            (ws / "k3").unlink()
            with (ws / "k4").open("a") as k4:
                k4.write("side\n")
        else:
            with (ws / "k3").open("a") as k3:
                k3.write("main\n")
            (ws / "k4").unlink()
        git("mv", "r", f"r-{branch}", cwd=ws)
        git("add", "-A", cwd=ws)
        git("commit", "-q", "-m", f"on {branch}", cwd=ws)
    assert git_run("merge", "-q", "side", cwd=ws).returncode == 1
    assert {(p, s) for p, s in porcelain(ws)} >= {
        ("k1", "UU"), ("k2", "AA"), ("k3", "UD"), ("k4", "DU"), ("r", "DD"),
        ("r-main", "AU"), ("r-side", "UA")}
    assert ours(place) == porcelain(ws)
    for args, flags in (({}, []), ({"staged": True}, ["--cached"]),
                        ({"revision": "HEAD"}, ["HEAD"]),
                        ({"revision": "HEAD~1", "staged": True}, ["--cached", "HEAD~1"])):
        diff = place.ok("git_diff", **args)["diff"]
        assert _diffed(diff) == set(git("diff", "--name-only", *flags, cwd=ws).split()), args
    unstaged = place.ok("git_diff")["diff"]
    assert "* Unmerged path k3\n" in unstaged and "k1 line" not in unstaged
    against_head = place.ok("git_diff", revision="HEAD")["diff"]
    assert "+>>>>>>> side" in against_head  # the working tree's file, markers and all


def test_issue41_w7_full_ref_names_name_commits(tmp_path: Path):
    place = committed(make_place(tmp_path))
    ws = place.ws
    git("tag", "v1", cwd=ws)
    git("tag", "-a", "-m", "annotated", "v2", cwd=ws)
    (ws / "README.md").write_text("# Demo\nchanged\n")
    git("commit", "-q", "-am", "second", cwd=ws)
    git("pack-refs", "--all", cwd=ws)
    git("branch", "loose", "HEAD~1", cwd=ws)  # a loose ref beside packed ones
    for revision in ("refs/heads/main", "refs/tags/v1", "refs/tags/v2", "refs/heads/loose",
                     "refs/heads/main~1", "refs/heads/main^1", "tags/v1", "heads/main"):
        expected = git("diff", "--name-only", revision, cwd=ws).split()
        diff = place.ok("git_diff", revision=revision)["diff"]
        assert [line.split(" b/")[0][len("diff --git a/"):] for line in diff.splitlines()
                if line.startswith("diff --git")] == expected, revision
    assert place.refused("git_diff", revision="refs/heads/none") == "invalid_argument"
    assert place.refused("git_diff", revision="refs/../config") == "invalid_argument"


def test_issue41_w4_git_log_of_a_denied_path_is_refused_as_read_file_is(tmp_path: Path):
    place = make_place(tmp_path)
    (place.ws / ".env").write_text("TOKEN=one\n")
    (place.ws / ".ssh").mkdir()
    (place.ws / ".ssh" / "config").write_text("Host x\n")
    committed(place)
    (place.ws / ".env").write_text("TOKEN=two\n")
    git("commit", "-q", "-am", "second", cwd=place.ws)
    for path in (".env", "app/../.env", ".ssh", ".ssh/config", "sub/.env"):
        if ".." in path:
            assert place.refused("git_log", path=path) == "invalid_path"
        else:
            assert place.refused("git_log", path=path) == "denied_path", path
    assert len(place.ok("git_log", path="README.md")["commits"]) == 1


IGNORE_CASES = {
    "build/\n!src/\n": ["src/build/out.o", "src/a.c", "build/x", "b/ba/c"],
    "b[!a]\n": ["b/x.txt", "bb/y.txt", "ba/z.txt", "b/c/d"],
    "*.o\n!keep.o\nsub/\n!sub/inner.o\n": ["keep.o", "x.o", "sub/inner.o", "a/sub/k.o"],
    "/top\ndeep/**/leaf\na**/b\n": ["top", "x/top", "deep/leaf", "deep/p/q/leaf", "ab",
                                     "a/q/b", "zz/ab"],
    "[a-c]?\n\\!bang\n*.txt \n# comment\n": ["ax", "d/bx", "!bang", "n.txt", "n.txt "],
}


@pytest.mark.parametrize("rules", list(IGNORE_CASES))
def test_issue41_w6_ignore_rules_hide_what_git_hides(tmp_path: Path, rules: str):
    """A folder an ignore rule excludes stays excluded whatever a later `!` says of a
    folder above it; `[!a]` is a bracket that excludes `a`; and the rest of Git's
    wildmatch, each compared with `git status` and `git check-ignore`."""
    place = committed(make_place(tmp_path))
    (place.ws / ".gitignore").write_text(rules)
    for path in IGNORE_CASES[rules]:
        (place.ws / path).parent.mkdir(parents=True, exist_ok=True)
        (place.ws / path).write_text("x\n")
    assert ours(place) == porcelain(place.ws)
    listed = {e["path"] for e in place.ok("list_files", depth=3)["entries"]
              if e["type"] != "directory"}
    hidden = set(git("check-ignore", "--stdin", cwd=place.ws,
                     input="\n".join(IGNORE_CASES[rules]) + "\n").split("\n")) - {""}
    assert listed & set(IGNORE_CASES[rules]) == set(IGNORE_CASES[rules]) - hidden


EOL_CASES = {
    "text-auto": ("* text=auto\n", None),
    "eol-crlf": ("*.txt eol=crlf\n*.md text eol=crlf\n", None),
    "autocrlf": ("", "true"),
    "autocrlf-input": ("", "input"),
    "text-and-binary": ("*.txt text\n*.md binary\n", None),
    "crlf-legacy": ("*.txt crlf\n*.md -crlf\n", None),
    "macro": ("[attr]lines text eol=crlf\n*.txt lines\n", None),
}


@pytest.mark.parametrize("case", list(EOL_CASES))
def test_issue41_w7_line_endings_converted_as_git_does_a_touched_file_is_unchanged(
        tmp_path: Path, case: str):
    """A file whose content is unchanged but whose timestamps changed is not ` M` under
    `eol`, `text`, `text=auto` or `core.autocrlf`: Git hashes it after its clean
    conversion (never a filter program), and so do we; an edit still shows."""
    attributes, autocrlf = EOL_CASES[case]
    place = make_place(tmp_path)
    ws = place.ws
    git("init", "-q", "-b", "main", cwd=ws)
    if autocrlf:
        git("config", "core.autocrlf", autocrlf, cwd=ws)
    (ws / ".gitattributes").write_text(attributes)
    (ws / "old.txt").write_bytes(b"committed\r\nwith crlf\r\n")
    git("add", ".", cwd=ws)
    git("commit", "-q", "-m", "before the rules", cwd=ws)  # (a CRLF blob, for text=auto)
    files = {"a.txt": b"one\r\ntwo\r\n", "b.md": b"x\r\ny\n", "c.py": b"lf only\n",
             "d.bin": b"\x00\r\n", "lone.txt": b"a\rb\r\n", "e.txt": b""}
    for name, data in files.items():
        (ws / name).write_bytes(data)
    git("add", ".", cwd=ws)
    git("commit", "-q", "-m", "with the rules", cwd=ws)
    for name in [*files, "old.txt"]:  # checked out again: content as it was, new times
        data = (ws / name).read_bytes()
        (ws / name).unlink()
        (ws / name).write_bytes(data)
    (ws / "c.py").write_bytes(b"lf only\r\n")  # a real change (or not, as Git says)
    theirs = porcelain(ws)
    assert ours(place) == theirs
    diff = place.ok("git_diff")["diff"]
    assert {line.split(" b/")[0][len("diff --git a/"):] for line in diff.splitlines()
            if line.startswith("diff --git")} == set(git("diff", "--name-only", cwd=ws).split())


def test_issue41_w7_a_file_of_the_index_s_second_is_racy_as_git_has_it(tmp_path: Path):
    """Git (built without USE_NSEC, as distributions build it) takes a file whose mtime
    lies in the same second as the index's as racy, even a few nanoseconds earlier, and
    hashes it: attributes changed since the index was written then make it ` M`. Here the
    index's mtime is set one second, then one nanosecond, after the file's (whose stat
    data is as recorded): trusted, then racy."""
    import os

    place = make_place(tmp_path)
    ws = place.ws
    (ws / "a.txt").write_bytes(b"one\r\ntwo\r\n")
    past = (int(__import__("time").time()) - 20) * 1_000_000_000 + 500
    os.utime(ws / "a.txt", ns=(past, past))
    committed(place)
    (ws / ".gitattributes").write_text("*.txt text\n")  # CRLF would now be cleaned to LF
    for later, racy in ((1_000_000_000, False), (1, True)):
        os.utime(ws / ".git" / "index", ns=(past + later, past + later))
        theirs = git("--no-optional-locks", "status", "--porcelain=v1", "--untracked-files=all",
                     cwd=ws)  # on the repository itself (a copy's new inodes are no match)
        assert (" M a.txt" in theirs) == racy, theirs
        assert ours(place) == {(line[3:], line[:2]) for line in theirs.splitlines()}


def test_issue41_w6_w7_rule_files_missing_from_the_working_tree_are_read_as_git_does(
        tmp_path: Path):
    """A `.gitignore` outside a sparse checkout (skip-worktree, absent) still hides what it
    names; a `.gitattributes` the user deleted still applies (Git reads both from the
    index then), and a deleted `.gitignore` that is not skip-worktree does not."""
    place = make_place(tmp_path)
    ws = place.ws
    (ws / "a.txt").write_bytes(b"one\r\ntwo\r\n")  # committed with CRLF
    (ws / ".gitignore").write_text("*.log\n")
    (ws / "sub").mkdir()
    (ws / "sub" / ".gitignore").write_text("*.tmp\n")
    committed(place)
    (ws / ".gitattributes").write_text("*.txt text\n")
    git("add", ".gitattributes", cwd=ws)
    git("commit", "-q", "-m", "attributes", cwd=ws)
    git("sparse-checkout", "set", "--no-cone", "/*", "!/.gitignore", cwd=ws)
    assert not (ws / ".gitignore").exists()
    (ws / ".gitattributes").unlink()
    (ws / "sub" / ".gitignore").unlink()
    (ws / "a.txt").unlink()
    (ws / "a.txt").write_bytes(b"one\r\ntwo\r\n")  # touched: hashed, cleaned to LF
    for name in ("x.log", "sub/y.tmp"):
        (ws / name).write_text("new\n")
    theirs = porcelain(ws)
    assert {("a.txt", " M"), ("sub/y.tmp", "??")} <= theirs and ("x.log", "??") not in theirs
    assert ours(place) == theirs
    listed = {e["path"] for e in place.ok("list_files", depth=2)["entries"]}
    assert "x.log" not in listed and "sub/y.tmp" in listed


@pytest.mark.parametrize("sparse", [False, True], ids=["flags", "sparse-checkout"])
def test_issue41_w7_skip_worktree_and_assume_unchanged_are_not_compared(tmp_path: Path,
                                                                       sparse: bool):
    """Files outside a sparse checkout are not ` D`; files marked skip-worktree or
    assume-unchanged and then edited or deleted are not ` M` or ` D` (Git shows
    nothing); a revision diff takes their index version, as Git's does."""
    place = make_place(tmp_path)
    ws = place.ws
    for name in ("a", "b", "c", "d", "in/e", "out/f", "out/g"):
        (ws / name).parent.mkdir(exist_ok=True)
        (ws / name).write_text(f"{name}\n")
    committed(place)
    (ws / "a").write_text("a two\n")
    git("commit", "-q", "-am", "second", cwd=ws)
    if sparse:
        git("sparse-checkout", "set", "--no-cone", "/*", "!/out/", cwd=ws)
        assert not (ws / "out").exists()
        (ws / "out").mkdir()
        (ws / "out" / "g").write_text("back, edited\n")  # present again: compared (Git 2.37+)
    git("update-index", "--assume-unchanged", "a", "b", cwd=ws)
    git("update-index", "--skip-worktree", "c", "d", cwd=ws)
    (ws / "a").write_text("edited\n")
    (ws / "b").unlink()
    (ws / "c").write_text("edited\n")
    (ws / "d").unlink()
    (ws / "in" / "e").write_text("edited\n")
    assert ours(place) == porcelain(ws)
    for args in ({}, {"revision": "HEAD~1"}, {"staged": True}):
        diff = place.ok("git_diff", **args)["diff"]
        named = {line.split(" b/")[0][len("diff --git a/"):] for line in diff.splitlines()
                 if line.startswith("diff --git")}
        flags = ["--cached"] if args.get("staged") else [args["revision"]] \
            if "revision" in args else []
        assert named == set(git("diff", "--name-only", *flags, cwd=ws).split()), args


def _pack_of_one(gitdir: Path, kind: str, data: bytes) -> None:
    """A pack (and its version-2 index) holding one whole object, written as Git would."""
    body = zlib.compress(data)
    size = len(data)
    byte = ({"commit": 1, "tree": 2, "blob": 3}[kind] << 4) | (size & 0x0F)
    size >>= 4
    head = bytearray()
    while size:
        head.append(byte | 0x80)
        byte, size = size & 0x7F, size >> 7
    head.append(byte)
    pack = b"PACK" + struct.pack(">II", 2, 1) + bytes(head) + body
    pack += hashlib.sha1(pack).digest()
    oid = hashlib.sha1(f"{kind} {len(data)}\0".encode() + data).digest()
    fanout = [0 if b < oid[0] else 1 for b in range(256)]
    idx = (b"\xfftOc" + struct.pack(">I", 2) + struct.pack(">256I", *fanout) + oid
           + struct.pack(">II", zlib.crc32(bytes(head) + body), 12) + pack[-20:])
    idx += hashlib.sha1(idx).digest()
    stem = gitdir / "objects" / "pack" / f"pack-{pack[-20:].hex()}"
    stem.with_suffix(".pack").write_bytes(pack)
    stem.with_suffix(".idx").write_bytes(idx)


_FEW_DESCRIPTORS = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))
from clankie.workspace.tools import ToolSettings, call_tool
from clankie.workspace.deny import DenyList
from clankie.workspace.identity import identify
ws = identify(sys.argv[2])
print(json.dumps({tool: call_tool(tool, args, ws, ToolSettings(DenyList())).result
                  for tool, args in (("git_log", "{}"), ("git_status", "{}"),
                                     ("git_diff", '{"revision": "HEAD~1"}'))}))
"""


def test_issue41_w5_w7_many_packs_are_opened_lazily_within_the_descriptors_there_are(
        tmp_path: Path):
    """A repository of 300 packs (600 files) read with 128 descriptors: each pack is
    opened when it is needed and at most a bounded number stay open, so no call fails
    with a false `permission_denied` (the real cause had been running out of them)."""
    place = make_place(tmp_path)
    ws, gitdir = place.ws, place.ws / ".git"
    committed(place)
    for n in range(3):
        (ws / f"f{n}.txt").write_text(f"file {n}\n")
        git("add", ".", cwd=ws)
        git("commit", "-q", "-m", f"commit {n}", cwd=ws)
    listed = git("cat-file", "--batch-all-objects", "--batch-check", cwd=ws).split("\n")
    for line in filter(None, listed):  # every object in a pack of its own
        oid, kind, _ = line.split()
        data = subprocess.run(["git", "cat-file", kind, oid], cwd=ws, check=True,
                              capture_output=True).stdout
        _pack_of_one(gitdir, kind, data)
    for n in range(300 - len(listed)):
        _pack_of_one(gitdir, "blob", f"unrelated {n}\n".encode())
    git("prune-packed", cwd=ws)
    assert len(list((gitdir / "objects" / "pack").glob("*.pack"))) >= 290
    (ws / "f0.txt").write_text("edited\n")
    done = subprocess.run([sys.executable, "-c", _FEW_DESCRIPTORS, str(ROOT / "src"),
                           str(ws)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads(done.stdout)
    assert all("code" not in result for result in results.values()), results
    assert [c["commit"] for c in results["git_log"]["commits"]] == \
        git("log", "--format=%H", cwd=ws).split()
    assert {(e["path"], e["status"]) for e in results["git_status"]["entries"]} == \
        porcelain(ws)
    assert "f0.txt" in results["git_diff"]["diff"] and "f2.txt" in results["git_diff"]["diff"]


_UNPRIVILEGED = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
from clankie.workspace.tools import ToolSettings, call_tool
from clankie.workspace.deny import DenyList
from clankie.workspace.identity import identify
if os.geteuid() == 0:  # as root the mode bits stop nothing: drop to `nobody` for good
    os.setgroups([])
    os.setgid(int(sys.argv[5]))
    os.setuid(int(sys.argv[4]))
try:
    os.listdir(sys.argv[3])
    bites = False
except PermissionError:
    bites = True
ws = identify(sys.argv[2])
results = {tool: call_tool(tool, args, ws, ToolSettings(DenyList())).result
           for tool, args in (("read_file", '{"path": "a.txt"}'), ("list_files", "{}"),
                              ("search_text", '{"pattern": "needle"}'), ("git_status", "{}"))}
print(json.dumps({"bites": bites, "uid": os.geteuid(), "results": results}))
"""


def test_issue41_w6_w7_a_workspace_below_a_traversable_unlistable_folder_is_read(
        tmp_path: Path):
    """A workspace (no `.git` of its own) below a folder others own with mode 0711: the
    tools list, search and look for a repository without ever listing (opening for
    reading) that folder, as `read_file` never did. Tests run as root, where mode bits stop
    nothing, so the tools run in a child process that drops to `nobody` (setgid/setuid after
    importing clankie) on a tree made under a world-traversable temporary folder; not as
    root, the folder is the test user's own with mode 0111 instead. The child first shows
    that the bits really bite there: listing the folder fails with `PermissionError`."""
    import os
    import pwd
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="clankie-0711-"))
    try:
        base.chmod(0o755)
        shared, ws = base / "shared", base / "shared" / "ws"
        (ws / "sub").mkdir(parents=True)
        (ws / "a.txt").write_text("needle here\n")
        (ws / "sub" / "b.txt").write_text("another needle\n")
        uid, gid = os.geteuid(), os.getegid()
        if uid == 0:
            nobody = pwd.getpwnam("nobody")
            uid, gid = nobody.pw_uid, nobody.pw_gid
            for path in (ws, ws / "sub", ws / "a.txt", ws / "sub" / "b.txt"):
                os.chown(path, uid, gid)
            shared.chmod(0o711)  # root's, traversable by others, not listable
        else:
            shared.chmod(0o111)
        done = subprocess.run([sys.executable, "-c", _UNPRIVILEGED, str(ROOT / "src"),
                               str(ws), str(shared), str(uid), str(gid)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert report["bites"] and report["uid"] == uid, report
        results = report["results"]
        assert results["read_file"]["content"] == "needle here", results
        assert [(e["path"], e["type"]) for e in results["list_files"]["entries"]] == \
            [("a.txt", "file"), ("sub", "directory")], results
        assert sorted((m["path"], m["line"]) for m in results["search_text"]["matches"]) \
            == [("a.txt", 1), ("sub/b.txt", 1)], results
        assert results["git_status"]["code"] == "not_a_repository", results
    finally:
        shared.chmod(0o755)
        shutil.rmtree(base)
