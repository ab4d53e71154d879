"""The `clankie` command and its set-up commands: `init`, `serve`, `demo`.

Owns argument parsing and what a person sees. It decides nothing the service decides;
errors are one or two lines with no traceback, and the exit code says what happened.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from clankie import __version__

from . import COMPLETE_VAR, access, autostart, bridge, chat, conversations
from .common import (
    USAGE,
    Arg,
    Group,
    exit_with,
    failure,
    print_json,
    say,
    usage_problem,
    warn,
)


def _version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        say(f"clankie {__version__}")
        ctx.exit()


@click.group("clankie", cls=Group, context_settings={"max_content_width": 120},
             help="clankie: a local agent service that asks its owner one question at a time.",
             epilog="Exit codes: 0 done; 2 usage or invalid input; 3 conflict, read again; 4 "
                    "refused; 5 unauthenticated or forbidden; 6 not found or unknown request; 7 "
                    "uncertain: inspect, never resend; 1 anything else.")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_version,
              help="Print the version and exit.")
def app() -> None:
    pass


app.add_command(chat.chat)
app.add_command(conversations.app)
app.add_command(access.devices)
app.add_command(access.credentials)
app.add_command(bridge.mcp)
app.add_command(autostart.service)


def fail(message: str, code: int = 1) -> click.exceptions.Exit:
    warn(f"clankie: {message}")
    return click.exceptions.Exit(code)


def warn_unknown_variables() -> None:
    """Issue 31: each `CLANKIE_` variable that is no setting and no other name clankie
    reads is said once on standard error, with the nearest name (never its value), and the
    command goes on (it changes nothing). Called once by `main`, for every command. The
    settings (pydantic) are imported to compare only when a `CLANKIE_` name outside
    `NOT_SETTINGS` is set: the common path pays nothing."""
    from clankie.home import NOT_SETTINGS

    if all(not v.startswith("CLANKIE_") or v in NOT_SETTINGS for v in os.environ):
        return
    from clankie.settings import unknown_variables

    for sentence in unknown_variables():
        warn(f"clankie: warning: {sentence}")


@app.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
def doctor_command(as_json: bool) -> None:
    """Check this setup: home and its folders and files, store, token, service, model, Git,
    settings."""
    from . import doctor  # the providers and the store schema: only for this command

    doctor.doctor(as_json)


SHELLS = ("bash", "zsh", "fish")


def _shells(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    return [s for s in SHELLS if s.startswith(incomplete)]


@app.command()
@click.argument("shell", cls=Arg, metavar="SHELL", help="bash, zsh or fish.",
                shell_complete=_shells)
def completion(shell: str) -> None:
    """Print the shell's completion script (commands, options, conversation IDs).

    \b
    bash: eval "$(clankie completion bash)"
    zsh:  eval "$(clankie completion zsh)"
    fish: clankie completion fish | source
    """
    if shell not in SHELLS:
        raise click.BadParameter(f"{shell!r} is not a shell clankie completes; give bash, zsh "
                                 "or fish", param_hint="SHELL")
    from click.shell_completion import get_completion_class

    complete = get_completion_class(shell)
    assert complete is not None  # bash, zsh and fish are click's own
    say(complete(app, {}, "clankie", COMPLETE_VAR).source())


@app.command()
@click.option("--json", "as_json", is_flag=True,
              help="Print the home, the token's file and whether this run created them.")
def init(as_json: bool) -> None:
    """Create the home folder, the store, the owner and a first operator token."""
    from clankie.home import Home, make_home, write_token_file
    from clankie.service import Service
    from clankie.settings import load_settings
    from clankie.store import Store

    home = Home.from_env()
    make_home(home)
    store = Store(home.store)
    try:
        service = Service(store, load_settings(home.path))
        token = service.devices.init_owner(reissue=not home.token_file.exists())
    finally:
        store.close()
    if token is not None:
        write_token_file(home, token)
    if as_json:  # never the token: its file is the way to it
        print_json({"home": str(home.path), "token_file": str(home.token_file),
                    "created": token is not None})
    elif token is None:
        say(f"clankie is already set up in {home.path}")
    else:
        say(f"clankie is set up in {home.path}; operator token in {home.token_file}")


@app.command()
@click.option("--tcp", metavar="HOST:PORT", help="Also serve on this loopback address.")
@click.option("--web", metavar="HOST:PORT",
              help="Serve the phone page on this loopback address (docs/phone.md).")
@click.option("--model", metavar="NAME", help="scripted (default), openai or anthropic.")
@click.option("--script", metavar="FILE", type=click.Path(path_type=Path),
              help='A JSON script for the scripted model (docs/cli.md, "Scripted '
                   'conversations").')
@click.option("--help-settings", is_flag=True, help="Print the settings table.")
def serve(tcp: str | None, web: str | None, model: str | None, script: Path | None,
          help_settings: bool) -> None:
    """Run the service in the foreground until SIGTERM or SIGINT."""
    from clankie.settings import load_settings, settings_table

    if help_settings:
        click.echo(settings_table())
        return
    from clankie.home import Home, check
    from clankie.serve import ServeError, ServeUsage, parse_tcp
    from clankie.serve import serve as run

    try:
        if tcp is not None:
            parse_tcp(tcp)  # a usage error, before the home or the store is touched
        if web is not None:
            parse_tcp(web, "--web")
    except ServeUsage as exc:
        raise fail(str(exc), USAGE) from None
    home = Home.from_env()
    check(home)  # before settings.toml is read or the store touched (T1)
    # T3: before anything touches the store
    settings = load_settings(home.path, flags={"model": model} if model is not None else {})
    try:
        run(home, settings, tcp, script, web)
    except ServeError as exc:
        raise fail(str(exc)) from None


@app.command()
def demo() -> None:
    """Show the question path end to end in a temporary home, offline."""
    from clankie.demo import run_demo

    exit_with(run_demo())


def main(argv: list[str] | None = None) -> int:
    """Entry point: no traceback ever reaches the user.

    click's usage errors are said as click says them (exit 2), and with `--json` also printed
    on stdout as an `invalid_request` problem document; Ctrl+C is 130; shell
    completion (`_CLANKIE_COMPLETE`) is click's and exits by itself. Unknown `CLANKIE_`
    variables are warned about first, once, whatever the command (issue 31).
    """
    if COMPLETE_VAR not in os.environ:  # a shell completing reads no warning
        warn_unknown_variables()
    try:
        code = app.main(args=argv, prog_name="clankie", complete_var=COMPLETE_VAR,
                        standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        if isinstance(exc, click.UsageError) and _wants_json(exc, argv):
            print_json(usage_problem(exc.format_message()))
        return exc.exit_code
    except click.exceptions.Abort as exc:  # click's word for Ctrl+C (or an EOF at a prompt)
        return 130 if isinstance(exc.__cause__, KeyboardInterrupt) else 1
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if os.environ.get(COMPLETE_VAR):  # a shell asked (COMP_CWORD missing, say): it
            return 0  # gets nothing, never an error in the middle of the command line
        return _said(exc)
    return code if isinstance(code, int) else 0


def _wants_json(exc: click.UsageError, argv: list[str] | None) -> bool:
    """Whether the command that failed to parse was given `--json` (SPEC section 10: with
    it, a usage error is a problem document on stdout too). What click parsed says so when
    it got that far; else `--json` anywhere in the words before a `--`, whatever the
    command: on one without the option (`chat --json`), the usage error is that option,
    and JSON was asked for all the same (issue 42)."""
    ctx = exc.ctx
    if ctx is not None and "as_json" in ctx.params:
        return bool(ctx.params["as_json"])
    words = sys.argv[1:] if argv is None else argv
    words = words[:words.index("--")] if "--" in words else words
    return "--json" in words


def _said(exc: Exception) -> int:
    """Say an error that reached `main` in a line or two (`common.failure`); its exit
    code. (With --json, the command printed it as a problem document already.)"""
    failed = failure(exc)
    warn(f"clankie: {failed.said}")
    if failed.fix:
        warn(f"  fix: {failed.fix}")
    return failed.exit


if __name__ == "__main__":
    sys.exit(main())
