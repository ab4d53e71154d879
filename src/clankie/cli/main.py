"""The `clankie` command and its set-up commands: `init`, `serve`, `demo`.

Owns argument parsing and what a person sees. It decides nothing the service decides;
errors are one or two lines with no traceback, and the exit code says what happened.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from clankie import __version__
from clankie.core.errors import ClankieError
from clankie.home import Home, UnsafeHome, check, make_home, write_token_file
from clankie.settings import SettingsError, load_settings, settings_table

from . import access, chat, conversations
from .common import DENIED, USAGE, explain_not_yours, say, warn
from .entry import COMPLETE_VAR

app = typer.Typer(no_args_is_help=True, add_completion=True, pretty_exceptions_enable=False,
                  help="clankie: a local agent service that asks its owner one question at a "
                       "time.",
                  epilog="Exit codes: 0 done; 2 usage or invalid input; 3 conflict, read again; "
                         "4 refused; 5 unauthenticated or forbidden; 6 not found or unknown "
                         "request; 7 uncertain: inspect, never resend; 1 anything else.")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"clankie {__version__}")
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit."
)] = False) -> None:
    pass


app.command()(chat.chat)
app.add_typer(conversations.app, name="conversations")
app.add_typer(access.devices, name="devices")
app.add_typer(access.credentials, name="credentials")


def fail(message: str, code: int = 1) -> typer.Exit:
    warn(f"clankie: {message}")
    return typer.Exit(code)


@app.command("doctor")
def doctor_command(as_json: Annotated[bool, typer.Option(
        "--json", help="Print the checks as JSON.")] = False) -> None:
    """Check this setup: home and its folders and files, store, token, service, model, Git,
    settings."""
    from . import doctor  # the providers and the store schema: only for this command

    doctor.doctor(as_json)


SHELLS = ("bash", "zsh", "fish")


@app.command()
def completion(shell: Annotated[str, typer.Argument(
        metavar="SHELL", help="bash, zsh or fish.")]) -> None:
    """Print the shell's completion script (commands, options, conversation IDs).

    bash: eval "$(clankie completion bash)"; zsh: the same with zsh; fish: clankie
    completion fish | source.
    """
    if shell not in SHELLS:
        raise typer.BadParameter(f"{shell!r} is not a shell clankie completes; give bash, zsh "
                                 "or fish", param_hint="SHELL")
    from typer.completion import get_completion_script

    say(get_completion_script(prog_name="clankie", complete_var=COMPLETE_VAR, shell=shell))


@app.command()
def init() -> None:
    """Create the home folder, the store, the owner and a first operator token."""
    from clankie.service import Service
    from clankie.store import Store

    home = Home.from_env()
    make_home(home)
    store = Store(home.store)
    try:
        service = Service(store, load_settings(home.path))
        token = service.init_owner(reissue=not home.token_file.exists())
    finally:
        store.close()
    if token is None:
        say(f"clankie is already set up in {home.path}")
        return
    write_token_file(home, token)
    say(f"clankie is set up in {home.path}; operator token in {home.token_file}")


@app.command()
def serve(
    tcp: Annotated[str | None, typer.Option("--tcp", metavar="HOST:PORT",
                                            help="Also serve on this loopback address.")] = None,
    model: Annotated[str | None, typer.Option(
        "--model", metavar="NAME", help="scripted (default), openai or anthropic.")] = None,
    script: Annotated[Path | None, typer.Option(
        "--script", metavar="FILE", help='A script for the scripted model: {"turns": [...]}.'
    )] = None,
    help_settings: Annotated[bool, typer.Option("--help-settings",
                                                help="Print the settings table.")] = False,
) -> None:
    """Run the service in the foreground until SIGTERM or SIGINT."""
    if help_settings:
        typer.echo(settings_table())
        return
    from clankie.api.server import ServeError, ServeUsage, parse_tcp
    from clankie.api.server import serve as run

    try:
        if tcp is not None:
            parse_tcp(tcp)  # a usage error, before the home or the store is touched
    except ServeUsage as exc:
        raise fail(str(exc), USAGE) from None
    home = Home.from_env()
    check(home)  # before settings.toml is read or the store touched (T1)
    environ = dict(os.environ) | ({"CLANKIE_MODEL": model} if model is not None else {})
    settings = load_settings(home.path, environ)  # T3: before anything touches the store
    try:
        run(home, settings, tcp, script)
    except ServeError as exc:
        raise fail(str(exc)) from None


@app.command()
def demo() -> None:
    """Show the question path end to end in a temporary home, offline."""
    from clankie.demo import run_demo

    raise typer.Exit(run_demo())


def main(argv: list[str] | None = None) -> int:
    """Entry point: no traceback ever reaches the user.

    click prints usage errors itself (exit 2) and turns `typer.Exit` into `SystemExit`.
    """
    try:
        app(args=argv, prog_name="clankie")
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        return _said(exc)
    return 0


def _said(exc: Exception) -> int:
    """Say an error that reached `main` in a line or two; its exit code. The client's and
    the store's classes are looked up among the modules already imported, never imported
    here: an error of theirs means their module is loaded, and a command that used neither
    pays nothing (nor can an import fail while an error is being said)."""
    client, store = sys.modules.get("clankie.client"), sys.modules.get("clankie.store.db")
    if isinstance(exc, SettingsError):  # invalid input: the owner's to fix (T3)
        warn(f"clankie: {exc}")
        warn(f"  fix: {exc.fix}")
        return USAGE
    if isinstance(exc, UnsafeHome):  # T1, or no usable home: the path, what is wrong, the fix
        warn(f"clankie: {exc.headline}")
        warn(f"  fix: {exc.unsafe.fix}")
        return USAGE
    # CLANKIE_URL is not an address: the owner's to fix.
    if client and isinstance(exc, client.BadServiceUrl):
        warn(f"clankie: {exc}")
        return USAGE
    # T2, from a command that reached the client outside `common.call`.
    if client and isinstance(exc, client.NotYours):
        explain_not_yours(exc)
        return DENIED
    if isinstance(exc, ClankieError) or (store and isinstance(exc, store.StoreUnusable)):
        warn(f"clankie: {exc}")
        return 1
    warn(f"clankie: internal error: {type(exc).__name__}: {exc}")  # never a traceback
    return 1


if __name__ == "__main__":
    sys.exit(main())
