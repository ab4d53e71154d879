"""`clankie devices ...` and `clankie credentials ...`: pairing, Take Control, tokens.

Owns those commands' output. A token is printed once, when it is made; the store keeps
only its hash. Rotating the token of the home's own token file rewrites that file.
"""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer

from clankie import when
from clankie.home import Home, write_token_file

from .common import JsonOption, call, connect, print_json, say

devices = typer.Typer(no_args_is_help=True, help="Paired devices and Take Control.")
credentials = typer.Typer(no_args_is_help=True, help="Operator and captain credentials.")
Json = Annotated[bool, JsonOption]


def _token(made: dict[str, Any], as_json: bool, what: str) -> None:
    if as_json:
        print_json(made)
        return
    say(f"{what} {made['credential_id']}")
    say(f"token (shown once): {made['token']}")


@devices.command()
def pair(name: Annotated[str, typer.Argument(help="A name for the device.")],
         mode: Annotated[str, typer.Option("--mode", help="control or read_only.")] = "control",
         as_json: Json = False) -> None:
    """Pair a device and print its token."""
    with connect() as client:
        made = call(client, "device_pair", {"name": name, "mode": mode}, as_json=as_json,
                    inspect="clankie devices list")
    _token(made, as_json, f"device ({mode})")


@devices.command("list")
def list_devices(as_json: Json = False) -> None:
    """List paired devices, and which one holds Take Control."""
    with connect() as client:
        listed = call(client, "credential_list", {}, as_json=as_json)
    found = [c for c in listed["credentials"] if c["kind"] == "device"]
    if as_json:
        print_json({"credentials": found})
        return
    for c in found:
        lease = "  holds Take Control" if c["holds_lease"] else ""
        say(f"{c['credential_id']}  {c['mode']:<9} {c['name']}{lease}")


@devices.command("take-control")
def take_control(ttl: Annotated[int | None, typer.Option("--ttl", metavar="SECONDS", min=1,
                                                         help="Lease length.")] = None,
                 as_json: Json = False) -> None:
    """Take Control with this device's token (CLANKIE_TOKEN); supersedes any other lease."""
    with connect() as client:
        lease = call(client, "device_take_control", {} if ttl is None else {"ttl_s": ttl},
                     as_json=as_json, inspect="clankie devices list")
    print_json(lease) if as_json else say(
        f"Take Control lease {lease['lease_id']} until {when.shown_now(lease['expires_at'])}")


@devices.command()
def release(as_json: Json = False) -> None:
    """Release this device's Take Control lease."""
    with connect() as client:
        done = call(client, "device_release", {}, as_json=as_json)
    print_json(done) if as_json else say("released")


@credentials.command()
def issue(name: Annotated[str, typer.Argument(help="A name for the credential.")],
          kind: Annotated[str, typer.Option("--kind", help="operator or captain.")] = "operator",
          as_json: Json = False) -> None:
    """Issue an operator or captain credential and print its token."""
    with connect() as client:
        made = call(client, "credential_issue", {"kind": kind, "name": name}, as_json=as_json)
    _token(made, as_json, kind)


@credentials.command()
def rotate(credential: Annotated[str | None, typer.Argument(
               metavar="CREDENTIAL_ID", help="Default: the credential in use.")] = None,
           as_json: Json = False) -> None:
    """Rotate a token: the old one is refused from now on."""
    with connect() as client:
        made = call(client, "credential_rotate",
                    {} if credential is None else {"credential_id": credential},
                    as_json=as_json)
    home = Home.from_env()
    if credential is None and not os.environ.get("CLANKIE_TOKEN") and home.token_file.exists():
        write_token_file(home, made["token"])  # or we would lock ourselves out
    _token(made, as_json, "credential")
