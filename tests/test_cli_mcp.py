"""`clankie mcp config CLIENT` (SPEC P2): the lines that register the bridge in a coding
agent's *user* configuration, with what each host needs so the tools run without a prompt
nobody sees; it writes no file and prints no token. In process, as the CLI's other
output tests."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

import pytest

from clankie.cli.common import USAGE
from clankie.cli.main import main

HOSTS = ("claude", "codex", "gemini", "opencode", "generic")


def config(host: str | None, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["mcp", "config", *([host] if host else [])]) == 0
    return capsys.readouterr().out


def block(text: str, opening: str) -> str:
    """The lines of `text` from the first that starts with `opening` to the next blank one."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(opening))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def test_p2_claude_code_gets_the_server_and_mcp__clankie_in_permissions_allow(
        capsys: pytest.CaptureFixture[str]):
    out = config("claude", capsys)
    assert "claude mcp add --scope user" in out and "CLANKIE_AGENT_TOKEN" in out
    settings = json.loads(block(out, "{"))
    assert "mcp__clankie" in settings["permissions"]["allow"]
    assert "--allowedTools mcp__clankie" in out


def test_p2_codex_gets_default_tools_approval_mode_approve(capsys: pytest.CaptureFixture[str]):
    out = config("codex", capsys)
    table = tomllib.loads(block(out, "[mcp_servers.clankie]"))["mcp_servers"]["clankie"]
    assert table["default_tools_approval_mode"] == "approve"
    assert table["args"] == ["mcp"] and "CLANKIE_AGENT_TOKEN" in table["env"]
    assert table["tool_timeout_sec"] > 30  # a wait holds up to 30 s
    # Codex leaves out an optional server not ready within 1 s (the bridge's start takes
    # longer): its tools would be missing from the model's first turn (docs/hosts.md).
    assert table["required"] is True


@pytest.mark.parametrize("host", HOSTS)
def test_p2_every_config_says_how_to_see_why_the_bridge_did_not_start(
        host: str, capsys: pytest.CaptureFixture[str]):
    """New-user trial: with the placeholder left in, Claude Code said only "Failed to
    connect"; the bridge's reason is on its standard error, which hosts do not show."""
    assert "run its command by hand" in config(host, capsys)


def test_p2_gemini_gets_trust_true(capsys: pytest.CaptureFixture[str]):
    out = config("gemini", capsys)
    server = json.loads(block(out, "{"))["mcpServers"]["clankie"]
    assert server["trust"] is True and server["args"] == ["mcp"]
    assert server["timeout"] > 30_000 and "CLANKIE_AGENT_TOKEN" in server["env"]
    assert "only in a folder you trust" in out  # new-user trial: else "Disabled"


def test_p2_opencode_gets_a_local_entry_with_a_timeout_above_30_s(
        capsys: pytest.CaptureFixture[str]):
    out = config("opencode", capsys)
    server = json.loads(block(out, "{"))["mcp"]["clankie"]
    assert server["type"] == "local" and server["command"][-1] == "mcp"
    assert server["timeout"] > 30_000 and "CLANKIE_AGENT_TOKEN" in server["environment"]


def test_p2_generic_names_the_command_and_the_variable(capsys: pytest.CaptureFixture[str]):
    out = config("generic", capsys)
    assert "mcp" in out and "CLANKIE_AGENT_TOKEN" in out and "stdio" in out
    assert out == config(None, capsys)  # generic is the default


@pytest.mark.parametrize("host", HOSTS)
def test_p2_config_writes_no_file_prints_no_token_and_names_the_limit(
        host: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """P2: prints only (the home folder and the working folder stay as they were), never a
    token (set or not), and says how to issue the agent's credential and the stated limit."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLANKIE_AGENT_TOKEN", "clk_secret-agent-token-value")
    monkeypatch.setenv("CLANKIE_TOKEN", "clk_secret-operator-token-value")
    before = sorted(os.walk(tmp_path))
    out = config(host, capsys)
    assert sorted(os.walk(tmp_path)) == before
    assert "secret" not in out
    assert "clankie credentials issue --kind agent" in out
    assert "operator token" in out  # the stated limit


def test_p2_an_unknown_client_is_a_usage_error(capsys: pytest.CaptureFixture[str]):
    assert main(["mcp", "config", "vim"]) == USAGE
    err = capsys.readouterr().err
    assert "claude, codex, gemini, opencode or generic" in err and "Traceback" not in err


def test_workspace_belongs_to_the_bridge_not_to_config(capsys: pytest.CaptureFixture[str]):
    assert main(["mcp", "--workspace", ".", "config", "codex"]) == USAGE
    assert "--workspace" in capsys.readouterr().err
