"""SPEC D16 against a real `clankie serve` whose model writes word by word: the scripted
model's paced `say` (`pace_ms`), or, for a withdrawn try (D8), the openai provider against
the fake endpoint of tests/fakes.py. The CLI runs as a subprocess, its standard output a
pty (a terminal, `pty.openpty`) or a pipe, read as it comes (`Output`): `send --wait` and
`events --follow` print the live reply as it arrives on a terminal and never print its
text twice; a pipe gets only stored messages; a partial message ends with its `[cut off
...]` line; `events --follow` goes on across a restart.
"""

from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.served import ROOT, Served
from tests.e2e.test_cli import _default_sigint, cli
from tests.e2e.test_providers import PROVIDERS
from tests.e2e.test_streaming import checkpointed, conversation, live_text, messages
from tests.fakes import Reply as FakeReply
from tests.fakes import model_endpoint, openai_reply, stream_error, stream_events
from tests.polling import eventually

WORDS = " ".join(f"w{n}" for n in range(80))  # 80 words 120 ms apart: about 10 s
SCRIPT: dict[str, Any] = {"turns": [[{"say": WORDS, "pace_ms": 120}]] * 20}
ENV = {"CLANKIE_STREAM_CHECKPOINT": "0.5", "CLANKIE_STREAM_INTERVAL": "0.05"}


class Output:
    """`clankie ARGS` as a subprocess, its standard output a terminal (`tty`) or a pipe,
    read as it comes on a thread; its standard error a pipe. Interrupted (Ctrl+C) if still
    running at `close`, killed if that does not end it."""

    def __init__(self, served: Served, *args: str, tty: bool) -> None:
        env = dict(os.environ, CLANKIE_HOME=str(served.home.path),
                   PYTHONPATH=str(ROOT / "src"), COLUMNS="200", TERM="xterm")
        for name in ("CLANKIE_URL", "CLANKIE_TOKEN"):
            env.pop(name, None)
        if tty:
            self.fd, child = pty.openpty()
        else:
            self.fd, child = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "clankie", *args], env=env, cwd=ROOT,
                stdin=subprocess.DEVNULL, stdout=child, stderr=subprocess.PIPE,
                preexec_fn=_default_sigint)
        finally:
            os.close(child)
        self.chunks: list[bytes] = []
        self.err = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            self.chunks.append(chunk)

    @property
    def text(self) -> str:
        """What was written so far, as the terminal's lines (a pty writes CRLF)."""
        return b"".join(self.chunks).decode("utf-8", "replace").replace("\r\n", "\n")

    def until(self, wanted: Callable[[str], bool], what: str, timeout: float = 30) -> str:
        return eventually(lambda: self.text, what, until=wanted, timeout=timeout)

    def ended(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout=timeout)
        self._reader.join(10)
        assert self.proc.stderr is not None
        self.err = self.proc.stderr.read().decode()
        assert "Traceback" not in self.err, self.err
        return code

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._reader.join(10)
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        os.close(self.fd)


@pytest.fixture
def output() -> Iterator[Callable[..., Output]]:
    started: list[Output] = []

    def start(served: Served, *args: str, tty: bool = True) -> Output:
        started.append(Output(served, *args, tty=tty))
        return started[-1]

    yield start
    for each in started:
        each.close()


@pytest.fixture(scope="module")
def paced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One service for the module whose every run writes `WORDS` word by word (each test
    works in a conversation of its own)."""
    served = Served.start(tmp_path_factory.mktemp("paced") / "home", script=SCRIPT, env=ENV)
    yield served
    served.stop()


def stored(served: Served, c: str) -> list[dict[str, Any]]:
    return messages(served, c)


# ------------------------------------------------------------------------- send --wait


def test_d16_send_wait_on_a_terminal_prints_the_reply_as_it_arrives_and_once(
        paced: Served, output: Callable[..., Output]):
    """D16: "When standard output is a terminal, the reply is printed as it arrives": its
    first words are on the terminal while the message is not stored yet, and at the end
    the reply stands there once, never printed again when stored."""
    c = conversation(paced)
    term = output(paced, "conversations", "send", c, "go", "--wait")
    term.until(lambda text: "Clankie: w0 w1 w2" in text, "the first words on the terminal")
    assert stored(paced, c) == []  # seen before it was stored: as it arrived
    assert term.ended() == 0
    assert term.text.count("Clankie:") == 1 and term.text.count("w79") == 1
    assert term.text.endswith(f"Clankie: {WORDS}\n")


def test_d16_d7_send_wait_in_a_pipe_prints_only_the_stored_message_ending_cut_off(
        paced: Served, output: Callable[..., Output]):
    """D16: "When standard output is not a terminal, only stored messages are printed": the
    pipe gets nothing while the reply is written; stopped mid-reply (D7), it gets the
    stored partial message and its `[cut off ...]` line; exit 1 as before."""
    c = conversation(paced)
    piped = output(paced, "conversations", "send", c, "go", "--wait", tty=False)
    seen = live_text(paced, c, 60)  # another reader sees the reply being written
    assert piped.text == ""
    cli(paced, "conversations", "stop", c)
    assert piped.ended() == 1
    [kept] = stored(paced, c)
    assert kept["partial"] == "stopped" and kept["text"].startswith(seen["text"])
    assert piped.text == f"Clankie: {kept['text']}\n[cut off: stopped by you]\n"
    assert "stopped by its owner" in piped.err


def test_d16_d7_a_reply_printed_live_then_stopped_ends_with_only_its_cut_off_line(
        paced: Served, output: Callable[..., Output]):
    """D16: "A partial message ends with its `[cut off ...]` line. When its text was
    already printed live, only that line is printed.\""""
    c = conversation(paced)
    term = output(paced, "conversations", "send", c, "go", "--wait")
    term.until(lambda text: "w5" in text, "some words on the terminal")
    cli(paced, "conversations", "stop", c)
    assert term.ended() == 1
    [kept] = stored(paced, c)
    assert kept["partial"] == "stopped"
    said = re.fullmatch(r"Clankie: (.*)\n\[cut off: stopped by you(.*)\]\n", term.text)
    assert said is not None, term.text
    shown, more = said.groups()
    assert shown.startswith(kept["text"])  # printed once: the live text, then the line alone
    # The store keeps the text as last published when the stop took it (D7); should a
    # publish race the stop, the line says that fewer characters were kept than shown.
    assert more == ("" if shown == kept["text"] else
                    f"; {len(kept['text']):,} of the {len(shown):,} characters shown were kept")


def test_d16_json_send_wait_is_one_object_at_the_end_its_messages_with_partial(
        paced: Served, output: Callable[..., Output]):
    """D16: "`--json` is unchanged: one object when the run ends, its messages with
    `partial`", even on a terminal."""
    c = conversation(paced)
    term = output(paced, "conversations", "send", c, "go", "--wait", "--json")
    live_text(paced, c, 40)
    assert term.text == ""
    cli(paced, "conversations", "stop", c)
    assert term.ended() == 1
    done = json.loads(term.text)
    assert done["run"]["status"] == "cancelled"
    [said] = done["messages"]
    assert said["partial"] == "stopped" and said["text"] == stored(paced, c)[0]["text"]


@pytest.fixture
def dropping(tmp_path: Path) -> Iterator[tuple[Served, list[FakeReply]]]:
    """A service on the openai provider whose endpoint's plan the test sets."""
    with model_endpoint() as endpoint:
        served = Served.start(tmp_path / "home", script=None, env={
            **PROVIDERS["openai"].env(endpoint.url), **ENV, "CLANKIE_MODEL_RETRIES": "2"})
        try:
            yield served, endpoint.plan
        finally:
            served.stop()


FIRST = "The first try writes this and is cut short"
SECOND = "The second try says it all."


def dropped_after_text() -> FakeReply:
    """`FIRST` streamed, then a pause long enough for every reader to see it, then the
    connection drops mid-body: a transient failure after published text (D8)."""
    events = [e for e in stream_events(openai_reply(FIRST), False) if isinstance(e, bytes)]
    return FakeReply(events=[*events[:-2], 4.0], ending="drop")


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_d16_d8_a_withdrawn_try_is_said_on_stderr_and_the_next_starts_on_a_new_line(
        dropping: tuple[Served, list[FakeReply]], output: Callable[..., Output],
        workspace: Path, tty: bool):
    """D16: "A withdrawal prints `[withdrawn: N characters: REASON; asking again]` on
    standard error, and the next try starts on a new line"; in a pipe the withdrawn text
    never reaches standard output ("a script never receives withdrawn text")."""
    served, plan = dropping
    plan += [dropped_after_text(), openai_reply(SECOND)]
    c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    out = output(served, "conversations", "send", c, "go", "--wait", tty=tty)
    assert out.ended() == 0
    said = re.search(r"\[withdrawn: (\d+) characters: (.*); asking again\]", out.err)
    assert said is not None, out.err
    assert int(said.group(1)) == len(FIRST) and "connection dropped" in said.group(2)
    if tty:
        assert out.text == f"Clankie: {FIRST}\nClankie: {SECOND}\n"
    else:
        assert out.text == f"Clankie: {SECOND}\n"


# --------------------------------------------------------------------- events --follow


def follows(term: Output, c: str) -> None:
    """Wait until the follower has read the conversation's first page."""
    term.until(lambda text: "owner: go" in text or '"owner"' in text, "the owner's message")


def test_d16_events_follow_on_a_terminal_prints_the_reply_live_and_not_its_message_line(
        paced: Served, output: Callable[..., Output]):
    """D16: "On a terminal, the live reply is printed as it arrives and its `message` line
    is not printed again."""
    c = conversation(paced)
    term = output(paced, "conversations", "events", c, "--follow")
    with paced.client() as client:
        run_id = client.call("conversation_send", {"conversation_id": c, "text": "go"})[
            "run_id"]
    term.until(lambda text: re.search(r"#… \S+ \S+ clankie: w0 w1 w2", text) is not None,
               "the reply being written, on a line of its own")
    assert stored(paced, c) == []
    term.until(lambda text: f"run {run_id} (turn) succeeded" in text, "the run's end")
    assert term.text.count("w79") == 1 and f"clankie: {WORDS}\n" in term.text
    assert re.search(r"#\d+ \S+ \S+ clankie:", term.text) is None


@pytest.mark.parametrize("how", ["--no-live", "pipe"])
def test_d16_events_follow_without_live_prints_only_the_message_line(
        paced: Served, output: Callable[..., Output], how: str):
    """D16: "`--no-live` turns this off"; "When standard output is not a terminal ... live
    replies are left out unless `--live` is given"."""
    c = conversation(paced)
    args = ["conversations", "events", c, "--follow"]
    out = output(paced, *args, "--no-live") if how == "--no-live" else \
        output(paced, *args, tty=False)
    with paced.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
    live_text(paced, c, 40)
    out.until(lambda text: re.search(r"#\d+ \S+ \S+ clankie: w0 w1", text) is not None,
              "the stored message's line", timeout=60)
    assert "#…" not in out.text and out.text.count("w79") == 1


@pytest.mark.parametrize("live", [True, False], ids=["live", "plain"])
def test_d16_events_follow_json_pages_carry_live_only_with_live(
        paced: Served, output: Callable[..., Output], live: bool):
    """D16: "With `--json --live`, each page printed carries its `live` field"; with
    `--json` alone they are as before."""
    c = conversation(paced)
    args = ["conversations", "events", c, "--follow", "--json"]
    out = output(paced, *args, *(["--live"] if live else []))
    with paced.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
    out.until(lambda text: '"author": "clankie"' in text and text.endswith("\n"),
              "the reply's message", timeout=60)
    pages, text, decoder = [], out.text, json.JSONDecoder()
    while text.strip():
        page, end = decoder.raw_decode(text.lstrip())
        pages.append(page)
        text = text.lstrip()[end:]
    # issue 42: pages printed as they come are JSON Lines, each parsed alone
    assert [json.loads(line) for line in out.text.splitlines()] == pages
    if live:
        assert all("live" in page for page in pages)
        assert any(page["live"] and page["live"]["type"] == "reply_delta" for page in pages
                   ), out.text
    else:
        assert not any("live" in page for page in pages)


def test_d16_d9_events_follow_across_a_restart_marks_the_reply_and_reads_live_again(
        tmp_path: Path, output: Callable[..., Output]):
    """D16: "After a service restart it asks again with a null `reply_id` and shows the
    text so far"; the reply cut by the kill is not printed again, only marked (D9)."""
    served = Served.start(tmp_path / "home", script=SCRIPT, env=ENV)
    try:
        c = conversation(served)
        term = output(served, "conversations", "events", c, "--follow")
        with served.client() as client:
            client.call("conversation_send", {"conversation_id": c, "text": "go"})
        term.until(lambda text: "w12" in text, "a dozen words on the terminal")
        eventually(lambda: checkpointed(served), "a checkpoint of them",
                   until=lambda text: text is not None and "w12" in text)
        served.stop(signal.SIGKILL)
        served = Served.start(served.home.path, init=False, script=SCRIPT, env=ENV)
        line = term.until(lambda text: "[cut off when clankie restarted" in text,
                          "the reply marked as cut off by the restart", timeout=60)
        assert "clankie restarted at" in line
        # what the follower says of the loss stands on a line of its own, never in the reply
        assert re.search(r"^\(lost clankie", line, re.M) is not None
        if printed_live(line).startswith(messages(served, c)[-1]["text"]):
            assert line.count("w12") == 1  # all it kept was shown: only marked
            assert re.search(r"#\d+ \S+ \S+ clankie:", line) is None  # not printed again
        else:  # the checkpoint was ahead of the follower: printed again, whole (see below)
            assert re.search(r"#\d+ \S+ \S+ clankie:", line) is not None
        with served.client() as client:
            client.call("conversation_send", {"conversation_id": c, "text": "again"})
        term.until(lambda text: text.count("clankie: w0 w1 w2") == 2,
                   "the next reply, live, after the restart", timeout=60)
    finally:
        served.stop()


def printed_live(text: str) -> str:
    """The reply as `events --follow` printed it live: its `#…` line's text."""
    found = re.search(r"^#… \S+ \S+ clankie: (.*)$", text, re.M)
    assert found is not None, text
    return found.group(1)


def test_d16_d9_a_reply_stored_past_what_was_printed_live_reads_as_stored_after_a_restart(
        tmp_path: Path, output: Callable[..., Output]):
    """D16, D9: a new user's follower printed the live line up to "w30 w31 w32 w33"; the
    service, told to stop, checkpointed "... w33 w34"; after the restart the follower
    printed `    | w34` under the notes of the loss, which reads as a line break the stored
    text does not have. The printed line was ended by those notes, so its rest cannot go
    on it: the message is printed again, whole and as stored, then its `[cut off ...]`
    line (docs/decisions.md, "Issue 40: the fixes after a new user's trial")."""
    served = Served.start(tmp_path / "home", script=SCRIPT, env=ENV)
    follower = None
    try:
        c = conversation(served)
        term = output(served, "conversations", "events", c, "--follow")
        follower = term.proc
        with served.client() as client:
            client.call("conversation_send", {"conversation_id": c, "text": "go"})
        term.until(lambda text: "w5 " in text, "a few words on the terminal")
        follower.send_signal(signal.SIGSTOP)  # it falls behind what the service publishes
        live_text(served, c, len(" ".join(WORDS.split()[:31])))  # up to w30 published
        assert served.stop() == 0  # SIGTERM: what was published is checkpointed at once
        follower.send_signal(signal.SIGCONT)
        follower = None
        served = Served.start(served.home.path, init=False, script=SCRIPT, env=ENV)
        text = term.until(lambda text: "[cut off when clankie restarted" in text,
                          "the reply marked as cut off by the restart", timeout=60)
        kept = messages(served, c)[-1]["text"]
        shown = printed_live(text)
        assert kept.startswith(shown) and len(kept) > len(shown) + 10, (shown, kept)
        assert not re.search(r"^ *\|", text, re.M), text  # WORDS has no line break
        assert re.search(r"^#\d+ \S+ \S+ clankie: " + re.escape(kept) + r"\n +\[cut off "
                         r"when clankie restarted", text, re.M), text
    finally:
        if follower is not None:
            follower.send_signal(signal.SIGCONT)
        served.stop()


@pytest.mark.parametrize("tty", [True, False], ids=["terminal", "pipe"])
def test_d16_d8_a_reply_cut_by_a_failure_ends_with_cut_off_and_the_reason(
        dropping: tuple[Served, list[FakeReply]], output: Callable[..., Output],
        workspace: Path, tty: bool):
    """D16: "A partial message ends with its `[cut off ...]` line": a call that fails for
    good after published text (an error event that is not transient, D12) stores it
    `partial: "failed"` (D8); the line says why, as the run's error does; exit 1."""
    served, plan = dropping
    cut = stream_error("invalid_request_error", False, openai_reply(FIRST), count=6)
    assert cut.events is not None
    plan.append(FakeReply(events=[*cut.events[:-1], 3.0, cut.events[-1]]))
    c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    out = output(served, "conversations", "send", c, "go", "--wait", tty=tty)
    assert out.ended() == 1
    [kept] = stored(served, c)
    assert kept["partial"] == "failed" and FIRST.startswith(kept["text"])
    said = re.fullmatch(r"Clankie: (.*)\n\[cut off: (model_error: openai: .*)\]\n", out.text)
    assert said is not None, out.text
    assert said.group(1) == kept["text"] and said.group(2) in out.err


def test_d16_events_live_without_follow_shows_the_reply_so_far_and_says_it_goes_on(
        paced: Served):
    """`--live` without `--follow` (docs/decisions.md, "Issue 40: the CLI"): one read, ending
    with the reply so far, said to be still written (a new user took it for the whole
    reply)."""
    c = conversation(paced)
    with paced.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
    live_text(paced, c, 20)
    done = cli(paced, "conversations", "events", c, "--live")
    assert done.returncode == 0, done.stderr
    assert re.search(r"^#… \S+ \S+ clankie: w0 w1 w2.*\n    \(still being written; see "
                     r"the rest with --follow\)\n\Z", done.stdout, re.M | re.S) is not None
    plain = cli(paced, "conversations", "events", c)
    assert "#…" not in plain.stdout and "still being written" not in plain.stdout
