"""The clankie home: where its files are, whether it can be trusted, how they are opened.

Owns the names inside `$CLANKIE_HOME`, the rules of SPEC section 10 "Setting up and
running" (`CLANKIE_HOME`, default the platform's user data folder; `CLANKIE_URL`, default
the home's socket; `CLANKIE_TOKEN`, default the home's `operator.token`) and SPEC T1, and
`NOT_SETTINGS`, the `CLANKIE_` variables clankie reads that are not settings.

T1 is checked the way OpenSSH's StrictModes checks `~/.ssh`: before anything in a home is
read or created, the folders above it (up to the user's own home, or `/`), the home and
each file clankie uses in it must be the current user's and writable by nobody else; a
folder above may also be root's, and a root-owned sticky one (like /tmp) may be writable
by all. No symlink is accepted for the home or its files. Once every folder on the way is
the user's alone, nobody else can add, swap or remove an entry in the home, so a file
checked here is still the one opened by name afterwards (by SQLite, by the settings
loader); the files opened here are opened with `O_NOFOLLOW` and checked again on the
open descriptor, and new ones are created with `O_EXCL`. A check is a few `lstat` calls.

A home can also be unusable without being unsafe: missing (only `init` makes one), not a
folder, under a file or a folder the user may not enter, or (for `init` and `serve`, which
write in it) on a read-only file system or not writable by the user. Those are refused the
same way, from the same checks, before anything is created or opened.

It imports nothing of the CLI or HTTP layers: a refusal is `UnsafeHome`, carrying the
path, what is wrong and the fix, which a surface shows as it is (exit 2).
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Final

import platformdirs

STORE: Final = "clankie.db"
SOCKET: Final = "clankie.sock"
TOKEN: Final = "operator.token"
LOCK: Final = "serve.lock"
SETTINGS: Final = "settings.toml"
LOG: Final = "serve.log"
# CLANKIE_ variables that are not settings: where to find the home and the service, the
# token `clankie mcp` asks with (P2); and the test suite's own sizes of its campaigns. Here,
# not in settings.py, so every command can tell an unknown name without importing pydantic.
NOT_SETTINGS: Final = frozenset({"CLANKIE_HOME", "CLANKIE_URL", "CLANKIE_TOKEN",
                                 "CLANKIE_URL_TRUSTED", "CLANKIE_AGENT_TOKEN",
                                 "CLANKIE_CAMPAIGN_EXAMPLES", "CLANKIE_AGREEMENT_EXAMPLES"})
# Every file clankie reads or writes in a home, and what the fix adds to "remove PATH".
# SQLite's own files are here too: a planted hot journal would be rolled back into the
# store on open.
FILES: Final[dict[str, str]] = {
    STORE: ", then run `clankie init` (a new, empty store)",
    f"{STORE}-wal": " (with `clankie serve` stopped)",
    f"{STORE}-shm": " (with `clankie serve` stopped)",
    f"{STORE}-journal": " (with `clankie serve` stopped)",
    TOKEN: ", then run `clankie init` (it issues a new token)",
    SETTINGS: ", then write your settings in a file of your own",
    LOCK: "",
    SOCKET: "",
    LOG: " (the service's log: `clankie serve` starts a new one)",
}
# Files whose contents are secrets or the owner's words: nobody else may read them either.
PRIVATE: Final[dict[str, str]] = {
    TOKEN: "the operator token", STORE: "every conversation and answer",
    f"{STORE}-wal": "recent answers", f"{STORE}-journal": "recent answers",
}
MAX_TOKEN_FILE = 4096  # bytes read of operator.token (a token is about 50)


@dataclass(frozen=True)
class Home:
    path: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Home:
        env = os.environ if environ is None else environ
        configured = env.get("CLANKIE_HOME")
        # `~` as a shell would have expanded it (a quoted "~/x" reaches us as it is), and
        # absolute: the same home whatever the current folder, and said as such
        if not configured:
            return cls(Path(os.path.abspath(platformdirs.user_data_path("clankie"))))
        try:
            path = Path(configured).expanduser()
        except RuntimeError:  # `~name` of no user this system has
            user = configured[1:].split("/", 1)[0]
            raise UnsafeHome(Unsafe(
                "home", Path(configured), f"starts with ~{user}, and there is no user {user} "
                "on this system", "set CLANKIE_HOME to a folder of your own (for example "
                "~/clankie), then run `clankie init`", trust=False)) from None
        return cls(Path(os.path.abspath(path)))

    @property
    def store(self) -> Path:
        return self.path / STORE

    @property
    def socket(self) -> Path:
        return self.path / SOCKET

    @property
    def token_file(self) -> Path:
        return self.path / TOKEN

    @property
    def lock(self) -> Path:
        return self.path / LOCK

    @property
    def settings_file(self) -> Path:
        return self.path / SETTINGS


@dataclass(frozen=True)
class Unsafe:
    """One thing that makes a home untrustworthy (`trust`: T1) or unusable (missing, not a
    folder, read-only...): `where` is "parents", "home" or "files"."""

    where: str
    path: Path
    problem: str
    fix: str
    trust: bool = True


class UnsafeHome(Exception):
    """The home, a folder above it or a file in it could have been changed by someone
    else, or the home cannot be used: nothing in it is used. Said to the user as
    `exc.headline` and `exc.unsafe.fix`."""

    def __init__(self, unsafe: Unsafe) -> None:
        self.unsafe = unsafe
        super().__init__(f"{unsafe.path} {unsafe.problem}")

    @property
    def headline(self) -> str:
        return f"{'unsafe home' if self.unsafe.trust else 'cannot use the home'}: {self}"


# Checking.

def problems(home: Home, *, write: bool = False, missing_ok: bool = False) -> list[Unsafe]:
    """Everything that makes `home` untrustworthy or unusable, outermost first: the folders
    above it, the home itself, then (only when the home is sound) its files. A home that
    does not exist is a problem unless `missing_ok` (then only the folders above it count);
    `write`: also one clankie cannot write in (read-only file system, permissions)."""
    path = _absolute(home.path)
    found = _parent_problems(path)
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        if missing_ok:
            return found
        return [*found, _missing_problem(path)]
    except OSError as exc:  # a folder above that the user may not enter
        return [*found, _unreachable(path, exc)]
    own = _home_problem(path, st) or (_write_problem(path) if write else None)
    if own is not None:
        return [*found, own]
    for name, remedy in FILES.items():
        try:
            st = os.lstat(path / name)
        except FileNotFoundError:
            continue
        unsafe = _file_problem(path / name, st, remedy)
        if unsafe is not None:
            found.append(unsafe)
    return found


def check(home: Home, *, write: bool = False, missing_ok: bool = False) -> None:
    """Refuse (`UnsafeHome`, the outermost problem) a home that is not the user's alone or
    cannot be used (see `problems`)."""
    found = problems(home, write=write, missing_ok=missing_ok)
    if found:
        raise UnsafeHome(found[0])


def make_home(home: Home) -> None:
    """For `init`: check the folders above, create what is missing (folders above 0755 at
    most, whatever the umask; the home 0700), check the home and its files, and make the
    home 0700. An existing home is refused rather than repaired: what someone else left in
    it stays theirs to explain. A home that cannot be made (a file on the way, a read-only
    file system, a folder the user may not write in) is refused before anything is made."""
    path = _absolute(home.path)
    found = _parent_problems(path)
    if found:
        raise UnsafeHome(found[0])
    missing: list[Path] = []
    folder = path
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    if missing:
        blocked = _cannot_make(path)
        if blocked is not None:
            raise UnsafeHome(blocked)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, 0o700 if folder == path else 0o755)
        except OSError as exc:  # changed since it was looked at: said all the same
            raise UnsafeHome(_cannot_make(path) or _unusable(
                path, f"cannot be made: {exc.strerror} ({folder})", _ELSEWHERE)) from None
        mode = stat.S_IMODE(os.lstat(folder).st_mode)
        if mode & 0o700 != 0o700:  # the umask took the owner's own bits
            os.chmod(folder, mode | 0o700)
    check(home, write=True)
    os.chmod(path, 0o700)  # not a link (just checked), and no one else can swap it in


# Usable: there, a folder, reachable and (for `init` and `serve`) writable.

_ELSEWHERE = "set CLANKIE_HOME to a folder of your own on a writable disk, then run " \
             "`clankie init`"


def _unusable(path: Path, problem: str, fix: str) -> Unsafe:
    return Unsafe("home", path, problem, fix, trust=False)


def _missing_problem(path: Path) -> Unsafe:
    blocked = _cannot_make(path)
    if blocked is not None:
        return replace(blocked, problem=f"does not exist, and {blocked.problem}")
    return _unusable(path, "does not exist", "run `clankie init` to make it, or check "
                     "CLANKIE_HOME (it names the home `clankie init` made)")


def _cannot_make(path: Path) -> Unsafe | None:
    """Why `init` could not make the missing `path`, looking at the nearest thing above it
    that exists: a file, a folder the user may not enter or write in, or a read-only file
    system; None when it can."""
    for folder in path.parents:
        try:
            st = os.stat(folder)  # a link above is the user's or root's (T1): followed
        except (FileNotFoundError, NotADirectoryError):
            continue  # missing too, or under a file (found further up)
        except PermissionError:
            return _unusable(path, f"cannot be made: {_closed(folder)}", _ELSEWHERE)
        except OSError as exc:
            return _unusable(path, f"cannot be made: {folder}: {exc.strerror}", _ELSEWHERE)
        if not stat.S_ISDIR(st.st_mode):
            return _unusable(path, f"cannot be made: {folder} is not a folder",
                             f"set CLANKIE_HOME to a path under folders only (or move "
                             f"{folder} away), then run `clankie init`")
        if _read_only(folder):
            return _unusable(path, f"cannot be made: {folder} is on a read-only file system",
                             _ELSEWHERE)
        if not os.access(folder, os.X_OK, effective_ids=True):
            return _unusable(path, f"cannot be made: {_closed(folder)}", _ELSEWHERE)
        if not os.access(folder, os.W_OK, effective_ids=True):
            me = _user(os.geteuid())
            return _unusable(path, f"cannot be made: you ({me}) may not write in {folder}",
                             f"{_ELSEWHERE}; or, as root: mkdir -m 700 {path} && "
                             f"chown {me} {path}")
        return None
    return None


def _unreachable(path: Path, exc: OSError) -> Unsafe:
    if isinstance(exc, PermissionError):
        return _unusable(path, f"cannot be reached: {_closed(path.parent)}", _ELSEWHERE)
    return _unusable(path, f"cannot be looked at: {exc.strerror}", _ELSEWHERE)


def _closed(below: Path) -> str:
    """Which folder at or above `below` the user may not enter, said as a reason."""
    closed = next((folder for folder in reversed([below, *below.parents])
                   if not os.access(folder, os.X_OK, effective_ids=True)), below)
    return f"you ({_user(os.geteuid())}) may not enter {closed}"


def _write_problem(path: Path) -> Unsafe | None:
    """An existing home (a folder, the user's) that clankie cannot write in."""
    if _read_only(path):
        return _unusable(path, "is on a read-only file system (clankie writes its store, "
                         "socket and log there)", "remount it read-write, or " + _ELSEWHERE)
    if not os.access(path, os.W_OK | os.X_OK, effective_ids=True):
        return _unusable(path, f"is not writable by you ({_user(os.geteuid())})",
                         f"chmod u+rwx {path} (and, if it is immutable, chattr -i {path}), "
                         "or " + _ELSEWHERE)
    return None


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _parent_problems(path: Path) -> list[Unsafe]:
    """The folders above `path`, as written and as resolved (a symlink on the way is
    checked as a link, and the folders it leads to as folders), up to the user's home."""
    me = os.geteuid()
    user_home = _user_home(me)
    above = str(path.parent)
    chains = [_upward(above, user_home)]
    resolved = os.path.realpath(above)
    if resolved != above:
        chains.append(_upward(resolved, os.path.realpath(user_home) if user_home else None))
    seen: set[str] = set()
    found: list[Unsafe] = []
    for chain in chains:
        for folder in chain:
            if folder in seen:
                continue
            seen.add(folder)
            try:
                st = os.lstat(folder)
            except OSError:  # missing (created later, under a checked folder) or unreadable
                continue
            unsafe = _parent_problem(Path(folder), st, me)
            if unsafe is not None:
                found.append(unsafe)
    return found[::-1]


def _parent_problem(folder: Path, st: os.stat_result, me: int) -> Unsafe | None:
    elsewhere = "keep the home in folders of your own: set CLANKIE_HOME, then run " \
                "`clankie init`"
    if st.st_uid not in (0, me):
        what = "is a symbolic link on the way to" if stat.S_ISLNK(st.st_mode) else "holds"
        return Unsafe("parents", folder, f"belongs to {_user(st.st_uid)} and {what} the home: "
                      "they could swap it", elsewhere)
    if stat.S_ISLNK(st.st_mode):
        return None  # only its owner can change it; where it leads is checked too
    sticky = bool(st.st_mode & stat.S_ISVTX)
    if st.st_mode & 0o022 and not (st.st_uid == 0 and sticky):
        fix = f"chmod go-w {folder}"
        if st.st_uid != me:
            fix += " (as root), or " + elsewhere
        return Unsafe("parents", folder, f"{_writable(st)} and holds the home: others could "
                      "swap it", fix)
    return None


def _home_problem(path: Path, st: os.stat_result) -> Unsafe | None:
    if stat.S_ISLNK(st.st_mode):
        target = os.readlink(path)
        return Unsafe("home", path, f"is a symbolic link (to {target})",
                      f"set CLANKIE_HOME to the folder itself ({target}), or remove the link "
                      f"{path} and run `clankie init`")
    if not stat.S_ISDIR(st.st_mode):
        return _unusable(path, "is not a folder", f"set CLANKIE_HOME to a folder (or move "
                         f"{path} away), then run `clankie init`")
    me = os.geteuid()
    if st.st_uid != me:
        return Unsafe("home", path, f"belongs to {_user(st.st_uid)}, not to you "
                      f"({_user(me)})", "use a home of your own: set CLANKIE_HOME to a new "
                      "folder, then run `clankie init`")
    if st.st_mode & 0o022:
        return Unsafe("home", path, _writable(st), f"chmod go-w {path}")
    if st.st_mode & 0o700 != 0o700:  # not unsafe, but its files could not be checked
        return _unusable(path, f"is not open to you (mode {stat.S_IMODE(st.st_mode):o}: "
                         "clankie reads and writes there)", f"chmod 700 {path}")
    return None


def _file_problem(path: Path, st: os.stat_result, remedy: str) -> Unsafe | None:
    remove = f"remove {path}{remedy}"
    if stat.S_ISLNK(st.st_mode):
        keep = (f"copy what it points to in its place (cp --remove-destination "
                f"\"$(readlink -f {path})\" {path}), or {remove}" if path.name == SETTINGS
                else remove)
        return Unsafe("files", path, "is a symbolic link (clankie never follows one in its "
                      "home)", keep)
    if st.st_uid != os.geteuid():
        keep = (f"if clankie made it while run as root (sudo), keep it: sudo chown "
                f"$(id -un) {path}; else {remove}" if st.st_uid == 0 else remove)
        return Unsafe("files", path, f"belongs to {_user(st.st_uid)}", keep)
    wanted = stat.S_ISSOCK if path.name == SOCKET else stat.S_ISREG
    if not wanted(st.st_mode):
        return Unsafe("files", path, "is not a socket" if path.name == SOCKET
                      else "is not a regular file", remove)
    if st.st_mode & 0o022:
        return Unsafe("files", path, _writable(st), f"chmod go-w {path}")
    if path.name in PRIVATE and st.st_mode & 0o044:  # like ssh's UNPROTECTED PRIVATE KEY
        return Unsafe("files", path, f"can be read by others (mode "
                      f"{stat.S_IMODE(st.st_mode):o}): it holds {PRIVATE[path.name]}",
                      f"chmod 600 {path}")
    return None


def _writable(st: os.stat_result) -> str:
    who = " and ".join(w for bit, w in ((0o020, "group"), (0o002, "others")) if st.st_mode & bit)
    return f"is writable by {who} (mode {stat.S_IMODE(st.st_mode):o})"


def _upward(start: str, stop: str | None) -> Iterator[str]:
    """`start` and the folders above it, up to `stop` (included) or `/`."""
    current = start
    while True:
        yield current
        parent = os.path.dirname(current)
        if current == stop or parent == current:
            return
        current = parent


def _user_home(uid: int) -> str | None:
    try:
        return os.path.abspath(pwd.getpwuid(uid).pw_dir)
    except KeyError:  # a uid without a passwd entry (some containers): check up to `/`
        return None


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _absolute(path: Path) -> Path:
    """`path` made absolute, and nothing else: `..` is left for the system to resolve as
    it will when the files are opened (folding it here could check another folder)."""
    return path if path.is_absolute() else Path.cwd() / path


# Opening.

def _open_checked(path: Path, flags: int, *, create: bool = False) -> int:
    """A descriptor on a file of the home, never through a symlink; a new file is created
    exclusively (0600). What was opened is checked again on the descriptor."""
    flags |= os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # O_NONBLOCK: a FIFO never blocks
    fd = -1
    if create:
        with contextlib.suppress(FileExistsError):
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
    if fd < 0:
        try:
            fd = os.open(path, flags)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW met a symlink
                st = os.lstat(path)
                unsafe = _file_problem(path, st, FILES.get(path.name, ""))
                if unsafe is not None:
                    raise UnsafeHome(unsafe) from None
            raise
    try:
        unsafe = _file_problem(path, os.fstat(fd), FILES.get(path.name, ""))
        if unsafe is not None:
            raise UnsafeHome(unsafe)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_lock(home: Home) -> int:
    """The serve lock's descriptor (read-write), created exclusively when missing."""
    return _open_checked(home.lock, os.O_RDWR, create=True)


def read_token_file(home: Home) -> str | None:
    """The token in `operator.token`, or None when there is none (or it cannot be read)."""
    try:
        fd = _open_checked(home.token_file, os.O_RDONLY)
    except OSError:  # missing, or not readable: no token (an UnsafeHome is raised)
        return None
    try:
        data = os.read(fd, MAX_TOKEN_FILE)
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace").strip() or None


def write_token_file(home: Home, token: str) -> None:
    """Replace `operator.token` atomically: a new 0600 file, created exclusively under a
    random name, written, synced, then renamed over the old one (a link there is replaced,
    never followed)."""
    tmp = home.path / f".{TOKEN}.{os.urandom(8).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        os.fchmod(fd, 0o600)  # a umask may have taken the owner's bits too
        data = (token + "\n").encode()
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, home.token_file)


# Finding the service and the token (the surfaces' rules).

def service_url(home: Home, environ: Mapping[str, str] | None = None) -> str:
    """`CLANKIE_URL`, else the home's socket once the home has been checked."""
    env = os.environ if environ is None else environ
    if env.get("CLANKIE_URL"):
        return env["CLANKIE_URL"]
    check(home)
    return f"unix://{home.socket}"


def operator_token(home: Home, environ: Mapping[str, str] | None = None) -> str | None:
    """`CLANKIE_TOKEN`, else the home's token file once the home has been checked."""
    env = os.environ if environ is None else environ
    if env.get("CLANKIE_TOKEN"):
        return env["CLANKIE_TOKEN"]
    check(home, missing_ok=True)  # no home, no token: CLANKIE_URL may be elsewhere
    return read_token_file(home)
