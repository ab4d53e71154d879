"""What the `clankie` command imports on its light paths (issue 19): `--version` loads none
of the CLI's libraries, and `--help` of a command loads neither the service's nor the TUI's.

Each case runs the command in a fresh interpreter with `-X importtime` and reads the names
of the modules it imported; the assertions are about names, never about time.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from clankie import __version__

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = Path(sys.executable).parent / "clankie"


def imported(*command: str, env: dict[str, str] | None = None) -> tuple[str, set[str]]:
    """The command's stdout and the top-level-or-dotted names of every module it imported."""
    done = subprocess.run([sys.executable, "-X", "importtime", *command], capture_output=True,
                          text=True, timeout=60, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src"), **(env or {})))
    assert done.returncode == 0, done.stderr[-2000:]
    names = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
             if line.startswith("import time:") and line.count("|") == 2}
    assert "clankie" in names, "importtime lines were not read"
    return done.stdout, names


def loaded(names: set[str], package: str) -> bool:
    return any(n == package or n.startswith(package + ".") for n in names)


HEAVY_FOR_VERSION = ("typer", "click", "httpx", "pydantic", "textual", "rich", "clankie.cli.main",
                     "clankie.store", "clankie.dto", "clankie.client")
HEAVY_FOR_HELP = ("typer", "pydantic", "rich", "httpx", "textual", "fastapi", "uvicorn",
                  "clankie.store", "clankie.dto", "clankie.agent", "clankie.service",
                  "clankie.client", "clankie.tui", "mcp", "mcp_types", "clankie.bridge.server")


@pytest.mark.parametrize("command", [["-m", "clankie"], ["-m", "clankie.cli.entry"]])
def test_version_prints_the_version_and_imports_no_cli_library(command: list[str]):
    """Issue 19: `clankie --version` answers without typer, httpx, pydantic or the store."""
    out, names = imported(*command, "--version")
    assert out.strip() == f"clankie {__version__}"
    assert [p for p in HEAVY_FOR_VERSION if loaded(names, p)] == []


def test_the_installed_clankie_script_takes_the_light_entry():
    """The console script of pyproject.toml is `clankie.cli.entry:main`."""
    assert SCRIPT.exists(), SCRIPT
    text = SCRIPT.read_text()
    assert "clankie.cli.entry" in text, text
    done = subprocess.run([str(SCRIPT), "--version"], capture_output=True, text=True,
                          timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, f"clankie {__version__}")


def test_anything_else_goes_to_the_full_cli():
    """Any other words are the full CLI's (click): `--help` lists the commands."""
    out, names = imported("-m", "clankie", "--help")
    assert "conversations" in out and loaded(names, "click")


@pytest.mark.parametrize("words", [["conversations", "list", "--help"], ["mcp", "--help"],
                                   ["conversations", "questions", "--help"],
                                   ["chat", "--help"], ["--help"],
                                   ["service", "install", "--help"]])
def test_help_imports_neither_the_service_the_store_the_tui_nor_httpx(words: list[str]):
    """Issue 19: help loads click and nothing of the service, the store, the agent, the DTOs,
    the TUI or the HTTP client; nor Typer, pydantic or Rich (the CLI is plain click)."""
    out, names = imported("-m", "clankie", *words)
    assert "Usage" in out
    assert [p for p in HEAVY_FOR_HELP if loaded(names, p)] == []


def test_p2_mcp_config_imports_neither_the_mcp_sdk_nor_the_client():
    """`clankie mcp config` prints lines: the SDK (about a second to import) and the client
    stay unloaded; only `clankie mcp` itself serves, and loads them."""
    out, names = imported("-m", "clankie", "mcp", "config", "codex")
    assert "[mcp_servers.clankie]" in out
    assert [p for p in HEAVY_FOR_HELP if loaded(names, p)] == []
