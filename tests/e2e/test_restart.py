"""SPEC R3 and R9 through a real `clankie serve`, stopped with SIGTERM or SIGKILL while a
question waits and a continuation runs: at the next start the notifier (with
`notify_on_resolved`) is told both endings with reason `restart`, once, in order; the CLI
says that clankie restarted, that nothing was answered or run, and how to carry on; and
nothing is run again."""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clankie import dto, wording
from tests.e2e.served import Served, finished
from tests.e2e.test_cli import cli
from tests.e2e.test_notify import HOOK, documents
from tests.e2e.test_providers import ASK, PROVIDERS
from tests.fakes import Endpoint, Reply, model_endpoint
from tests.polling import eventually

OPENAI = PROVIDERS["openai"]


@dataclass
class Restarted:
    """A service on a fake model with a hook that records every document it is given."""

    endpoint: Endpoint
    served: Served
    home: Path
    env: dict[str, str]
    out: Path

    def start(self) -> None:
        self.served = Served.start(self.home, init=False, script=None, env=self.env)

    def stop(self, sig: int) -> None:
        code = self.served.stop(sig)
        assert code == (0 if sig == signal.SIGTERM else -signal.SIGKILL)


@contextmanager
def hooked_on_a_model(tmp_path: Path) -> Iterator[Restarted]:
    script, out = tmp_path / "hook.py", tmp_path / "hook.out"
    script.write_text(HOOK)
    with model_endpoint() as endpoint:
        env = {**OPENAI.env(endpoint.url), "CLANKIE_NOTIFY_ON_RESOLVED": "true",
               "CLANKIE_NOTIFY_COMMAND": json.dumps([sys.executable, str(script), str(out),
                                                     "record"])}
        served = Served.start(tmp_path / "home", script=None, env=env)
        world = Restarted(endpoint, served, tmp_path / "home", env, out)
        try:
            yield world
        finally:
            world.served.stop()


def answered_and_running(world: Restarted, workspace: Path, *, ask_again: bool
                         ) -> tuple[str, str, str]:
    """A turn asks; its answer starts a continuation that (with `ask_again`) asks again,
    then waits on the model (held): (conversation, the answered request, the running
    continuation)."""
    p, endpoint = OPENAI, world.endpoint
    held = threading.Event()  # never set: the continuation's last model call never returns
    endpoint.plan += [p.tool(ASK), p.text("Asked."), *([p.tool(ASK)] if ask_again else []),
                      Reply(body=p.text("late").body, hold=held)]
    with world.served.client() as client:
        c = str(client.op(dto.CONVERSATION_CREATE,
                          dto.ConversationCreate(workspace=str(workspace))).conversation_id)
        finished(client, client.call("conversation_send", {
            "conversation_id": c, "text": "Set up tests."})["run_id"])
        snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
        assert snap.pending is not None
        answered = snap.pending.request_id
        continuation = client.op(dto.INPUT_ANSWER, dto.InputAnswer(
            conversation_id=c, request_id=answered, incarnation=snap.incarnation,
            revision=snap.revision, option_id=snap.pending.options[0].option_id)).receipt.run_id
        assert continuation is not None
        endpoint.wait_for_requests(4 if ask_again else 3)  # (asked again, then) it waits
        assert client.call("run_get", {"run_id": continuation})["status"] == "running"
    return c, answered, continuation


def asked_and_running(world: Restarted, workspace: Path) -> tuple[str, str, str]:
    """`answered_and_running` whose continuation asked again: (conversation, the pending
    request, the running continuation)."""
    c, _, continuation = answered_and_running(world, workspace, ask_again=True)
    with world.served.client() as client:
        pending = eventually(lambda: client.op(dto.INPUT_GET,
                                               dto.InputGet(conversation_id=c)).pending,
                             "the second question")
    return c, pending.request_id, continuation


def restart_endings(out: Path) -> list[dict[str, Any]]:
    return [d for d in documents(out) if d.get("reason") == "restart"]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["term", "kill"])
def test_r9_r3_restart_endings_reach_the_hook_once_in_order_and_nothing_runs_again(
        tmp_path: Path, workspace: Path, sig: int):
    with hooked_on_a_model(tmp_path) as world:
        c, request, continuation = asked_and_running(world, workspace)
        eventually(lambda: documents(world.out), "the hook told of the second question",
                   until=lambda docs: len(docs) == 3, timeout=20)
        world.stop(sig)
        world.start()
        endings = eventually(lambda: restart_endings(world.out), "the restart's endings",
                             until=lambda docs: len(docs) >= 2, timeout=20)
        question, run = endings
        assert question == {**question, "event": "input_resolved", "conversation_id": c,
                            "request_id": request, "outcome": "cancelled", "reason": "restart"}
        answered = documents(world.out)[1]["request_id"]  # the answer that started the run
        assert run == {**run, "event": "continuation_failed", "conversation_id": c,
                       "request_id": answered, "run_id": continuation, "reason": "restart",
                       "error": "orphaned_by_restart"}
        assert run["read_with"] == f"clankie conversations questions {c} --request {answered}"
        with world.served.client() as client:
            got = client.call("run_get", {"run_id": continuation})
            assert (got["status"], got["error"]) == ("failed", "orphaned_by_restart")

        # Restarted again at once: nothing is told twice. The conversation's documents are
        # told in order, so once a new question's has come, a repeat would have come first.
        world.stop(sig)
        world.start()
        world.endpoint.plan += [OPENAI.tool(ASK), OPENAI.text("Asked again.")]
        with world.served.client() as client:
            finished(client, client.call("conversation_send", {
                "conversation_id": c, "text": "Carry on where you left off."})["run_id"])
        eventually(lambda: documents(world.out)[-1], "the new question's document",
                   until=lambda doc: doc["event"] == "input_requested"
                   and doc["request_id"] != request, timeout=20)
        assert restart_endings(world.out) == endings
        assert len(world.endpoint.requests) == 6  # the orphaned run was never sent again


def test_r9_the_cli_says_clankie_restarted_nothing_was_answered_or_run_and_how_to_carry_on(
        tmp_path: Path, workspace: Path):
    with hooked_on_a_model(tmp_path) as world:
        c, request, continuation = asked_and_running(world, workspace)
        world.stop(signal.SIGKILL)
        world.start()
        served = world.served
        with served.client() as client:
            events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
        answered = next(e["request_id"] for e in events if e["type"] == "input_requested")
        shown = " ".join(cli(served, "conversations", "questions", c, "--request",
                             request).stdout.split())
        assert "cancelled (restart)" in shown and wording.RESTARTED_QUESTION in shown
        shown = " ".join(cli(served, "conversations", "questions", c).stdout.split())
        assert f"{wording.NO_QUESTION}." in shown  # without --request: the restart said too
        assert f"Question {request}" in shown and wording.RESTARTED_QUESTION in shown
        shown = " ".join(cli(served, "conversations", "questions", c, "--request",
                             answered).stdout.split())
        assert f"continuation run {continuation}: failed: orphaned_by_restart" in shown
        assert wording.RUN_INTERRUPTED in shown
        lines = cli(served, "conversations", "events", c).stdout
        assert f"question {request} {wording.RESTARTED_QUESTION}" in lines
        assert (f"run {continuation} (continuation) failed (orphaned_by_restart): "
                f"{wording.RUN_INTERRUPTED}") in lines


def test_r9_issue31_questions_says_the_latest_answer_whose_run_a_restart_interrupted(
        tmp_path: Path, workspace: Path):
    """Issue 31: after a restart orphaned the continuation of an answered question (no
    question waits), plain `conversations questions` said only "No question is pending.";
    now it shows that answered question as the latest to end, saying the answer was kept
    but Clankie's run for it was interrupted by the restart, and how to carry on (R9)."""
    with hooked_on_a_model(tmp_path) as world:
        c, answered, continuation = answered_and_running(world, workspace, ask_again=False)
        world.stop(signal.SIGKILL)
        world.start()
        shown = " ".join(cli(world.served, "conversations", "questions", c).stdout.split())
        assert f"{wording.NO_QUESTION}. The latest question to end: Question {answered}" \
            in shown, shown
        assert "Receipt" in shown and ": answered" in shown
        assert f"continuation run {continuation}: failed: orphaned_by_restart" in shown
        assert f"The answer is kept, but Clankie's run for it was {wording.RUN_INTERRUPTED}" \
            in shown
        assert wording.CARRY_ON in shown
