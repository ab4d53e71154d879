"""`clankie demo`: the whole question path, for real, in a temporary home, then cleaned up.

Owns only the scenario and its transcript: one story, "set up tests for this project". It
starts a real `clankie serve` with the scripted model in a temporary home and, with the
real CLI, printed as run: binds a conversation to a small generated project (a Git
repository with a pyproject.toml, no tests and a secret `.env`), asks Clankie to set up
tests; Clankie looks at the project with its read-only tools (the `.env` refused visibly)
and asks which test runner; a chat "yes" is not an answer; the answer is given with
`--choice 1` and short IDs, and Clankie's reply uses it; the same answer again changes
nothing. Offline; no key needed.
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

from clankie import dto
from clankie.client import Client
from clankie.core.vocabulary import Author

SCRIPT = {"turns": [
    [{"tool": "list_files", "args": {}},
     {"tool": "read_file", "args": {"path": "pyproject.toml"}},
     {"tool": "read_file", "args": {"path": ".env"}},
     {"say": "I read pyproject.toml; the .env file stays private: {tool_summary}."},
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
    """One story, every step of the owner a real `clankie` command printed as it runs:
    ask Clankie to set up tests; it looks at the project and asks which test runner; a chat
    "yes" is not an answer; the answer `questions` suggests is accepted and Clankie goes on
    with it; the same answer sent again is not applied twice."""
    def run(*args: str) -> str:
        out("\n$ clankie " + " ".join(_quoted(a) for a in args))
        said = _clankie(env, *args).rstrip()
        out(said)
        return said

    c = run("conversations", "new", "--workspace", str(repo)).splitlines()[-1].strip()
    short = c[:8]  # every ID may be given by a unique prefix of at least 4 hex characters
    run("conversations", "send", short, "Set up tests for this project, please.")
    _settle(client, c)
    seen = _show_run(client, c, 0, out)

    run("conversations", "questions", short)

    run("conversations", "send", short, "yes")
    out("  (ordinary chat text is never an answer)")
    _settle(client, c)
    seen = _show_run(client, c, seen, out)
    snapshot = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
    assert snapshot.pending is not None
    q = snapshot.pending
    out(f"  the question is still pending; the revision moved to {snapshot.revision}")

    answer = ("conversations", "answer", short, q.request_id[:8], "--incarnation",
              snapshot.incarnation[:8], "--revision", str(snapshot.revision), "--choice", "1")
    run(*answer)
    _settle(client, c)
    _show_run(client, c, seen, out)
    out("\nThe same answer again, as a careful script retries it (with the whole IDs it "
        "keeps):")
    run("conversations", "answer", c, q.request_id, "--incarnation", snapshot.incarnation,
        "--revision", str(snapshot.revision), "--choice", "1")
    asked = client.op(dto.INPUT_GET,
                      dto.InputGet(conversation_id=c, request_id=q.request_id)).request
    assert asked is not None and asked.receipt is not None
    final = asked.receipt
    out(f"\nreceipt {final.receipt_id[:8]}: {final.outcome} with {q.options[0].label}, "
        f"continuation {final.continuation}; one run, never two.")


def _quoted(arg: str) -> str:
    return f'"{arg}"' if " " in arg else arg


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
    while run_id and client.op(dto.RUN_GET,
                               dto.RunRef(run_id=run_id)).status in ("queued", "running"):
        if time.monotonic() > deadline:
            raise RuntimeError(f"run {run_id} did not finish")
        time.sleep(0.05)


def _settle(client: Client, c: str) -> None:
    """Wait until no run of the conversation is queued or running."""
    events = client.op(dto.EVENTS_TAIL, dto.EventsTail(conversation_id=c, limit=500)).events
    for run_id in {e.run_id for e in events if isinstance(e, dto.RunStatusEvent)}:
        _finished(client, run_id)


def _show_run(client: Client, c: str, after: int, out: Callable[[str], Any]) -> int:
    """Print what Clankie looked at and said since event `after`; the last event seen."""
    page = client.op(dto.EVENTS_TAIL, dto.EventsTail(conversation_id=c, after=after, limit=500))
    for e in page.events:
        if isinstance(e, dto.ToolActivityEvent):
            out(f"  [{e.tool}] {e.summary}")
        elif isinstance(e, dto.MessageEvent) and e.author == Author.CLANKIE:
            out(f"clankie> {e.text}")
    return page.next_after
