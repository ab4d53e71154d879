"""SPEC section 10 "CLI, Finding what waits, as a person would", against a real `clankie
serve`, the CLI run as a subprocess: `send --wait`, `events --follow` across a restart,
the same answer again with prefixes, and `--json` usage errors said after a read."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.served import ROOT, LineReader, Served, ask, settle
from tests.e2e.test_cli import _default_sigint, cli, ok_json

SAYS = {"turns": [[{"say": f"Reply {n}."}] for n in range(50)]}


@dataclass
class Running:
    """A CLI command running in the background, its output read line by line."""

    proc: subprocess.Popen[str]
    out: LineReader
    err: LineReader

    def ended(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout=timeout)
        self.out.all_lines(10)
        self.err.all_lines(10)
        return code


@contextmanager
def running(home: Path, *args: str) -> Iterator[Running]:
    """`clankie ARGS` as a subprocess on `home`; interrupted (Ctrl+C) if still running at
    the end, and killed if that does not end it."""
    env = dict(os.environ, CLANKIE_HOME=str(home), PYTHONPATH=str(ROOT / "src"))
    for name in ("CLANKIE_URL", "CLANKIE_TOKEN"):
        env.pop(name, None)
    proc = subprocess.Popen([sys.executable, "-m", "clankie", *args], env=env, cwd=ROOT,
                            text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_default_sigint)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        yield Running(proc, LineReader(proc.stdout), LineReader(proc.stderr))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        assert "Traceback" not in "".join(proc.stderr.readlines() if proc.stderr else [])


def new_conversation(served: Served, workspace: Path) -> str:
    return cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()


# -------------------------------------------------------------------- prefixes, receipts


def same(receipt: dict[str, Any], original: dict[str, Any]) -> bool:
    """The same receipt (A4), its continuation's status aside (it moves on as the run does)."""
    return {**receipt, "continuation": None} == {**original, "continuation": None}


def test_section10_the_same_answer_again_with_prefixes_gets_the_original_receipt(
        served: Served, workspace: Path):
    """SPEC section 10: "The same answer given again with prefixes gets the original receipt
    and exit 0, exactly as with whole IDs: prefixes resolve against the question and the
    receipts that R1 keeps" (A4); the incarnation prefix against the question's own after a
    reset rotated the conversation's; the same for a repeated cancel (A12)."""
    c = new_conversation(served, workspace)
    with served.client() as client:
        r = ask(client, c)
    snap = ok_json(served, "conversations", "questions", c)
    tabs = snap["pending"]["options"][0]["option_id"]
    short = ["conversations", "answer", c[:6], r[:6], "--incarnation",
             snap["incarnation"][:6], "--revision", str(snap["revision"])]
    first = ok_json(served, *short, "--choice", "1")
    assert first["duplicate"] is False and first["receipt"]["answer"] == {"option_id": tabs}
    with served.client() as client:
        settle(client, c)  # the continuation ran and asked the next question
        nxt = client.input_get(c).pending
    assert nxt is not None and nxt.request_id != r
    again = cli(served, *short, "--choice", "1")
    assert again.returncode == 0, again.stderr
    assert f"Already accepted (the same answer): receipt {first['receipt']['receipt_id']}" \
        in again.stdout
    by_option = ok_json(served, *short[:-1], "1", "--option", tabs[:5])  # any revision (A4)
    assert by_option["duplicate"] is True and same(by_option["receipt"], first["receipt"])
    shown = ok_json(served, "conversations", "questions", c[:6], "--request", r[:6])
    assert same(shown["request"]["receipt"], first["receipt"])

    # A repeated cancel, with prefixes, of a question that is no longer pending.
    now = ok_json(served, "conversations", "questions", c)
    cancel = ["conversations", "cancel-question", c[:6], nxt.request_id[:6], "--incarnation",
              now["incarnation"][:6], "--revision", str(now["revision"])]
    cancelled = ok_json(served, *cancel)
    assert cancelled["duplicate"] is False
    with served.client() as client:
        ask(client, c, "ask again")  # a new question is the pending one now
    repeat = cli(served, *cancel)
    assert repeat.returncode == 0, repeat.stderr
    assert repeat.stdout.startswith(
        f"Already cancelled: receipt {cancelled['receipt']['receipt_id']}")

    # After a reset, the old incarnation's prefix is still the answered question's own.
    ok_json(served, "conversations", "reset", c)
    after_reset = ok_json(served, *short, "--choice", "1")
    assert after_reset["duplicate"] is True and same(after_reset["receipt"], first["receipt"])


def test_section10_an_unmatched_request_prefix_lists_the_pending_and_kept_ones(
        served: Served, workspace: Path):
    """An unmatched prefix is exit 2 naming the candidates (the pending question and the
    ones whose receipts are kept); with --json, a problem document on stdout (exit 2)."""
    c = new_conversation(served, workspace)
    with served.client() as client:
        r = ask(client, c)
    snap = ok_json(served, "conversations", "questions", c)
    other = next(p for p in ("0000", "ffff") if not r.startswith(p))
    args = ["conversations", "answer", c, other, "--incarnation", snap["incarnation"],
            "--revision", str(snap["revision"]), "--choice", "1"]
    plain = cli(served, *args)
    assert plain.returncode == 2 and plain.stdout == ""
    assert f"no question starts with '{other}'" in plain.stderr and r in plain.stderr
    problem = cli(served, *args, "--json")
    assert problem.returncode == 2
    document = json.loads(problem.stdout)
    assert document["code"] == "invalid_request" and r in document["detail"]
    unknown = cli(served, "conversations", "show", "ffffffff", "--json")
    assert unknown.returncode == 2
    assert "no conversation starts with" in json.loads(unknown.stdout)["detail"]


# ------------------------------------------------------------------ events --follow


def test_section10_events_follow_survives_a_restart_says_so_and_repeats_nothing(
        tmp_path: Path, workspace: Path):
    """SPEC section 10: "`conversations events --follow` survives a service restart like the
    TUI (it says so and goes on from the event it had reached)": the real service is stopped
    (SIGTERM) and started again on the same home, a message is posted, and the follower
    prints the restart note, then the new event; no event is printed twice."""
    home = tmp_path / "home"
    served = Served.start(home, script=SAYS)
    try:
        c = new_conversation(served, workspace)
        cli(served, "conversations", "send", c, "before the restart")
        with served.client() as client:
            settle(client, c)
        with running(home, "conversations", "events", c, "--follow") as follower:
            follower.out.until(lambda line: "clankie: Reply 0." in line, 30)
            assert served.stop() == 0
            served = Served.start(home, init=False, script=SAYS)
            cli(served, "conversations", "send", c, "after the restart")
            follower.out.until(lambda line: "clankie: Reply 1." in line, 30)
            assert follower.proc.poll() is None  # still following
        lines = follower.out.seen
    finally:
        served.stop()
    said = "".join(lines)
    note = next(i for i, line in enumerate(lines) if "clankie restarted at" in line)
    new = next(i for i, line in enumerate(lines) if "owner: after the restart" in line)
    assert note < new, said
    seqs = [int(m.group(1)) for line in lines if (m := re.match(r"#(\d+) ", line))]
    assert len(seqs) == len(set(seqs)) and seqs == sorted(seqs), said
    assert seqs[0] == 1
