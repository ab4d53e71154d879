"""A real `clankie serve` process in a temporary home, for end-to-end tests.

`Served.start` runs `clankie init` and `clankie serve --tcp 127.0.0.1:0` as subprocesses
and waits (with a deadline) for the ready line; `stop` sends a signal and waits for a clean
exit. Until the agent runtime exists, `Clankie` plays the agent's part on the same store
from the test process (claim a run, call `ask_question`), as the executor will.
"""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clankie.client import Client
from clankie.core.model import RunStatus
from clankie.home import Home
from clankie.service import Service
from clankie.store import Store

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"clankie serving on (unix://\S+)(?: and (http://\S+))?")


def clankie(*args: str, home: Path, timeout: float = 60,
            **kwargs: Any) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, CLANKIE_HOME=str(home), PYTHONPATH=str(ROOT / "src"))
    env.pop("CLANKIE_URL", None)
    env.pop("CLANKIE_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "clankie", *args], env=env, text=True,
                          capture_output=True, timeout=timeout, cwd=ROOT, **kwargs)


@dataclass
class Served:
    home: Home
    proc: subprocess.Popen[str]
    tcp_url: str
    log: list[str] = field(default_factory=list)

    @classmethod
    def start(cls, home_path: Path, *extra: str, init: bool = True,
              env: dict[str, str] | None = None) -> Served:
        if init:
            done = clankie("init", home=home_path)
            assert done.returncode == 0, done.stderr
        env = dict(os.environ, CLANKIE_HOME=str(home_path), PYTHONPATH=str(ROOT / "src"),
                   **(env or {}))
        proc = subprocess.Popen([sys.executable, "-m", "clankie", "serve", "--tcp",
                                 "127.0.0.1:0", *extra], env=env, cwd=ROOT, text=True,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        log: list[str] = []
        deadline = time.monotonic() + 30
        assert proc.stderr is not None
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 0.5)
            if ready:
                line = proc.stderr.readline()
                if not line:
                    break
                log.append(line)
                match = READY.search(line)
                if match:
                    served = cls(Home(home_path), proc, match.group(2), log)
                    threading.Thread(target=served._drain, daemon=True).start()
                    return served
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError("clankie serve did not become ready:\n" + "".join(log))

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)

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
        return self.proc.returncode


class Clankie:
    """Plays the agent's part on the served store: starts runs in order and asks."""

    def __init__(self, home: Home) -> None:
        self.service = Service(Store(home.store))

    def close(self) -> None:
        self.service.store.close()

    def ask(self, conversation_id: str, client: Client, args: dict[str, Any]) -> str:
        sent = client.call("conversation_send", {"conversation_id": conversation_id,
                                                 "text": "please ask"})
        for _ in range(100):
            run = self.service.claim_next_run(conversation_id)
            assert run is not None
            if run.run_id == sent["run_id"]:
                break
            self.service.finish_run(run.run_id, RunStatus.SUCCEEDED)
        result = self.service.ask_question(run.run_id, args)
        assert result.status == "pending", result
        self.service.finish_run(run.run_id, RunStatus.SUCCEEDED)
        assert result.request_id is not None
        return result.request_id


def wait_for(predicate: Any, what: str, timeout: float = 20) -> Any:
    """Poll `predicate` until it returns something truthy, within a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def run_status(client: Client, run_id: str) -> dict[str, Any]:
    return client.call("run_get", {"run_id": run_id})


def finished(client: Client, run_id: str, timeout: float = 20) -> dict[str, Any]:
    """The run once it has finished (succeeded, failed or cancelled)."""
    return wait_for(lambda: (lambda r: r if r["status"] in ("succeeded", "failed", "cancelled")
                             else None)(run_status(client, run_id)),
                    f"run {run_id} to finish", timeout)
