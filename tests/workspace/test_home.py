"""SPEC W4, the service's own home: a workspace that contains clankie's home (a conversation
bound to `~`, the default home beneath it) never lets a tool read, search, list beneath
or diff a file there, whatever the deny patterns say: not directly, not through a symlink
or a bind mount inside the workspace, not at any depth. The home is known to the tools by
identity (device, inode), as the service gives it. An inotify watch on the home and its
files proves that nothing there was opened for reading (an `O_PATH` handle, which reads
nothing, is no open to inotify) and that no folder there was listed."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clankie.workspace import confine
from clankie.workspace.deny import DenyList
from clankie.workspace.identity import identify
from tests.workspace.tooling import Place, git, make_place, opener
from tests.workspace.watch import Watch

TOKEN = "clk_HOME-TOKEN-7e2a91"  # the home's secret: no byte of it may reach a result


def shows_nothing_of_the_home(result: dict[str, Any], home: str | None = "home") -> None:
    """No byte of the home's files in `result` (a search echoes its pattern: not that), and,
    unless `home` is None, no entry or match beneath the folder `home`."""
    text = json.dumps({k: v for k, v in result.items() if k != "pattern"})
    assert "TOKEN-7e2a91" not in text and "deep secret" not in text
    for entry in result.get("entries", []) + result.get("matches", []):
        assert home is None or not entry["path"].startswith(home + "/"), entry


class Home:
    """A folder standing for clankie's home, somewhere in the workspace: `operator.token`,
    the store's files and a subfolder, each holding the token."""

    def __init__(self, place: Place, where: str = "home") -> None:
        self.where = where
        self.path = place.ws / where
        self.path.mkdir(parents=True)
        for name in ("operator.token", "clankie.db", "clankie.db-wal"):
            (self.path / name).write_text(f"{TOKEN}\n")
        (self.path / "sub").mkdir()
        (self.path / "sub" / "deep.txt").write_text(f"deep secret {TOKEN}\n")
        st = self.path.stat()
        place.home = (st.st_dev, st.st_ino)
        self.place = place

    def watch(self) -> Watch:
        files = (self.path / "operator.token", self.path / "clankie.db-wal", self.path / "sub",
                 self.path / "sub" / "deep.txt")
        return Watch(self.path, *(f for f in files if f.exists()))


@pytest.fixture(params=["openat2", "walk"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    with opener(request.param):
        yield make_place(tmp_path)


@pytest.fixture
def home(place: Place) -> Home:
    return Home(place)


def by_symlink() -> str:
    """The refusal a symlink inside the workspace gets: the home's (openat2 follows it and
    finds where it led), or the portable walk's (it follows none)."""
    return "denied_path" if confine.openat2_in_use() else "outside_workspace"


@pytest.mark.parametrize("path", ["home/operator.token", "home/clankie.db-wal",
                                  "home/sub/deep.txt", "./home//operator.token", "home",
                                  "home/sub"])
def test_w4_home_read_file_is_refused_whatever_the_patterns_and_nothing_is_opened(
        place: Place, home: Home, path: str):
    place.deny = DenyList(())  # no pattern at all: the home is denied by what it is
    with home.watch() as watch:
        outcome = place.call("read_file", path=path)
        assert (outcome.status, outcome.code) == ("refused", "denied_path")
        assert "home" in outcome.result["reason"] and "TOKEN" not in outcome.text
        assert watch.opened() == []


def test_w4_home_a_symlink_inside_the_workspace_into_the_home_is_refused(
        place: Place, home: Home):
    ws = place.ws
    (ws / "innocent.txt").symlink_to("home/operator.token")
    (ws / "h").symlink_to("home")
    (ws / "docs").mkdir()
    (ws / "docs" / "deeper").symlink_to("../home/sub")
    with home.watch() as watch:
        for path in ("innocent.txt", "h/operator.token", "docs/deeper/deep.txt"):
            assert place.refused("read_file", path=path) == by_symlink()
        for path in ("h", "docs/deeper"):
            assert place.refused("list_files", path=path) == by_symlink()
            assert place.refused("search_text", path=path, pattern="TOKEN") == by_symlink()
        assert watch.opened() == []


def test_w4_home_through_a_bind_mount_inside_the_workspace_is_refused(
        place: Place, home: Home):
    mount = place.ws / "mnt"
    mount.mkdir()
    done = subprocess.run(["mount", "--bind", str(home.path), str(mount)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip("bind mounts are not permitted here")
    try:
        with home.watch() as watch:
            for path in ("mnt/operator.token", "mnt/sub/deep.txt", "mnt"):
                assert place.refused("read_file", path=path) == "denied_path"
            assert place.refused("list_files", path="mnt") == "denied_path"
            for depth in (1, 2, 3):
                listed = place.ok("list_files", depth=depth)
                shows_nothing_of_the_home(listed, "mnt")
                assert {"path": "mnt", "type": "directory", "size": None,
                        "denied": True} in listed["entries"]
            found = place.ok("search_text", pattern=TOKEN, fixed=True, include_ignored=True)
            shows_nothing_of_the_home(found, "mnt")
            assert found["matches"] == [] and found["skipped_denied"] == 2  # home, mnt
            assert watch.opened() == []
    finally:
        subprocess.run(["umount", str(mount)], capture_output=True, check=True)


@pytest.mark.parametrize("where", ["home", "a/b/home"])
def test_w4_home_list_files_shows_the_home_denied_and_nothing_beneath_at_every_depth(
        place: Place, where: str):
    home = Home(place, where)
    parent = where.rpartition("/")[0] or "."
    with home.watch() as watch:
        for start in {".", parent}:
            for depth in (1, 2, 3):
                listed = place.ok("list_files", path=start, depth=depth)
                shows_nothing_of_the_home(listed, where)
                if where.count("/") - (start.count("/") + 1 if start != "." else 0) < depth:
                    assert {"path": where, "type": "directory", "size": None,
                            "denied": True} in listed["entries"]
        for start in (where, f"{where}/sub"):
            assert place.refused("list_files", path=start) == "denied_path"
        assert watch.opened() == []


@pytest.mark.parametrize("include_ignored", [False, True])
def test_w4_home_search_text_never_reads_it_and_counts_it_skipped(
        place: Place, home: Home, include_ignored: bool):
    place.deny = DenyList(())
    (place.ws / "note.txt").write_text(f"not the {TOKEN[:4]}\n")
    with home.watch() as watch:
        for pattern, fixed in ((TOKEN, True), ("clk_[A-Za-z0-9-]+", False)):
            found = place.ok("search_text", pattern=pattern, fixed=fixed,
                             include_ignored=include_ignored)
            shows_nothing_of_the_home(found)
            assert found["matches"] == [] and found["skipped_denied"] == 1
        assert place.refused("search_text", path="home", pattern="x") == "denied_path"
        assert watch.opened() == []


def test_w4_home_the_workspace_in_the_home_is_refused_whole(place: Place, home: Home):
    for where in (home.path, home.path / "sub"):
        inside = identify(str(where))
        assert inside is not None
        with home.watch() as watch:
            for tool, args in (("read_file", {"path": "operator.token"}),
                               ("list_files", {}), ("search_text", {"pattern": "clk"}),
                               ("git_status", {})):
                outcome = place.call(tool, identity=inside, **args)
                assert (outcome.status, outcome.code) == ("refused", "denied_path")
                assert "workspace lies in clankie's own home" in outcome.result["reason"]
            # The workspace's own folder is opened, to tell it is the conversation's (W8),
            # then refused: never listed, and nothing in it opened.
            assert set(watch.opened()) <= {f"{where} open"}


git_only = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@git_only
@pytest.mark.parametrize("ignored", [False, True])
def test_w4_home_git_tools_never_list_or_read_an_untracked_home(
        place: Place, home: Home, ignored: bool):
    ws = place.ws
    if ignored:
        (ws / ".gitignore").write_text("home/\n")
    git("init", "-q", "-b", "main", cwd=ws)
    git("add", "README.md", cwd=ws)
    git("commit", "-q", "-m", "first", cwd=ws)
    (ws / "README.md").write_text("# Demo\nchanged\n")
    with home.watch() as watch:
        status = place.ok("git_status")
        shows_nothing_of_the_home(status)
        assert [e["path"] for e in status["entries"]] == (
            [".gitignore", "README.md"] if ignored else ["README.md"])
        for args in ({}, {"revision": "HEAD"}, {"staged": True}):
            diff = place.ok("git_diff", **args)
            shows_nothing_of_the_home(diff)
            assert "home/" not in diff["diff"]
        for tool in ("git_diff", "git_log"):
            for path in ("home", "home/operator.token"):
                assert place.refused(tool, path=path) == "denied_path"
        listed = place.ok("list_files", depth=3)
        shows_nothing_of_the_home(listed)
        found = place.ok("search_text", pattern=TOKEN, fixed=True, include_ignored=True)
        assert found["matches"] == [] and found["skipped_denied"] == 1
        assert watch.opened() == []


@git_only
def test_w4_home_git_tools_never_show_a_byte_of_a_tracked_home(place: Place, home: Home):
    """Even a home whose files were committed (the blobs hold the token): the working
    tree's files there are never opened or hashed, and no diff quotes them."""
    ws = place.ws
    git("init", "-q", "-b", "main", cwd=ws)
    git("add", ".", cwd=ws)
    git("commit", "-q", "-m", "everything, the home too", cwd=ws)
    (home.path / "operator.token").write_text("clk_HOME-TOKEN-7e2a91 reissued\n")
    (home.path / "sub" / "deep.txt").unlink()
    (ws / "README.md").write_text("# Demo\nchanged\n")
    with home.watch() as watch:
        status = place.ok("git_status")
        shows_nothing_of_the_home(status, None)
        assert ("README.md", " M") in {(e["path"], e["status"]) for e in status["entries"]}
        for args in ({}, {"revision": "HEAD"}, {"staged": True}):
            diff = place.ok("git_diff", **args)
            shows_nothing_of_the_home(diff, None)
        for path in ("home", "home/operator.token", "home/sub/deep.txt"):
            assert place.refused("git_diff", path=path) == "denied_path"
        assert "+changed" in place.ok("git_diff")["diff"]
        assert watch.opened() == []


@git_only
def test_w4_home_git_status_and_diff_name_no_tracked_path_beneath_the_home(
        place: Place, home: Home):
    """The walk never enters the home, so its tracked files are not seen; they are left
    out, never called deleted (nor compared with anything)."""
    git("init", "-q", "-b", "main", cwd=place.ws)
    git("add", ".", cwd=place.ws)
    git("commit", "-q", "-m", "everything, the home too", cwd=place.ws)
    git("rm", "-q", "--cached", "home/clankie.db", cwd=place.ws)  # staged: "D " in HEAD only
    with home.watch() as watch:
        shows_nothing_of_the_home(place.ok("git_status"))
        for args in ({}, {"revision": "HEAD"}, {"staged": True}):
            assert "home/" not in place.ok("git_diff", **args)["diff"]
        assert watch.opened() == []
