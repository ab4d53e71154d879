"""`clankie devices ...` and `clankie credentials ...`: pairing, Take Control, tokens.

Owns those commands' output. A token is printed once, when it is made; the store keeps
only its hash. Rotating the token of the home's own token file rewrites that file.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NoReturn

import click

from clankie import when, wording
from clankie.useragent import describe
from clankie.wording import one_line

from .common import (
    OTHER,
    USAGE,
    Arg,
    Group,
    Whole,
    call,
    connect,
    exit_with,
    fail_usage,
    id_or_prefix,
    json_lines,
    json_option,
    print_json,
    problem_document,
    request_of,
    say,
    usage_problem,
    warn,
)

if TYPE_CHECKING:  # the shapes (pydantic) load with a command's first call, not for --help
    from clankie import dto

devices = Group("devices", help="Paired devices and Take Control.")
credentials = Group("credentials", help="Operator, captain and agent credentials.")


def _token(made: dto.TokenOut, as_json: bool, what: str) -> None:
    if as_json:
        print_json(made)
        return
    say(f"{what} {made.credential_id}")
    say(f"token (shown once): {made.token}")
    if what == "agent":  # SPEC P2: the bridge reads it from this variable only
        say("Give it to the agent's MCP bridge as CLANKIE_AGENT_TOKEN (`clankie mcp config` "
            "prints the lines); it can ask you questions and read your answers, nothing "
            "else.")


@devices.command()
@click.argument("name", cls=Arg, metavar="NAME", required=False,
                help="A name for the device (with --web, or give --name).")
@click.option("--name", "name_option", metavar="NAME",
              help="A name for the browser (with --web; default: phone).")
@click.option("--mode", metavar="MODE", default="control", show_default=True,
              help="control or read_only.")
@click.option("--web", is_flag=True,
              help="Pair a phone's browser: print a one-time URL, its QR code and a "
                   "confirmation word, and wait until the browser pairs or the code expires.")
@click.option("--here", is_flag=True,
              help="With --web: the browser runs on this machine, so pair without "
                   "web_origin at the page's 127.0.0.1 address.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the service's object (or problem) as JSON. With --web, JSON Lines: "
                   "one object a line as it happens (the pairing URL, code and word, then "
                   "what paired, or a problem).")
def pair(name: str | None, name_option: str | None, mode: str, web: bool, here: bool,
         as_json: bool) -> None:
    """Pair a device and print its token, or (--web) pair a browser by a one-time URL."""
    if here and not web:
        fail_usage("--here goes with --web (it says the browser runs on this machine)")
    if web:
        _pair_web(name_option or name or "phone", mode, here, as_json)
        return
    if name is None:
        fail_usage("give the device a NAME (or pair a browser with --web)")
    from clankie import dto

    with connect() as client:
        made = call(client, dto.DEVICE_PAIR, request_of(dto.DEVICE_PAIR, name=name, mode=mode),
                    as_json=as_json, inspect="clankie devices list")
    _token(made, as_json, f"device ({mode})")


def _pair_web(name: str, mode: str, here: bool, as_json: bool) -> None:
    """SPEC H2: the URL (and its QR code) carries the code; the browser confirms with a
    button. The URL is one a phone can open: without `web_origin`, only `--here` (the
    browser runs on this machine) pairs at the listener's 127.0.0.1 address. Waits,
    reading `credential_list`, for the device the pairing makes (its id is the
    pairing's) until the code expires, then says what paired and how to revoke it."""
    from clankie import dto

    if as_json:
        json_lines()  # it prints as it goes: one object a line (issue 42)
    with connect() as client:
        info = call(client, dto.SERVICE_INFO, as_json=as_json)
        if not info.web_url:
            _failed("web_not_served", "this service does not serve the phone page",
                    "restart it with `clankie serve --web 127.0.0.1:PORT` (and set "
                    "web_origin to the address the phone uses)", OTHER, as_json)
        if not info.settings.get("web_origin") and not here:
            _no_web_origin(info.web_url, as_json)
        started = call(client, dto.DEVICE_PAIR_START, request_of(
            dto.DEVICE_PAIR_START, name=name, mode=mode), as_json=as_json,
                       inspect="clankie devices list")
        url = f"{info.web_url}/pair?code={started.code}"
        if as_json:
            print_json(started.model_dump(mode="json") | {"url": url})
        else:
            import segno  # only this command draws a QR code

            where = "in the browser on this machine" if here else "on the phone"
            say(f"Open this {where} to pair it as {name!r} ({mode}):")
            say(url)
            segno.make(url, error="m").terminal(out=sys.stdout, compact=True)
            say(f"The page shows the confirmation word: {started.word}")
            say(f"Waiting until it pairs (the code expires at "
                f"{when.shown_now(started.expires_at)}); Ctrl+C stops waiting.")
        expires = when.parse(started.expires_at)
        while datetime.now(UTC) < expires:
            listed = call(client, dto.CREDENTIAL_LIST, as_json=as_json).credentials
            device = next((c for c in listed if c.credential_id == started.pairing_id), None)
            if device is not None:
                _paired(device, name, mode, as_json)
                return
            time.sleep(1)  # a person is pairing a phone: once a second is soon enough
    _failed("pairing_expired", "the pairing code expired unused",
            "run `clankie devices pair --web` again", OTHER, as_json)


def _failed(code: str, said: str, fix: str, exit: int, as_json: bool) -> NoReturn:
    """Pairing by the page failed (nothing came from the service to say so): in words, or
    as a problem document on one line (JSON Lines)."""
    if as_json:
        print_json(problem_document(code, said, fix=fix))
    else:
        warn(f"clankie: {said}")
        warn(f"  fix: {fix}")
    exit_with(exit)


def _no_web_origin(listener: str, as_json: bool) -> NoReturn:
    """H2: a QR code of a 127.0.0.1 address is one no phone can open: say how to serve
    the page at an address it can, and make no code."""
    port = listener.rsplit(":", 1)[-1]
    said = ("a phone cannot open this service's page: web_origin is not set, so the "
            f"pairing link would be {listener}, which only this machine reaches")
    fix = [f"tailscale serve --bg http://127.0.0.1:{port}",
           "echo 'web_origin = \"https://MACHINE.TAILNET.ts.net\"' >> "
           "\"$CLANKIE_HOME/settings.toml\"",
           "then restart `clankie serve` and pair again"]
    here = "if the browser runs on this machine: clankie devices pair --web --here"
    if as_json:  # a usage error (exit 2): SPEC section 10's invalid_request
        print_json(usage_problem(said, fix="put HTTPS in front of the page and name it in "
                                 "web_origin, e.g. with Tailscale: " + "; ".join(fix) +
                                 "; or, " + here))
        exit_with(USAGE)
    warn(f"clankie: {said}")
    warn("  fix: put HTTPS in front of the page and name it in web_origin, e.g. with "
         "Tailscale (docs/phone.md):")
    for line in fix:
        warn(f"    {line}")
    warn(f"  or, {here}")
    exit_with(USAGE)


def _paired(device: dto.CredentialOut, name: str, mode: str, as_json: bool) -> None:
    """H2: what paired (browser and system from its User-Agent, escaped), when, and how to
    revoke it at once, so that a code used by someone else is seen."""
    what = describe(device.user_agent)
    if as_json:
        # `credential_id`, `name`, `mode`: what paired, as data (issue 42); `paired` (the
        # same ID) is kept for programs and tests written against it
        print_json({"paired": device.credential_id, "credential_id": device.credential_id,
                    "name": name, "mode": mode, "browser": what,
                    "paired_at": device.created_at})
        return
    say(f"paired: {name} ({mode}), device {device.credential_id}")
    say(f"  by {what} at {when.shown_now(device.created_at)}")
    say(f"  not yours? revoke it at once: clankie devices revoke {device.credential_id}")


@devices.command("list")
@json_option
def list_devices(as_json: bool) -> None:
    """List paired devices: mode, name, created (by what), last used, Take Control,
    revoked."""
    from clankie import dto

    with connect() as client:
        listed = call(client, dto.CREDENTIAL_LIST, as_json=as_json)
    found = [c for c in listed.credentials if c.kind == "device"]
    if as_json:
        print_json({"credentials": found})
        return
    if not found:
        say("No paired devices; pair a phone with `clankie devices pair --web`.")
    for c in found:
        lease = "  holds Take Control" if c.holds_lease else ""
        used = when.shown_now(c.last_used_at) if c.last_used_at else "never"
        revoked = "  revoked" if c.revoked else ""
        # H2: what paired a browser, in a few escaped words (a device paired with a
        # token of its own has none)
        by = f"  by {describe(c.user_agent)}" if c.user_agent else ""
        say(f"{c.credential_id}  {c.mode or '':<9} {c.name}  created "
            f"{when.shown_now(c.created_at)}{by}  last used {used}{lease}{revoked}")


@devices.command()
@click.argument("credential_id", cls=Arg, metavar="ID", help="The device's ID (devices list).")
@json_option
def revoke(credential_id: str, as_json: bool) -> None:
    """Revoke a device (its ID or a prefix of it): its token is refused from its next
    request."""
    from clankie import dto

    given = id_or_prefix(credential_id, "a device", "ID")
    with connect() as client:
        devices = [c.credential_id for c in call(client, dto.CREDENTIAL_LIST,
                                                 as_json=as_json).credentials
                   if c.kind == "device"]
        found = [d for d in devices if d.startswith(given)]
        if len(found) != 1:
            raise click.BadParameter(
                f"no device starts with {given!r}; list them with `clankie devices list`"
                if not found else f"{given!r} is ambiguous: it is the start of "
                + ", ".join(found), param_hint="ID")
        credential_id = found[0]
        done = call(client, dto.CREDENTIAL_REVOKE, dto.CredentialRevoke(
            credential_id=credential_id), as_json=as_json, inspect="clankie devices list")
    print_json(done) if as_json else say(f"revoked {credential_id}")


@devices.command("take-control")
@click.option("--ttl", metavar="SECONDS", type=Whole(1),
              help="Lease length (default: the service's take_control_ttl).")
@json_option
def take_control(ttl: int | None, as_json: bool) -> None:
    """Take Control with this device's token (CLANKIE_TOKEN); supersedes any other lease."""
    from clankie import dto

    with connect() as client:
        lease = call(client, dto.DEVICE_TAKE_CONTROL, request_of(
            dto.DEVICE_TAKE_CONTROL, **({} if ttl is None else {"ttl_s": ttl})),
                     as_json=as_json, inspect="clankie devices list")
    print_json(lease) if as_json else say(
        f"Take Control lease {lease.lease_id} until {when.shown_now(lease.expires_at)}")


@devices.command()
@json_option
def release(as_json: bool) -> None:
    """Release this device's Take Control lease."""
    from clankie import dto

    with connect() as client:
        done = call(client, dto.DEVICE_RELEASE, as_json=as_json)
    print_json(done) if as_json else say("released")


@credentials.command()
@click.argument("name", cls=Arg, metavar="NAME", help="A name for the credential.")
@click.option("--kind", metavar="KIND", default="operator", show_default=True,
              help="operator, captain (reads, never answers) or agent (a coding agent that "
                   "asks you through `clankie mcp`).")
@json_option
def issue(name: str, kind: str, as_json: bool) -> None:
    """Issue an operator, captain or agent credential and print its token."""
    from clankie import dto

    with connect() as client:
        made = call(client, dto.CREDENTIAL_ISSUE, request_of(
            dto.CREDENTIAL_ISSUE, kind=kind, name=name), as_json=as_json)
    _token(made, as_json, kind)


@credentials.command()
@click.argument("credential_id", cls=Arg, required=False,
                help="Default: the credential in use.")
@json_option
def rotate(credential_id: str | None, as_json: bool) -> None:
    """Rotate a token: the old one is refused from now on."""
    from clankie import dto

    with connect() as client:
        made = call(client, dto.CREDENTIAL_ROTATE, request_of(dto.CREDENTIAL_ROTATE, **(
            {} if credential_id is None else {"credential_id": credential_id})),
                    as_json=as_json)
    from clankie.home import Home, write_token_file

    home = Home.from_env()
    if credential_id is None and not os.environ.get("CLANKIE_TOKEN") and home.token_file.exists():
        write_token_file(home, made.token)  # or we would lock ourselves out
    _token(made, as_json, "credential")


@credentials.command("list")
@json_option
def list_credentials(as_json: bool) -> None:
    """List every credential: kind, name, created, last used, revoked (devices: their mode
    too)."""
    from clankie import dto

    with connect() as client:
        listed = call(client, dto.CREDENTIAL_LIST, as_json=as_json)
    if as_json:
        print_json(listed)
        return
    for c in listed.credentials:
        kind = f"{c.kind} ({c.mode})" if c.mode else c.kind
        used = when.shown_now(c.last_used_at) if c.last_used_at else "never"
        revoked = "  revoked" if c.revoked else ""
        say(f"{c.credential_id}  {kind:<18} {one_line(c.name)}  created "
            f"{when.shown_now(c.created_at)}  last used {used}{revoked}")


@credentials.command("revoke")
@click.argument("credential_id", cls=Arg, metavar="ID",
                help="The credential's ID (credentials list), or a unique prefix of it.")
@json_option
def revoke_credential(credential_id: str, as_json: bool) -> None:
    """Revoke a credential of any kind (an agent's, say): its token is refused from its
    next request."""
    from clankie import dto

    given = id_or_prefix(credential_id, "a credential", "ID")
    with connect() as client:
        listed = call(client, dto.CREDENTIAL_LIST, as_json=as_json).credentials
        kinds = {c.credential_id: c.kind for c in listed}
        found = [k for k in kinds if k.startswith(given)]
        if len(found) != 1:
            raise click.BadParameter(
                f"no credential starts with {given!r}; list them with `clankie credentials "
                "list`" if not found else f"{given!r} is ambiguous: it is the start of "
                + ", ".join(found), param_hint="ID")
        done = call(client, dto.CREDENTIAL_REVOKE, dto.CredentialRevoke(
            credential_id=found[0]), as_json=as_json, inspect="clankie credentials list")
    if as_json:
        print_json(done)
        return
    say(f"revoked {found[0]}")
    if kinds[found[0]] == "agent":  # new-user trial: its question looked still read later
        say("A question of this agent that was waiting has ended: invalidated "
            f"(asker_revoked): {wording.ASKER_REVOKED}.")
