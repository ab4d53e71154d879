"""`clankie service`'s I/O: the unit file, the user's service manager, and the facts that
`decide` takes.

Owns reading the file found at the unit's path (never through a link: install writes none),
writing it whole or not at all (a new file beside it, renamed over), removing it and the
links `systemctl enable` made to it; asking whether the user's service manager answers, and
running `systemctl --user` or `launchctl` (each once, within `TIMEOUT_S`, its words kept
for the report); the owners of folders (`decide.root_refusal`), the user's home, linger, and
whether a `clankie serve` started by hand holds the home. It decides nothing.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from clankie.home import Home

from .decide import UNIT, Platform, systemctl

TIMEOUT_S: Final = 60.0
SETTLE_S: Final = 10.0  # serve answers within 1 s (SPEC section 10); a loaded machine
MAX_UNIT_BYTES: Final = 1 << 20
MAX_OUTPUT: Final = 2000
LINGER: Final = Path("/var/lib/systemd/linger")


@dataclass(frozen=True)
class Ran:
    """A command run once: its words, exit status (127: not found; -1: no answer within
    `TIMEOUT_S`) and what it said, stripped and bounded."""

    argv: tuple[str, ...]
    status: int
    said: str
    out: str = ""  # its standard output alone, whole

    @property
    def ok(self) -> bool:
        return self.status == 0


def run(argv: tuple[str, ...]) -> Ran:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, errors="replace",
                              timeout=TIMEOUT_S, stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        return Ran(argv, 127, f"{argv[0]} is not installed")
    except OSError as exc:
        return Ran(argv, 126, f"{argv[0]} does not run: {exc.strerror or exc}")
    except subprocess.TimeoutExpired:
        return Ran(argv, -1, f"{argv[0]} gave no answer within {TIMEOUT_S:g} s")
    said = " ".join(f"{done.stderr.strip()} {done.stdout.strip()}".split())
    return Ran(argv, done.returncode, said[:MAX_OUTPUT], done.stdout)


@dataclass(frozen=True)
class Reach:
    """Whether the user's service manager answers, and in its words why not."""

    reachable: bool
    detail: str


def reach(platform: Platform, uid: int) -> Reach:
    if platform is Platform.MACOS:
        asked = run(("launchctl", "print", f"gui/{uid}"))
        return Reach(asked.ok, "launchd's gui domain answers" if asked.ok else asked.said)
    asked = run(systemctl("show", "--property=Version", "--value"))
    if asked.ok:
        return Reach(True, f"systemd {asked.said} answers")
    return Reach(False, f"`systemctl --user` says: {asked.said or f'exit {asked.status}'}")


def user_home() -> Path:
    """The user's home as the service manager sees it: HOME when it is absolute, else the
    password database's."""
    home = os.environ.get("HOME", "")
    return Path(home) if os.path.isabs(home) else Path(pwd.getpwuid(os.getuid()).pw_dir)


def user_name() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def owners(paths: list[Path]) -> dict[Path, int]:
    """Each path's nearest folder that exists (itself, or a parent), and its owner."""
    found: dict[Path, int] = {}
    for path in paths:
        for folder in (path, *path.parents):
            with contextlib.suppress(OSError):
                found[folder] = os.stat(folder).st_uid
                break
    return found


def read_unit(path: Path) -> str | None:
    """The file at `path` (None: there is none); a link, or what cannot be read as a file,
    is read as "" (no one's seal: not clankie's)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a link
            return ""
        raise
    with os.fdopen(fd, "rb") as file:
        return file.read(MAX_UNIT_BYTES).decode("utf-8", "surrogateescape")


def write_unit(path: Path, text: str) -> None:
    """`text` at `path`, mode 0644 (a service file, no secret in it): written beside it,
    synced, then renamed over, so the manager never reads half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.new")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o644)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(text.encode("utf-8"))
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o644)  # whatever the umask
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _sync_folder(path.parent)


def remove_unit(path: Path) -> list[Path]:
    """Remove the unit and the links to it that enabling it made (`*.wants/clankie.service`
    beside it, pointing at it); what was removed. Other files (drop-ins) stay."""
    removed = []
    for wants in sorted(path.parent.glob(f"*.wants/{UNIT}")) + sorted(
            path.parent.glob(f"*.requires/{UNIT}")):
        with contextlib.suppress(OSError):
            if wants.is_symlink() and Path(os.readlink(wants)) == path:
                wants.unlink()
                removed.append(wants)
    path.unlink()
    removed.append(path)
    _sync_folder(path.parent)
    return removed


def _sync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def unit_state() -> dict[str, str]:
    """systemd's properties of the unit (`LoadState`, `ActiveState`, `SubState`,
    `UnitFileState`, `MainPID`, `NRestarts`); empty when it cannot be asked."""
    asked = run(systemctl("show", UNIT, "--property=LoadState,ActiveState,SubState,"
                          "UnitFileState,MainPID,NRestarts"))
    if not asked.ok:
        return {}
    return dict(line.split("=", 1) for line in asked.out.splitlines() if "=" in line)


def launchd_loaded(uid: int, label: str) -> bool:
    return run(("launchctl", "print", f"gui/{uid}/{label}")).ok


def linger(name: str) -> bool | None:
    """Whether systemd keeps the user's manager running while they are logged out (None:
    this system keeps no such list)."""
    if not LINGER.is_dir():
        return None
    return (LINGER / name).exists()


def serve_by_hand(home: Home, unit_pid: int | None) -> int | None:
    """The process ID of a `clankie serve` that holds `home` and is not the unit's own
    (`unit_pid`): one started by hand, with which the unit's would fail to start. Read from
    the lock file (the holder writes its ID there) and, on Linux, the process's command
    line; None when there is none."""
    try:
        fd = os.open(home.lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not text.isdigit() or int(text) in (unit_pid, 0):
        return None
    pid = int(text)
    if not Path("/proc/self").is_dir():  # no /proc (macOS): whether it lives
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return pid
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    return pid if b"serve" in words and any(b"clankie" in w for w in words) else None


def answers(home: Home) -> bool:
    """Whether something listens on the home's socket (connected, nothing sent)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(1.0)
        try:
            sock.connect(str(home.socket))
        except OSError:
            return False
    return True


def came_up(platform: Platform, home: Home, within_s: float = SETTLE_S) -> bool:
    """Whether the service, just started, answers on the home's socket within `within_s`;
    False as soon as systemd says it failed or waits to restart."""
    deadline = time.monotonic() + within_s
    while True:
        if answers(home):
            return True
        if platform is Platform.LINUX:
            state = unit_state()
            if state.get("ActiveState") == "failed" or state.get("SubState") == "auto-restart":
                return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
