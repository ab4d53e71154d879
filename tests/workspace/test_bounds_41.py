"""Issue 41's memory and time findings (SPEC W5), each rebuilt at its size: one memory
account per call instead of one cap per structure, and the deadline, or a cycle found, in
every loop a repository can lengthen. Each shape runs in a child process whose peak growth
during the call is read (`_measured`); the refusal at the bound is shown in this process
with the account made smaller, so that its numbers can be read.

Shapes: `git_log` over three layers of 1,000-parent octopus merges; `git_diff` over an
index of 5,000 paths 16 long folders deep, and `git_status` over 300 paths 2,000 folders
deep, both with a home to check; an index whose cache-tree names 17,000 deep folders; an
index of 40 MB beside two nested 16 MB trees; five nested folders of 50,000 files; a tree
that holds itself, under a 600-level path; a commit that is its own parent, 250 `^` back.
And what the Git-answers part added, on the same account: a file whose line endings are
converted, RE2's memory for ignore rules, the tables of many packs.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
from pathlib import Path

import pytest

from clankie.workspace import bounds
from tests.workspace.gitbombs import Pack, commit_of, copy, delta, insert, loose, tree_of, write
from tests.workspace.test_bounds import W5_MEMORY_KIB, W5_SECONDS, _measured
from tests.workspace.test_git_answers import _pack_of_one
from tests.workspace.tooling import Place, committed, git, make_place

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Place:
    return committed(make_place(tmp_path))


def _head(place: Place, commit: str) -> None:
    (place.ws / ".git" / "refs" / "heads" / "main").write_text(commit + "\n")


def _within(call: dict[str, object], *codes: str) -> dict[str, object]:
    """The call returned within W5's time and memory, ok or refused with one of `codes`;
    its result."""
    assert call["seconds"] <= W5_SECONDS and call["grew_kib"] <= W5_MEMORY_KIB, call
    result = call["result"]
    assert isinstance(result, dict)
    assert call["status"] == "ok" or result["code"] in codes, call
    return result


def _with_home(place: Place) -> None:
    home = place.root / "home"
    home.mkdir()
    place.home = (home.stat().st_dev, home.stat().st_ino)


def _small_account(monkeypatch: pytest.MonkeyPatch, mib: int) -> None:
    monkeypatch.setattr(bounds, "CALL_MEMORY", mib * 1024 * 1024)


def _too_large(place: Place, tool: str, **args: object) -> str:
    outcome = place.call(tool, **args)
    assert outcome.code == "repository_too_large", outcome.result
    reason = str(outcome.result["reason"])
    assert "a tool call may hold" in reason and any(c.isdigit() for c in reason), reason
    return reason


# --- parsed commits: octopus merges ---------------------------------------------------------

def _octopus(place: Place, layers: int = 3, width: int = 1_000) -> str:
    """`layers` layers of `width` commits, each naming every commit of the layer below as
    a parent (the last layer's have none), and HEAD naming the first layer's: about 41 KB
    a merge, packed as deltas of one another, as `git gc` packs them (0.4 MB in all)."""
    gitdir = place.ws / ".git"
    tree = write(gitdir, "tree", b"")
    pack = Pack()
    below: list[str] = []
    for layer in range(layers, 0, -1):
        when = 1_700_000_000 + 1_000 * (layers - layer)
        ids: list[str] = []
        base_at = -1
        base_size = 0
        for n in range(width):
            data = commit_of(tree, *below, subject=f"layer {layer} commit {n:04d}", when=when)
            oid = hashlib.sha1(f"commit {len(data)}\0".encode() + data).hexdigest()
            if base_at < 0:
                _, base_at = pack.add("commit", data, oid=oid)
                base_size = len(data)
            else:  # the same but for its subject's last four characters
                keep = base_size - 5
                pack.ofs_delta(oid, base_at, delta(base_size, len(data), [
                    copy(0, keep), insert(data[keep:])]))
            ids.append(oid)
        below = ids
    pack.save(gitdir)
    head = write(gitdir, "commit", commit_of(tree, *below, subject="octopus",
                                             when=1_700_000_000 + 1_000 * layers))
    _head(place, head)
    return head


def test_w5_issue41_git_log_over_octopus_merges_keeps_ids_not_parsed_commits(repo: Place):
    """Every parsed parent was kept until popped: 1,000 merges of 1,000 parents each held
    (+219 MiB for four layers). The queue keeps a date and an ID a commit."""
    head = _octopus(repo)
    (log,) = _measured(repo, ("git_log", {"limit": 20}))
    commits = _within(log)["commits"]
    assert isinstance(commits, list) and len(commits) == 20
    assert commits[0]["commit"] == head and commits[1]["subject"].startswith("layer 1 ")


def test_w5_issue41_the_history_walk_is_refused_at_the_bound(repo: Place,
                                                            monkeypatch: pytest.MonkeyPatch):
    _octopus(repo, layers=2, width=400)
    assert repo.ok("git_log", limit=5)["commits"]
    _small_account(monkeypatch, 1)
    _too_large(repo, "git_log", limit=5)


# --- the home check ---------------------------------------------------------------------------

def _index_info(place: Place, paths: list[str], version: int = 2) -> None:
    blob = write(place.ws / ".git", "blob", b"x\n")
    (place.ws / ".git" / "index").unlink()
    git("update-index", "--index-version", str(version), "--index-info", cwd=place.ws,
        input="".join(f"100644 {blob}\t{path}\n" for path in paths))


def test_w5_issue41_the_home_check_remembers_one_path_not_every_folder(repo: Place):
    """`Root.folder_in_home` kept every folder of every path by its whole path: an 18 MB
    index of 5,000 paths 16 long folders deep made `git_diff {staged}` grow +170 MiB."""
    folder = "d" * 220
    _index_info(repo, [f"{n:04d}/" + f"{folder}/" * 15 + "f.txt" for n in range(5_000)])
    _with_home(repo)
    staged, status = _measured(repo, ("git_diff", {"staged": True}), ("git_status", {}))
    assert _within(staged)["truncated"] is True  # 5,000 new files: more than 32 KiB
    assert _within(status)["truncated"] is True


def test_w5_issue41_the_home_check_is_linear_in_the_depth(repo: Place):
    """300 paths 2,000 folders deep (1.2 MB of index): every folder of every path kept by
    its whole path grew quadratically (+114 MiB, then `time_limit`)."""
    _index_info(repo, [f"{n:03d}/" + "a/" * 2_000 + "f" for n in range(300)], version=4)
    (repo.ws / "000").mkdir()
    deep = repo.ws / "000"
    for _ in range(3):  # the first path's folders partly there: lstat'ed down to the end
        deep = deep / ("a/" * 200).strip("/")
        deep.mkdir(parents=True)
    _with_home(repo)
    (status,) = _measured(repo, ("git_status", {}))
    entries = _within(status)["entries"]
    assert isinstance(entries, list) and {e["status"] for e in entries} == {"AD"}
    assert status["result"]["truncated"] is True  # type: ignore[index]


# --- the index's cache-tree ------------------------------------------------------------------

def _with_cache_tree(place: Place, spines: int, depth: int, name: int) -> None:
    """An index (version 4, so its file stays small) of `spines` chains of `depth` folders
    named by `name` characters, a file in each folder, and a cache-tree naming every
    folder, as `git write-tree` leaves it (its tree IDs made up: only counts are read)."""
    paths = []
    for spine in range(spines):
        folders = [f"{spine:04d}"] + [f"{level:02d}" + "c" * (name - 2) for level in
                                       range(depth - 1)]
        paths += ["/".join(folders[:level + 1]) + "/f" for level in range(depth)]
    _index_info(place, sorted(paths), version=4)
    data = bytearray(b"\0%d %d\n" % (len(paths), spines) + b"\x01" * 20)
    for spine in range(spines):
        names = [f"{spine:04d}"] + [f"{level:02d}" + "c" * (name - 2) for level in
                                     range(depth - 1)]
        for level, folder in enumerate(names):
            inner = 1 if level < depth - 1 else 0
            data += folder.encode() + b"\0%d %d\n" % (depth - level, inner) + b"\x02" * 20
    index = place.ws / ".git" / "index"
    body = index.read_bytes()[:-20] + b"TREE" + struct.pack(">I", len(data)) + bytes(data)
    index.write_bytes(body + hashlib.sha1(body).digest())


def test_w5_issue41_the_cache_tree_is_kept_a_folder_at_a_time(repo: Place):
    """The cache-tree was kept by each folder's whole path: 900 chains of 19 folders of
    200 characters held their paths twice over (the index's and the cache-tree's)."""
    _with_cache_tree(repo, spines=900, depth=19, name=200)
    listing, status = _measured(repo, ("list_files", {}), ("git_status", {}))
    assert _within(listing)["note"] is None  # read as a repository, not a plain folder
    _within(status, "time_limit")


def test_w5_issue41_the_index_and_its_cache_tree_are_refused_at_the_bound(
        repo: Place, monkeypatch: pytest.MonkeyPatch):
    _with_cache_tree(repo, spines=300, depth=10, name=100)
    assert repo.ok("git_status")["entries"]
    _small_account(monkeypatch, 1)
    assert "its index" in _too_large(repo, "git_status")


# --- per-structure caps that added up --------------------------------------------------------

def test_w5_issue41_an_index_and_two_nested_16_mb_trees_share_one_account(repo: Place):
    """A 38 MB index (under its own 40 MiB cap) and two nested 16 MB trees (under theirs,
    32 MiB) made `git_diff {staged}` hold +92 MiB: each cap held, their sum did not."""
    gitdir = repo.ws / ".git"
    blob = write(gitdir, "blob", b"x\n")
    inner = write(gitdir, "tree", tree_of(("100644", f"i{n:07d}" + "i" * 8, blob)
                                          for n in range(380_000)))
    outer = write(gitdir, "tree", tree_of([("40000", "a", inner)] + [
        ("100644", f"o{n:07d}" + "o" * 8, blob) for n in range(380_000)]))
    _head(repo, write(gitdir, "commit", commit_of(outer)))
    _index_info(repo, [f"p/{n:06d}" + "x" * 150 for n in range(200_000)])
    (staged,) = _measured(repo, ("git_diff", {"staged": True}))
    result = _within(staged, "repository_too_large")
    if staged["status"] == "refused":
        assert "a tool call may hold" in str(result["reason"])


# --- folder listings -----------------------------------------------------------------------

def test_w5_issue41_the_walk_keeps_names_not_entries_on_its_way_down(place: Place):
    """Five nested folders of 50,000 files of 80-character names each: the walk held every
    entry of each (`os.DirEntry`, with its status once asked: +110 MiB for `search_text`
    in the finding, +75 MiB here)."""
    folder = place.ws
    for level in range(5):
        folder = folder / f"level{level}"
        folder.mkdir()
        for n in range(50_000):
            name = f"{'0' if level < 4 else 'z'}{n:05d}".rjust(80, "n")
            os.close(os.open(folder / name, os.O_CREAT, 0o644))
    search, listing = _measured(place, ("search_text", {"pattern": "needle"}),
                                ("list_files", {"depth": 3}))
    assert _within(search)["matches"] == []
    assert _within(listing)["truncated"] is True


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return make_place(tmp_path)


def test_w5_issue41_the_walk_is_refused_at_the_bound(place: Place,
                                                    monkeypatch: pytest.MonkeyPatch):
    for n in range(20_000):
        os.close(os.open(place.ws / f"file-{n:05d}.txt", os.O_CREAT, 0o644))
    assert place.ok("list_files")["truncated"] is True
    _small_account(monkeypatch, 1)
    assert "walk" in _too_large(place, "list_files")


# --- inflated objects ------------------------------------------------------------------------

def test_w5_issue41_an_object_is_counted_before_it_is_inflated(repo: Place,
                                                               monkeypatch: pytest.MonkeyPatch):
    gitdir = repo.ws / ".git"
    tree = write(gitdir, "tree", b"")
    big = commit_of(tree) + b"y\n" * 1_000_000  # 2 MB
    _head(repo, write(gitdir, "commit", big))
    assert repo.ok("git_log")["commits"]
    _small_account(monkeypatch, 2)
    assert "an object of" in _too_large(repo, "git_log")


# --- time: cycles by hash ---------------------------------------------------------------------

def test_w5_issue41_a_tree_that_holds_itself_is_a_cycle_found_not_walked(repo: Place):
    """A hand-made tree of 1.3 KB naming itself as its folder `a`: `git_log` of a 600-level
    path took 25-32 s, past the deadline."""
    gitdir = repo.ws / ".git"
    blob = write(gitdir, "blob", b"x\n")
    me = "77" * 20
    data = tree_of([("40000", "a", me)] + [("100644", f"f{n:02d}", blob) for n in range(40)])
    loose(gitdir, me, f"tree {len(data)}\0".encode(), [data])
    _head(repo, write(gitdir, "commit", commit_of(me)))
    path = "a/" * 600 + "f00"
    report = _measured(repo, ("git_log", {"path": path}), ("git_status", {}),
                       ("git_diff", {"revision": "HEAD"}))
    for call in report:
        result = _within(call, "unsafe_repository")
        assert call["status"] == "refused" and "cycle" in str(result["reason"]), call


def test_w5_issue41_a_commit_that_is_its_own_parent_is_found_at_the_first_step(repo: Place):
    """A commit of 4 MB naming itself as its parent, `git_diff` against HEAD and 250 `^`:
    each step read it again (19-28 s)."""
    gitdir = repo.ws / ".git"
    tree = write(gitdir, "tree", b"")
    me = "66" * 20
    data = commit_of(tree, me).replace(b"\n\n", b"\n" + b"x y\n" * 1_000_000 + b"\n", 1)
    loose(gitdir, me, f"commit {len(data)}\0".encode(), [data])
    _head(repo, me)
    (diff,) = _measured(repo, ("git_diff", {"revision": "HEAD" + "^" * 250}))
    result = _within(diff, "unsafe_repository")
    assert diff["status"] == "refused" and "cycle" in str(result["reason"])


# --- the Git-answers part (branch i41-agree) on the same account -----------------------------

def test_w5_w7_issue41_a_file_converted_for_hashing_is_counted_on_the_account(
        repo: Place, monkeypatch: pytest.MonkeyPatch):
    """Git's line-ending conversion holds a file's bytes and their converted copy at once
    (6 MiB of CRLF lines: 12 MiB): both are counted on the call's account."""
    ws = repo.ws
    (ws / ".gitattributes").write_text("*.txt text\n")
    data = b"line\r\n" * (1 << 20)
    (ws / "big.txt").write_bytes(data)
    git("add", ".", cwd=ws)
    git("commit", "-q", "-m", "a big text file", cwd=ws)
    (ws / "big.txt").unlink()  # the same bytes, new stat data: hashed again, converted
    (ws / "big.txt").write_bytes(data)
    assert repo.ok("git_status")["entries"] == []
    _small_account(monkeypatch, 8)
    reason = _too_large(repo, "git_status")
    assert f"converting the line endings of {len(data)} bytes" in reason


def test_w5_w6_issue41_ignore_rules_draw_on_the_account_and_leave_it_half_free(
        repo: Place, monkeypatch: pytest.MonkeyPatch):
    """RE2's memory for the rules is counted on the call's account: with an account too
    small for them all, the rules past half of it are skipped and counted (W5: said with
    numbers), and the call still has the other half for reading the repository."""
    ws = repo.ws
    rules = [f"{n:04d}-*" for n in range(999)]  # (with `*.log`, a file's 1,000 lines):
    # 8.5 MB of RE2 memory in all
    (ws / ".gitignore").write_text("*.log\n" + "".join(f"{rule}\n" for rule in rules))
    (ws / "debug.log").write_text("ignored\n")
    (ws / "0998-x").write_text("the last rule ignores it\n")
    whole = repo.ok("git_status")
    assert whole["rules_skipped"] == 0
    assert {e["path"] for e in whole["entries"]} == {".gitignore"}
    _small_account(monkeypatch, 4)
    cut = repo.ok("git_status")
    assert 0 < cut["rules_skipped"] <= 1_000
    assert "debug.log" not in {e["path"] for e in cut["entries"]}  # the first set was made


def test_w5_issue41_the_tables_of_many_packs_are_counted_on_the_account(
        repo: Place, monkeypatch: pytest.MonkeyPatch):
    """Each pack's fan-out table is kept for the call, its descriptors open or not (the
    packs are opened lazily): 600 packs' tables (1.6 MB) are counted, and refused at the
    bound."""
    gitdir = repo.ws / ".git"
    for n in range(600):
        _pack_of_one(gitdir, "blob", f"unrelated {n}\n".encode())
    assert len(repo.ok("git_log", limit=5)["commits"]) == 1
    _small_account(monkeypatch, 1)
    reason = _too_large(repo, "git_log", limit=5)
    assert "the tables of" in reason and "packs" in reason
