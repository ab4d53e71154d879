"""SPEC section 13's rule, with real hosts: "`clankie mcp` is done when an agent in each of
Claude Code, Codex CLI, Gemini CLI and OpenCode asks and gets the owner's answer."

For each host (pinned in hosts/package.json, installed by `make hosts`): a real
`clankie serve` in a temporary home; an `agent` credential issued by the operator; the
host, headless, in its own temporary home, registering `clankie mcp --workspace DIR` with
that credential (as `clankie mcp config HOST` prints it, where the bridge has that
command); the scripted model (tests/hosts/fake_model.py) on 127.0.0.1 as the host's model;
and the owner, who answers through the service (`input_get`, `input_answer`, operator
token) once the model has called `wait_answer`. The test then reads what the model was sent:
the ask's pending result with "The owner has not answered yet. Do not assume an answer.",
the `request_id`, and the owner's answer; and the host's own output, which ends with the
model's final text quoting the answer's label.

`make test` and `make hosts` install the pinned hosts first; a host missing from
hosts/node_modules is a failure that says so, never a skip (`make check` leaves them out).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.served import Served
from tests.hosts.fake_model import FINAL_PREFIX, FakeModel, Recorded, tool_named
from tests.hosts.hosts import HOSTS, bridge_for, installed

PENDING = "The owner has not answered yet. Do not assume an answer."
ANSWER = "four spaces"  # the owner's choice: the second option, so no default passes for it
RUN_S = 150  # a host's whole run, at most (each scripted wait holds up to 25 s)

# What each host hands its model of a tool result (SPEC P4, measured): the structured
# content's JSON, or the one line of text (the sentence, then the compact JSON).
SEES = {"claude": "structuredContent", "codex": "structuredContent", "gemini": "text",
        "opencode": "text"}


@dataclass
class Outcome:
    host: str
    seconds: float = 0.0
    returncode: int | None = None
    tool_names: list[str] = field(default_factory=list)
    model_saw: str = ""
    client_info: str | None = None
    registration: str = ""
    stray: list[str] = field(default_factory=list)
    leftovers: int = 0


OUTCOMES: list[Outcome] = []


@pytest.fixture
def host(request: pytest.FixtureRequest) -> str:
    """The host's name, once it is known to be installed (before anything is started)."""
    name: str = request.param
    if not installed(name):
        pytest.fail(f"{name} is not installed in hosts/node_modules (`make test` and "
                    "`make hosts` install the pinned hosts)")
    return name


@pytest.fixture
def served(host: str, tmp_path: Path) -> Iterator[Served]:
    """`clankie serve` of the bridge's own code (HOSTS_BRIDGE_SRC, where set): one version."""
    src = os.environ.get("HOSTS_BRIDGE_SRC")
    server = Served.start(tmp_path / "clankie-home", script=None,
                          env={"PYTHONPATH": src} if src else None)
    try:
        yield server
    finally:
        assert server.stop() == 0


class Owner:
    """The owner at another screen: once the model has called `wait_answer`, answers the
    agent's pending question with the option labelled `label` (operator token, the
    dispatcher's `input_get` and `input_answer`), within a deadline."""

    def __init__(self, served: Served, fake: FakeModel, label: str, timeout: float) -> None:
        self.served, self.fake, self.label = served, fake, label
        self.deadline = time.monotonic() + timeout
        self.stop = threading.Event()
        self.answered: dict[str, Any] | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            with self.served.client() as client:
                while not self.stop.is_set() and time.monotonic() < self.deadline:
                    if self.fake.waited.wait(0.05) and self._answer(client):
                        return
        except BaseException as exc:  # reported by `close`
            self.error = exc

    def _answer(self, client: Any) -> bool:
        for conversation in client.call("conversation_list", {})["conversations"]:
            if conversation["kind"] != "agent":
                continue
            snapshot = client.call("input_get",
                                   {"conversation_id": conversation["conversation_id"]})
            pending = snapshot["pending"]
            if pending is None:
                continue
            option = next(o for o in pending["options"] if o["label"] == self.label)
            reply = client.call("input_answer", {
                "conversation_id": snapshot["conversation_id"],
                "request_id": pending["request_id"], "incarnation": snapshot["incarnation"],
                "revision": snapshot["revision"], "option_id": option["option_id"]})
            self.answered = {"conversation": conversation, "receipt": reply["receipt"]}
            return True
        return False

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the owner's thread did not stop"
        if self.error is not None:
            raise self.error


def run_host(argv: list[str], env: dict[str, str], cwd: Path, outcome: Outcome, owner: Owner,
             logs: Path) -> subprocess.CompletedProcess[str]:
    """The host to its end (at most RUN_S, or until the owner's thread fails), in a session
    of its own, its output in files under `logs`; whatever of that session is still running
    after it (an MCP server it left) is counted and stopped."""
    started = time.monotonic()
    out_path, err_path = logs / f"{outcome.host}.stdout", logs / f"{outcome.host}.stderr"
    with out_path.open("w") as out, err_path.open("w") as err:
        proc = subprocess.Popen(argv, env=env, cwd=cwd, text=True, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=err, start_new_session=True)
    try:
        while proc.poll() is None:
            if time.monotonic() - started > RUN_S or owner.error is not None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                owner.close()  # raises the owner's error, if that is why
                raise AssertionError(f"{argv[0]} did not finish in {RUN_S} s:\n"
                                     f"{out_path.read_text()[-4000:]}\n"
                                     f"{err_path.read_text()[-4000:]}")
            time.sleep(0.05)
    finally:
        outcome.seconds = round(time.monotonic() - started, 2)
        outcome.leftovers = _stop_group(proc.pid)
    return subprocess.CompletedProcess(argv, proc.returncode, out_path.read_text(),
                                       err_path.read_text())


def _stop_group(pgid: int) -> int:
    """Stop what is left of the host's own process group (it made it; nothing else is in
    it): SIGTERM, up to 5 s, then SIGKILL. Returns how many processes were left."""
    left = _members(pgid)
    if not left:
        return 0
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while _members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _members(pgid):
        os.killpg(pgid, signal.SIGKILL)
    return len(left)


def _members(pgid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry))
    return found


def agent_turns(fake: FakeModel) -> list[Recorded]:
    turns = fake.scripted()
    assert turns, f"the host never offered clankie's tools to the model: {fake.requests!r}"
    return turns


@pytest.mark.parametrize("host", sorted(HOSTS), indirect=True)
def test_an_agent_in_the_host_asks_and_gets_the_owners_answer(host: str, served: Served,
                                                              tmp_path: Path):
    outcome = Outcome(host)
    OUTCOMES.append(outcome)
    with served.client() as operator:
        token = operator.call("credential_issue", {"kind": "agent",
                                                   "name": f"{host}-agent"})["token"]
    workspace = tmp_path / "project"
    workspace.mkdir()
    home = tmp_path / "host-home"
    home.mkdir()
    with FakeModel() as fake:
        bridge = bridge_for(workspace, token, served.home.path)
        prepared = HOSTS[host](home, workspace, fake.url, bridge)
        outcome.registration = prepared.registration.source
        if bridge.src is not None:  # the bridge's own code prints the entry (P2)
            assert outcome.registration == "clankie mcp config"
        owner = Owner(served, fake, ANSWER, RUN_S)
        try:
            done = run_host(prepared.argv, prepared.env, prepared.cwd, outcome, owner,
                            tmp_path)
        finally:
            owner.close()
        outcome.returncode = done.returncode
        outcome.stray = list(fake.stray)
        turns = agent_turns(fake)
        outcome.tool_names = sorted(n for n in turns[0].turn.tools if "clankie" in n)
        failure = (f"{host} exited {done.returncode}\nstdout: {done.stdout[-4000:]}\n"
                   f"stderr: {done.stderr[-4000:]}")
        assert done.returncode == 0, failure

        # The model called ask_owner first, was handed a pending result with the sentence
        # and the request_id, called wait_answer with that id, and was handed the answer.
        first = turns[0].action
        assert first is not None and first.__class__.__name__ == "Call"
        ask = tool_named(turns[0].turn.tools, "ask_owner")
        wait = tool_named(turns[0].turn.tools, "wait_answer")
        assert ask is not None and wait is not None
        results = [r for t in turns for r in t.turn.results if r.name in (ask, wait)]
        assert results, failure
        asked = results[0]
        assert asked.name == ask and PENDING in asked.seen, asked
        assert owner.answered is not None, "the owner never saw the question pending"
        request_id = owner.answered["receipt"]["request_id"]
        assert request_id in asked.seen
        waits = [t.action for t in turns if t.action is not None and
                 getattr(t.action, "name", None) == wait]
        assert waits and all(w.args["request_id"] == request_id for w in waits)  # type: ignore[union-attr]
        last = turns[-1].turn.results[-1]
        assert last.name == wait and '"answered"' in last.seen.replace('\\"', '"'), last
        assert ANSWER in last.seen

        # What form the model read (P4): the structured content, or the line of text.
        outcome.model_saw = form_seen(asked.seen)
        assert outcome.model_saw == SEES[host], asked.seen

        # The final text quotes the answer, and the host printed it.
        final = turns[-1].action
        assert final is not None and getattr(final, "text", "") == f"{FINAL_PREFIX} {ANSWER}."
        assert f"{FINAL_PREFIX} {ANSWER}." in done.stdout, failure

        # The service: one agent conversation, asked by this credential; the answer's
        # receipt, answered by the operator, collected by the agent's read.
        conversation_id = owner.answered["conversation"]["conversation_id"]
        with served.client() as operator:
            ended = operator.call("input_get", {"conversation_id": conversation_id})
            conversation = operator.call("conversation_get",
                                         {"conversation_id": conversation_id})
        assert ended["pending"] is None
        assert conversation["asker"]["name"] == f"{host}-agent"
        outcome.client_info = conversation["asker"].get("client")

    # Nothing went anywhere but the fake model.
    assert outcome.stray == [], f"{host} tried to reach: {outcome.stray}"


def form_seen(seen: str) -> str:
    """"text" when the model was handed the line of text (the sentence, then the JSON),
    "structuredContent" when only the structured content's JSON (the sentence inside it,
    as its `note`), "neither" when the sentence is not there at all."""
    plain = seen.replace('\\"', '"')
    outside = re.sub(r'"note"\s*:\s*"[^"]*"', "", plain)
    if PENDING in outside:
        return "text"
    return "structuredContent" if PENDING in plain else "neither"
