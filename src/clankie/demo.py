"""`clankie demo`: the whole question path, for real, in a temporary home, then cleaned up.

Owns only the scenario and its transcript. It starts a real `clankie serve` with the
scripted model in a temporary home, binds a conversation to a small generated project (a
Git repository with a pyproject.toml, no tests and a secret `.env`), sends a message,
lets Clankie look at the project with its read-only tools (the `.env` refused visibly)
and ask a choice question, shows and answers it with the real CLI, and prints the
continuation's reply that uses the answer. Offline; no key needed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clankie.client import Client

SCRIPT = {"turns": [
    [{"tool": "list_files", "args": {}},
     {"tool": "read_file", "args": {"path": "pyproject.toml"}},
     {"tool": "read_file", "args": {"path": ".env"}},
     {"say": "I looked first: the .env file stays private ({tool_result})."},
     {"tool": "git_status", "args": {}},
     {"say": "There is no tests/ folder yet and pyproject.toml names no test runner, so "
             "before I set up tests, one preference question."},
     {"ask": {"kind": "choice", "prompt": "Which test runner should this project use?",
              "options": [{"label": "pytest", "description": "plain asserts, fixtures"},
                          {"label": "unittest", "description": "standard library only"}],
              "allow_text": True}}],
    # Each run takes the next entry: the owner's "yes" is a chat message with a turn of
    # its own, so it gets one; the continuation after the answer gets the last.
    [{"say": "That was a chat message, not an answer: my question is still pending."}],
    [{"say": "Thanks. I will set up {answer} for this project (a preference, not a "
             "settings change)."}],
]}
PYPROJECT = """[project]
name = "demo-project"
version = "0.1.0"
dependencies = ["requests>=2"]
"""
READY = re.compile(r"clankie serving on unix://(\S+)")
DEADLINE_S = 30.0


def run_demo(out: Callable[[str], Any] = print) -> int:
    with tempfile.TemporaryDirectory(prefix="clankie-demo-") as tmp:
        root = Path(tmp)
        env = dict(os.environ, CLANKIE_HOME=str(root / "home"))
        for name in ("CLANKIE_URL", "CLANKIE_TOKEN", "CLANKIE_MODEL"):
            env.pop(name, None)
        repo = _repository(root / "project", out)
        (root / "script.json").write_text(json.dumps(SCRIPT))
        _clankie(env, "init")
        server = subprocess.Popen([sys.executable, "-m", "clankie", "serve", "--script",
                                   str(root / "script.json")], env=env, text=True,
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        try:
            socket = _ready(server)
            token = (root / "home" / "operator.token").read_text().strip()
            with Client(f"unix://{socket}", token) as client:
                _scenario(client, env, repo, out)
        finally:
            server.send_signal(signal.SIGTERM)
            server.communicate(timeout=DEADLINE_S)
    return 0


def _scenario(client: Client, env: dict[str, str], repo: Path, out: Callable[[str], Any]
              ) -> None:
    c = client.op("conversation_create", workspace=str(repo)).conversation_id
    client.op("project_register", root=str(repo), name="demo-project")
    fact = client.op("conversation_get", conversation_id=c).membership
    out(f"$ clankie conversations new --workspace {repo}\n{c}")
    out(f"  (project membership, read-only: {fact.status}; nothing was enrolled)")
    out("\nowner> Set up tests for this project, please.")
    sent = client.op("conversation_send", conversation_id=c,
                     text="Set up tests for this project, please.")
    _finished(client, sent.run_id)
    seen = _show_run(client, c, 0, out)

    out(f"\n$ clankie conversations questions {c[:8]}")
    out(_clankie(env, "conversations", "questions", c[:8]).rstrip())

    out("\nowner> yes      (ordinary chat text is never an answer)")
    client.op("conversation_send", conversation_id=c, text="yes")
    _settle(client, c)
    seen = _show_run(client, c, seen, out)
    snapshot = client.input_get(c)
    assert snapshot.pending is not None
    q = snapshot.pending
    out(f"  the question is still pending; the revision moved to {snapshot.revision}")

    args = ["conversations", "answer", c, q.request_id, "--incarnation",
            snapshot.incarnation, "--revision", str(snapshot.revision), "--option",
            q.options[0].option_id]
    out(f"\n$ clankie conversations answer {c[:8]} {q.request_id[:8]}... --revision "
        f"{snapshot.revision} --option {q.options[0].option_id[:8]}...   # 1. pytest")
    out(_clankie(env, *args).rstrip())
    receipt = client.input_get(c, q.request_id).request.receipt  # type: ignore[union-attr]
    _finished(client, receipt.run_id)
    _show_run(client, c, seen, out)
    out("\n$ the same answer again (a retry by a careful script):")
    out(_clankie(env, *args).rstrip())
    final = client.input_get(c, q.request_id).request.receipt  # type: ignore[union-attr]
    out(f"\nreceipt {final.receipt_id[:8]}...: {final.outcome}, continuation "
        f"{final.continuation}; one run, never two.")


def _repository(path: Path, out: Callable[[str], Any]) -> Path:
    """A small project: a package, its pyproject.toml, no tests, and a secret `.env` (Git
    ignores it; Clankie's deny list refuses it anyway)."""
    (path / "src" / "demo").mkdir(parents=True)
    (path / "README.md").write_text("# demo project\n")
    (path / "pyproject.toml").write_text(PYPROJECT)
    (path / "src" / "demo" / "__init__.py").write_text("def answer() -> int:\n    return 42\n")
    (path / ".env").write_text("API_KEY=demo-secret-never-shown\n")
    git = shutil.which("git")
    if git is None:
        out("(git is not installed: the demo project is a plain folder)")
        return path
    quiet = {"capture_output": True, "check": True, "cwd": path}
    (path / ".gitignore").write_text(".env\n")
    who = ["-c", "user.name=demo", "-c", "user.email=demo@example.invalid"]
    for args in (["init", "-q"], ["add", "."], [*who, "commit", "-qm", "First commit"]):
        subprocess.run([git, *args], **quiet)  # type: ignore[call-overload]
    (path / "README.md").write_text("# demo project\n\nWork in progress.\n")
    return path


def _clankie(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "clankie", *args], env=env, text=True,
                          capture_output=True, timeout=DEADLINE_S, stdin=subprocess.DEVNULL)
    return done.stdout + done.stderr


def _ready(server: subprocess.Popen[str]) -> str:
    assert server.stderr is not None
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        line = server.stderr.readline()
        if not line:
            break
        match = READY.search(line)
        if match:
            return match.group(1)
    raise RuntimeError("clankie serve did not start")


def _finished(client: Client, run_id: str | None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while run_id and client.op("run_get", run_id=run_id).status in ("queued", "running"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} did not finish")
        time.sleep(0.05)


def _settle(client: Client, c: str) -> None:
    """Wait until no run of the conversation is queued or running."""
    events = client.op("events_tail", conversation_id=c, limit=500).events
    for run_id in {e["run_id"] for e in events if e["type"] == "run_status"}:
        _finished(client, run_id)


def _show_run(client: Client, c: str, after: int, out: Callable[[str], Any]) -> int:
    """Print what Clankie looked at and said since event `after`; the last event seen."""
    page = client.op("events_tail", conversation_id=c, after=after, limit=500)
    for e in page.events:
        if e["type"] == "tool_activity":
            out(f"  [{e['tool']}] {e['summary']}")
        elif e["type"] == "message" and e["author"] == "clankie":
            out(f"clankie> {e['text']}")
    return page.next_after
