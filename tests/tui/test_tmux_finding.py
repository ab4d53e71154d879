"""SPEC section 10 "Finding what waits": the real `clankie chat` in a real terminal (tmux),
started in a subdirectory of a bound workspace (it opens that conversation, saying so) and
in an unrelated directory (it says that it starts a new one)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.e2e.served import ROOT, Served
from tests.polling import eventually
from tests.tui.test_tmux import pytestmark, screen_shows, tmux

__all__ = ["pytestmark"]  # skipped, as there, where tmux is not installed


def chat_from(served: Served, directory: Path, session: str) -> str:
    """The screen of `clankie chat` started in `directory`, once it shows its notes."""
    env = {"CLANKIE_HOME": str(served.home.path), "PYTHONPATH": str(ROOT / "src"),
           "TERM": "xterm-256color"}
    command = " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), sys.executable,
                        "-m", "clankie", "chat"])
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "40", "-c", str(directory),
         "env " + command)
    return screen_shows(session, "Message Clankie")


def said(session: str, sentence: str) -> None:
    """Wait until the log says `sentence`, however the log wraps it (within a path too):
    the screen and the sentence compared without blanks and the log's borders."""
    def bare(text: str) -> str:
        return re.sub(r"[\s│]", "", text)

    eventually(lambda: bare(tmux("capture-pane", "-p", "-t", session)), f"{sentence!r} said",
               timeout=30, every=0.1, until=lambda screen: bare(sentence) in screen)


def test_finding_chat_in_a_subdirectory_opens_the_workspaces_conversation_else_a_new_one(
        tmp_path: Path):
    """Issue 31: `clankie chat` in `widget/src` silently created a second, empty
    conversation."""
    workspace = tmp_path / "widget"
    (workspace / "src").mkdir(parents=True)
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    served = Served.start(tmp_path / "home")
    sessions = [f"clankie-finding-{os.getpid()}-{n}" for n in (1, 2)]
    try:
        with served.client() as client:
            c = client.call("conversation_create", {"workspace": str(workspace)})[
                "conversation_id"]
        chat_from(served, workspace / "src", sessions[0])
        said(sessions[0], f"Opened conversation {c[:8]}, bound to {workspace}, a parent of "
                          "this directory.")
        chat_from(served, unrelated, sessions[1])
        said(sessions[1], f"No conversation is bound to {unrelated} or a parent of it: "
                          "started a new one")
        with served.client() as client:
            listed = client.call("conversation_list", {})["conversations"]
        assert sorted(x["workspace"]["path"] for x in listed) == sorted(
            [str(workspace), str(unrelated)])
    finally:
        for session in sessions:
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True,
                           timeout=30)
        served.stop()
