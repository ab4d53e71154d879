"""T1 in process: the opening functions of `clankie.home` never go through a link and check
what they opened; the store is never created through a link; `init`'s folders are
private whatever the umask. (The refusals as the CLI shows them: tests/e2e/test_home_trust.py.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from clankie.home import (
    Home,
    UnsafeHome,
    check,
    make_home,
    open_lock,
    operator_token,
    problems,
    read_token_file,
    service_url,
    write_token_file,
)
from clankie.store.db import Store, StoreUnusable


@pytest.fixture
def home(tmp_path: Path) -> Home:
    path = tmp_path / "home"
    path.mkdir(mode=0o700)
    return Home(path)


def test_t1_the_lock_is_never_opened_through_a_link(home: Home, tmp_path: Path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    home.lock.symlink_to(victim)
    with pytest.raises(UnsafeHome) as refused:
        open_lock(home)
    assert refused.value.unsafe.path == home.lock and "symbolic link" in str(refused.value)
    assert victim.read_text() == "precious\n"
    home.lock.unlink()
    home.lock.symlink_to(tmp_path / "dangling")
    with pytest.raises(UnsafeHome):
        open_lock(home)
    assert not (tmp_path / "dangling").exists()


def test_t1_a_new_lock_is_created_exclusively_and_an_old_one_reopened(home: Home):
    fd = open_lock(home)
    os.close(fd)
    assert stat.S_IMODE(home.lock.stat().st_mode) == 0o600
    os.close(open_lock(home))


def test_t1_the_token_file_is_never_read_through_a_link_or_a_fifo(home: Home, tmp_path: Path):
    secret = tmp_path / "secret"
    secret.write_text("clk_other\n")
    home.token_file.symlink_to(secret)
    with pytest.raises(UnsafeHome):
        read_token_file(home)
    with pytest.raises(UnsafeHome):
        operator_token(home, {})
    assert operator_token(home, {"CLANKIE_TOKEN": "clk_env"}) == "clk_env"  # home not read
    home.token_file.unlink()
    os.mkfifo(home.token_file, 0o600)  # opening a FIFO to read would wait for a writer
    with pytest.raises(UnsafeHome) as refused:
        read_token_file(home)
    assert "not a regular file" in str(refused.value)


def test_t1_the_token_file_is_written_atomically_and_privately(home: Home, tmp_path: Path):
    target = tmp_path / "target"
    target.write_text("keep\n")
    home.token_file.symlink_to(target)
    write_token_file(home, "clk_new")  # a link there is replaced, not followed
    assert target.read_text() == "keep\n"
    assert not home.token_file.is_symlink() and read_token_file(home) == "clk_new"
    assert stat.S_IMODE(home.token_file.stat().st_mode) == 0o600
    assert [p.name for p in home.path.iterdir()] == ["operator.token"]


def test_t1_the_store_is_never_created_through_a_link(tmp_path: Path):
    path = tmp_path / "clankie.db"
    path.symlink_to(tmp_path / "planted.db")
    with pytest.raises(StoreUnusable):
        Store(path)
    assert not (tmp_path / "planted.db").exists()


@pytest.fixture
def umask_all() -> Iterator[None]:
    old = os.umask(0o777)
    try:
        yield
    finally:
        os.umask(old)


def test_t1_init_folders_are_private_under_any_umask(tmp_path: Path, umask_all: None):
    home = Home(tmp_path / "a" / "b" / "home")
    make_home(home)
    assert stat.S_IMODE(home.path.stat().st_mode) == 0o700
    for folder in (tmp_path / "a", tmp_path / "a" / "b"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # the owner's bits only
    write_token_file(home, "clk_x")
    assert stat.S_IMODE(home.token_file.stat().st_mode) == 0o600
    check(home)


def test_t1_every_problem_is_listed_outermost_first(tmp_path: Path):
    parent = tmp_path / "open"
    parent.mkdir()
    parent.chmod(0o777)
    home = Home(parent / "home")
    home.path.mkdir(mode=0o700)
    (home.path / "settings.toml").symlink_to("/dev/null")
    (home.path / "serve.lock").write_text("")
    (home.path / "serve.lock").chmod(0o666)
    found = problems(home)
    assert [(u.where, u.path.name) for u in found] == [
        ("parents", "open"), ("files", "settings.toml"), ("files", "serve.lock")]
    assert found[2].fix == f"chmod go-w {home.lock}"
    home.path.chmod(0o707)
    assert [u.where for u in problems(home)] == ["parents", "home"]  # files: not looked at


def test_t1_dotdot_after_a_link_is_checked_where_the_system_resolves_it(tmp_path: Path):
    """`link/../home` opens `target/../home`, not `home` beside the link: that folder is
    the one checked."""
    real = tmp_path / "real"
    (real / "sub").mkdir(parents=True)
    real.chmod(0o777)
    (tmp_path / "link").symlink_to(real / "sub")
    home = Home(tmp_path / "link" / ".." / "home")
    with pytest.raises(UnsafeHome) as refused:
        make_home(home)
    assert refused.value.unsafe.path == real and not (real / "home").exists()
    real.chmod(0o755)
    make_home(home)
    assert (real / "home").is_dir() and not (tmp_path / "home").exists()


def test_t1_a_home_given_with_tilde_or_relative_is_one_absolute_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert Home.from_env({"CLANKIE_HOME": "~/clankie-x"}).path == tmp_path / "clankie-x"
    assert Home.from_env({"CLANKIE_HOME": "rel/h"}).path == tmp_path / "rel" / "h"


def test_a_missing_home_is_refused_where_it_is_read_but_not_for_a_token_alone(tmp_path: Path):
    """SPEC section 10 "Setting up and running" and T1: every command that reads the home
    refuses a missing one with the fix; the token lookup behind CLANKIE_URL, which may
    name a service elsewhere, finds no token instead."""
    home = Home(tmp_path / "never-made")
    [missing] = problems(home)
    assert (missing.where, missing.path, missing.trust) == ("home", home.path, False)
    assert missing.problem == "does not exist" and "clankie init" in missing.fix
    with pytest.raises(UnsafeHome) as refused:
        service_url(home, {})
    assert refused.value.headline == f"cannot use the home: {home.path} does not exist"
    assert service_url(home, {"CLANKIE_URL": "unix:///elsewhere.sock"}) == \
        "unix:///elsewhere.sock"
    assert operator_token(home, {}) is None
    assert problems(home, missing_ok=True) == []
    assert list(tmp_path.iterdir()) == []


def test_a_home_under_a_file_is_refused_by_init_and_nothing_is_made(tmp_path: Path):
    above = tmp_path / "notes.txt"
    above.write_text("keep\n")
    home = Home(above / "a" / "home")
    with pytest.raises(UnsafeHome) as refused:
        make_home(home)
    assert refused.value.unsafe.path == home.path
    assert refused.value.unsafe.problem == f"cannot be made: {above} is not a folder"
    [found] = problems(home)
    assert found.problem == f"does not exist, and cannot be made: {above} is not a folder"
    assert above.read_text() == "keep\n" and [p.name for p in tmp_path.iterdir()] == [
        "notes.txt"]


def test_a_store_that_cannot_be_opened_is_said_plainly(tmp_path: Path):
    """How opening the store fails when its folder went away (or turned read-only) after
    the home was checked: `StoreUnusable`, naming the store and the cause."""
    path = tmp_path / "gone" / "clankie.db"
    with pytest.raises(StoreUnusable) as refused:
        Store(path)
    assert str(refused.value).startswith(f"the store {path} cannot be opened (No such file")


@pytest.mark.parametrize("mode", [0o500, 0o300, 0o600])
def test_a_home_its_owner_may_not_write_or_enter_is_refused_with_chmod(home: Home, mode: int):
    """Not writable by permission: said from the mode bits (root, who runs CI, passes
    every access check, so the bits are what is looked at), with the fix."""
    home.path.chmod(mode)
    try:
        with pytest.raises(UnsafeHome) as refused:
            check(home)
        assert refused.value.headline == (
            f"cannot use the home: {home.path} is not open to you (mode {mode:o}: clankie "
            "reads and writes there)")
        assert refused.value.unsafe.fix == f"chmod 700 {home.path}"
    finally:
        home.path.chmod(0o700)
