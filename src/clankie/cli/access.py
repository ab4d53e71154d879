"""`clankie devices ...` and `clankie credentials ...`: pairing, Take Control, tokens.

Owns those commands' output. A token is printed once, when it is made; the store keeps
only its hash. Rotating the token of the home's own token file rewrites that file.
"""

from __future__ import annotations

import os
from typing import Any

import click

from clankie import when

from .common import Arg, Group, Whole, call, connect, json_option, print_json, say

devices = Group("devices", help="Paired devices and Take Control.")
credentials = Group("credentials", help="Operator and captain credentials.")


def _token(made: dict[str, Any], as_json: bool, what: str) -> None:
    if as_json:
        print_json(made)
        return
    say(f"{what} {made['credential_id']}")
    say(f"token (shown once): {made['token']}")


@devices.command()
@click.argument("name", cls=Arg, metavar="NAME", help="A name for the device.")
@click.option("--mode", metavar="MODE", default="control", show_default=True,
              help="control or read_only.")
@json_option
def pair(name: str, mode: str, as_json: bool) -> None:
    """Pair a device and print its token."""
    with connect() as client:
        made = call(client, "device_pair", {"name": name, "mode": mode}, as_json=as_json,
                    inspect="clankie devices list")
    _token(made, as_json, f"device ({mode})")


@devices.command("list")
@json_option
def list_devices(as_json: bool) -> None:
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
@click.option("--ttl", metavar="SECONDS", type=Whole(1),
              help="Lease length (default: the service's take_control_ttl).")
@json_option
def take_control(ttl: int | None, as_json: bool) -> None:
    """Take Control with this device's token (CLANKIE_TOKEN); supersedes any other lease."""
    with connect() as client:
        lease = call(client, "device_take_control", {} if ttl is None else {"ttl_s": ttl},
                     as_json=as_json, inspect="clankie devices list")
    print_json(lease) if as_json else say(
        f"Take Control lease {lease['lease_id']} until {when.shown_now(lease['expires_at'])}")


@devices.command()
@json_option
def release(as_json: bool) -> None:
    """Release this device's Take Control lease."""
    with connect() as client:
        done = call(client, "device_release", {}, as_json=as_json)
    print_json(done) if as_json else say("released")


@credentials.command()
@click.argument("name", cls=Arg, metavar="NAME", help="A name for the credential.")
@click.option("--kind", metavar="KIND", default="operator", show_default=True,
              help="operator or captain.")
@json_option
def issue(name: str, kind: str, as_json: bool) -> None:
    """Issue an operator or captain credential and print its token."""
    with connect() as client:
        made = call(client, "credential_issue", {"kind": kind, "name": name}, as_json=as_json)
    _token(made, as_json, kind)


@credentials.command()
@click.argument("credential_id", cls=Arg, required=False,
                help="Default: the credential in use.")
@json_option
def rotate(credential_id: str | None, as_json: bool) -> None:
    """Rotate a token: the old one is refused from now on."""
    with connect() as client:
        made = call(client, "credential_rotate",
                    {} if credential_id is None else {"credential_id": credential_id},
                    as_json=as_json)
    from clankie.home import Home, write_token_file

    home = Home.from_env()
    if credential_id is None and not os.environ.get("CLANKIE_TOKEN") and home.token_file.exists():
        write_token_file(home, made["token"])  # or we would lock ourselves out
    _token(made, as_json, "credential")
