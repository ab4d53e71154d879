"""`clankie mcp` as a coding agent's host runs it, for end-to-end tests (SPEC section 13).

Three ways in, all spawning the bridge as a subprocess of this worktree's code
(`sys.executable -m clankie`, `PYTHONPATH` = this `src`) with only the environment a host
gives it (no `CLANKIE_TOKEN`, no `CLANKIE_URL` unless a test sets one):

- `connect`: the `mcp` SDK's own client over stdio (`mcp.Client` on `stdio_client`), in
  either protocol era: `"legacy"` is the `initialize` handshake (2025-11-25), `"auto"`
  negotiates `server/discover` (2026-07-28). Its stderr goes to a file the test reads.
- `RawBridge`: JSON-RPC lines written and read by hand, to see every byte of standard
  output, to send `notifications/cancelled` for a chosen request, and to SIGKILL it.
- `run_bridge`: the command run to its end, for the refusals at start (exit 2).

Every process is stopped by the context manager or `close` that made it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, Implementation

ROOT = Path(__file__).resolve().parents[2]
HOST = "test-host"  # the clientInfo.name every test client gives


def bridge_env(home: Path, token: str | None, **extra: str) -> dict[str, str]:
    """What a host gives the bridge: its own PATH and HOME, the clankie home, the agent
    token; nothing else of this process's environment."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""),
           "PYTHONPATH": str(ROOT / "src"), "CLANKIE_HOME": str(home)}
    if token is not None:
        env["CLANKIE_AGENT_TOKEN"] = token
    env.update(extra)
    return env


def bridge_args(workspace: Path | None) -> list[str]:
    return ["-m", "clankie", "mcp", *(["--workspace", str(workspace)] if workspace else [])]


@asynccontextmanager
async def connect(home: Path, token: str | None, workspace: Path | None, stderr: Path, *,
                  mode: str = "legacy", client: str = HOST, cwd: Path = ROOT,
                  read_timeout_s: float | None = None,
                  env: dict[str, str] | None = None,
                  **options: Any) -> AsyncIterator[Client]:
    """The SDK's client, connected to a new bridge; the bridge's stderr goes to `stderr`.
    `options` go to the client as they are (an `elicitation_callback`, say)."""
    params = StdioServerParameters(command=sys.executable, args=bridge_args(workspace),
                                   env=bridge_env(home, token, **(env or {})), cwd=cwd)
    with stderr.open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode=mode,  # type: ignore[arg-type]
                          client_info=Implementation(name=client, version="1.0"),
                          read_timeout_seconds=read_timeout_s, **options) as session:
            yield session


def structured(result: CallToolResult) -> dict[str, Any]:
    """A tool result's structured content, after checking P4's shape: one text content,
    the note followed by the compact JSON of the structured content."""
    content = result.structured_content
    assert isinstance(content, dict), result
    assert len(result.content) == 1, result.content
    text = result.content[0]
    assert text.type == "text", text
    compact = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
    assert text.text == f"{content['note']} {compact}", text.text
    return content


class RawBridge:
    """The bridge driven by hand: JSON-RPC lines in, every line of stdout kept."""

    def __init__(self, home: Path, token: str | None, workspace: Path | None, *,
                 cwd: Path = ROOT, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *bridge_args(workspace)], env=bridge_env(home, token, **(env or {})),
            cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, encoding="utf-8")
        self.lines: list[str] = []
        self.stderr: list[str] = []
        self._out: queue.Queue[str | None] = queue.Queue()
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for thread in self._threads:
            thread.start()
        self._next_id = 1

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            self._out.put(line)
        self._out.put(None)

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()

    def write(self, line: str) -> None:
        """One line as it is, JSON or not."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def next_message(self, timeout: float = 30) -> dict[str, Any]:
        """The next line of stdout not yet read by `response`, as JSON, within `timeout` s."""
        try:
            line = self._out.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line in {timeout} s: {self.lines!r}") from None
        assert line is not None, f"stdout closed; stderr: {''.join(self.stderr)}"
        return dict(json.loads(line))

    def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request; its id."""
        request_id, self._next_id = self._next_id, self._next_id + 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method,
                   **({"params": params} if params is not None else {})})
        return request_id

    def response(self, request_id: int, timeout: float = 30) -> dict[str, Any]:
        """The response to `request_id`, within `timeout` s (other lines are kept)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no response to {request_id} in {timeout} s: {self.lines!r}"
            try:
                line = self._out.get(timeout=left)
            except queue.Empty:
                continue
            assert line is not None, f"stdout closed; stderr: {''.join(self.stderr)}"
            message = json.loads(line)
            if message.get("id") == request_id:
                return dict(message)

    def call(self, method: str, params: dict[str, Any] | None = None,
             timeout: float = 30) -> dict[str, Any]:
        return self.response(self.request(method, params), timeout)

    def initialize(self) -> dict[str, Any]:
        reply = self.call("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": HOST, "version": "1.0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def tool(self, name: str, arguments: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
        """A tool's result (`structuredContent`, `isError`, `content`)."""
        reply = self.call("tools/call", {"name": name, "arguments": arguments}, timeout)
        assert "result" in reply, reply
        return dict(reply["result"])

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self, timeout: float = 10) -> int:
        """Close stdin (the host's way to stop it) and wait; killed if it does not end."""
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError("clankie mcp did not end when its stdin closed") from None
        for thread in self._threads:
            thread.join(10)
        return code


def run_bridge(home: Path, token: str | None, workspace: Path | None, *, cwd: Path = ROOT,
               env: dict[str, str] | None = None,
               timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`clankie mcp` with nothing on stdin, run to its end (the refusals at start)."""
    return subprocess.run([sys.executable, *bridge_args(workspace)], cwd=cwd,
                          env=bridge_env(home, token, **(env or {})), text=True,
                          capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
