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
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clankie import dto, wording
from clankie.core.vocabulary import RunError
from tests.e2e.served import ASK, ROOT, LineReader, Served, ask, finished, settle
from tests.e2e.test_cli import _default_sigint, cli, ok_json
from tests.e2e.test_providers import PROVIDERS, World, served_world
from tests.fakes import Reply, error_reply

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
        nxt = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending
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


# ---------------------------------------------------------------------------- send --wait


ASKS = {"turns": [[{"say": "Let me look."}, {"ask": ASK}]] * 10}


def test_section10_send_wait_prints_the_reply_and_the_question_and_exits_0(
        tmp_path: Path, workspace: Path):
    """SPEC section 10: `send --wait` waits for the run it started to end and prints
    Clankie's reply and any question it asked (options numbered as `questions` prints them,
    and the command that answers); with --json, the run and its messages; exit 0 when the
    run succeeded."""
    served = Served.start(tmp_path / "home", script=ASKS)
    try:
        c = new_conversation(served, workspace)
        done = cli(served, "conversations", "send", c[:6], "hello", "--wait")
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert "Clankie: Let me look." in out
        assert "Tabs or spaces?" in out
        assert "  1. tabs - one per level" in out and "  2. spaces" in out
        assert f"clankie conversations answer {c} " in out and "--choice N" in out
        assert out.index("Let me look.") < out.index("Tabs or spaces?")

        other = new_conversation(served, workspace)
        got = ok_json(served, "conversations", "send", other, "hello", "--wait")
        assert got["run"]["status"] == "succeeded" and got["run"]["conversation_id"] == other
        assert isinstance(got["message_id"], str)
        assert [(m["author"], m["text"]) for m in got["messages"]] == [
            ("clankie", "Let me look.")]
        assert [(q["prompt"], q["status"]) for q in got["questions"]] == [
            ("Tabs or spaces?", "pending")]
        # issue 42: the binding is data in send's own reply; answered with it, no read first
        snap = ok_json(served, "conversations", "questions", other)
        assert (got["incarnation"], got["revision"]) == (snap["incarnation"], snap["revision"])
        question = got["questions"][0]
        answered = cli(served, "conversations", "answer", other, question["request_id"],
                       "--incarnation", got["incarnation"], "--revision",
                       str(got["revision"]), "--option", question["options"][1]["option_id"])
        assert answered.returncode == 0, answered
    finally:
        served.stop()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from served_world(PROVIDERS["openai"], tmp_path)  # the CLI is the same for each


def test_section10_send_wait_exits_1_when_the_run_fails_saying_why(world: World):
    world.endpoint.plan.append(error_reply(400, "no such model"))
    c = world.conversation()
    done = cli(world.served, "conversations", "send", c, "hello", "--wait")
    assert done.returncode == 1, done
    assert "failed" in done.stderr and "400" in done.stderr, done.stderr
    got = cli(world.served, "conversations", "send", c, "again", "--wait", "--json")
    assert got.returncode == 1  # the endpoint's plan is empty: this one fails too
    assert json.loads(got.stdout)["run"]["status"] == "failed"


def test_section10_send_wait_exits_1_when_the_run_is_stopped(world: World):
    """R7 while waiting: the stop is said with the words every surface uses."""
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("Too late.").body, hold=release))
    c = world.conversation()
    try:
        with running(world.home, "conversations", "send", c, "hello", "--wait") as waiter:
            world.endpoint.wait_for_requests(1)
            assert cli(world.served, "conversations", "stop", c).returncode == 0
            assert waiter.ended() == 1
    finally:
        release.set()
    said = "".join(waiter.err.seen)
    assert str(wording.run_ended(RunError.STOPPED_BY_OWNER)) in said, said


def test_section10_send_wait_timeout_says_the_run_goes_on_and_how_to_follow_it(
        world: World):
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("Done now.").body, hold=release))
    c = world.conversation()
    try:
        done = cli(world.served, "conversations", "send", c, "hello", "--wait", "--timeout", "1")
    finally:
        release.set()
    assert done.returncode == 1, done
    assert "goes on" in done.stderr, done.stderr
    assert f"clankie conversations events {c} --after " in done.stderr
    assert "--follow" in done.stderr and f"clankie conversations stop {c}" in done.stderr
    with world.served.client() as client:
        runs = [e for e in client.call("events_tail", {"conversation_id": c})["events"]
                if e["type"] == "run_status"]
        assert finished(client, runs[0]["run_id"])["status"] == "succeeded"
    bad = cli(world.served, "conversations", "send", c, "x", "--wait", "--timeout", "0")
    assert bad.returncode == 2  # a usage error: nothing was sent


def test_section10_send_wait_interrupted_says_the_message_was_sent_and_the_run_goes_on(
        world: World):
    """Ctrl+C while waiting stops only the waiting (130): the message was sent, the run
    goes on, and the CLI says how to follow or stop it."""
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("Later.").body, hold=release))
    c = world.conversation()
    try:
        with running(world.home, "conversations", "send", c, "hello", "--wait") as waiter:
            world.endpoint.wait_for_requests(1)
            waiter.proc.send_signal(signal.SIGINT)
            assert waiter.ended() == 130
    finally:
        release.set()
    said = "".join(waiter.err.seen)
    assert "was sent and the run goes on" in said, said
    assert f"clankie conversations events {c} --after " in said
    with world.served.client() as client:
        runs = [e for e in client.call("events_tail", {"conversation_id": c})["events"]
                if e["type"] == "run_status"]
        assert finished(client, runs[0]["run_id"])["status"] == "succeeded"


def test_section10_send_wait_says_when_a_restart_orphaned_the_run(world: World):
    """R3 while waiting: the service restarts; the waiting CLI says so, and that the run
    was interrupted by the restart (it is never run again), exit 1."""
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("Never.").body, hold=release))
    c = world.conversation()
    try:
        with running(world.home, "conversations", "send", c, "hello", "--wait") as waiter:
            world.endpoint.wait_for_requests(1)
            world.restart()
            assert waiter.ended() == 1
    finally:
        release.set()
    said = "".join(waiter.err.seen)
    assert "clankie restarted at" in said, said
    assert str(wording.run_ended(RunError.ORPHANED_BY_RESTART)) in said, said


def test_section10_send_wait_timeout_holds_while_the_service_is_down(world: World):
    """`--timeout S` bounds the wait while the service is gone too (issue 32's new-user
    trial: it waited the follower's 10 minutes for a restart): the CLI stops waiting, says
    the service did not come back within the timeout and how to follow the run, exit 1."""
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("Never.").body, hold=release))
    c = world.conversation()
    try:
        with running(world.home, "conversations", "send", c, "hello", "--wait",
                     "--timeout", "3") as waiter:
            world.endpoint.wait_for_requests(1)
            world.served.stop(signal.SIGKILL)
            assert waiter.ended(timeout=120) == 1
    finally:
        release.set()
    said = "".join(waiter.err.seen)
    assert "did not come back within --timeout 3 s" in said, said
    assert f"clankie conversations events {c} --after " in said, said


def test_section10_issue42_send_wait_json_when_the_service_does_not_come_back(world: World):
    """Issue 42: with --json, the wait that the service's loss ended is a problem document
    on stdout (`service_unreachable`), which says the message was sent and names it and its
    run, exit 1 as in words."""
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("Never.").body, hold=release))
    c = world.conversation()
    try:
        with running(world.home, "conversations", "send", c, "hello", "--wait",
                     "--timeout", "3", "--json") as waiter:
            world.endpoint.wait_for_requests(1)
            world.served.stop(signal.SIGKILL)
            assert waiter.ended(timeout=120) == 1
    finally:
        release.set()
    problem = json.loads("".join(waiter.out.all_lines(10)))
    assert (problem["code"], problem["sent"]) == ("service_unreachable", "yes"), problem
    assert problem["message_id"] and problem["run_id"]
    assert "--timeout 3 s" in problem["detail"] and problem["fix"]
