"""Text from others through the real CLI (SPEC section 10, "Text from others"): a model's
escape sequences and markup, in a message, a question's prompt and options, a tool's
name and summary, a file name, a workspace path and a room message, reach the terminal
as visible text, never raw; `--json` stays the service's JSON with nothing raw in it."""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clankie import dto
from tests.e2e.served import ROOT, LineReader, Served, settle
from tests.e2e.test_cli import answer_args, cli, ok_json

# Clear the screen, write the clipboard (OSC 52), overwrite the line, C1 CSI, backspace,
# and a right-to-left override: each would act on a terminal if printed raw.
ESCAPES = "\x1b[2J\x1b]52;c;ZXZpbA==\x07\rX\x9b31m\x08\u202eRLO\u202c"
SHOWN = r"\x1b[2J\x1b]52;c;ZXZpbA==\x07\x0dX\x9b31m\x08\u202eRLO\u202c"
MARKUP = "[bold]b[/] [@click=app.quit]q[/] [link=file:///etc]l[/]"
HOSTILE = ESCAPES + MARKUP
FILE = "f\x1b[2J\x9b1m\u202e[bold]n.txt"  # a file name cannot hold "/"
FILE_SHOWN = r"f\x1b[2J\x9b1m\u202e[bold]n.txt"
TOOL = "no\x1b[2J[@click=app.quit]t[/]"
TOOL_SHOWN = r"no\x1b[2J[@click=app.quit]t[/]"
ASK = {"kind": "choice", "prompt": "ask " + HOSTILE, "allow_text": True,
       "options": [{"label": "lab " + HOSTILE, "description": "desc " + ESCAPES},
                   {"label": "plain"}]}
SCRIPT = {"turns": [[{"say": "msg " + HOSTILE},
                     {"tool": "read_file", "args": {"path": FILE}},
                     {"tool": TOOL, "args": {}},
                     {"ask": ASK}],
                    [{"say": "got {answer}"}]] + [[{"say": "ok"}]] * 20}
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def shown_safely(output: str, *expected: str) -> None:
    assert not RAW.search(output), output
    for text in expected:
        assert text in output, (text, output)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = Served.start(tmp_path_factory.mktemp("others") / "home", script=SCRIPT)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / ("ws\x1b[2J\x9b1m\u202e" + MARKUP.replace("/", "|"))
    path.mkdir()
    (path / FILE).write_text("one line\n")
    return path


@pytest.fixture
def asked(served: Served, workspace: Path) -> str:
    """A conversation whose first run said, used tools and asked, all of it hostile."""
    with served.client() as client:
        c = str(client.op(dto.CONVERSATION_CREATE,
                          dto.ConversationCreate(workspace=str(workspace))).conversation_id)
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
        settle(client, c)
    return c


def test_text_from_others_in_events_a_message_a_tool_and_a_question_are_visible(
        served: Served, asked: str):
    done = cli(served, "conversations", "events", asked)
    assert done.returncode == 0, done.stderr
    shown_safely(done.stdout + done.stderr,
                 f"clankie: msg {SHOWN}{MARKUP}",
                 f"tool read_file ok: read {FILE_SHOWN} lines 1-1 of 1",
                 f"tool {TOOL_SHOWN} refused unknown_tool",
                 f"asked: ask {SHOWN}{MARKUP} [lab {SHOWN}{MARKUP} | plain]")


def test_text_from_others_in_a_question_prompt_and_options_are_visible(
        served: Served, asked: str):
    done = cli(served, "conversations", "questions", asked)
    assert done.returncode == 0, done.stderr
    shown_safely(done.stdout + done.stderr, f"  ask {SHOWN}{MARKUP}\n",
                 f"  1. lab {SHOWN}{MARKUP} - desc {SHOWN}\n", "  2. plain\n")


def test_text_from_others_reach_a_real_terminal_visible(served: Served, asked: str):
    """click strips some escape sequences when writing to a pipe, never to a terminal."""
    output = _in_a_terminal(served, "conversations", "questions", asked)
    shown_safely(output.replace("\r\n", "\n"), f"  ask {SHOWN}{MARKUP}\n",
                 f"  1. lab {SHOWN}{MARKUP} - desc {SHOWN}\n")
    events = _in_a_terminal(served, "conversations", "events", asked)
    shown_safely(events.replace("\r\n", "\n"), f"clankie: msg {SHOWN}{MARKUP}\n",
                 f"read {FILE_SHOWN} lines")


def test_text_from_others_json_is_the_services_object_with_nothing_raw(
        served: Served, asked: str):
    done = cli(served, "conversations", "questions", asked, "--json")
    assert done.returncode == 0
    shown_safely(done.stdout)
    with served.client() as client:
        assert json.loads(done.stdout) == client.call("input_get", {"conversation_id": asked})
    events = cli(served, "conversations", "events", asked, "--json")
    shown_safely(events.stdout)
    said = [e["text"] for e in json.loads(events.stdout)["events"]
            if e["type"] == "message" and e["author"] == "clankie"]
    assert said == ["msg " + HOSTILE]


def test_text_from_others_workspace_paths_in_list_and_show_are_visible(
        served: Served, asked: str, workspace: Path):
    path = str(workspace.resolve())
    escaped = path.replace("\x1b", r"\x1b").replace("\x9b", r"\x9b").replace(
        "\u202e", r"\u202e")
    shown_safely(cli(served, "conversations", "list").stdout, escaped)
    shown_safely(cli(served, "conversations", "show", asked).stdout, f"workspace: {escaped}")


def test_text_from_others_an_answer_and_the_reply_with_it_are_visible(
        served: Served, asked: str):
    snap = ok_json(served, "conversations", "questions", asked)
    r = snap["pending"]["request_id"]
    done = cli(served, *answer_args(asked, r, snap), "--text", "mine " + HOSTILE)
    assert done.returncode == 0, done.stderr
    with served.client() as client:
        settle(client, asked)
    receipt = cli(served, "conversations", "questions", asked, "--request", r)
    shown_safely(receipt.stdout, "answer: text 'mine ", MARKUP)
    events = cli(served, "conversations", "events", asked)
    shown_safely(events.stdout, f"clankie: got mine {SHOWN}{MARKUP}")


def test_text_from_others_a_room_message_is_visible_and_so_is_follow(served: Served,
                                                                     asked: str):
    with served.client() as client:
        room = client.call("conversation_create", {"kind": "room"})["conversation_id"]
        client.call("room_post", {"conversation_id": room, "text": "room " + HOSTILE})
    shown_safely(cli(served, "conversations", "events", room).stdout,
                 f"room: room {SHOWN}{MARKUP}")
    env = dict(os.environ, CLANKIE_HOME=str(served.home.path), PYTHONPATH=str(ROOT / "src"))
    follower = subprocess.Popen([sys.executable, "-m", "clankie", "conversations", "events",
                                 asked, "--follow"], env=env, cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        lines = LineReader(follower.stdout)
        lines.until(lambda line: "asked:" in line, 30)
        with served.client() as client:
            client.call("conversation_send", {"conversation_id": asked,
                                              "text": "again " + HOSTILE})
        lines.until(lambda line: "owner: again " in line, 30)
    finally:
        follower.send_signal(signal.SIGINT)
        follower.communicate(timeout=30)
    shown_safely("".join(lines.seen), f"owner: again {SHOWN}{MARKUP}\n",
                 f"clankie: msg {SHOWN}{MARKUP}\n")


def _in_a_terminal(served: Served, *args: str) -> str:
    """What the CLI writes to a real terminal (a pseudo-terminal), as text."""
    env = dict(os.environ, CLANKIE_HOME=str(served.home.path), PYTHONPATH=str(ROOT / "src"),
               TERM="xterm-256color")
    for name in ("CLANKIE_URL", "CLANKIE_TOKEN"):
        env.pop(name, None)
    main, child = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "clankie", *args], env=env, cwd=ROOT,
                                stdin=subprocess.DEVNULL, stdout=child, stderr=child)
    finally:
        os.close(child)
    chunks: list[bytes] = []
    try:
        while True:
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(main)
        proc.wait(timeout=60)
    assert proc.returncode == 0
    return b"".join(chunks).decode("utf-8")
