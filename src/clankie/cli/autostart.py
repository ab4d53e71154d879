"""`clankie service install|uninstall|status`: `clankie serve` started at login and again
after a crash by the owner's own service manager (issue 42; docs/decisions.md, "Issue 42:
`clankie service ...`").

Owns these commands' options and what a person (or, with --json, a program) reads. It
decides nothing: `clankie.autostart.decide` says what is written, where, and whether it may
be; `clankie.autostart.host` reads and writes the file and runs `systemctl --user` or
`launchctl`. Results go to standard output, notes to standard error; a refusal is a line
and its fix on standard error (with --json, a problem document on standard output) and
SPEC section 10's exit code. Nothing here reaches the running service's API.
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn

import click

from .common import (
    DONE,
    MISSING,
    OTHER,
    Group,
    current_directory,
    exit_with,
    print_json,
    say,
    usage_problem,
    warn,
)

if TYPE_CHECKING:
    from clankie.autostart.decide import Launch, Platform, Refused, Write
    from clankie.autostart.host import Reach
    from clankie.home import Home, UnsafeHome

service = Group("service", help="Start `clankie serve` at login and again after a crash: a "
                "systemd user unit (Linux) or a launchd agent (macOS), for this clankie.")

SETTINGS_HOW: Final = "put it in settings.toml in the home, which the service reads"

json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the result (or the problem) as JSON.")


@dataclass(frozen=True)
class Place:
    """Where this user's service file goes, and the home it serves."""

    platform: Platform
    user_home: Path
    path: Path
    home: Home
    uid: int
    user: str


def _place() -> Place:
    from clankie.autostart import decide, host
    from clankie.home import Home

    platform = decide.platform_of(sys.platform)
    user_home = host.user_home()
    return Place(platform, user_home, decide.unit_path(platform, os.environ, user_home),
                 Home.from_env(), os.getuid(), host.user_name())


def _refuse_root(place: Place, command: str) -> None:
    from clankie.autostart import decide, host

    who = decide.Who(os.getuid(), os.geteuid(), dict(os.environ),
                     host.owners([place.user_home, place.path.parent, place.home.path]))
    refusal = decide.root_refusal(who, command)
    if refusal is not None:
        raise refusal


def _refused(exc: Refused, as_json: bool) -> NoReturn:
    if as_json:
        print_json(usage_problem(exc.detail, fix=exc.fix) if exc.code == "invalid_request"
                   else exc.problem())
    else:
        warn(f"clankie: {exc.detail}")
        diff = exc.more.get("diff")
        for line in diff if isinstance(diff, list) else ():
            warn(f"  {line}")
        warn(f"  fix: {exc.fix}")
    exit_with(exc.exit)


def _unsafe(exc: UnsafeHome, as_json: bool) -> NoReturn:
    """T1, or no home yet: said as `init` and `serve` say it (exit 2)."""
    if as_json:
        print_json(usage_problem(exc.headline, fix=exc.unsafe.fix))
    else:
        warn(f"clankie: {exc.headline}")
        warn(f"  fix: {exc.unsafe.fix}")
    exit_with(2)


def _guarded(command: str, as_json: bool, body: Callable[[], None]) -> None:
    """Run `body` (a command's work), saying its refusals as refusals."""
    from clankie.autostart.decide import Refused
    from clankie.home import UnsafeHome

    try:
        body()
    except Refused as exc:
        _refused(exc, as_json)
    except UnsafeHome as exc:
        _unsafe(exc, as_json)
    except OSError as exc:  # the file could not be read, written or removed
        where = f" {exc.filename}" if exc.filename else ""
        _refused(Refused("service_file_unusable", OTHER, f"clankie service {command}:{where}: "
                         f"{exc.strerror or exc}", "fix what the line above names, then run "
                         "it again"), as_json)


# ------------------------------------------------------------------ install


@dataclass
class Started:
    """What install did with the service manager."""

    reach: Reach
    ran: list[tuple[str, ...]] = field(default_factory=list)
    to_run: list[tuple[str, ...]] = field(default_factory=list)
    started: bool = False
    by_hand: int | None = None
    restart_needed: bool = False


@service.command()
@click.option("--web", metavar="HOST:PORT",
              help="Serve the phone page too, on this loopback address (a fixed port).")
@click.option("--tcp", metavar="HOST:PORT",
              help="Serve the API on this loopback address too (a fixed port).")
@click.option("--replace", is_flag=True,
              help="Write clankie's unit over one that differs from it (edited since, or not "
                   "clankie's).")
@json_option
def install(web: str | None, tcp: str | None, replace: bool, as_json: bool) -> None:
    """Write clankie's user service for this clankie and home, enable it and start it.

    \b
    Linux: $XDG_CONFIG_HOME/systemd/user/clankie.service (default ~/.config), started with
    `systemctl --user enable --now` when your user service manager answers; otherwise the
    commands to run are printed. macOS: ~/Library/LaunchAgents/clankie.serve.plist.
    Never as root for another user. Undo: clankie service uninstall.
    """
    _guarded("install", as_json, lambda: _install(web, tcp, replace, as_json))


def _install(web: str | None, tcp: str | None, replace: bool, as_json: bool) -> None:
    from clankie.autostart import decide, host
    from clankie.home import check

    place = _place()
    serve = _serve_options(web, tcp)
    _refuse_root(place, "install")
    check(place.home)  # T1, and a home that exists: `clankie init` first
    launched = _launch(place, serve)
    wanted = _text(place, launched)
    write = decide.install_write(host.read_unit(place.path), wanted, replace=replace,
                                 path=place.path, platform=place.platform)
    if write is not decide.Write.UNCHANGED:
        host.write_unit(place.path, wanted)
    started = _start(place, write)
    not_carried = _not_carried()
    linger = host.linger(place.user) if place.platform is decide.Platform.LINUX else None
    if as_json:
        print_json({
            "platform": place.platform.value, "unit": str(place.path), "written": write.value,
            "runs": list(launched.argv), "environment": dict(launched.environment),
            "user": {"uid": place.uid, "name": place.user},
            "user_manager": {"reachable": started.reach.reachable,
                             "detail": started.reach.detail},
            "ran": [list(c) for c in started.ran], "to_run": [list(c) for c in started.to_run],
            "started": started.started, "serve_by_hand": started.by_hand,
            "restart_needed": started.restart_needed, "linger": linger,
            "not_carried": not_carried, "undo": list(decide.UNDO)})
    else:
        _say_installed(place, launched, write, started, linger, not_carried)
    if started.ran and not started.started and started.by_hand is None:
        exit_with(OTHER)  # started, and it did not come up: said above


def _serve_options(web: str | None, tcp: str | None) -> tuple[str, ...]:
    """`--web`, `--tcp` as `serve` takes them, with a port of their own (0, any free port,
    would move at each start)."""
    from clankie.autostart.decide import Refused
    from clankie.core.vocabulary import Exit

    words: list[str] = []
    for option, address in (("--tcp", tcp), ("--web", web)):
        if address is None:
            continue
        from clankie.serve import ServeUsage, parse_tcp

        try:
            _, port = parse_tcp(address, option)
        except ServeUsage as exc:
            raise click.BadParameter(str(exc), param_hint=option) from None
        if port == 0:
            raise Refused("invalid_request", Exit.USAGE, f"{option} {address}: a service needs "
                          "a port of its own (0 would be another port at each start); "
                          "nothing was written", f"give a port, as in {option} 127.0.0.1:8766")
        words += [option, address]
    return tuple(words)


def _launch(place: Place, serve: tuple[str, ...]) -> Launch:
    import clankie
    from clankie.autostart import decide

    argv0 = sys.argv[0]
    cwd = str(current_directory())
    program = os.path.join(cwd, argv0)
    return decide.launch(argv0=argv0, argv0_runs=os.path.isfile(program) and os.access(
        program, os.X_OK), executable=sys.executable, cwd=cwd,
        package_root=str(Path(clankie.__file__).resolve().parents[1]),
        pythonpath=os.environ.get("PYTHONPATH"), home=place.home.path, serve=serve)


def _text(place: Place, launched: Launch) -> str:
    from clankie import __version__
    from clankie.autostart import decide

    if place.platform is decide.Platform.MACOS:
        return decide.launchd_plist(launched, __version__, decide.launchd_log(place.user_home))
    return decide.systemd_unit(launched, __version__)


def _start(place: Place, write: Write) -> Started:
    """Enable and start the service where the user's manager answers; else the commands."""
    from clankie.autostart import decide, host

    reach = host.reach(place.platform, place.uid)
    commands = decide.start_commands(place.platform, place.uid, place.path)
    running = False
    if not reach.reachable:
        return Started(reach, to_run=commands, by_hand=host.serve_by_hand(place.home, None))
    if place.platform is decide.Platform.MACOS:
        loaded = host.launchd_loaded(place.uid, decide.LABEL)
        if loaded and write is decide.Write.UNCHANGED:
            return Started(reach, started=host.came_up(place.platform, place.home))
        by_hand = host.serve_by_hand(place.home, None)
        if loaded:  # launchd reads a plist only as it loads it: out and in again
            commands = [*decide.stop_commands(place.platform, place.uid), *commands]
    else:
        state = host.unit_state()
        running = state.get("ActiveState") == "active"
        main_pid = int(state.get("MainPID") or 0) or None
        by_hand = host.serve_by_hand(place.home, main_pid)
        commands = decide.start_commands(place.platform, place.uid, place.path,
                                         start=by_hand is None)
        if state.get("ActiveState") == "failed":  # a start limit hit before: start afresh
            commands = [decide.systemctl("reset-failed", decide.UNIT), *commands]
    if by_hand is not None:
        if place.platform is decide.Platform.MACOS:
            return Started(reach, to_run=commands, by_hand=by_hand)
        to_run = [decide.systemctl("start", decide.UNIT)]
    else:
        to_run = []
    for command in commands:
        done = host.run(command)
        if not done.ok:
            raise decide.Refused(
                "service_manager_failed", OTHER, f"`{shlex.join(command)}` failed: "
                f"{done.said or f'exit {done.status}'}", f"the unit is written at {place.path}; "
                f"{decide.log_hint(place.platform, place.user_home)}; undo with `clankie "
                "service uninstall`", ran=[list(c) for c in commands[:commands.index(command)]])
    started = by_hand is None and host.came_up(place.platform, place.home)
    restart = (place.platform is decide.Platform.LINUX and running and write in (
        decide.Write.UPDATED, decide.Write.REPLACED))
    return Started(reach, ran=commands, to_run=to_run, started=started, by_hand=by_hand,
                   restart_needed=restart)


def _not_carried() -> list[str]:
    """The variables of this environment that `clankie serve` reads and the service will not
    get: the unit carries only CLANKIE_HOME (and PYTHONPATH); settings belong in
    settings.toml, and keys never in a service file."""
    from clankie.agent.sdk import KEY_VARIABLES
    from clankie.home import NOT_SETTINGS

    keys = set(KEY_VARIABLES.values())
    return sorted(v for v in os.environ if v in keys or (
        v.startswith("CLANKIE_") and v not in NOT_SETTINGS))


def _say_installed(place: Place, launched: Launch, write: Write, started: Started,
                   linger: bool | None, not_carried: list[str]) -> None:
    from clankie.autostart import decide

    said = {"created": "wrote", "updated": "rewrote (an earlier install's, unedited)",
            "replaced": "wrote over", "unchanged": "already as install writes it:"}
    say(f"{said[write.value]} {place.path}")
    say(f"  runs: {shlex.join(launched.argv)}")
    say("  with: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in launched.environment))
    if place.uid == 0:
        say("  as root, in root's own service manager (it never runs as root for another "
            "user)")
    hint = decide.log_hint(place.platform, place.user_home)
    by_hand = (f"a `clankie serve` you started yourself (pid {started.by_hand}) serves "
               f"{place.home.path}, and the service's would fail beside it")
    if not started.reach.reachable:
        say(f"not started: no user service manager answers here ({started.reach.detail}). "
            + (f"Also, {by_hand}: stop it first. " if started.by_hand is not None else "")
            + "Where you log in with one, run:")
    elif started.by_hand is not None:
        say(f"not started: {by_hand}. Stop that one (Ctrl+C in its terminal), then run:")
    elif started.started:
        last = shlex.join(started.ran[-1]) if started.ran else "already loaded"
        say(f"enabled and started ({last}): clankie serve answers now, and starts at each "
            f"login and again after a crash; {hint}")
    else:
        say(f"enabled, but clankie serve did not come up within a few seconds; {hint}")
    for command in started.to_run:
        say(f"  {shlex.join(command)}")
    if started.restart_needed:
        say("clankie serve still runs as it was started; `"
            f"{shlex.join(decide.restart_command(place.platform, place.uid))}` runs the new "
            "unit (a restart ends a question that waits, rule R3)")
    if linger is False:
        say(f"it stops when you log out; to keep it running: loginctl enable-linger "
            f"{place.user}")
    for name in not_carried:
        key_how = ("`systemctl --user edit clankie.service` (an EnvironmentFile= only you "
                   "can read)" if place.platform is decide.Platform.LINUX else
                   f"`launchctl setenv {name} ...`, then `"
                   f"{shlex.join(decide.restart_command(place.platform, place.uid))}`")
        how = (SETTINGS_HOW if name.startswith("CLANKIE_") else
               f"a key is never written into a service file: give it with {key_how}")
        warn(f"clankie: note: {name} is set here, and the service does not get it; {how}")
    say(f"undo: {' '.join(decide.UNDO)}")


# ------------------------------------------------------------------ uninstall


@service.command()
@json_option
def uninstall(as_json: bool) -> None:
    """Stop and disable clankie's user service and remove its file (only as install wrote
    it; drop-ins of your own, the home and what it holds are kept)."""
    _guarded("uninstall", as_json, lambda: _uninstall(as_json))


def _uninstall(as_json: bool) -> None:
    from clankie.autostart import decide, host

    place = _place()
    _refuse_root(place, "uninstall")
    found = host.read_unit(place.path)
    result: dict[str, object] = {
        "platform": place.platform.value, "unit": str(place.path), "removed": [],
        "ran": [], "user_manager": None}
    if not decide.may_remove(found, place.path, place.platform, place.uid):
        if as_json:
            print_json(result)
        else:
            say(f"nothing to remove: there is no unit at {place.path}")
        return
    reach = host.reach(place.platform, place.uid)
    ran: list[tuple[str, ...]] = []
    if reach.reachable and (place.platform is decide.Platform.LINUX
                            or host.launchd_loaded(place.uid, decide.LABEL)):
        for command in decide.stop_commands(place.platform, place.uid):
            done = host.run(command)
            if not done.ok:
                raise decide.Refused("service_manager_failed", OTHER, f"`{shlex.join(command)}`"
                                     f" failed: {done.said or f'exit {done.status}'}; nothing "
                                     "was removed", "see `clankie service status`")
            ran.append(command)
    removed = host.remove_unit(place.path)
    if reach.reachable and place.platform is decide.Platform.LINUX:
        reload = decide.systemctl("daemon-reload")
        if host.run(reload).ok:
            ran.append(reload)
    kept = [p for p in (place.path.with_name(place.path.name + ".d"),) if p.exists()]
    if as_json:
        print_json({**result, "removed": [str(p) for p in removed],
                    "ran": [list(c) for c in ran], "kept": [str(p) for p in kept],
                    "user_manager": {"reachable": reach.reachable, "detail": reach.detail}})
        return
    if ran:
        say(f"stopped and disabled ({shlex.join(ran[0])})")
    say("removed " + ", ".join(str(p) for p in removed))
    if not reach.reachable:
        say(f"no user service manager answers here ({reach.detail}); if clankie serve runs "
            "under one elsewhere, stop it there: "
            + shlex.join(decide.systemctl("stop", decide.UNIT)))
    for path in kept:
        say(f"kept {path} (your own drop-ins)")
    say(f"clankie serve no longer starts at login; {place.home.path} and what it holds are "
        "kept")


# ------------------------------------------------------------------ status


@service.command()
@json_option
def status(as_json: bool) -> None:
    """Say whether clankie's user service is installed, enabled and running (exit 6 when it
    is not installed)."""
    _guarded("status", as_json, lambda: _status(as_json))


def _status(as_json: bool) -> None:
    from clankie.autostart import decide, host

    place = _place()
    found = host.read_unit(place.path)
    shown: dict[str, object] = {
        "platform": place.platform.value, "unit": str(place.path), "installed": found is not None,
        "origin": None, "runs": None, "environment": None, "user_manager": None,
        "enabled": None, "active": None, "sub": None, "pid": None, "restarts": None,
        "answers": host.answers(place.home), "home": str(place.home.path),
        "linger": host.linger(place.user) if place.platform is decide.Platform.LINUX else None,
        "undo": list(decide.UNDO) if found is not None else None}
    if found is not None:
        shown |= {"origin": decide.origin(found).value,
                  **decide.described(found, place.platform)}
        reach = host.reach(place.platform, place.uid)
        shown["user_manager"] = {"reachable": reach.reachable, "detail": reach.detail}
        if reach.reachable and place.platform is decide.Platform.LINUX:
            state = host.unit_state()
            shown |= {"enabled": state.get("UnitFileState") == "enabled",
                      "active": state.get("ActiveState"), "sub": state.get("SubState"),
                      "pid": int(state.get("MainPID") or 0) or None,
                      "restarts": int(state.get("NRestarts") or 0)}
        elif reach.reachable:
            shown["active"] = "loaded" if host.launchd_loaded(place.uid, decide.LABEL) else (
                "not loaded")
    if as_json:
        print_json(shown)
    else:
        _say_status(place, shown)
    exit_with(DONE if found is not None else MISSING)


def _say_status(place: Place, shown: dict[str, object]) -> None:
    answers = (f"clankie serve answers on {place.home.socket}" if shown["answers"] else
               f"nothing answers on {place.home.socket}")
    if not shown["installed"]:
        say(f"not installed: there is no unit at {place.path} ({answers}); `clankie service "
            "install` writes one")
        return
    whose = {"clankie": "as `clankie service install` wrote it",
             "edited": "changed since `clankie service install` wrote it",
             "foreign": "not written by `clankie service install`"}
    say(f"unit: {place.path} ({whose[str(shown['origin'])]})")
    if shown["runs"]:
        runs = shown["runs"]
        say(f"  runs: {shlex.join(runs) if isinstance(runs, list) else runs}")
    manager = shown["user_manager"]
    assert isinstance(manager, dict)
    if not manager["reachable"]:
        say(f"user service manager: none answers here ({manager['detail']}), so whether the "
            "unit is enabled or running cannot be told")
    elif shown["sub"] is not None:
        enabled = "enabled" if shown["enabled"] else "not enabled (it does not start at login)"
        pid = f", pid {shown['pid']}" if shown["pid"] else ""
        say(f"{Path(str(shown['unit'])).name}: {enabled}; {shown['active']} ({shown['sub']})"
            f"{pid}; restarts: {shown['restarts']}")
    else:
        say(f"launchd: {shown['active']}")
    say(answers)
    if shown["linger"] is False:
        say(f"linger: off (it stops when you log out; `loginctl enable-linger {place.user}` "
            "keeps it running)")
    say("undo: clankie service uninstall")
