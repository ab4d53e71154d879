"""A real `clankie serve` process in a temporary home, for end-to-end tests.

`Served.start` runs `clankie init` (in this process, through click's runner: the same
command, without a second Python start-up per test) and `clankie serve --tcp 127.0.0.1:0` as
a subprocess, and waits (with a deadline) for the ready line; `stop` sends a signal and
waits for a clean exit. By default the scripted model asks `ASK` in every run (a run
finding a question already pending is refused, as a tool result). `ask` sends a message and
waits for the question; `settle` waits until no run of a conversation is queued or running,
because a finishing run moves the revision (an answer read before it would be stale, by
design).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clankie import dto
from clankie.client import Client
from clankie.home import Home
from tests.polling import eventually

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"clankie serving on (unix://\S+)(?: and (http://\S+))?")
WEB = re.compile(r"the phone page on (http://\S+)")
ASK = {"kind": "choice", "prompt": "Tabs or spaces?", "allow_text": True,
       "options": [{"label": "tabs", "description": "one per level"}, {"label": "spaces"}]}
DEFAULT_SCRIPT: dict[str, Any] = {"turns": [[{"ask": ASK}]] * 500}


def clankie(*args: str, home: Path, timeout: float = 60, env_extra: dict[str, str] | None = None,
            cwd: Path = ROOT, program: list[str] | None = None, **kwargs: Any
            ) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess (`program`: what runs instead of `python -m clankie`, with
    the same environment: a shell that prepares the directory first)."""
    env = dict(os.environ, CLANKIE_HOME=str(home), PYTHONPATH=str(ROOT / "src"))
    env.pop("CLANKIE_URL", None)
    env.pop("CLANKIE_TOKEN", None)
    env.update(env_extra or {})
    argv = program if program is not None else [sys.executable, "-m", "clankie"]
    return subprocess.run([*argv, *args], env=env, text=True,
                          capture_output=True, timeout=timeout, cwd=cwd, **kwargs)


def init_home(home: Path) -> None:
    """`clankie init` for `home`, the CLI's own command run in this process (about 15 ms
    instead of a subprocess's 0.5 s); the environment is the one `clankie()` gives a child.
    The command itself, as a subprocess, is tested in test_cli.py and test_home_*.py."""
    from click.testing import CliRunner

    from clankie.cli.main import app

    env: dict[str, str | None] = {"CLANKIE_HOME": str(home), "CLANKIE_URL": None,
                                  "CLANKIE_TOKEN": None}
    done = CliRunner().invoke(app, ["init"], env=env)
    assert done.exit_code == 0 and done.exception is None, (done.output, done.exception)


class LineReader:
    """Lines of a child's pipe, read on a thread (select() on a buffered pipe loses lines)."""

    def __init__(self, pipe: Any) -> None:
        self.seen: list[str] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._pipe = pipe
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        for line in self._pipe:
            self.seen.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def all_lines(self, timeout: float) -> list[str]:
        """Every line, once the pipe has closed (the child has exited)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the pipe did not close"
        return list(self.seen)

    def until(self, wanted: Any, timeout: float) -> str:
        """The first line (from now on) for which `wanted(line)` holds, within `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"no such line in {self.seen!r}"
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            assert line is not None, f"the pipe closed; lines: {self.seen!r}"
            if wanted(line):
                return line


@dataclass
class Served:
    home: Home
    proc: subprocess.Popen[str]
    tcp_url: str
    log: list[str] = field(default_factory=list)
    reader: LineReader | None = None

    @classmethod
    def start(cls, home_path: Path, *extra: str, init: bool = True,
              env: dict[str, str] | None = None,
              script: dict[str, Any] | None = DEFAULT_SCRIPT,
              preexec: Callable[[], None] | None = None) -> Served:
        if init:
            init_home(home_path)
        if script is not None:
            path = home_path / "script.json"
            path.write_text(json.dumps(script))
            extra = ("--script", str(path), *extra)
        env = {**os.environ, "CLANKIE_HOME": str(home_path), "PYTHONPATH": str(ROOT / "src"),
               **(env or {})}  # `env` may replace PYTHONPATH too (tests/hosts)
        proc = subprocess.Popen([sys.executable, "-m", "clankie", "serve", "--tcp",
                                 "127.0.0.1:0", *extra], env=env, cwd=ROOT, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, preexec_fn=preexec)
        lines = LineReader(proc.stderr)
        try:
            line = lines.until(lambda text: READY.search(text) is not None, 30)
        except AssertionError:
            proc.kill()
            proc.wait(timeout=10)
            raise AssertionError("clankie serve did not become ready:\n" +
                                 "".join(lines.seen)) from None
        match = READY.search(line)
        assert match is not None
        return cls(Home(home_path), proc, match.group(2), lines.seen, lines)

    @property
    def web_url(self) -> str:
        """The `--web` listener's address (SPEC H1), from the ready line."""
        found = next(m for line in self.log if (m := WEB.search(line)))
        return found.group(1)

    def client(self, token: str | None = None, url: str | None = None) -> Client:
        return Client(url or f"unix://{self.home.socket}",
                      token or self.home.token_file.read_text().strip())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                raise AssertionError("clankie serve did not stop in time") from None
        if self.reader is not None and self.proc.stderr is not None:
            self.reader.all_lines(10)
            self.proc.stderr.close()
        return self.proc.returncode


ENDED = ("succeeded", "failed", "cancelled")  # a run's statuses once it has finished


def run_status(client: Client, run_id: str) -> dict[str, Any]:
    return client.call("run_get", {"run_id": run_id})


def finished(client: Client, run_id: str, timeout: float = 20) -> dict[str, Any]:
    """The run once it has finished (succeeded, failed or cancelled)."""
    return eventually(lambda: run_status(client, run_id), f"run {run_id} to finish",
                      timeout=timeout, every=0.02,
                      until=lambda r: r["status"] in ENDED)


def settle(client: Client, conversation_id: str, timeout: float = 20) -> None:
    """Wait until no run of the conversation is queued or running."""
    def unfinished() -> set[str]:
        events = client.call("events_tail", {"conversation_id": conversation_id,
                                             "limit": 500})["events"]
        status: dict[str, str] = {}
        for e in events:
            if e["type"] == "run_status":
                status[e["run_id"]] = e["status"]
        return {r for r, s in status.items() if s in ("queued", "running")}

    eventually(unfinished, f"the runs of {conversation_id} to finish", timeout=timeout,
               every=0.02, until=lambda runs: not runs)


def ask(client: Client, conversation_id: str, text: str = "please ask") -> str:
    """Send a message; the scripted run asks; return the pending request once settled."""
    client.call("conversation_send", {"conversation_id": conversation_id, "text": text})
    settle(client, conversation_id)
    pending = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=conversation_id)).pending
    assert pending is not None, "no question was asked"
    return pending.request_id
