"""Issue 42: `clankie service install|uninstall|status` as real `clankie` processes, each in a
user environment of the test's own (HOME, XDG_CONFIG_HOME, an empty XDG_RUNTIME_DIR: no user
service manager answers there, as in this container), with decisions cited by heading from
docs/decisions.md, "Issue 42: `clankie service ...`".

Where no user manager answers, install writes the unit, says so plainly and prints the
commands that enable and start it: that is tested here, on every machine. The same commands
against a real user manager (`systemctl --user`) are tests/e2e/test_service_manager.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.served import init_home

ROOT = Path(__file__).resolve().parents[1]
CLEARED = ("CLANKIE_URL", "CLANKIE_TOKEN", "DBUS_SESSION_BUS_ADDRESS", "SUDO_UID", "SUDO_USER",
           "SUDO_GID", "SUDO_COMMAND", "DOAS_USER", "PKEXEC_UID", "XDG_CONFIG_HOME",
           "XDG_RUNTIME_DIR", "XDG_DATA_HOME")


class User:
    """A user environment of the test's own: its home folder, config, runtime folder and
    clankie home."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.config = root / "config"
        self.runtime = root / "runtime"
        self.runtime.mkdir(mode=0o700)
        self.home = root / "clankie-home"
        self.unit = self.config / "systemd" / "user" / "clankie.service"

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if k not in CLEARED and not k.startswith("CLANKIE_")}
        return {**env, "HOME": str(self.root), "XDG_CONFIG_HOME": str(self.config),
                "XDG_RUNTIME_DIR": str(self.runtime), "CLANKIE_HOME": str(self.home),
                "PYTHONPATH": str(ROOT / "src"), **extra}

    def clankie(self, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "clankie", "service", *args],
                              capture_output=True, text=True, timeout=120, cwd=self.root,
                              env=self.env(**extra))
        assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done
        return done


@pytest.fixture
def user(tmp_path: Path) -> User:
    return User(tmp_path)


def verify(user: User) -> subprocess.CompletedProcess[str]:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is not installed: apt-get install systemd (issue 42)"
    return subprocess.run([analyze, "--user", "verify", str(user.unit)], capture_output=True,
                          text=True, timeout=60, env=user.env(), cwd=user.root)


def test_issue42_no_user_manager_install_writes_the_unit_and_prints_the_commands(user: User):
    """Decision "Enable and start": no user manager answers here, so install writes the unit,
    says that nothing was started and why (systemctl's words), prints the two commands to
    run where one answers, and how to undo it; exit 0 (the unit is what install makes)."""
    init_home(user.home)
    done = user.clankie("install")
    assert done.returncode == 0, done
    out = done.stdout
    assert f"wrote {user.unit}" in out
    assert f"runs: {sys.executable} -m clankie serve" in out  # the running install
    assert f"CLANKIE_HOME={user.home}" in out and f"PYTHONPATH={ROOT / 'src'}" in out
    assert "not started: no user service manager answers here (`systemctl --user` says:" in out
    lines = out.splitlines()
    assert "  systemctl --user daemon-reload" in lines
    assert "  systemctl --user enable --now clankie.service" in lines
    assert "undo: clankie service uninstall" in lines
    checked = verify(user)  # what was written is clean
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", ""), checked
    assert oct(user.unit.stat().st_mode & 0o777) == "0o644"

    again = user.clankie("install", "--json")
    assert again.returncode == 0, again
    result = json.loads(again.stdout)
    assert result["written"] == "unchanged" and result["started"] is False
    assert result["user_manager"]["reachable"] is False
    assert "Failed to connect to bus" in result["user_manager"]["detail"]
    assert result["ran"] == [] and result["to_run"] == [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", "clankie.service"]]
    assert result["runs"] == [sys.executable, "-m", "clankie", "serve"]
    assert result["environment"] == {"CLANKIE_HOME": str(user.home),
                                     "PYTHONPATH": str(ROOT / "src")}
    assert result["undo"] == ["clankie", "service", "uninstall"]

    status = user.clankie("status")
    assert status.returncode == 0, status
    assert f"unit: {user.unit} (as `clankie service install` wrote it)" in status.stdout
    assert "none answers here" in status.stdout and "cannot be told" in status.stdout
    shown = json.loads(user.clankie("status", "--json").stdout)
    assert shown["installed"] is True and shown["origin"] == "clankie"
    assert shown["user_manager"]["reachable"] is False and shown["active"] is None
    assert shown["answers"] is False
    # issue 42: status's `runs` and `environment` have install's types and values
    assert (shown["runs"], shown["environment"]) == (result["runs"], result["environment"])


def test_issue42_install_before_init_is_refused_with_the_fix(user: User):
    """Decision "The home": a unit for a home that does not exist would fail at each login
    (T1's checks, as `serve` makes them): refused, exit 2, nothing written."""
    done = user.clankie("install")
    assert done.returncode == 2, done
    assert "does not exist" in done.stderr and "clankie init" in done.stderr
    assert not user.unit.exists()
    problem = json.loads(user.clankie("install", "--json").stdout)
    assert problem["code"] == "invalid_request" and "clankie init" in problem["fix"]


def test_issue42_a_unit_that_differs_is_never_written_over_without_replace(user: User):
    """Decision "What install does with a file that is there": an edited unit is refused
    (exit 3, the lines that would change shown), --replace writes over it; one an earlier
    install wrote, unedited, is rewritten."""
    init_home(user.home)
    assert user.clankie("install").returncode == 0
    edited = user.unit.read_text().replace("RestartSec=2", "RestartSec=30")
    user.unit.write_text(edited)
    done = user.clankie("install")
    assert done.returncode == 3, done
    assert "was changed since `clankie service install` wrote it" in done.stderr
    assert "-RestartSec=30" in done.stderr and "+RestartSec=2" in done.stderr
    assert "--replace" in done.stderr and user.unit.read_text() == edited
    problem = json.loads(user.clankie("install", "--json").stdout)
    assert problem["code"] == "unit_differs" and "+RestartSec=2" in problem["diff"]
    assert user.clankie("uninstall").returncode == 3  # removes only what install wrote
    assert user.unit.read_text() == edited

    replaced = json.loads(user.clankie("install", "--replace", "--json").stdout)
    assert replaced["written"] == "replaced" and "RestartSec=2\n" in user.unit.read_text()
    other_home = user.root / "other-home"
    init_home(other_home)
    moved = user.clankie("install", "--json", CLANKIE_HOME=str(other_home))
    assert json.loads(moved.stdout)["written"] == "updated", moved  # an earlier install's
    assert f'Environment="CLANKIE_HOME={other_home}"' in user.unit.read_text()


def test_issue42_uninstall_removes_the_unit_and_its_links_and_keeps_the_rest(user: User):
    """Decision "uninstall": the unit and the links enabling it made go; drop-ins of the
    owner's own and the home stay; a second uninstall has nothing to remove (exit 0);
    status then says it is not installed (exit 6)."""
    init_home(user.home)
    assert user.clankie("install").returncode == 0
    wants = user.unit.parent / "default.target.wants" / "clankie.service"
    wants.parent.mkdir()
    wants.symlink_to(user.unit)  # as `systemctl --user enable` makes it
    drop_in = user.unit.parent / "clankie.service.d" / "keys.conf"
    drop_in.parent.mkdir()
    drop_in.write_text("[Service]\nEnvironmentFile=%h/keys\n")
    done = user.clankie("uninstall")
    assert done.returncode == 0, done
    assert f"removed {wants}, {user.unit}" in done.stdout
    assert "no user service manager answers here" in done.stdout
    assert f"kept {drop_in.parent}" in done.stdout
    assert not user.unit.exists() and not wants.is_symlink() and drop_in.exists()
    assert (user.home / "clankie.db").exists()
    again = user.clankie("uninstall", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["removed"] == []
    status = user.clankie("status")
    assert status.returncode == 6 and "not installed" in status.stdout, status
    assert json.loads(user.clankie("status", "--json").stdout)["installed"] is False


def test_issue42_settings_and_keys_in_this_environment_are_said_not_carried(user: User):
    """Decision "What the service runs": only CLANKIE_HOME (and PYTHONPATH) go into the unit;
    a setting or a key set here is named on standard error, with where it belongs."""
    init_home(user.home)
    done = user.clankie("install", CLANKIE_QUESTION_TTL="600", OPENAI_API_KEY="sk-secret")
    assert done.returncode == 0, done
    assert "CLANKIE_QUESTION_TTL is set here" in done.stderr and "settings.toml" in done.stderr
    assert "OPENAI_API_KEY is set here" in done.stderr
    assert "sk-secret" not in user.unit.read_text() + done.stdout + done.stderr
    assert "600" not in user.unit.read_text()


def test_issue42_web_and_tcp_go_to_serve_with_a_port_of_their_own(user: User):
    init_home(user.home)
    done = user.clankie("install", "--web", "127.0.0.1:8766", "--tcp", "[::1]:8765")
    assert done.returncode == 0, done
    assert ('"serve" "--tcp" "[::1]:8765" "--web" "127.0.0.1:8766"'
            in user.unit.read_text())
    port0 = user.clankie("install", "--replace", "--web", "127.0.0.1:0")
    assert port0.returncode == 2 and "a port of its own" in port0.stderr, port0
    wide = user.clankie("install", "--replace", "--web", "0.0.0.0:8766", "--json")
    assert wide.returncode == 2 and json.loads(wide.stdout)["code"] == "invalid_request"


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="only root can be root for a user")


@needs_root
def test_issue42_as_root_for_a_user_through_sudo_is_refused(user: User):
    """Decision "Never as root for a user": sudo from alice would put clankie serve in
    root's manager as root; refused, exit 5, nothing written; root for itself is allowed
    and said."""
    init_home(user.home)
    done = user.clankie("install", SUDO_UID="1000", SUDO_USER="alice")
    assert done.returncode == 5, done
    assert "as root for alice" in done.stderr and "without sudo" in done.stderr
    assert not user.unit.exists()
    problem = json.loads(user.clankie("install", "--json", SUDO_UID="1000").stdout)
    assert problem["code"] == "root_for_a_user"
    own = user.clankie("install")
    assert own.returncode == 0 and "as root, in root's own service manager" in own.stdout
    assert user.clankie("uninstall", DOAS_USER="bob").returncode == 5
    assert user.unit.exists()


@needs_root
def test_issue42_as_root_into_another_users_folders_is_refused(user: User):
    """`su` without `-` keeps the user's XDG_CONFIG_HOME: root would write into their
    folders a unit that runs as root. Refused by the folder's owner, exit 5."""
    init_home(user.home)
    user.config.mkdir()
    os.chown(user.config, 65534, 65534)
    done = user.clankie("install")
    assert done.returncode == 5, done
    assert f"{user.config} belongs to user ID 65534" in done.stderr
    assert not user.unit.exists()
