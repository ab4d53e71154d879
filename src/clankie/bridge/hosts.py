"""`clankie mcp config CLIENT` (SPEC P2): the lines that register the bridge in a coding
agent's *user* configuration, for the owner to paste; no file is written.

Owns each host's format and what it needs so that the bridge's tools run without a prompt
that nobody would see: Claude Code's `mcp__clankie` in `permissions.allow` (or
`--allowedTools mcp__clankie` with `-p`), Codex's `default_tools_approval_mode = "approve"`,
Gemini CLI's `"trust": true`, OpenCode's `mcp.clankie` entry of `type: "local"`; and a
tool-call time-out above the 30 s a wait may hold (60 s where the host has the setting).

No token is ever printed: the lines hold the placeholder `<AGENT_TOKEN>`, to be replaced
with the token `clankie credentials issue --kind agent NAME` printed once. Each host's
user configuration is a file of the owner's own, never a project's (a project's file gets
committed, with the token in it). Pure but for reading the environment and PATH.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping
from typing import Final

HOSTS: Final = ("claude", "codex", "gemini", "opencode", "generic")
PLACEHOLDER: Final = "<AGENT_TOKEN>"
TIMEOUT_S: Final = 60  # a wait holds up to 30 s, and the service's reply comes after it
PASSED: Final = ("CLANKIE_HOME", "CLANKIE_URL", "CLANKIE_URL_TRUSTED")  # where, never who


def command() -> str:
    """The `clankie` the host should start: the one on PATH, as an absolute path (a host's
    PATH may differ from this shell's)."""
    return shutil.which("clankie") or "clankie"


def environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The bridge's environment in the host: the token's placeholder, and where this shell
    finds clankie when it is not the default."""
    env = os.environ if environ is None else environ
    return {"CLANKIE_AGENT_TOKEN": PLACEHOLDER,
            **{name: env[name] for name in PASSED if env.get(name)}}


def limit(home: str) -> str:
    """SPEC P2's stated limit, as comment lines."""
    return (
        "# Limit: an agent credential stops answering through MCP only. A program running as\n"
        f"# your own Unix user can read the operator token in clankie's home ({home}):\n"
        "# keep the agent's file access away from that folder (the client's sandbox or deny\n"
        "# rules), or run the agent as another user.")


def _head(host: str) -> str:
    return (f"# {host}: clankie's bridge in your user configuration (every project).\n"
            "# 1. The agent's credential, once (its token is printed once):\n"
            "#      clankie credentials issue --kind agent NAME\n"
            f"# 2. Below, replace {PLACEHOLDER} with that token. The bridge's workspace is the\n"
            "#    folder the client starts it in; add --workspace DIR to fix one.\n"
            "#    If the client says the server failed or closed, run its command by hand\n"
            "#    with the token set: clankie mcp says why on standard error.")


def _json(value: object) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


def _toml_table(env: Mapping[str, str]) -> str:
    return "{ " + ", ".join(f"{k} = {json.dumps(v, ensure_ascii=False)}"
                            for k, v in env.items()) + " }"


def claude(exe: str, env: Mapping[str, str]) -> str:
    flags = " ".join(f"-e {k}={_shell(v)}" for k, v in env.items())
    return "\n".join([
        _head("Claude Code"),
        f"claude mcp add --scope user clankie {flags} -- {_shell(exe)} mcp",
        "",
        "# 3. Let its tools run without a prompt nobody sees: add to ~/.claude/settings.json",
        _json({"permissions": {"allow": ["mcp__clankie"]}}),
        "",
        "# With `claude -p`, give instead: --allowedTools mcp__clankie",
    ])


def codex(exe: str, env: Mapping[str, str]) -> str:
    return "\n".join([
        _head("Codex"),
        "# 3. In ~/.codex/config.toml (approve: its tools run without a prompt):",
        "[mcp_servers.clankie]",
        f"command = {json.dumps(exe, ensure_ascii=False)}",
        'args = ["mcp"]',
        f"env = {_toml_table(env)}",
        'default_tools_approval_mode = "approve"',
        f"tool_timeout_sec = {TIMEOUT_S}",
        "# required: Codex leaves out a server that is not ready within 1 s otherwise",
        "required = true",
    ])


def gemini(exe: str, env: Mapping[str, str]) -> str:
    return "\n".join([
        _head("Gemini CLI"),
        "# 3. In ~/.gemini/settings.json (trust: its tools run without a prompt; timeout in",
        "#    milliseconds). Gemini CLI starts it only in a folder you trust (`gemini mcp",
        "#    list` says \"Disabled because this folder is untrusted\" until you do):",
        _json({"mcpServers": {"clankie": {"command": exe, "args": ["mcp"], "env": dict(env),
                                          "timeout": TIMEOUT_S * 1000, "trust": True}}}),
    ])


def opencode(exe: str, env: Mapping[str, str]) -> str:
    return "\n".join([
        _head("OpenCode"),
        "# 3. In ~/.config/opencode/opencode.json (timeout in milliseconds, above the 30 s a",
        "#    wait may hold):",
        _json({"$schema": "https://opencode.ai/config.json",
               "mcp": {"clankie": {"type": "local", "command": [exe, "mcp"],
                                   "environment": dict(env), "enabled": True,
                                   "timeout": TIMEOUT_S * 1000}}}),
    ])


def generic(exe: str, env: Mapping[str, str]) -> str:
    return "\n".join([
        _head("Any MCP client"),
        "# 3. A stdio server:",
        f"command: {exe}",
        "args:    mcp",
        "env:     " + " ".join(f"{k}={v}" for k, v in env.items()),
        "# Let its five tools (ask_owner, wait_answer, get_question, list_questions,",
        "# cancel_question) run without a prompt, and give a tool call more than 30 s",
        f"# ({TIMEOUT_S} s) before the client gives up on it.",
    ])


def _shell(word: str) -> str:
    """`word` for a POSIX shell line; the placeholder's brackets quoted too."""
    import shlex

    return shlex.quote(word)


LINES: Final[Mapping[str, Callable[[str, Mapping[str, str]], str]]] = {
    "claude": claude, "codex": codex, "gemini": gemini, "opencode": opencode,
    "generic": generic}


def config(host: str, home: str, environ: Mapping[str, str] | None = None) -> str:
    """The lines for `host` (one of `HOSTS`), then the stated limit."""
    return LINES[host](command(), environment(environ)) + "\n\n" + limit(home)
