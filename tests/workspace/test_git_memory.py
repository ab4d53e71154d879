"""SPEC W5 and W7 against object stores that lie, measured from the outside: each Git tool
runs in a child process whose peak memory is read before and after the call (what Git's
own child used to hold counts now, since no Git program runs). Bombs: a loose object
declaring 512 MiB, one declaring 200 bytes that inflates to 512 MiB, the same two in a
pack, a delta declaring a 1 GiB result, a delta chain of 60, two deltas based on each
other, pack offsets outside the pack. Large but honest: an index of 115,000 entries with a
HEAD tree of 134,000 other paths, and a tree of a million entries (one subtree of a
thousand files named a thousand times). Every call returns within W5's bound, ok or
refused with a short reason, and holds at most 64 MiB beyond its result."""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path

import pytest

from tests.workspace.gitbombs import (
    Pack,
    commit_of,
    copy,
    delta,
    insert,
    loose,
    object_id,
    tree_of,
    write,
    zeros,
)
from tests.workspace.test_bounds import W5_MEMORY_KIB, W5_SECONDS, _measured
from tests.workspace.tooling import Place, committed, git, make_place

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GIT_CALLS = (("git_log", {}), ("git_status", {}), ("git_diff", {"staged": True}),
             ("git_diff", {"revision": "HEAD"}), ("git_diff", {}))
BOMB = 512 * 1024 * 1024


@pytest.fixture
def repo(tmp_path: Path) -> Place:
    return committed(make_place(tmp_path))


def _head(place: Place, commit: str) -> None:
    (place.ws / ".git" / "refs" / "heads" / "main").write_text(commit + "\n")


def _within_bounds(report: list[dict[str, object]], *codes: str) -> None:
    for call in report:
        assert call["seconds"] <= W5_SECONDS, call
        assert call["grew_kib"] <= W5_MEMORY_KIB, call
        if call["status"] == "refused":
            assert call["result"]["code"] in codes, call  # type: ignore[index]
            assert len(json.dumps(call["result"])) < 300, call
        else:
            assert call["status"] == "ok", call


def _commit_pointing_at(place: Place, tree: str) -> str:
    return write(place.ws / ".git", "commit", commit_of(tree))


def test_w5_w7_a_loose_object_declaring_512_mib_is_refused_before_it_is_inflated(repo: Place):
    bomb = "ab" * 20
    loose(repo.ws / ".git", bomb, f"commit {BOMB}\0".encode(), zeros(BOMB))
    _head(repo, bomb)
    report = _measured(repo, *GIT_CALLS)
    _within_bounds(report, "repository_too_large")
    assert report[0]["status"] == "refused"  # git_log reads the commit


def test_w5_w7_a_loose_object_that_inflates_past_what_it_declares_is_refused(repo: Place):
    bomb = "cd" * 20
    loose(repo.ws / ".git", bomb, b"commit 200\0", zeros(BOMB))
    _head(repo, bomb)
    report = _measured(repo, *GIT_CALLS)
    _within_bounds(report, "unsafe_repository")
    assert report[0]["result"]["code"] == "unsafe_repository"  # type: ignore[index]


def test_w5_w7_packed_bombs_are_refused_within_the_bounds(repo: Place):
    gitdir = repo.ws / ".git"
    pack = Pack()
    big, liar, huge_delta = "01" * 20, "02" * 20, "03" * 20
    stream = zlib.compress(b"\0" * (64 * 1024 * 1024), 9)
    pack.raw(big, 1, BOMB, stream)  # declares 512 MiB
    pack.raw(liar, 1, 300, stream)  # declares 300 bytes, inflates to 64 MiB
    base_oid, base_at = pack.add("blob", b"base\n")
    pack.ofs_delta(huge_delta, base_at, delta(5, 1 << 30, [copy(0, 5)]))  # a 1 GiB result
    pack.save(gitdir)
    for commit, code in ((big, "repository_too_large"), (liar, "unsafe_repository")):
        _head(repo, commit)
        report = _measured(repo, *GIT_CALLS)
        _within_bounds(report, code)
        assert report[0]["result"]["code"] == code  # type: ignore[index]
    blob_tree = write(gitdir, "tree", tree_of([("100644", "README.md", huge_delta)]))
    _head(repo, _commit_pointing_at(repo, blob_tree))
    report = _measured(repo, *GIT_CALLS)
    _within_bounds(report, "repository_too_large")
    staged = report[2]["result"]["diff"]  # type: ignore[index]
    assert f"not diffed: {1 << 30} -> " in staged  # named by its declared size, never built
    assert base_oid


def test_w5_w7_a_delta_chain_past_50_and_a_delta_loop_are_refused(repo: Place):
    gitdir = repo.ws / ".git"
    pack = Pack()
    data = commit_of(object_id("tree", b""))
    write(gitdir, "tree", b"")
    _, offset = pack.add("commit", data, oid="10" * 20)
    last = ""
    for n in range(60):  # each the same commit again, based on the one before
        last = f"{n + 11:02x}" * 20
        offset = pack.ofs_delta(last, offset, delta(len(data), len(data),
                                                    [copy(0, len(data))]))
    a, b = "e0" * 20, "e1" * 20  # two REF_DELTAs based on each other
    pack.ref_delta(a, b, delta(5, 5, [insert(b"abcde")]))
    pack.ref_delta(b, a, delta(5, 5, [insert(b"abcde")]))
    pack.save(gitdir)
    for commit in (last, a, f"{50 + 10:02x}" * 20):
        _head(repo, commit)
        _within_bounds(_measured(repo, *GIT_CALLS), "repository_too_large", "unsafe_repository")
    _head(repo, f"{49 + 11:02x}" * 20)  # 50 deltas deep: read
    report = _measured(repo, ("git_log", {}))
    assert report[0]["status"] == "ok", report


@pytest.mark.parametrize("offset", [0, 5, 1 << 30])
def test_w7_a_pack_offset_outside_its_pack_is_unsafe(repo: Place, offset: int):
    gitdir = repo.ws / ".git"
    pack = Pack()
    commit = write(gitdir, "tree", b"")
    oid, _ = pack.add("commit", commit_of(commit))
    pack.save(gitdir, offsets={oid: offset})
    _head(repo, oid)
    assert repo.refused("git_log") == "unsafe_repository"


def test_w5_an_index_of_115000_entries_and_a_tree_of_134000_other_paths(repo: Place):
    ws = repo.ws
    blob = write(ws / ".git", "blob", b"same\n")
    lines = "".join(f"100644 {blob}\thead/{n // 1000:03d}/{n % 1000:03d}.txt\n"
                    for n in range(134_000))
    git("update-index", "--index-info", cwd=ws, input=lines)
    tree = git("write-tree", cwd=ws).strip()
    _head(repo, write(ws / ".git", "commit", commit_of(tree)))
    (ws / ".git" / "index").unlink()
    lines = "".join(f"100644 {blob}\tindex/{n // 1000:03d}/{n % 1000:03d}.txt\n"
                    for n in range(115_000))
    git("update-index", "--index-info", cwd=ws, input=lines)
    report = _measured(repo, *GIT_CALLS)
    _within_bounds(report, "time_limit")
    diff = report[2]["result"]
    assert diff["truncated"] is True and "changed files and" in diff["diff"]  # type: ignore


def test_w5_a_tree_of_a_million_entries_stays_within_the_bounds(repo: Place):
    gitdir = repo.ws / ".git"
    blob = write(gitdir, "blob", b"x\n")
    leaf = write(gitdir, "tree", tree_of(("100644", f"f{n:04d}", blob) for n in range(1000)))
    root = write(gitdir, "tree", tree_of(("40000", f"d{n:04d}", leaf) for n in range(1000)))
    _head(repo, write(gitdir, "commit", commit_of(root)))
    _within_bounds(_measured(repo, *GIT_CALLS), "time_limit")
