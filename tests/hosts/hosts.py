"""The four coding hosts, each run headless against the fake model and `clankie mcp`.

`HOSTS[name](home, workspace, fake_url, bridge)` writes one run's configuration into a
fresh temporary home (nothing of the machine user's configuration is read or written: HOME,
XDG_* and each host's own config variable point into it) and returns the command line and
the environment. The environment is built from nothing but PATH and the locale, so no key
or setting of the caller leaks in. Each host is told, by its own settings, to make no call
but to the fake model: no update check, no telemetry, no error reports, no feedback. Belt
and braces: its HTTP(S) proxy is the fake model itself, which records and refuses whatever
a host tries to reach elsewhere.

The MCP server's host-specific keys are those `clankie mcp config HOST` prints (SPEC P2:
what each host needs so that its tools run without a prompt nobody sees): Claude Code's
`permissions.allow: ["mcp__clankie"]`, Codex's `default_tools_approval_mode = "approve"`,
Gemini CLI's `"trust": true`, OpenCode's `mcp.clankie` (`type: "local"`) with a `timeout`
above 30 s. Where the bridge cannot print them (a stand-in given by HOSTS_BRIDGE_ARGV), the
harness's own copies of the same keys are used. docs/hosts.md tells what each host needed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HOSTS_DIR = ROOT / "hosts"
BIN = HOSTS_DIR / "node_modules" / ".bin"

PROMPT = ("Before writing the new module, ask the owner through clankie which indentation "
          "to use, wait for the answer, and then say what the owner chose.")
MODEL = {"claude": "claude-sonnet-4-5", "codex": "gpt-5-codex", "gemini": "gemini-2.5-pro",
         "opencode": "fake/fake-model"}


@dataclass(frozen=True)
class Bridge:
    """How the host starts `clankie mcp`: the command, its arguments and environment, and
    the code it runs (`src`: a source tree put on PYTHONPATH by env(1) on the command line,
    since Gemini CLI drops PYTHONPATH from a server's `env`; None: an installed clankie)."""

    command: str
    args: list[str]
    env: dict[str, str]
    src: str | None


def bridge_for(workspace: Path, token: str, clankie_home: Path) -> Bridge:
    """`python -m clankie mcp --workspace DIR` with the agent token and the clankie home.
    The bridge's code is `HOSTS_BRIDGE_SRC` (a `src` folder; default this repository's);
    `HOSTS_BRIDGE_ARGV` (a JSON list) replaces the command before `--workspace`, as for an
    installed `clankie` (`["clankie", "mcp"]`)."""
    env = {"CLANKIE_AGENT_TOKEN": token, "CLANKIE_HOME": str(clankie_home)}
    argv = os.environ.get("HOSTS_BRIDGE_ARGV")
    if argv:
        full = [*json.loads(argv), "--workspace", str(workspace)]
        return Bridge(full[0], full[1:], env, None)
    src = os.environ.get("HOSTS_BRIDGE_SRC", str(ROOT / "src"))
    return Bridge("env", [f"PYTHONPATH={src}", "PYTHONDONTWRITEBYTECODE=1", sys.executable,
                          "-m", "clankie", "mcp", "--workspace", str(workspace)], env, src)


@dataclass(frozen=True)
class Registration:
    """The host-specific part of the server's entry (`trust`, `timeout`, approval mode...):
    from `clankie mcp config HOST` where the bridge prints it, else the harness's own."""

    source: str  # "clankie mcp config" or "harness"
    entry: dict[str, Any]
    printed: str = ""


def printed_config(host: str, bridge: Bridge) -> str | None:
    """What `clankie mcp config HOST` prints with the bridge's code, or None where that
    command does not exist (yet)."""
    if bridge.src is None:
        argv = [bridge.command, *bridge.args[:bridge.args.index("--workspace")]]
        command = [*argv, "config", host]
    else:
        command = ["env", f"PYTHONPATH={bridge.src}", sys.executable, "-m", "clankie", "mcp",
                   "config", host]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/")}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    printed = done.returncode == 0 and "CLANKIE_AGENT_TOKEN" in done.stdout
    return done.stdout if printed else None


def block(text: str, opening: str) -> str:
    """The lines of `text` from the first that starts with `opening` to the next blank one."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(opening))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def registration(host: str, bridge: Bridge, own: dict[str, Any]) -> Registration:
    """The entry's host-specific keys as `clankie mcp config HOST` prints them (its command,
    arguments and environment are the harness's: this run's bridge and token)."""
    text = printed_config(host, bridge)
    if text is None:
        return Registration("harness", own)
    if host == "codex":
        entry = tomllib.loads(block(text, "[mcp_servers.clankie]"))["mcp_servers"]["clankie"]
    elif host == "gemini":
        entry = json.loads(block(text, "{"))["mcpServers"]["clankie"]
    elif host == "opencode":
        entry = json.loads(block(text, "{"))["mcp"]["clankie"]
    else:  # claude: the settings that allow the tools; the server is `claude mcp add`'s
        entry = json.loads(block(text, "{"))
    for key in ("command", "args", "env", "environment"):
        entry.pop(key, None)
    return Registration("clankie mcp config", entry, text)


def base_env(home: Path, fake_url: str) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
           "HOME": str(home), "USER": "clankie-test", "TERM": "dumb", "NO_COLOR": "1",
           "CI": "1",
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local/share"),
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
           "TMPDIR": str(home / "tmp")}
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[name] = env[name.lower()] = fake_url
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    for folder in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
                   "TMPDIR"):
        Path(env[folder]).mkdir(parents=True, exist_ok=True)
    return env


@dataclass(frozen=True)
class Prepared:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    registration: Registration


Prepare = Callable[[Path, Path, str, Bridge], Prepared]


def claude(home: Path, workspace: Path, fake_url: str, bridge: Bridge) -> Prepared:
    env = base_env(home, fake_url)
    config_dir = home / ".claude"
    config_dir.mkdir()
    env.update({
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "ANTHROPIC_BASE_URL": fake_url,
        "ANTHROPIC_API_KEY": "sk-ant-fake",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "IS_SANDBOX": "1",  # running as root: no refusal for it
    })
    # The settings that let the tools run unprompted: `permissions.allow` (P2). Without it
    # `claude -p` refuses each call ("Claude requested permissions to use ..."); the flag
    # --allowedTools mcp__clankie would do the same as the setting.
    reg = registration("claude", bridge, {"permissions": {"allow": ["mcp__clankie"]}})
    (config_dir / "settings.json").write_text(json.dumps(reg.entry))
    mcp = home / "mcp.json"
    mcp.write_text(json.dumps({"mcpServers": {"clankie": {
        "type": "stdio", "command": bridge.command, "args": bridge.args, "env": bridge.env}}}))
    argv = [str(BIN / "claude"), "-p", PROMPT, "--mcp-config", str(mcp), "--strict-mcp-config",
            "--output-format", "json", "--model", MODEL["claude"]]
    return Prepared(argv, env, workspace, reg)


def _toml(value: object) -> str:
    """A TOML value: JSON's strings, lists and numbers are TOML's too; a table inline."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def codex(home: Path, workspace: Path, fake_url: str, bridge: Bridge) -> Prepared:
    env = base_env(home, fake_url)
    codex_home = home / ".codex"
    codex_home.mkdir()
    env.update({"CODEX_HOME": str(codex_home), "FAKE_OPENAI_KEY": "sk-fake"})
    reg = registration("codex", bridge, {"default_tools_approval_mode": "approve",
                                         "tool_timeout_sec": 60})
    settings = {
        "model": MODEL["codex"],
        "model_provider": "fake",
        "approval_policy": "never",
        "sandbox_mode": "read-only",
        "check_for_update_on_startup": False,
    }
    tables = {
        "model_providers.fake": {"name": "fake", "base_url": fake_url + "/v1",
                                 "wire_api": "responses", "env_key": "FAKE_OPENAI_KEY",
                                 "request_max_retries": 0, "stream_max_retries": 0,
                                 "supports_websockets": False},
        "analytics": {"enabled": False},
        "feedback": {"enabled": False},
        "otel": {"exporter": "none"},
        # Each of these otherwise reaches github.com or chatgpt.com at start (0.169).
        "features": {"plugins": False, "remote_plugin": False, "apps": False,
                     "plugin_sharing": False},
        # `required = true` comes from `clankie mcp config codex` (in reg.entry): Codex
        # leaves out an optional server not ready within `mcp_optional_startup_grace_ms`
        # (1 s), and the bridge's start (the mcp SDK's import) can take longer.
        "mcp_servers.clankie": {"command": bridge.command, "args": bridge.args,
                                "env": bridge.env, **reg.entry},
    }
    text = "".join(f"{k} = {_toml(v)}\n" for k, v in settings.items())
    for name, table in tables.items():
        text += f"\n[{name}]\n" + "".join(f"{k} = {_toml(v)}\n" for k, v in table.items())
    (codex_home / "config.toml").write_text(text)
    argv = [str(BIN / "codex"), "exec", "--skip-git-repo-check", "--ephemeral", "--json",
            PROMPT]
    return Prepared(argv, env, workspace, reg)


def gemini(home: Path, workspace: Path, fake_url: str, bridge: Bridge) -> Prepared:
    env = base_env(home, fake_url)
    env.update({
        "GEMINI_CLI_HOME": str(home),
        "GEMINI_API_KEY": "fake-gemini-key",
        "GOOGLE_GEMINI_BASE_URL": fake_url,
        "GEMINI_TELEMETRY_ENABLED": "false",
        # A stdio MCP server runs only in a trusted folder.
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    })
    reg = registration("gemini", bridge, {"trust": True, "timeout": 60_000})
    settings = {
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "mcpServers": {"clankie": {"command": bridge.command, "args": bridge.args,
                                   "env": bridge.env, **reg.entry}},
    }
    config = home / ".gemini"
    config.mkdir()
    (config / "settings.json").write_text(json.dumps(settings, indent=1))
    argv = [str(BIN / "gemini"), "-p", PROMPT, "--model", MODEL["gemini"],
            "--output-format", "json"]
    return Prepared(argv, env, workspace, reg)


def opencode(home: Path, workspace: Path, fake_url: str, bridge: Bridge) -> Prepared:
    env = base_env(home, fake_url)
    env.update({
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1",
        "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
        "OPENCODE_DISABLE_TERMINAL_TITLE": "1",
    })
    reg = registration("opencode", bridge, {"type": "local", "enabled": True,
                                            "timeout": 60_000})
    provider, model = MODEL["opencode"].split("/")
    settings = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "model": MODEL["opencode"],
        "small_model": MODEL["opencode"],
        "provider": {provider: {
            "npm": "@ai-sdk/openai-compatible", "name": "Fake",
            "options": {"baseURL": fake_url + "/v1", "apiKey": "sk-fake"},
            "models": {model: {"name": "Fake model", "tool_call": True}}}},
        "mcp": {"clankie": {**reg.entry, "command": [bridge.command, *bridge.args],
                            "environment": bridge.env}},
    }
    config = home / ".config" / "opencode"
    config.mkdir(parents=True)
    (config / "opencode.json").write_text(json.dumps(settings, indent=1))
    # At every start OpenCode installs @opencode-ai/plugin from the npm registry into each
    # config folder, in the background, unless the folder has node_modules and a
    # package.json and package-lock.json that already name it (1.18: no setting turns it
    # off). This says it is there; nothing loads it without a plugin configured.
    wanted = {"@opencode-ai/plugin": "*"}
    (config / "node_modules").mkdir()
    (config / "package.json").write_text(json.dumps({"dependencies": wanted}))
    (config / "package-lock.json").write_text(json.dumps(
        {"lockfileVersion": 3, "packages": {"": {"dependencies": wanted}}}))
    argv = [str(BIN / "opencode"), "run", "--model", MODEL["opencode"], "--format", "json",
            PROMPT]
    return Prepared(argv, env, workspace, reg)


HOSTS: dict[str, Prepare] = {"claude": claude, "codex": codex, "gemini": gemini,
                             "opencode": opencode}


def installed(name: str) -> bool:
    return shutil.which(name, path=str(BIN)) is not None
