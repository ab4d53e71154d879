"""A home that cannot be used, from the outside (SPEC section 10 "Setting up and running"
and T1: `init`, `serve` and every command that reads the home refuse with exit 2, naming
the path and the fix): a home that is missing (for every command but `init`), a file
where the home should be, a file where a folder above it should be, a home on a
read-only file system (a read-only bind mount), a folder the user may not write in or
enter (run as `nobody`). Each is run through the real CLI and must end in exit 2, one or
two plain lines with the path, the cause and the fix, no traceback, and nothing created
or changed; `doctor` names the same cause on its home line and blames nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.served import ROOT
from tests.e2e.test_home_trust import (
    assert_refused,
    clankie,
    environment,
    initialised,
    serve_or_refuse,
)

IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not IS_ROOT, reason="a read-only bind mount and running as "
                                "another user need root; CI runs as root")
# Every command that reads the home (init aside), as a user would type them.
READERS = (("conversations", "list"), ("chat",), ("devices", "list"))


def snapshot(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every entry under `folder` (itself included): its mode and, for a file, its bytes."""
    seen: dict[str, tuple[int, bytes]] = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        st = path.lstat()
        seen[str(path.relative_to(folder))] = (
            st.st_mode, path.read_bytes() if path.is_file() and not path.is_symlink() else b"")
    return seen


def doctor(home: Path) -> tuple[int, dict[str, dict[str, object]], str]:
    done = clankie("doctor", "--json", home=home)
    assert "Traceback" not in done.stderr, done.stderr
    text = clankie("doctor", home=home).stdout
    return done.returncode, {c["check"]: c for c in json.loads(done.stdout)}, text


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], None]]:
    """Makes a folder read-only with a bind mount on itself; unmounted after the test."""
    mounted: list[Path] = []

    def mount(folder: Path) -> None:
        subprocess.run(["mount", "--bind", str(folder), str(folder)], check=True)
        mounted.append(folder)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], check=True)

    try:
        yield mount
    finally:
        for folder in reversed(mounted):
            subprocess.run(["umount", str(folder)], check=True)


# Missing.

def test_a_missing_home_is_refused_by_every_command_but_init_and_is_not_created(
        tmp_path: Path):
    home = tmp_path / "never-made"
    for command in (*READERS, ("serve",)):
        done = clankie(*command, home=home, timeout=30)
        assert_refused(done.returncode, done.stderr, home, "clankie init")
        assert "does not exist" in done.stderr and "CLANKIE_HOME" in done.stderr
    assert list(tmp_path.iterdir()) == []
    code, checks, _ = doctor(home)
    assert code == 1 and not checks["home"]["ok"]
    assert f"{home} does not exist" in str(checks["home"]["detail"])
    assert "clankie init" in str(checks["home"]["fix"]) and "CLANKIE_HOME" in str(
        checks["home"]["fix"])
    assert list(tmp_path.iterdir()) == []


# Not a folder.

def test_a_file_as_home_is_refused_everywhere_and_left_byte_identical(tmp_path: Path):
    home = tmp_path / "home"
    home.write_bytes(b"my notes\x00\n")
    home.chmod(0o600)
    before = snapshot(tmp_path)
    for command in (("init",), *READERS):
        done = clankie(*command, home=home, timeout=30)
        assert_refused(done.returncode, done.stderr, home, "CLANKIE_HOME")
        assert "is not a folder" in done.stderr
    code, said = serve_or_refuse(home, tmp_path)
    (tmp_path / "script.json").unlink()  # serve_or_refuse's own
    assert_refused(code, said, home, "CLANKIE_HOME")
    assert snapshot(tmp_path) == before
    code, checks, text = doctor(home)
    assert code == 1 and not checks["home"]["ok"]
    assert str(checks["home"]["detail"]) == f"{home} is not a folder"
    assert "CLANKIE_HOME" in str(checks["home"]["fix"])
    assert not checks["store"]["ok"] and "mode" not in str(checks["store"]["fix"])
    assert f"FAIL home: {home} is not a folder" in text
    assert "CLANKIE_HOME" in str(checks["service"]["fix"]), checks["service"]
    assert snapshot(tmp_path) == before


def test_a_file_where_a_folder_above_the_home_should_be_is_refused(tmp_path: Path):
    above = tmp_path / "notes.txt"
    above.write_text("keep\n")
    home = above / "clankie"
    before = snapshot(tmp_path)
    for command in (("init",), *READERS, ("serve",)):
        done = clankie(*command, home=home, timeout=30)
        assert_refused(done.returncode, done.stderr, home, "CLANKIE_HOME")
        assert f"{above} is not a folder" in done.stderr
    code, checks, _ = doctor(home)
    assert code == 1 and f"{above} is not a folder" in str(checks["home"]["detail"])
    assert snapshot(tmp_path) == before


# A read-only file system.

@needs_root
def test_a_home_on_a_read_only_file_system_is_refused_by_init_and_serve_and_doctor_says_so(
        tmp_path: Path, read_only: Callable[[Path], None]):
    mount = tmp_path / "media"
    mount.mkdir()
    home = initialised(mount)
    read_only(mount)
    before = snapshot(mount)
    done = clankie("init", home=home)
    assert_refused(done.returncode, done.stderr, home, "CLANKIE_HOME")
    assert "read-only file system" in done.stderr and "internal error" not in done.stderr
    code, said = serve_or_refuse(home, tmp_path)
    assert_refused(code, said, home, "CLANKIE_HOME")
    assert "read-only file system" in said
    assert snapshot(mount) == before
    code, checks, text = doctor(home)
    assert code == 1 and not checks["home"]["ok"]
    assert str(checks["home"]["detail"]).startswith(f"{home} is on a read-only file system")
    assert "CLANKIE_HOME" in str(checks["home"]["fix"])
    assert "mode" not in str(checks["store"]["detail"]) + str(checks["store"]["fix"])
    assert f"FAIL home: {home} is on a read-only file system" in text
    # nothing listens, and `clankie serve` would refuse this home: the fix is the home's
    assert not checks["service"]["ok"] and "fix the home first" in str(
        checks["service"]["fix"])


@needs_root
def test_init_of_a_new_home_on_a_read_only_file_system_is_refused_and_makes_nothing(
        tmp_path: Path, read_only: Callable[[Path], None]):
    mount = tmp_path / "media"
    mount.mkdir()
    read_only(mount)
    home = mount / "sub" / "clankie"
    done = clankie("init", home=home)
    assert_refused(done.returncode, done.stderr, home, "CLANKIE_HOME")
    assert f"{mount} is on a read-only file system" in done.stderr
    assert list(mount.iterdir()) == []
    code, checks, _ = doctor(home)
    assert code == 1 and f"{mount} is on a read-only file system" in str(
        checks["home"]["detail"])


# Not the user's to write or enter (as `nobody`: root passes every permission check).

@pytest.fixture
def open_folder() -> Iterator[Path]:
    """A folder outside the test's own (which only root may enter), open to everyone."""
    folder = Path(tempfile.mkdtemp(prefix="clankie-home-problems-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


AS_NOBODY = """
import os, sys
from clankie.cli.main import main
# The CLI imports what a command needs when it runs; import it now, as root, since the
# venv (root's) may not be readable by nobody.
import asyncio, clankie.client, clankie.cli.doctor, clankie.service, clankie.store
os.setgroups([])
os.setegid(65534)
os.seteuid(65534)  # effective only: the OS checks every access as nobody's
sys.exit(main(sys.argv[1:]))
"""


def as_nobody(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI run as user `nobody` (imported as root, since the venv's Python is root's)."""
    return subprocess.run([sys.executable, "-c", AS_NOBODY, *args], cwd="/", text=True,
                          capture_output=True, timeout=60, stdin=subprocess.DEVNULL,
                          env=environment(home) | {"PYTHONPATH": str(ROOT / "src")})


@needs_root
def test_init_in_a_folder_the_user_may_not_write_in_is_refused(open_folder: Path):
    locked = open_folder / "system"
    locked.mkdir(mode=0o755)  # root's: T1 accepts it above a home, but nobody can't write it
    home = locked / "clankie"
    done = as_nobody(home, "init")
    assert_refused(done.returncode, done.stderr, home, "CLANKIE_HOME")
    assert f"may not write in {locked}" in done.stderr
    assert list(locked.iterdir()) == []


@needs_root
def test_a_home_behind_a_folder_the_user_may_not_enter_is_refused(open_folder: Path):
    closed = open_folder / "closed"
    closed.mkdir(mode=0o700)  # root's alone
    home = closed / "clankie"
    for command in (("init",), ("conversations", "list")):
        done = as_nobody(home, *command)
        assert_refused(done.returncode, done.stderr, home, "CLANKIE_HOME")
        assert f"may not enter {closed}" in done.stderr
    assert list(closed.iterdir()) == []


# A `~user` that names no user of this system.

def test_a_home_under_the_tilde_of_no_user_is_refused_everywhere_and_nothing_is_made(
        tmp_path: Path):
    """Issue 19's second trial: `CLANKIE_HOME=~nosuchuser/x` was `internal error:
    RuntimeError: Could not determine home directory.` from every command."""
    home = Path("~clankie-no-such-user/clankie")
    for command in (("init",), *READERS, ("serve",), ("doctor",)):
        done = clankie(*command, home=home, timeout=30)
        assert_refused(done.returncode, done.stderr, home, "CLANKIE_HOME")
        assert "no user clankie-no-such-user" in done.stderr, done.stderr
    assert not (ROOT / "~clankie-no-such-user").exists()
