"""What `clankie service` writes, where, and whether what it finds is its own; pure.

Owns the decisions of docs/decisions.md ("Issue 42: `clankie service ...`") that need no
I/O: the platform's file and its path (`unit_path`), what the service runs (`launch`: the
running install's entry point, the home it serves, the `PYTHONPATH` entry clankie was
imported from), the text of the systemd unit and of the launchd plist, each sealed with a
digest of what install wrote so that `origin` tells clankie's own file from one edited since
and from someone else's; what `install` does with the file it finds (`install_write`), what
`uninstall` may remove (`may_remove`), who may do either (`root_refusal`: never as root for
a user), and the commands that enable, start, stop and disable the service.

Facts (the platform, the environment, folders' owners, the text found) come in as
arguments: nothing here reads a file, runs a program or looks at the clock. A refusal is
`Refused`: its problem code, its exit code (SPEC section 10), what is wrong and the fix.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import plistlib
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final

from clankie.core.vocabulary import Exit

UNIT: Final = "clankie.service"  # systemd's name for it
LABEL: Final = "clankie.serve"  # launchd's
SEAL: Final = "clankie-sha256:"  # the digest of what install wrote, after the header
UNDO: Final = ("clankie", "service", "uninstall")
SETTINGS_FIX: Final = "put settings in $CLANKIE_HOME/settings.toml, which the service reads"
MAX_DIFF_LINES: Final = 60


class Platform(StrEnum):
    LINUX = "linux"  # a systemd user unit
    MACOS = "macos"  # a launchd agent


class Origin(StrEnum):
    """Whose the file at the unit's path is."""

    CLANKIE = "clankie"  # as `clankie service install` wrote it
    EDITED = "edited"  # install wrote it, and it was changed since
    FOREIGN = "foreign"  # not written by install (or a link, which install never writes)


class Write(StrEnum):
    """What `install` did with the file."""

    CREATED = "created"
    UNCHANGED = "unchanged"  # already as install writes it
    UPDATED = "updated"  # an earlier install's, unedited: rewritten
    REPLACED = "replaced"  # edited or someone else's, written over with --replace


class Refused(Exception):
    """Why `clankie service` did not do it: a problem `code`, the `exit` code, the
    `detail` and the `fix`; `more` goes into the problem document as it is."""

    def __init__(self, code: str, exit: int, detail: str, fix: str,
                 **more: object) -> None:
        super().__init__(detail)
        self.code, self.exit, self.detail, self.fix, self.more = code, exit, detail, fix, more

    def problem(self) -> dict[str, object]:
        """The refusal for --json, shaped like the service's problem documents."""
        return {"type": f"urn:clankie:problem:{self.code}", "title": self.code.replace("_", " "),
                "code": self.code, "detail": self.detail, "fix": self.fix, **self.more}


def platform_of(sys_platform: str) -> Platform:
    if sys_platform.startswith("linux"):
        return Platform.LINUX
    if sys_platform == "darwin":
        return Platform.MACOS
    raise Refused("unsupported_platform", Exit.OTHER, f"clankie service writes a systemd user "
                  f"unit (Linux) or a launchd agent (macOS), and this is {sys_platform}",
                  "start `clankie serve` at login the way this system starts programs")


# ------------------------------------------------------------------ where, and what it runs


def unit_path(platform: Platform, environ: Mapping[str, str], user_home: Path) -> Path:
    """Where the file goes: `$XDG_CONFIG_HOME/systemd/user/clankie.service` (an absolute
    XDG_CONFIG_HOME only, as the XDG spec says; else `~/.config`), or
    `~/Library/LaunchAgents/clankie.serve.plist`."""
    if platform is Platform.MACOS:
        return user_home / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    config = environ.get("XDG_CONFIG_HOME", "")
    base = Path(config) if os.path.isabs(config) else user_home / ".config"
    return base / "systemd" / "user" / UNIT


def launchd_log(user_home: Path) -> Path:
    """Where launchd writes the agent's standard output and error (macOS has no journal)."""
    return user_home / "Library" / "Logs" / "clankie.log"


@dataclass(frozen=True)
class Launch:
    """What the service runs: `clankie serve`'s command line and the variables it gets."""

    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...] = field(default=())


def launch(*, argv0: str, argv0_runs: bool, executable: str, cwd: str, package_root: str,
           pythonpath: str | None, home: Path, serve: Sequence[str] = ()) -> Launch:
    """The running install's `clankie serve`: the `clankie` script this command was started
    as (`argv0`, when it is a program that runs: `argv0_runs`), else this interpreter with
    `-m clankie`; each as an absolute path, links kept (a venv's `python`, a `~/.local/bin`
    link, stay valid across upgrades). The home is always given (`CLANKIE_HOME`): its
    default depends on variables the service manager does not share. `PYTHONPATH` is given
    only as the one entry clankie itself was imported from, so the service runs this code."""
    if argv0_runs and not argv0.endswith(".py"):
        entry: tuple[str, ...] = (os.path.normpath(os.path.join(cwd, argv0)),)
    else:
        entry = (os.path.normpath(os.path.join(cwd, executable)), "-m", "clankie")
    environment = [("CLANKIE_HOME", str(home))]
    root = os.path.normpath(package_root)
    entries = [os.path.normpath(os.path.join(cwd, e)) for e in (pythonpath or "").split(os.pathsep)
               if e]
    if root in entries:
        environment.append(("PYTHONPATH", root))
    made = Launch((*entry, "serve", *serve), tuple(environment))
    for word in made.argv:
        _carried("the command line", word)
    for name, value in made.environment:
        _carried(name, value)
    return made


def _carried(what: str, value: str) -> None:
    """Refuse what a unit file or a plist cannot carry as it is: bytes that are no UTF-8
    text, and control or other invisible characters (a newline would end the line)."""
    try:
        value.encode("utf-8")
        printable = value.isprintable()
    except UnicodeEncodeError:
        printable = False
    if not printable:
        shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise Refused("invalid_request", Exit.USAGE, f"{what} {shown!r} holds a character a "
                      "service file cannot carry as it is (a control character, or bytes "
                      "that are not UTF-8); nothing was written",
                      "install clankie, or set CLANKIE_HOME, at a path of plain characters")


# ------------------------------------------------------------------ the texts


def systemd_unit(launched: Launch, version: str) -> str:
    """The user unit: `Restart=on-failure` (not after exit 2, the owner's to fix: a bad
    setting, an unsafe home), at most 5 starts a minute, the journal as its log, SIGTERM to
    `serve` alone (it stops its run process and hooks itself, as on Ctrl+C), then SIGKILL to
    what is left."""
    body = "\n".join([
        "[Unit]",
        "Description=clankie serve: the owner's questions wait while it runs",
        "StartLimitIntervalSec=60",
        "StartLimitBurst=5",
        "",
        "[Service]",
        "Type=exec",
        "ExecStart=" + " ".join([_program(launched.argv[0]), *(
            _unit_quoted(w, dollar="$$") for w in launched.argv[1:])]),
        *(f"Environment={_unit_quoted(f'{k}={v}')}" for k, v in launched.environment),
        "Restart=on-failure",
        "RestartSec=2",
        "RestartPreventExitStatus=2",
        "KillMode=mixed",
        "UMask=0077",
        "StandardOutput=journal",
        "StandardError=journal",
        "SyslogIdentifier=clankie",
        "",
        "[Install]",
        "WantedBy=default.target",
        ""])
    header = [f"# Written by `clankie service install` (clankie {version}): `clankie serve`,",
              "# started at login and again after a crash. Undo: `clankie service uninstall`.",
              "# Put changes of your own in `systemctl --user edit clankie.service` (a drop-in",
              "# that install and uninstall leave alone): install refuses to write over an",
              "# edit made here, and uninstall to remove it."]
    return _sealed(header, body, "# {}")


def _program(path: str) -> str:
    """The program's path as the first word of `ExecStart=`: systemd starts no program whose
    path holds a quote or a backslash (its "special characters"), and substitutes no
    variable there (so `$` stays single)."""
    if any(ch in path for ch in "'\"\\"):
        raise Refused("invalid_request", Exit.USAGE, f"systemd starts no program whose path "
                      f"holds a quote or a backslash, as {path!r} does; nothing was written",
                      "install clankie at a path without quotes or backslashes")
    return _unit_quoted(path)


def _unit_quoted(word: str, dollar: str = "$") -> str:
    """`word` as one double-quoted systemd word: backslash and quote escaped, `%` doubled
    (a specifier otherwise), and in a command line `$` doubled (a variable otherwise)."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return '"' + escaped.replace("$", dollar) + '"'


def launchd_plist(launched: Launch, version: str, log: Path) -> str:
    """The launch agent: started at load (login), `KeepAlive` while it does not exit
    successfully (a crash, a kill: launchd's on-failure), its output in `log`."""
    document = {
        "Label": LABEL,
        "ProgramArguments": list(launched.argv),
        "EnvironmentVariables": dict(launched.environment),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "StandardOutPath": str(log),
        "StandardErrorPath": str(log),
    }
    lines = plistlib.dumps(document, fmt=plistlib.FMT_XML, sort_keys=False).decode().split(
        "\n")
    declaration, body = lines[:2], "\n".join(lines[2:])  # <?xml ...?> and <!DOCTYPE ...>
    header = [*declaration,
              f"<!-- Written by `clankie service install` (clankie {version}): `clankie serve`,",
              "     started at login and again after a crash. Undo: `clankie service",
              "     uninstall`, which removes this file only as install wrote it. -->"]
    return _sealed(header, body, "<!-- {} -->")


def _sealed(header: list[str], body: str, comment: str) -> str:
    digest = hashlib.sha256(body.encode("utf-8")).hexdigest()
    return "".join(f"{line}\n" for line in header) + comment.format(
        f"{SEAL} {digest}") + "\n" + body


def origin(text: str) -> Origin:
    """Whose `text` is: its seal's digest against the text after the seal's line."""
    at = text.find(SEAL)
    end = text.find("\n", at)
    if at < 0 or end < 0:
        return Origin.FOREIGN
    sealed = text[at + len(SEAL):end].split()
    body = text[end + 1:].encode("utf-8", "surrogateescape")
    if sealed and sealed[0] == hashlib.sha256(body).hexdigest():
        return Origin.CLANKIE
    return Origin.EDITED


def described(found: str, platform: Platform) -> dict[str, object]:
    """What a unit found says it runs (for `status`), in the types `install --json` gives:
    `runs` the command line as a list, `environment` the variables as an object; read back
    from the systemd unit's `ExecStart=` and `Environment=` lines (`unit_words`) or the
    plist's program and variables; None for what cannot be read so."""
    if platform is Platform.MACOS:
        try:
            document = plistlib.loads(found.encode("utf-8", "surrogateescape"))
        except Exception:  # plistlib raises several kinds for what is no plist
            return {}
        if not isinstance(document, dict):
            return {}
        return {"runs": document.get("ProgramArguments"),
                "environment": document.get("EnvironmentVariables")}
    lines = [line.strip() for line in found.splitlines()]
    start = next((line.removeprefix("ExecStart=") for line in lines
                  if line.startswith("ExecStart=")), None)
    runs = None if start is None else unit_words(start, command=True)
    environment: dict[str, str] | None = {}
    for line in lines:
        if line.startswith("Environment=") and environment is not None:
            words = unit_words(line.removeprefix("Environment="), command=False)
            if words is None or not all("=" in w for w in words):
                environment = None
            else:
                environment |= dict(w.split("=", 1) for w in words)
    return {"runs": runs, "environment": environment}


_ESCAPES: Final = {"\\": "\\", '"': '"', "'": "'", "n": "\n", "t": "\t", "r": "\r",
                   "s": " ", " ": " "}


def unit_words(line: str, *, command: bool) -> list[str] | None:
    """The words of an `ExecStart=` (`command`) or `Environment=` value as systemd reads
    them, the inverse of `_unit_quoted`: split at blanks outside quotes (double or single,
    which must end a word), backslash escapes undone, `%%` read as `%` and, in a command
    line, `$$` as `$`; None for what is no systemd words (an open quote, an unknown escape).
    Other specifiers (`%h`) and variables (`$X`) are left as written."""
    words: list[str] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in " \t":
            i += 1
        if i == n:
            return words
        word: list[str] = []
        quote = line[i] if line[i] in "\"'" else None
        i += quote is not None
        while i < n and (line[i] != quote if quote else line[i] not in " \t"):
            if line[i] == "\\":
                if i + 1 == n or line[i + 1] not in _ESCAPES:
                    return None
                word.append(_ESCAPES[line[i + 1]])
                i += 2
            else:
                word.append(line[i])
                i += 1
        if quote:
            if i == n or (i + 1 < n and line[i + 1] not in " \t"):
                return None  # an open quote, or a closing one that does not end the word
            i += 1
        words.append(_unspecified("".join(word), command))


def _unspecified(word: str, command: bool) -> str:
    out, i = [], 0
    while i < len(word):
        pair = word[i:i + 2]
        if pair == "%%" or (command and pair == "$$"):
            out.append(pair[0])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


# ------------------------------------------------------------------ install and uninstall


def install_write(found: str | None, wanted: str, *, replace: bool, path: Path,
                  platform: Platform) -> Write:
    """What install does with what it `found` at `path` (None: nothing): write it, leave it,
    rewrite an earlier install's own, or, only with --replace, write over one that was
    edited or is someone else's; without --replace that is `unit_differs` (exit 3, as a
    conflict: read what is there, then decide) with the lines that would change."""
    if found is None:
        return Write.CREATED
    if found == wanted:
        return Write.UNCHANGED
    whose = origin(found)
    if whose is Origin.CLANKIE:
        return Write.UPDATED
    if replace:
        return Write.REPLACED
    own = ("keep changes of your own in `systemctl --user edit clankie.service`, then "
           if platform is Platform.LINUX else "")
    raise Refused("unit_differs", Exit.CONFLICT,
                  f"{path} {_whose(whose)}, and differs from what install writes; nothing "
                  "was written",
                  f"read it and the lines below; {own}`clankie service install --replace` "
                  "writes clankie's over it", diff=difference(found, wanted, path))


def may_remove(found: str | None, path: Path, platform: Platform, uid: int) -> bool:
    """Whether uninstall removes the file `found` at `path`: only one install wrote, as it
    wrote it (False: there is none); one edited since, or someone else's, is refused
    `unit_differs` (exit 3), with the commands that remove it by hand."""
    if found is None:
        return False
    whose = origin(found)
    if whose is Origin.CLANKIE:
        return True
    by_hand = "; ".join(shlex.join(c) for c in [
        *stop_commands(platform, uid), ("rm", str(path)),
        *([] if platform is Platform.MACOS else [systemctl("daemon-reload")])])
    raise Refused("unit_differs", Exit.CONFLICT, f"{path} {_whose(whose)}; nothing was removed",
                  f"if it is to go, remove it yourself: {by_hand}")


def _whose(whose: Origin) -> str:
    return ("was changed since `clankie service install` wrote it" if whose is Origin.EDITED
            else "was not written by `clankie service install`")


def difference(found: str, wanted: str, path: Path) -> list[str]:
    """The lines that would change, as a unified diff, at most `MAX_DIFF_LINES`."""
    lines = [line.rstrip("\n") for line in difflib.unified_diff(
        found.splitlines(keepends=True), wanted.splitlines(keepends=True),
        f"{path} (now)", f"{path} (install)")]
    if len(lines) > MAX_DIFF_LINES:
        lines = [*lines[:MAX_DIFF_LINES], f"... {len(lines) - MAX_DIFF_LINES} more lines"]
    return lines


# ------------------------------------------------------------------ who may


@dataclass(frozen=True)
class Who:
    """Who runs `clankie service`: real and effective user IDs, the environment, and the
    owner (user ID) of each folder it would write under or serve."""

    uid: int
    euid: int
    environ: Mapping[str, str]
    owners: Mapping[Path, int]


def root_refusal(who: Who, command: str) -> Refused | None:
    """Never as root for a user (exit 5): a user unit runs as the user whose manager runs it,
    so root installing one for a user (through sudo, doas or pkexec, or into a folder of
    theirs) would run `clankie serve` as root. Root installing for root's own user manager,
    in root's own folders, is root's own service, as `clankie serve` run by root is."""
    nothing = "nothing was written" if command == "install" else "nothing was removed"
    if who.euid != who.uid:
        return Refused("root_for_a_user", Exit.DENIED, f"clankie runs with the rights of user "
                       f"ID {who.euid} for user ID {who.uid}; {nothing}",
                       f"run `clankie service {command}` as yourself")
    if who.euid != 0:
        return None
    invoker = _invoker(who.environ)
    if invoker is not None:
        return Refused("root_for_a_user", Exit.DENIED, f"run as root for {invoker} ({invoker}'s "
                       "sudo, doas or pkexec): the unit would go to root's service manager and "
                       f"run clankie serve as root, not as {invoker}; {nothing}",
                       f"run `clankie service {command}` as {invoker}, without sudo: a user "
                       "service needs no root")
    for folder, owner in sorted(who.owners.items()):
        if owner != 0:
            return Refused("root_for_a_user", Exit.DENIED, f"run as root, but {folder} belongs "
                           f"to user ID {owner}: the unit would serve or write another user's "
                           f"files as root; {nothing}",
                           f"run `clankie service {command}` as the user who owns {folder}")
    return None


def _invoker(environ: Mapping[str, str]) -> str | None:
    """The user that sudo (or run0), doas or pkexec ran this as root for, if not root."""
    for uid_name, user_name in (("SUDO_UID", "SUDO_USER"), ("PKEXEC_UID", "")):
        uid = environ.get(uid_name, "")
        if uid and uid != "0":
            return environ.get(user_name) or f"user ID {uid}"
    doas = environ.get("DOAS_USER", "")
    return doas if doas and doas != "root" else None


# ------------------------------------------------------------------ the manager's commands


def systemctl(*words: str) -> tuple[str, ...]:
    return ("systemctl", "--user", *words)


def start_commands(platform: Platform, uid: int, path: Path, *, start: bool = True
                   ) -> list[tuple[str, ...]]:
    """What enables the service (starts it at login) and, with `start`, starts it now."""
    if platform is Platform.MACOS:
        return [("launchctl", "bootstrap", f"gui/{uid}", str(path))]
    now = ("--now",) if start else ()
    return [systemctl("daemon-reload"), systemctl("enable", *now, UNIT)]


def stop_commands(platform: Platform, uid: int) -> list[tuple[str, ...]]:
    """What stops the service and disables it, before its file goes."""
    if platform is Platform.MACOS:
        return [("launchctl", "bootout", f"gui/{uid}/{LABEL}")]
    return [systemctl("disable", "--now", UNIT)]


def restart_command(platform: Platform, uid: int) -> tuple[str, ...]:
    if platform is Platform.MACOS:
        return ("launchctl", "kickstart", "-k", f"gui/{uid}/{LABEL}")
    return systemctl("restart", UNIT)


def log_hint(platform: Platform, user_home: Path) -> str:
    if platform is Platform.MACOS:
        return f"its log: {launchd_log(user_home)}"
    return "its log: journalctl --user-unit clankie"  # root's, in the system journal, too
