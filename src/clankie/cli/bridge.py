"""`clankie mcp` and `clankie mcp config CLIENT`: the bridge for coding agents (SPEC 13).

Owns those commands' arguments and what a person sees when the bridge does not start:
one line saying why and one with the fix, on standard error, and the exit code (2 for the
token, the workspace or the home; 5 for a listener that is not the owner's, as in the
CLI). It decides nothing: `clankie.bridge.start` checks, `clankie.bridge.server` serves,
`clankie.bridge.hosts` writes the configuration lines. The MCP SDK is imported only once
`clankie mcp` is about to serve, so `--help` and `config` never pay for it.
"""

from __future__ import annotations

import click

from .common import OTHER, Arg, Group, exit_with, say, warn

CLIENTS = ("claude", "codex", "gemini", "opencode", "generic")


def _clients(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[str]:
    return [c for c in CLIENTS if c.startswith(incomplete)]


@click.group("mcp", cls=Group, invoke_without_command=True,
             help="Serve the MCP bridge on stdio: any coding agent's MCP client asks the "
                  "owner through it, and collects the answer later (its token: "
                  "CLANKIE_AGENT_TOKEN, an agent credential's). `clankie mcp config CLIENT` "
                  "prints the lines that register it.")
@click.option("--workspace", metavar="DIR",
              help="The workspace the agent asks about (default: the working directory).")
@click.pass_context
def mcp(ctx: click.Context, workspace: str | None) -> None:
    if ctx.invoked_subcommand is not None:
        if workspace is not None:
            raise click.UsageError("--workspace belongs to `clankie mcp` itself; `clankie mcp "
                                   "config` prints lines for the client's own folder")
        return
    from clankie.bridge.start import StartRefused, agent_token, identify, workspace_dir

    try:
        token = agent_token()
        folder = workspace_dir(workspace)
        identity = identify(token)
    except StartRefused as exc:
        warn(f"clankie mcp: {exc}")
        warn(f"  fix: {exc.fix}")
        exit_with(exc.code)
    try:
        from clankie.bridge.server import serve
    except ImportError as exc:  # the extra is not installed
        warn(f"clankie mcp: the MCP SDK is not installed ({exc.name or exc})")
        warn("  fix: pip install 'clankie[mcp]'")
        exit_with(OTHER)
    serve(folder, token, identity)


@mcp.command("config")
@click.argument("client", cls=Arg, metavar="CLIENT", required=False, default="generic",
                help="claude, codex, gemini, opencode or generic (the default).",
                shell_complete=_clients)
def config(client: str) -> None:
    """Print the lines that register the bridge in CLIENT's user configuration (writes no
    file, prints no token)."""
    if client not in CLIENTS:
        raise click.BadParameter(f"{client!r} is not a client clankie knows; give claude, "
                                 "codex, gemini, opencode or generic", param_hint="CLIENT")
    from clankie.bridge.hosts import config as lines
    from clankie.home import Home

    say(lines(client, str(Home.from_env().path)))
