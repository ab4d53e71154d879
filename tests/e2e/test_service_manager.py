"""Issue 42: `clankie service` against a real systemd user manager, driven through a real
`systemctl --user`: install enables and starts the unit, clankie serve answers, its output
is in a real journal, a SIGKILL is followed by a restart (`Restart=on-failure`), an exit 2
is not (the owner's to fix), a `clankie serve` started by hand is never fought, and
uninstall stops, disables and removes it.

The manager is the test's own: `systemd --user` (and a `systemd-journald` beside it) in a
private mount namespace (`unshare -m`), where `/run/systemd`, `/run/log` and
`/var/log/journal` are empty tmpfs mounts of its own, with HOME, XDG_CONFIG_HOME and
XDG_RUNTIME_DIR in the test's folder. Nothing of the machine's own systemd (if it has one)
is touched or needed, so this runs in a container without systemd as PID 1 (as here) and in
CI, both as root: the namespace needs root (CAP_SYS_ADMIN). Where that cannot be had the
test fails saying so, never skips: a skip would let `make test` say green with no real
`systemctl --user` run (as the hosts tests, docs/decisions.md "Issue 29"). In this
namespace journald files the unit's lines as a system unit's (its cgroup is not under a
`user@.service`), so the journal is read by SyslogIdentifier, not `--user-unit`.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.served import Served, init_home
from tests.polling import eventually
from tests.test_cli_service import User

SYSTEMD = Path("/lib/systemd/systemd")
JOURNALD = Path("/lib/systemd/systemd-journald")
NAMESPACE = r"""
set -e
mount -t tmpfs tmpfs /run/systemd
mkdir /run/systemd/system /run/systemd/journal
mount -t tmpfs tmpfs /run/log
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
/lib/systemd/systemd-journald </dev/null >/dev/null 2>&1 &
echo $! > "$1"
i=0
while [ ! -S /run/systemd/journal/stdout ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
exec /lib/systemd/systemd --user
"""


class UserManager:
    """A `systemd --user` of the test's own (see the module's docstring); `pid` is the
    manager's, which is also the namespace's first process."""

    def __init__(self, user: User) -> None:
        missing = [str(p) for p in (SYSTEMD, JOURNALD) if not p.exists()] + [
            n for n in ("unshare", "nsenter", "systemctl") if shutil.which(n) is None]
        assert not missing, f"a real user manager needs {missing}: apt-get install systemd"
        assert os.geteuid() == 0, ("a user manager of the test's own needs root (a private "
                                   "mount namespace, unshare -m); run the e2e tests as root, "
                                   "as CI does")
        self.user = user
        self.journald_pid_file = user.root / "journald.pid"
        self.log = (user.root / "manager.log").open("w")
        self.proc = subprocess.Popen(
            ["unshare", "-m", "sh", "-c", NAMESPACE, "namespace",
             str(self.journald_pid_file)], env=user.env(), cwd=user.root,
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            eventually(lambda: self.proc.poll() is not None or self.systemctl(
                "show", "--property=Version", "--value").returncode == 0,
                "the user manager to answer", timeout=30, every=0.05)
            assert self.proc.poll() is None, (user.root / "manager.log").read_text()
        except BaseException:
            self.stop()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def systemctl(self, *words: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["systemctl", "--user", *words], capture_output=True, text=True,
                              timeout=60, env=self.user.env(), cwd=self.user.root)

    def prop(self, name: str) -> str:
        return self.systemctl("show", "clankie.service", f"--property={name}",
                              "--value").stdout.strip()

    def journal(self) -> str:
        """What the journal holds from the service (inside the namespace, where it is)."""
        return subprocess.run(
            ["nsenter", "-t", str(self.pid), "-m", "journalctl", "--no-pager", "-o", "cat",
             "SYSLOG_IDENTIFIER=clankie"], capture_output=True, text=True, timeout=60).stdout

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.systemctl("exit")
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        try:
            journald = int(self.journald_pid_file.read_text())
        except (OSError, ValueError):
            journald = 0
        if journald:
            _end(journald)
        self.log.close()


def _end(pid: int) -> None:
    """Stop the journald this test started (by its process ID) and wait until it is gone."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    if Path(f"/proc/{pid}").exists():
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def user(tmp_path: Path) -> User:
    return User(tmp_path)


@pytest.fixture
def manager(user: User) -> Iterator[UserManager]:
    started = UserManager(user)
    try:
        yield started
    finally:
        started.stop()


def answers(user: User) -> bool:
    """Whether the home's service answers a real read (T2's check of who listens first)."""
    done = subprocess.run([sys.executable, "-m", "clankie", "conversations", "list"],
                          capture_output=True, text=True, timeout=60, env=user.env(),
                          cwd=user.root)
    return done.returncode == 0


def test_issue42_install_enables_starts_restarts_after_a_kill_and_uninstall_removes(
        user: User, manager: UserManager):
    """Decisions "Enable and start", "The unit" and "uninstall", with a real manager."""
    init_home(user.home)
    done = user.clankie("install")
    assert done.returncode == 0, (done, manager.journal())
    assert ("enabled and started (systemctl --user enable --now clankie.service): clankie "
            "serve answers now" in done.stdout), done
    assert manager.systemctl("is-enabled", "clankie.service").stdout.strip() == "enabled"
    assert manager.systemctl("is-active", "clankie.service").stdout.strip() == "active"
    assert (user.unit.parent / "default.target.wants" / "clankie.service").is_symlink()
    assert answers(user)
    eventually(lambda: "clankie serving on unix://" in manager.journal(),
               "serve's ready line in the journal", timeout=10)

    first = int(manager.prop("MainPID"))
    os.kill(first, signal.SIGKILL)  # a crash: Restart=on-failure
    eventually(lambda: manager.prop("NRestarts") == "1" and manager.prop("SubState") ==
               "running", "systemd to start clankie serve again", timeout=30, every=0.1)
    assert int(manager.prop("MainPID")) != first
    eventually(lambda: answers(user), "the restarted service to answer", timeout=20, every=0.2)
    shown = json.loads(user.clankie("status", "--json").stdout)
    assert {k: shown[k] for k in ("installed", "origin", "enabled", "active", "sub",
                                  "restarts", "answers")} == {
        "installed": True, "origin": "clankie", "enabled": True, "active": "active",
        "sub": "running", "restarts": 1, "answers": True}
    assert shown["user_manager"]["reachable"] is True

    # An exit 2 (here T3: a setting out of bounds) is the owner's to fix: not restarted.
    (user.home / "settings.toml").write_text("question_ttl = 0\n")
    os.chmod(user.home / "settings.toml", 0o600)
    os.kill(int(manager.prop("MainPID")), signal.SIGKILL)
    eventually(lambda: manager.prop("ActiveState"), "clankie serve to fail on exit 2",
               timeout=30, every=0.1, until=lambda state: state == "failed")
    assert manager.prop("NRestarts") == "2" and manager.prop("ExecMainStatus") == "2"
    assert "question_ttl" in manager.journal()
    (user.home / "settings.toml").unlink()
    again = json.loads(user.clankie("install", "--json").stdout)  # fixed: start it afresh
    assert again["written"] == "unchanged" and again["started"] is True, again
    assert again["ran"][0] == ["systemctl", "--user", "reset-failed", "clankie.service"]
    assert answers(user)

    removed = user.clankie("uninstall")
    assert removed.returncode == 0, removed
    assert "stopped and disabled (systemctl --user disable --now clankie.service)" in (
        removed.stdout)
    assert not user.unit.exists()
    assert not (user.unit.parent / "default.target.wants" / "clankie.service").is_symlink()
    assert manager.systemctl("is-enabled", "clankie.service").returncode != 0
    assert not answers(user)
    assert user.clankie("status").returncode == 6


def test_issue42_a_serve_started_by_hand_is_not_fought(user: User, manager: UserManager):
    """Decision "Enable and start": a `clankie serve` the owner started holds the home, and
    the unit's would fail beside it (then be restarted until systemd gives up): install
    enables the unit, starts nothing, and says what to stop and what to run."""
    by_hand = Served.start(user.home, env={"CLANKIE_HOME": str(user.home)})
    try:
        done = user.clankie("install")
        assert done.returncode == 0, done
        assert (f"not started: a `clankie serve` you started yourself (pid {by_hand.proc.pid})"
                in done.stdout), done
        assert "  systemctl --user start clankie.service" in done.stdout.splitlines()
        assert manager.systemctl("is-enabled", "clankie.service").stdout.strip() == "enabled"
        assert manager.systemctl("is-active", "clankie.service").stdout.strip() == "inactive"
    finally:
        by_hand.stop()
    assert manager.systemctl("start", "clankie.service").returncode == 0
    eventually(lambda: answers(user), "the unit's serve to answer", timeout=20, every=0.2)
    assert user.clankie("uninstall").returncode == 0
