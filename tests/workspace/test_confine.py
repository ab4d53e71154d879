"""SPEC W2, W3, W4, W8 as an attacker would try them, with the kernel's openat2 and with the
portable component-by-component walk. For every refusal, an inotify watch on the outside
folder proves that nothing outside the workspace was even opened."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clankie.workspace import confine
from clankie.workspace.deny import DenyList
from tests.workspace.tooling import SECRET, Place, make_place, opener
from tests.workspace.watch import Watch


@pytest.fixture(params=["openat2", "walk"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    with opener(request.param):
        yield make_place(tmp_path)


@pytest.fixture
def watch(place: Place) -> Iterator[Watch]:
    with Watch(place.outside, place.outside / "secret.txt", place.outside / "dir",
               place.outside / "dir" / "inner.txt") as w:
        yield w


DOTDOT = ["..", "../outside/secret.txt", "a/../../outside/secret.txt", "./../outside",
          "README.md/..", "x/y/..", "../ws/README.md", "..//outside"]


@pytest.mark.parametrize("path", DOTDOT)
def test_w2_a_dotdot_component_anywhere_is_invalid_path(place: Place, watch: Watch, path: str):
    for tool in ("read_file", "list_files", "search_text"):
        args = {"pattern": "x"} if tool == "search_text" else {}
        assert place.refused(tool, path=path, **args) == "invalid_path"
    assert watch.opened() == []


@pytest.mark.parametrize("path", ["/etc/passwd", "//etc/passwd", "", "a\x00b",
                                  "x" * 4_097, "a/" * 2_049])
def test_w2_absolute_empty_nul_and_overlong_paths_are_invalid_path(place: Place, path: str):
    assert place.refused("read_file", path=path) == "invalid_path"


def test_w2_a_path_of_exactly_4096_bytes_is_not_refused_for_its_length(place: Place):
    assert place.refused("read_file", path="a" * 4_096) in ("not_found", "invalid_path")
    nested = "/".join(["d"] * 2_048)  # 4,095 bytes: a path, merely missing
    assert place.refused("read_file", path=nested) == "not_found"


@pytest.mark.parametrize("link", ["abs_file", "abs_dir", "rel_file", "rel_dir", "deep", "loop",
                                  "magic"])
def test_w2_symlinks_leading_outside_are_refused_and_nothing_outside_is_opened(
        place: Place, watch: Watch, link: str):
    ws, outside = place.ws, place.outside
    (ws / "sub").mkdir()
    targets = {"abs_file": outside / "secret.txt", "abs_dir": outside / "dir",
               "rel_file": Path("../outside/secret.txt"), "rel_dir": Path("../outside/dir"),
               "deep": Path("../../outside/dir"), "loop": Path("loop"),
               "magic": Path("/proc/self/root") / outside.relative_to("/") / "secret.txt"}
    where = ws / "sub" / link if link == "deep" else ws / link
    where.symlink_to(targets[link])
    name = str(where.relative_to(ws))
    assert place.refused("read_file", path=name) == "outside_workspace"
    assert place.refused("read_file", path=f"{name}/inner.txt") in ("outside_workspace",
                                                                     "not_found")
    assert place.refused("list_files", path=name) in ("outside_workspace", "invalid_path")
    listed = place.ok("list_files", depth=3)
    assert all(e["type"] != "directory" for e in listed["entries"] if e["path"] == name)
    found = place.ok("search_text", pattern=SECRET, fixed=True)
    assert found["matches"] == []
    assert watch.opened() == []


def test_w2_a_symlink_inside_the_workspace_is_followed_only_with_openat2(place: Place):
    (place.ws / "link.md").symlink_to("README.md")
    if confine.openat2_in_use():
        assert place.ok("read_file", path="link.md")["content"].startswith("# Demo")
    else:
        assert place.refused("read_file", path="link.md") == "outside_workspace"


def test_w4_a_symlink_inside_to_a_secret_is_refused_as_the_secret(place: Place):
    (place.ws / ".env").write_text("TOKEN=x\n")
    (place.ws / "innocent.txt").symlink_to(".env")
    expected = "denied_path" if confine.openat2_in_use() else "outside_workspace"
    assert place.refused("read_file", path="innocent.txt") == expected
    found = place.ok("search_text", pattern="TOK")
    assert found["matches"] == [] and found["skipped_denied"] == 1  # a walk skips symlinks


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_w3_a_fifo_is_refused_without_blocking(place: Place):
    os.mkfifo(place.ws / "pipe")
    done = threading.Event()
    result: list[str] = []

    def read() -> None:
        result.append(place.refused("read_file", path="pipe"))
        done.set()

    threading.Thread(target=read, daemon=True).start()
    assert done.wait(10), "read_file blocked on a FIFO"
    assert result == ["not_regular_file"]
    assert place.ok("search_text", pattern="x")["matches"] == []  # the search skips it


def test_w3_a_socket_a_directory_and_a_missing_path(place: Place):
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(place.ws / "sock"))
        assert place.refused("read_file", path="sock") == "not_regular_file"
    finally:
        server.close()
    (place.ws / "folder").mkdir()
    assert place.refused("read_file", path="folder") == "is_directory"
    assert place.refused("read_file", path="nothing.txt") == "not_found"
    assert place.refused("read_file", path="README.md/x") == "not_found"


@pytest.mark.skipif(os.geteuid() != 0, reason="creating a device node needs root")
def test_w3_a_device_is_refused_and_never_opened_for_reading(place: Place):
    os.mknod(place.ws / "zero", 0o600 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero
    assert place.refused("read_file", path="zero") == "not_regular_file"


@pytest.mark.parametrize("path", [".env", ".ENV", "app/.env", "app/.env.local", "k/server.pem",
                                  "K/SERVER.PEM", "deploy/prod.key", "a/b/c/id_rsa",
                                  "id_ed25519.pub", ".ssh/config", "home/.aws/credentials",
                                  ".netrc", ".git/config", "x.p12", "cert.PFX"])
def test_w4_secret_paths_at_any_depth_and_any_case_are_denied_and_never_opened(
        place: Place, path: str):
    target = place.ws / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(f"{SECRET}\n")
    with Watch(target) as watch:
        assert place.refused("read_file", path=path) == "denied_path"
        result = place.ok("search_text", pattern=SECRET, fixed=True, include_ignored=True)
        assert result["matches"] == []
        assert result["skipped_denied"] == (0 if path.startswith(".git/") else 1)  # never walked
        assert watch.opened() == []
    listed = place.ok("list_files", path=str(Path(path).parent), depth=1)
    (entry,) = [e for e in listed["entries"] if e["path"] == path]
    assert entry["denied"] is True  # visible, never a silent absence


def test_w4_the_deny_list_is_a_setting(place: Place):
    (place.ws / "notes.secret").write_text("hidden\n")
    (place.ws / ".env").write_text("now readable\n")
    place.deny = DenyList(("*.secret",))
    assert place.refused("read_file", path="notes.secret") == "denied_path"
    assert place.ok("read_file", path=".env")["content"] == "now readable"


def test_w8_a_replaced_workspace_is_refused_and_nothing_is_read(place: Place):
    saved = place.identity
    moved = place.root / "old"
    place.ws.rename(moved)
    (place.ws).mkdir()
    (place.ws / "README.md").write_text(f"{SECRET}\n")
    with Watch(place.ws, place.ws / "README.md") as watch:
        for tool in ("read_file", "list_files", "git_status"):
            args = {"path": "README.md"} if tool == "read_file" else {}
            outcome = place.call(tool, identity=saved, **args)
            assert (outcome.status, outcome.code) == ("refused", "workspace_replaced")
        assert [e for e in watch.opened() if "README.md" in e] == []
    shutil.rmtree(place.ws)
    outcome = place.call("read_file", identity=saved, path="README.md")
    assert outcome.code == "workspace_missing"


def test_w2_a_symlink_swapped_for_a_directory_in_a_loop_never_leaks(place: Place):
    """A race: `flip` is a real folder with a harmless file one moment and a symlink to
    the outside the next; reads and searches racing with it never see outside bytes."""
    ws = place.ws
    stop = threading.Event()
    flips = [0]

    def flip() -> None:
        deadline = time.monotonic() + 30
        while not stop.is_set() and time.monotonic() < deadline:
            (ws / "flip").mkdir()
            (ws / "flip" / "inner.txt").write_text("harmless\n")
            shutil.rmtree(ws / "flip")
            (ws / "flip").symlink_to(place.outside / "dir")
            os.unlink(ws / "flip")
            flips[0] += 1

    flipper = threading.Thread(target=flip, daemon=True)
    flipper.start()
    seen = set()
    try:
        for _ in range(300):
            outcome = place.call("read_file", path="flip/inner.txt")
            assert SECRET not in outcome.text
            seen.add(outcome.code)
            assert SECRET not in place.call("search_text", pattern="inner", path=".").text
    finally:
        stop.set()
        flipper.join(timeout=30)
    assert seen <= {None, "outside_workspace", "not_found"}
    assert flips[0] > 10  # the folder really was being swapped while we read


def test_w8_red41_a_workspace_swapped_for_a_symlink_is_replaced_not_missing(place: Place):
    """W8: an identity that changed is `workspace_replaced`. A symlink now at the
    workspace's path (to a folder holding a secret) was reported `workspace_missing`."""
    saved = place.identity
    place.ws.rename(place.root / "old")
    place.ws.symlink_to(place.outside, target_is_directory=True)
    with Watch(place.outside, place.outside / "secret.txt") as watch:
        for tool in ("read_file", "list_files", "git_status"):
            args = {"path": "secret.txt"} if tool == "read_file" else {}
            outcome = place.call(tool, identity=saved, **args)
            assert (outcome.status, outcome.code) == ("refused", "workspace_replaced")
            assert SECRET not in outcome.text
        assert watch.opened() == []  # nothing was read through it
    place.ws.unlink()
    assert place.call("list_files", identity=saved).code == "workspace_missing"
