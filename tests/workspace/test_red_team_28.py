"""What the red team of issue 28 found against the reader with no Git program, each rebuilt
as a test that failed before its fix (SPEC W4, W5, W7): an index (version 4) whose paths
grow a byte an entry, a commit naming 100,000 parents, a commit that is its own parent
walked back a long way, someone else's `.git` above a workspace in a shared folder, many
large ignore files, a file of `\\r` "lines" diffed, a 16 MiB commit, a delta chain of 16 MiB
results, `git_status` as a yes/no oracle on a denied file, `error` where a refusal or a
note belongs (a `.git` that changes as it is opened, files the user may not read), a hard
link of the home's token, and a file name that forges a line of the diff."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

from tests.workspace.gitbombs import (
    Pack,
    commit_of,
    copy,
    delta,
    insert,
    object_id,
    tree_of,
    write,
)
from tests.workspace.test_bounds import ROOT, W5_MEMORY_KIB, W5_SECONDS, _measured
from tests.workspace.tooling import Place, committed, git, make_place

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GIT_CALLS = (("git_log", {}), ("git_status", {}), ("git_diff", {"staged": True}),
             ("git_diff", {"revision": "HEAD"}), ("list_files", {}))


@pytest.fixture
def repo(tmp_path: Path) -> Place:
    return committed(make_place(tmp_path))


def _head(place: Place, commit: str) -> None:
    (place.ws / ".git" / "refs" / "heads" / "main").write_text(commit + "\n")


def _bounded(report: list[dict[str, object]], *codes: str) -> None:
    for call in report:
        assert call["seconds"] <= W5_SECONDS and call["grew_kib"] <= W5_MEMORY_KIB, call
        result = call["result"]
        assert isinstance(result, dict)
        assert call["status"] == "ok" or result["code"] in codes, call


def _varint(value: int) -> bytes:
    out = [value & 0x7F]
    value >>= 7
    while value:
        value -= 1
        out.insert(0, 0x80 | (value & 0x7F))
        value >>= 7
    return bytes(out)


def test_w5_an_index_whose_paths_grow_a_byte_an_entry_is_refused_at_once(repo: Place):
    """Version 4 builds each path from the one before: 20,000 entries of 65 bytes made
    paths of up to 20,000 bytes (gigabytes in all). A path past 4,096 bytes ends it."""
    body = bytearray(b"DIRC" + struct.pack(">II", 4, 20_000))
    for _ in range(20_000):
        body += struct.pack(">10I", 0, 0, 0, 0, 0, 0, 0o100644, 0, 0, 0) + b"\x01" * 20
        body += struct.pack(">H", 1) + _varint(0) + b"a\0"
    (repo.ws / ".git" / "index").write_bytes(bytes(body) + hashlib.sha1(body).digest())
    report = _measured(repo, *GIT_CALLS)
    _bounded(report, "repository_too_large")
    assert report[0]["result"]["code"] == "repository_too_large"  # type: ignore[index]
    assert "4096" in json.dumps(report[0]["result"])
    assert report[-1]["status"] == "ok"  # listed as a plain folder, and it says why


def test_w5_a_commit_naming_very_many_parents_is_refused(repo: Place):
    gitdir = repo.ws / ".git"
    tree = write(gitdir, "tree", b"")
    parents = [hashlib.sha1(str(n).encode()).hexdigest() for n in range(100_000)]
    _head(repo, write(gitdir, "commit", commit_of(tree, *parents)))
    report = _measured(repo, ("git_log", {}), ("git_log", {"path": "README.md"}))
    _bounded(report, "repository_too_large")
    assert {r["result"]["code"] for r in report} == {"repository_too_large"}  # type: ignore


def test_w5_a_commit_that_is_its_own_parent_is_found_not_walked(repo: Place):
    """Loose objects are not checked against their names: a commit can name itself. A
    long `~N` then meets it again at once: the cycle is found (issue 41: it was walked
    until the deadline), and the log shows it once."""
    gitdir = repo.ws / ".git"
    tree = write(gitdir, "tree", b"")
    oid = "12" * 20
    data = commit_of(tree, oid)
    path = gitdir / "objects" / oid[:2] / oid[2:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(zlib.compress(f"commit {len(data)}\0".encode() + data))
    _head(repo, oid)
    report = _measured(repo, ("git_diff", {"revision": "main~20000"}), ("git_log", {}))
    _bounded(report, "unsafe_repository")
    assert report[0]["result"]["code"] == "unsafe_repository"  # type: ignore[index]
    assert "cycle" in report[0]["result"]["reason"]  # type: ignore[index]
    assert [c["commit"] for c in report[1]["result"]["commits"]] == [oid]  # type: ignore


@pytest.mark.skipif(os.geteuid() != 0, reason="making another user's folder needs root")
def test_w7_another_users_git_directory_above_the_workspace_is_not_trusted(tmp_path: Path):
    """Git's "dubious ownership": a `.git` in a shared folder above the workspace that
    belongs to someone else. Its `info/exclude` of `*` would hide every file."""
    shared = tmp_path / "shared"
    shared.mkdir()
    git("init", "-q", "-b", "main", cwd=shared)
    (shared / ".git" / "info").mkdir(exist_ok=True)
    (shared / ".git" / "info" / "exclude").write_text("*\n")
    place = Place(shared)
    (shared / "ws").mkdir()
    (shared / "outside").mkdir()
    (shared / "ws" / "README.md").write_text("# mine\n")
    for where, _, files in os.walk(shared / ".git"):
        for name in [where, *(os.path.join(where, f) for f in files)]:
            os.chown(name, 65534, 65534)
    os.chown(shared, 65534, 65534)
    assert place.refused("git_status") == "unsafe_repository"
    listed = place.ok("list_files")
    assert [e["path"] for e in listed["entries"]] == ["README.md"]
    assert "another user" in listed["note"]


def test_w5_many_large_ignore_files_are_never_all_held(repo: Place):
    for n in range(150):  # each its own 1 MiB
        folder = repo.ws / f"pkg{n:03d}"
        folder.mkdir()
        lines = "".join(f"gen-{n}-{i}-*.tmp\n" for i in range(1_000))
        (folder / ".gitignore").write_bytes((lines * 64).encode()[:1024 * 1024])
    report = _measured(repo, ("search_text", {"pattern": "zzz-absent"}), ("git_status", {}))
    _bounded(report, "time_limit")
    assert report[0]["status"] == "ok"


def test_w5_a_diff_counts_lines_as_git_does_and_stays_bounded(repo: Place):
    """Only `\\n` ends a line: a megabyte of `a\\r` is one line, not a million, and it is
    not said to lack a newline a million times."""
    (repo.ws / "crs.txt").write_bytes(b"a\r" * 500_000)
    git("add", "crs.txt", cwd=repo.ws)
    (repo.ws / "crs.txt").write_bytes(b"b\r" * 500_000)
    report = _measured(repo, ("git_diff", {}))
    _bounded(report)
    diff = report[0]["result"]["diff"]  # type: ignore[index]
    assert diff.count("No newline at end of file") <= 2 and "@@ -1 +1 @@" in diff


def test_w5_a_16_mib_commit_and_a_chain_of_16_mib_deltas_stay_within_64_mib(repo: Place):
    gitdir = repo.ws / ".git"
    tree = write(gitdir, "tree", b"")
    size = 16 * 1024 * 1024 - 4096
    big = commit_of(tree, subject="x" * 100) + b"\n" + b"y\n" * ((size - 200) // 2)
    pack = Pack()
    commit, _ = pack.add("commit", big[:size])
    base = b"x" * size
    _, at = pack.add("blob", base, oid="aa" * 20)
    for n in range(48):  # each the whole base again: 16 MiB between every two steps
        at = pack.ofs_delta(f"{n + 1:02x}" * 20, at, delta(size, size, [copy(0, size)]))
    final = "fe" * 20
    pack.ofs_delta(final, at, delta(size, 5, [insert(b"done\n")]))
    pack.save(gitdir)
    blob_tree = write(gitdir, "tree", tree_of([("100644", "f", final)]))
    _head(repo, commit)
    _bounded(_measured(repo, ("git_log", {})))
    _head(repo, write(gitdir, "commit", commit_of(blob_tree)))
    (repo.ws / "f").write_text("other\n")
    git("add", "f", cwd=repo.ws)
    report = _measured(repo, ("git_diff", {"staged": True}))
    _bounded(report)
    assert "-done" in report[0]["result"]["diff"]  # type: ignore[index]
    assert object_id("blob", b"done\n")


def test_w4_git_status_is_no_oracle_on_a_denied_file(repo: Place):
    """Whether a tracked `.env` equals the index's is not said: it is counted, never
    compared (as `git_diff` does)."""
    (repo.ws / ".env").write_text("TOKEN=one\n")
    git("add", "-f", ".env", cwd=repo.ws)
    answers = []
    for text in ("TOKEN=one\n", "TOKEN=two\n"):
        (repo.ws / ".env").write_text(text)
        os.utime(repo.ws / ".env", (1, 1))
        answers.append(repo.ok("git_status"))
    assert answers[0] == answers[1] and answers[0]["skipped_denied"] == 1
    assert ".env" not in json.dumps(answers[0]["entries"])


_AS_NOBODY = """
import json, os, sys
sys.path.insert(0, {src!r})
from clankie.workspace.deny import DenyList
from clankie.workspace.identity import identify
from clankie.workspace.tools import ToolSettings, call_tool
os.setgroups([]); os.setresgid(65534, 65534, 65534); os.setresuid(65534, 65534, 65534)
ws = identify({ws!r})
print(json.dumps([[call_tool(t, json.dumps(a), ws, ToolSettings(DenyList())).status,
                   call_tool(t, json.dumps(a), ws, ToolSettings(DenyList())).result]
                  for t, a in {calls!r}]))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="reading as another user needs root")
def test_w3_w7_what_the_user_may_not_read_is_refused_or_said_never_an_error():
    tmp_path = Path(tempfile.mkdtemp(prefix="clankie-as-nobody-"))  # a path nobody reaches
    os.chmod(tmp_path, 0o755)
    try:
        _as_nobody(tmp_path)
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)


def _as_nobody(tmp_path: Path) -> None:
    place = committed(make_place(tmp_path / "p"))
    ws = place.ws
    (ws / "locked").mkdir()
    (ws / "locked" / "b.txt").write_text("b\n")
    (ws / "secret.txt").write_text("s\n")
    git("add", "-A", cwd=ws)
    git("commit", "-q", "-m", "more", cwd=ws)
    for where, _dirs, files in os.walk(tmp_path):
        for name in [where, *(os.path.join(where, f) for f in files)]:
            os.chown(name, 65534, 65534)
    os.chown(ws / "secret.txt", 0, 0)
    os.chmod(ws / "secret.txt", 0o600)
    os.chown(ws / "locked", 0, 0)
    os.chmod(ws / "locked", 0o000)
    calls = [("read_file", {"path": "secret.txt"}), ("list_files", {"depth": 3}),
             ("git_status", {}), ("git_diff", {}), ("search_text", {"pattern": "b"})]
    done = subprocess.run([sys.executable, "-c", _AS_NOBODY.format(
        src=str(ROOT / "src"), ws=str(ws), calls=calls)], capture_output=True, text=True,
        check=True, timeout=120)
    said = json.loads(done.stdout)
    assert [s for s, _ in said] == ["refused", "ok", "ok", "ok", "ok"], said
    assert said[0][1]["code"] == "permission_denied"
    status = said[2][1]
    assert all(e["status"] != " D" for e in status["entries"]), status  # not "deleted"
    assert "could not be read" in status["note"]


def test_w7_a_git_directory_swapped_while_it_is_opened_is_a_refusal(repo: Place,
                                                                   monkeypatch: pytest.MonkeyPatch):
    """Between looking at `.git` and opening it, it becomes a file: a refusal, never an
    error (the race, made certain)."""
    from clankie.workspace import gitrepo
    real_open = os.open

    def swapped(path: object, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        if path == ".git" and dir_fd is not None:
            raise NotADirectoryError(20, "Not a directory")
        return real_open(path, flags, mode, dir_fd=dir_fd)  # type: ignore[arg-type]

    monkeypatch.setattr(gitrepo.os, "open", swapped)
    outcome = repo.call("git_status")
    assert (outcome.status, outcome.code) == ("refused", "unsafe_repository")
    assert repo.call("list_files").status == "ok"


def test_w4_a_hard_link_of_the_homes_token_is_never_read(repo: Place):
    """A name elsewhere in the workspace for one of the home's files (a hard link, or a
    bind mount of the file) is refused by the file's identity."""
    home = repo.root / "home"
    home.mkdir()
    token = home / "operator.token"
    token.write_text("clk_HARDLINK-TOKEN-31\n")
    os.link(token, repo.ws / "notes.txt")
    st = home.stat()
    repo.home = (st.st_dev, st.st_ino)
    repo.home_files = frozenset({(token.stat().st_dev, token.stat().st_ino)})
    assert repo.refused("read_file", path="notes.txt") == "denied_path"
    for tool, args in (("search_text", {"pattern": "HARDLINK"}), ("git_diff", {}),
                       ("git_status", {})):
        outcome = repo.call(tool, **args)
        assert outcome.status == "ok" and "HARDLINK-TOKEN" not in json.dumps(
            {k: v for k, v in outcome.result.items() if k != "pattern"}), outcome.result


def test_w7_a_file_name_never_forges_a_line_of_the_diff(repo: Place):
    name = "x\ndiff --git a b\n+TOKEN=forged"
    (repo.ws / name).write_text("one\n")
    git("add", "-A", cwd=repo.ws)
    (repo.ws / name).write_text("two\n")
    diff = repo.ok("git_diff")["diff"]
    assert not any(line.startswith(("diff --git a b", "+TOKEN"))
                   for line in diff.splitlines()), diff
    assert '"a/x\\ndiff --git a b\\n+TOKEN=forged"' in diff


# --- the second pass, against the fixes ----------------------------------------------------

def _index_with(place: Place, entries: list[tuple[int, str, bytes, int]],
                extensions: list[tuple[bytes, bytes]]) -> None:
    """A version-2 index of (mode, blob ID, path, stage) entries, stat data all zero, and
    the extensions given (a hand-made cache-tree, say)."""
    body = bytearray(b"DIRC" + struct.pack(">II", 2, len(entries)))
    for mode, oid, name, stage in sorted(entries, key=lambda e: (e[2], e[3])):
        entry = (struct.pack(">10I", 0, 0, 0, 0, 0, 0, mode, 0, 0, 0) + bytes.fromhex(oid)
                 + struct.pack(">H", (stage << 12) | min(len(name), 0xFFF)) + name)
        body += entry + b"\0" * (8 - len(entry) % 8)
    for signature, data in extensions:
        body += signature + struct.pack(">I", len(data)) + data
    (place.ws / ".git" / "index").write_bytes(bytes(body) + hashlib.sha1(body).digest())


def test_w5_a_deep_or_wide_cache_tree_is_read_within_the_bounds(repo: Place):
    """A cache-tree 30,000 folders deep (each path one step longer) or naming far more
    folders than the index has entries is left out: it only saves work."""
    for data in (b"\0-1 1\n" + b"a\0-1 1\n" * 30_000,
                 b"\0-1 200000\n" + b"".join(b"d%06d\0-1 0\n" % n for n in range(200_000))):
        _index_with(repo, [], [(b"TREE", data)])
        _bounded(_measured(repo, ("git_status", {}), ("git_log", {})))


def test_w5_many_attribute_macros_stay_within_the_bounds(repo: Place):
    for n in range(150):
        folder = repo.ws / f"d{n:03d}"
        folder.mkdir()
        (folder / ".gitattributes").write_text("".join(
            f"[attr]m{n:03d}_{j:04d}_{'x' * 200} filter=x\n" for j in range(1_000)))
        (folder / "f.txt").write_text("hi\n")
    report = _measured(repo, ("search_text", {"pattern": "zzz"}), ("git_status", {}))
    _bounded(report, "time_limit")
    assert report[0]["status"] == "ok"


def test_w5_git_status_with_a_home_ends_within_the_bound_on_deep_folders(repo: Place):
    """1,000 deleted files 300 folders deep, their folder unchanged by the cache-tree, in
    a workspace checked against a home: every folder looked at once, the deadline asked
    as the files are said."""
    gitdir = repo.ws / ".git"
    blob = write(gitdir, "blob", b"x\n")
    tree = write(gitdir, "tree", tree_of([("100644", "x", blob)]))
    for _ in range(300):
        tree = write(gitdir, "tree", tree_of([("40000", "a", tree)]))
    names = [f"{n:04d}" for n in range(1_000)]
    folder = write(gitdir, "tree", tree_of([("40000", name, tree) for name in names]))
    root = write(gitdir, "tree", tree_of([("40000", "d", folder)]))
    _head(repo, write(gitdir, "commit", commit_of(root)))
    deep = "a/" * 300
    _index_with(repo, [(0o100644, blob, f"d/{name}/{deep}x".encode(), 0) for name in names],
                [(b"TREE", b"\0" + b"1000 1\n" + bytes.fromhex(root)
                  + b"d\0" + b"1000 0\n" + bytes.fromhex(folder))])
    home = repo.root / "home"
    home.mkdir()
    repo.home = (home.stat().st_dev, home.stat().st_ino)
    outcome = repo.call("git_status")
    assert outcome.status == "ok" or outcome.code == "time_limit", outcome.result
    if outcome.status == "ok":
        assert outcome.result["truncated"]
        assert {e["status"] for e in outcome.result["entries"]} == {" D", "??"}


def test_w5_long_identity_lines_are_never_held_whole(repo: Place):
    gitdir = repo.ws / ".git"
    tree = write(gitdir, "tree", b"")
    parent = ""
    for _ in range(20):
        body = (f"tree {tree}\n" + (f"parent {parent}\n" if parent else "")).encode()
        body += b"author " + b"\xff" * 4_000_000 + b" <a@example.invalid> 1 +0000\n"
        body += b"committer " + b"ab " * 1_000_000 + b"\n\nlong identities\n"
        parent = write(gitdir, "commit", body)
    _head(repo, parent)
    report = _measured(repo, ("git_log", {}), ("git_status", {}))
    _bounded(report, "time_limit")
    assert report[0]["status"] == "ok"
    assert len(report[0]["result"]["commits"][0]["author"]) <= 200  # type: ignore[index]


def test_w7_conflict_stages_in_a_folder_the_cache_tree_vouches_for_are_not_deleted(
        repo: Place):
    """A hand-made cache-tree may claim a folder whose entries are a conflict: its stages
    are never taken for deleted files (the folder is compared entry by entry)."""
    gitdir = repo.ws / ".git"
    (repo.ws / "sub").mkdir()
    (repo.ws / "sub" / "a.txt").write_text("ours\n")
    blob = write(gitdir, "blob", b"ours\n")
    sub = write(gitdir, "tree", tree_of([("100644", "a.txt", blob)]))
    readme = git("hash-object", "-w", "README.md", cwd=repo.ws).strip()
    root = write(gitdir, "tree", tree_of([("100644", "README.md", readme), ("40000", "sub", sub)]))
    _head(repo, write(gitdir, "commit", commit_of(root)))
    _index_with(repo, [(0o100644, readme, b"README.md", 0), (0o100644, blob, b"sub/a.txt", 2),
                       (0o100644, blob, b"sub/a.txt", 3)],
                [(b"TREE", b"\0" + b"3 1\n" + bytes.fromhex(root)
                  + b"sub\0" + b"2 0\n" + bytes.fromhex(sub))])
    entries = repo.ok("git_status")["entries"]
    assert {(e["path"], e["status"]) for e in entries} == {("sub/a.txt", "AA")}, entries


def test_w7_a_checked_out_submodule_is_said_once(repo: Place):
    nested = repo.root / "nested-source"
    nested.mkdir()
    (nested / "f.txt").write_text("n\n")
    git("init", "-q", "-b", "main", cwd=nested)
    git("add", ".", cwd=nested)
    git("commit", "-q", "-m", "nested", cwd=nested)
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(nested), "mod",
        cwd=repo.ws)
    entries = repo.ok("git_status")["entries"]
    assert [e for e in entries if e["path"] == "mod"] == [{"path": "mod",
                                                          "status": "submodule"}], entries


def test_w7_a_refusal_inside_a_diff_never_forges_a_line(repo: Place):
    name = "n\n+++ fake\n@@ -0,0 +1 @@\n+INJECTED"
    (repo.ws / name).write_text("one\n")
    git("add", "-A", cwd=repo.ws)
    (repo.ws / name).unlink()
    os.mkfifo(repo.ws / name)
    diff = repo.ok("git_diff")["diff"]
    assert not any(line.startswith(("+++ fake", "@@ -0,0", "+INJECTED"))
                   for line in diff.splitlines()), diff
