"""The real `clankie chat` in a real terminal (tmux): a question answered end to end, and
one cancelled from the CLI shown as ended."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clankie import dto
from tests.e2e.served import ROOT, Served
from tests.polling import eventually
from tests.tui.test_chat import SCRIPT

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (.ci/run installs it)")


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout


def screen_shows(session: str, text: str, timeout: float = 30) -> str:
    return eventually(lambda: tmux("capture-pane", "-p", "-t", session), f"{text!r} to show",
                      timeout=timeout, every=0.1, until=lambda screen: text in screen)


PLACEHOLDER = "Message Clankie, or /question"  # shown only while the input line is empty


def type_line(session: str, text: str) -> None:
    """Type `text` and Enter as a person would: each step once the screen shows the one
    before (keys sent within a millisecond of each other can reach Textual's Input in
    another order than sent: an Enter then counts the next line's first keys as its own)."""
    tmux("send-keys", "-t", session, "-l", text)
    eventually(lambda: tmux("capture-pane", "-p", "-t", session), f"{text!r} typed",
               timeout=30, every=0.05, until=lambda screen: PLACEHOLDER not in screen)
    tmux("send-keys", "-t", session, "Enter")
    screen_shows(session, PLACEHOLDER)


@contextmanager
def chat_in_tmux(tmp_path: Path) -> Iterator[tuple[Served, str, dict[str, str]]]:
    """`clankie chat` on a new workspace in a tmux session, against a real `clankie
    serve`; both stopped after."""
    served = Served.start(tmp_path / "home", script=SCRIPT)
    session = f"clankie-test-{os.getpid()}"
    workspace = tmp_path / "project"
    workspace.mkdir()
    env = {"CLANKIE_HOME": str(served.home.path), "PYTHONPATH": str(ROOT / "src"),
           "TERM": "xterm-256color"}
    command = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), sys.executable,
                        "-m", "clankie", "chat", "--workspace", shlex.quote(str(workspace))])
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", "env " + command)
    try:
        screen_shows(session, "Message Clankie")
        yield served, session, env
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True,
                       timeout=30)
        served.stop()


def test_clankie_chat_in_tmux_answers_a_question(tmp_path: Path):
    with chat_in_tmux(tmp_path) as (served, session, _):
        screen_shows(session, "model scripted (offline)")  # the header
        type_line(session, "Set up tests, please.")
        screen_shows(session, "Clankie asked a question")
        type_line(session, "/question")
        screen_shows(session, "2. spaces")
        type_line(session, "/question answer 2")
        screen_shows(session, "clankie: You chose spaces.")
        screen_shows(session, "That question ended: answered with spaces")
        with served.client() as client:
            conversation = client.call("conversation_list")["conversations"][0]
            events = client.call("events_tail", {"conversation_id":
                                                 conversation["conversation_id"],
                                                 "limit": 500})["events"]
            request_id = next(e["request_id"] for e in events
                              if e["type"] == "input_requested")
            receipt = client.op(dto.INPUT_GET,
                                dto.InputGet(conversation_id=conversation["conversation_id"],
                                             request_id=request_id)).request.receipt
        assert receipt.outcome == "answered" and receipt.continuation == "succeeded"
        tmux("send-keys", "-t", session, "C-q")
        eventually(lambda: _alive(session), "clankie chat to quit on Ctrl+Q", timeout=20,
                   every=0.1, until=lambda alive: not alive)


def test_clankie_chat_in_tmux_shows_a_question_cancelled_from_the_cli_as_ended(
        tmp_path: Path):
    """SPEC section 10 "Operator TUI": a question that ended, by any surface, is shown as
    ended at once, never with live options (issue 19: after `cancel-question` from the CLI
    the panel kept its options and "Answer with /question answer N")."""
    with chat_in_tmux(tmp_path) as (served, session, env):
        type_line(session, "Set up tests, please.")
        screen_shows(session, "Clankie asked a question")
        type_line(session, "/question")  # as in the issue (the panel shows it anyway)
        screen_shows(session, "2. spaces")
        # the panel and the status line are drawn in separate refreshes: wait for both
        screen_shows(session, "question pending, expires in 23 h")
        with served.client() as client:
            c = client.call("conversation_list")["conversations"][0]["conversation_id"]
            snapshot = client.call("input_get", {"conversation_id": c})
        cancelled = subprocess.run(
            [sys.executable, "-m", "clankie", "conversations", "cancel-question", c,
             snapshot["pending"]["request_id"], "--incarnation", snapshot["incarnation"],
             "--revision", str(snapshot["revision"])],
            env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
        assert cancelled.returncode == 0, cancelled.stderr
        screen_shows(session, "That question ended: cancelled (explicit)")
        # once the screen has settled on "no question", no live option is left on it
        eventually(lambda: tmux("capture-pane", "-p", "-t", session),
                   "the panel and the status line to show the question ended", timeout=30,
                   every=0.1, until=lambda screen: "| no question |" in screen
                   and "/question answer" not in screen and "2. spaces" not in screen)


def _alive(session: str) -> bool:
    return subprocess.run(["tmux", "has-session", "-t", session], capture_output=True,
                          timeout=30).returncode == 0
