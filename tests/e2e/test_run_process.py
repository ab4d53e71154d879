"""Issue 39, runs in a process of their own, end to end: a real `clankie serve` on the
OpenAI-compatible provider (its official SDK) against the fake endpoint of tests/fakes.py.

The run process is a child of `serve`, in a session of its own (a Ctrl+C in serve's
terminal is serve's alone); the model's SDK and the turn loop are loaded there, never in
the service, even after a run. Killed while it holds a run hung in a model call, it takes
nothing with it: the run is failed at once, saying so (R9 tells the owner as for any failed
run), nothing it would have said is stored, and the next message is run by a new process.
When `serve` is killed (SIGKILL: no word to it), the run process ends too, and the next
start fails the run it held, never sending it again (R3).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.served import ROOT, clankie, finished
from tests.e2e.test_providers import PROVIDERS, World, served_world
from tests.e2e.test_serve import ONLY_FOR_RUNS_OR_THE_PAGE
from tests.fakes import Reply, model_endpoint
from tests.polling import eventually


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    yield from served_world(PROVIDERS["openai"], tmp_path)


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux: each thread's `children`)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return found


def run_process(world: World) -> int:
    """The run process, once it runs its own program: a child stopped between its fork and
    its exec would hold `serve`'s start of it (`Popen` waits for the exec), which no
    signal but this test's can do."""
    def started() -> int | None:
        for child in children(world.served.proc.pid):
            try:
                if b"clankie.service.runner_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    return child
            except OSError:
                continue
        return None
    child: int = eventually(started, "the run process", timeout=20)
    return child


def held_call(world: World) -> threading.Event:
    """The next model call waits for the returned event, then says "Late words."."""
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("Late words.").body,
                                     hold=release))
    return release


def statuses(world: World, c: str) -> list[tuple[str, Any]]:
    with world.served.client() as client:
        events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
    return [(e["type"], e.get("status") or e.get("text")) for e in events]


def test_issue39_the_run_process_is_a_child_of_serve_in_a_session_of_its_own(world: World):
    p, endpoint = world.provider, world.endpoint
    endpoint.plan.append(p.text("Hello."))
    c = world.conversation()
    assert world.run(world.send(c))["status"] == "succeeded"
    child = run_process(world)
    assert os.getsid(child) == child != os.getsid(world.served.proc.pid)


# `clankie serve` in the main thread, and a thread that waits for it, has one run made (a
# message to a conversation), waits for the run's end, then prints its status and every
# module the service has imported by then, and stops it (SIGTERM).
SERVE_RUN_AND_LIST_MODULES = """
import os, signal, sys, threading
from clankie.cli.main import main
from clankie.client import Client, ClientError
from tests.polling import eventually

def info():
    try:
        with Client(timeout=5) as client:
            return client.call("service_info")
    except ClientError:
        return None

def probe():
    eventually(info, "service_info", timeout=60, every=0.02)
    with Client(timeout=30) as client:
        c = client.call("conversation_create", {"workspace": os.environ["PROBE_WORKSPACE"]})
        run_id = client.call("conversation_send", {"conversation_id": c["conversation_id"],
                                                   "text": "hi"})["run_id"]
        run = eventually(lambda: client.call("run_get", {"run_id": run_id}), "the run",
                         timeout=60, until=lambda r: r["status"] not in ("queued", "running"))
    print(run["status"], *sorted(sys.modules), sep="\\n", flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=probe, daemon=True).start()
sys.exit(main(sys.argv[1:]))
"""


def test_issue39_after_a_run_the_service_has_imported_no_sdk_nor_the_turn_loop(
        tmp_path: Path):
    """The run's model call, its SDK and the turn loop are the run process's alone: the
    service that made the run never loads them (issue 31 kept them out until the first
    run; now for good)."""
    home, workspace = tmp_path / "home", tmp_path / "project"
    workspace.mkdir()
    assert clankie("init", home=home).returncode == 0
    p = PROVIDERS["openai"]
    with model_endpoint() as endpoint:
        endpoint.plan.append(p.text("Hello."))
        done = subprocess.run(
            [sys.executable, "-c", SERVE_RUN_AND_LIST_MODULES, "serve"], capture_output=True,
            text=True, timeout=120, cwd=ROOT,
            env=dict(os.environ, **p.env(endpoint.url), CLANKIE_HOME=str(home),
                     PROBE_WORKSPACE=str(workspace), PYTHONPATH=f"{ROOT / 'src'}:{ROOT}"))
        assert done.returncode == 0, done.stderr
        assert len(endpoint.requests) == 1
    status, *modules = done.stdout.splitlines()
    assert status == "succeeded" and "clankie.api.app" in modules, done.stdout[:2000]
    assert [m for m in modules if m.split(".")[0] in ONLY_FOR_RUNS_OR_THE_PAGE
            or m.startswith(ONLY_FOR_RUNS_OR_THE_PAGE[6:])] == []


def test_issue39_r9_a_run_held_by_a_killed_run_process_fails_at_once_and_the_next_goes_on(
        world: World):
    c = world.conversation()
    release = held_call(world)
    run_id = world.send(c)
    world.endpoint.wait_for_requests(1)
    killed = run_process(world)
    os.kill(killed, signal.SIGKILL)
    with world.served.client() as client:
        run = finished(client, run_id)
    assert run["status"] == "failed"
    assert run["error"].startswith("internal_error: the run process ended (exit status -9)")
    release.set()  # what the killed process would have said, had it lived
    world.endpoint.plan.append(world.provider.text("Back."))
    assert world.run(world.send(c, "again"))["status"] == "succeeded"
    assert run_process(world) != killed
    said = [text for kind, text in statuses(world, c) if kind == "message"]
    assert said == ["Set up tests.", "again", "Back."]
    assert any("the run process ended" in line for line in world.served.log)


def test_issue39_r3_a_killed_service_takes_its_run_process_along_and_never_reruns(
        world: World):
    c = world.conversation()
    release = held_call(world)
    run_id = world.send(c)
    world.endpoint.wait_for_requests(1)
    child = run_process(world)
    world.served.proc.send_signal(signal.SIGKILL)
    world.served.proc.wait(10)

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        return Path(f"/proc/{child}/stat").read_text().split()[2] == "Z"  # ended, unreaped
    eventually(gone, "the run process to end with its service", timeout=10)
    release.set()
    world.served = type(world.served).start(world.home, init=False, script=None,
                                            env=world.provider.env(world.endpoint.url))
    with world.served.client() as client:
        run = client.call("run_get", {"run_id": run_id})
    assert (run["status"], run["error"]) == ("failed", "orphaned_by_restart")
    assert len(world.endpoint.requests) == 1  # never sent again


def test_issue39_r4_a_killed_run_process_fails_only_the_runs_it_held(world: World):
    """Red team: runs started while the dead process is replaced go to the new one; only
    the run the dead one held fails (before, every running run did, new ones included)."""
    held_in = world.conversation()
    release = held_call(world)
    held = world.send(held_in)
    world.endpoint.wait_for_requests(1)
    others = [world.conversation() for _ in range(12)]
    world.endpoint.plan.extend(world.provider.text("Back.") for _ in others)
    os.kill(run_process(world), signal.SIGKILL)
    sent = [world.send(c) for c in others]  # as the service finds the process gone
    with world.served.client() as client:
        assert finished(client, held)["status"] == "failed"
    release.set()
    assert [world.run(run_id)["status"] for run_id in sent] == ["succeeded"] * len(others)


def test_issue39_r3_r4_runs_handed_to_a_process_that_died_before_taking_them_still_run(
        world: World):
    """R3 forbids a run sent twice, not a run never sent: a run the process was handed but
    never took (it was stopped, then killed, before reading its channel) has called no
    model; it is run by the next process, and only the run it held fails (CI once saw two
    runs sent in the instant after a kill failed with it)."""
    held_in = world.conversation()
    release = held_call(world)
    held = world.send(held_in)
    world.endpoint.wait_for_requests(1)
    others = [world.conversation() for _ in range(6)]
    world.endpoint.plan.extend(world.provider.text("Back.") for _ in others)
    child = run_process(world)
    os.kill(child, signal.SIGSTOP)  # it reads nothing more, and the service cannot tell
    sent = [world.send(c) for c in others]  # handed to it: in its channel, unread
    os.kill(child, signal.SIGKILL)
    with world.served.client() as client:
        assert finished(client, held)["status"] == "failed"
    release.set()
    assert [world.run(run_id)["status"] for run_id in sent] == ["succeeded"] * len(others)
    assert len(world.endpoint.requests) == 1 + len(others)  # none was sent twice


def test_issue39_a_stopped_run_process_never_holds_up_the_services_writes(world: World):
    """Red team: with the run process stopped (SIGSTOP), the runs handed to it queue in the
    service; answers, sends and stops are still answered (before, the store's writer
    blocked on the full channel, and with it every write)."""
    child = run_process(world)
    os.kill(child, signal.SIGSTOP)
    try:
        with world.served.client() as client:
            for _ in range(400):  # far more than a socket's buffer holds of `execute`s
                c = client.call("conversation_create", {"kind": "owner",
                                                        "workspace": str(world.workspace)})
                client.call("conversation_send", {"conversation_id": c["conversation_id"],
                                                  "text": "hi"})
    finally:
        os.kill(child, signal.SIGCONT)
