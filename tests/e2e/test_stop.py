"""SPEC R7 (and R5 after a stop) end to end: a real `clankie serve` with the
OpenAI-compatible and the Anthropic provider (their official SDKs) against the fake
endpoint of `tests/fakes.py`, and the CLI's `clankie conversations stop`.

A run hung in a model call is stopped by `run_cancel`: the endpoint sees the request
abandoned (its connection shut), the conversation's next run starts within 1 s of the stop
by the service's own clock, and after the held reply is released nothing the stopped run
would have said or called is stored. A queued run that is stopped never sends a request.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from clankie import dto
from tests.e2e.served import finished
from tests.e2e.test_cli import cli
from tests.e2e.test_providers import ASK, PROVIDERS, World, served_world
from tests.fakes import Reply, error_reply
from tests.polling import eventually


@pytest.fixture(params=sorted(PROVIDERS))
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    yield from served_world(PROVIDERS[request.param], tmp_path)


def at(moment: str) -> datetime:
    return datetime.fromisoformat(moment)


def held(world: World, release: threading.Event) -> Reply:
    """A reply that would say words, call a tool and ask, held until `release`."""
    p = world.provider
    body = p.calls(("late-1", "list_files", {}), ("late-2", "ask_question", ASK),
                   text="words after the stop").body
    return Reply(body=body, hold=release)


def stored(world: World, c: str) -> dict[str, Any]:
    with world.served.client() as client:
        events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
        pending = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending
    return {"said": [e["text"] for e in events if e["type"] == "message"
                     and e["author"] == "clankie"],
            "tools": [e["tool"] for e in events if e["type"] == "tool_activity"],
            "pending": pending.prompt if pending else None,
            "runs": [(e["run_id"], e["status"]) for e in events if e["type"] == "run_status"]}


def test_r7_a_run_hung_in_a_model_call_stops_within_1s_and_stores_nothing_after(
        world: World):
    p, endpoint = world.provider, world.endpoint
    release = threading.Event()
    endpoint.plan += [held(world, release), p.text("The next run.")]
    c = world.conversation()
    first = world.send(c, "one")
    endpoint.wait_for_requests(1)  # its model call is in flight, held by the endpoint
    second = world.send(c, "two")  # queued behind it (R4)
    with world.served.client() as client:
        stopped = client.call("run_cancel", {"run_id": first})
        assert (stopped["status"], stopped["error"]) == ("cancelled", "stopped_by_owner")
        eventually(lambda: endpoint.hung_up, "the endpoint to see the request abandoned", timeout=5)
        after = finished(client, second, timeout=5)
    release.set()
    gap = (at(after["started_at"]) - at(stopped["finished_at"])).total_seconds()
    assert gap <= 1.0, f"the next run started {gap:.3f} s after the stop"
    assert after["status"] == "succeeded"
    assert len(endpoint.requests) == 2  # the stopped run asked the model nothing more
    with world.served.client() as client:
        assert client.call("run_get", {"run_id": first}) == stopped  # unchanged since
    shown = stored(world, c)
    assert shown["said"] == ["The next run."]
    assert shown["tools"] == [] and shown["pending"] is None
    assert [s for r, s in shown["runs"] if r == first] == ["queued", "running", "cancelled"]


def test_r7_a_queued_run_stopped_never_sends_a_request(world: World):
    p, endpoint = world.provider, world.endpoint
    release = threading.Event()
    endpoint.plan += [Reply(body=p.text("First.").body, hold=release), p.text("Third.")]
    c = world.conversation()
    first = world.send(c, "one")
    endpoint.wait_for_requests(1)
    second = world.send(c, "two")
    with world.served.client() as client:
        stopped = client.call("run_cancel", {"run_id": second})
    assert (stopped["status"], stopped["error"], stopped["started_at"]) == (
        "cancelled", "stopped_by_owner", None)
    release.set()
    assert world.run(first)["status"] == "succeeded"
    third = world.send(c, "three")
    assert world.run(third)["status"] == "succeeded"
    assert len(endpoint.requests) == 2  # the first and the third: the second never started
    assert "two" in json.dumps(endpoint.requests[1]["body"])  # its message stays history
    assert world.run(second) == stopped


def test_r7_a_stopped_continuation_shows_cancelled_and_its_answer_stays(world: World):
    p, endpoint = world.provider, world.endpoint
    release = threading.Event()
    endpoint.plan += [p.tool(ASK), p.text("Asked."), held(world, release)]
    c = world.conversation()
    world.run(world.send(c))
    receipt = world.answer(c, option=0)["receipt"]
    endpoint.wait_for_requests(3)  # the continuation's model call is held
    with world.served.client() as client:
        client.call("run_cancel", {"run_id": receipt["run_id"]})
        eventually(lambda: endpoint.hung_up, "the endpoint to see the request abandoned", timeout=5)
        ended = client.op(dto.INPUT_GET,
                          dto.InputGet(conversation_id=c, request_id=receipt["request_id"])).request
    release.set()
    assert ended is not None and ended.receipt is not None
    assert (ended.status, ended.receipt.continuation, ended.receipt.continuation_error) == (
        "answered", "cancelled", "stopped_by_owner")
    shown = cli(world.served, "conversations", "questions", c, "--request",
                receipt["request_id"]).stdout
    assert "cancelled: stopped_by_owner" in shown
    endpoint.plan.append(p.text("Noted."))
    assert world.run(world.send(c, "next"))["status"] == "succeeded"
    # R5: the stopped continuation's answer is still context for the next turn
    assert "answered: the owner (operator) chose the option 'pytest'." in json.dumps(
        endpoint.requests[-1]["body"])
    assert len(endpoint.requests) == 4  # the stopped continuation sent nothing more


@pytest.mark.parametrize("world", ["openai"], indirect=True)  # the CLI is the same for each
def test_r7_cli_stop_stops_the_running_run_and_those_queued_behind_it(world: World):
    p, endpoint = world.provider, world.endpoint
    release = threading.Event()
    endpoint.plan += [held(world, release), p.text("After the stop.")]
    c = world.conversation()
    first = world.send(c, "one")
    endpoint.wait_for_requests(1)
    second = world.send(c, "two")
    done = cli(world.served, "conversations", "stop", c[:8])
    assert done.returncode == 0, done.stderr
    assert f"Stopped run {first} (turn, was running)." in done.stdout
    assert f"Stopped run {second} (turn, was queued)." in done.stdout
    eventually(lambda: endpoint.hung_up, "the endpoint to see the request abandoned", timeout=5)
    release.set()
    again = cli(world.served, "conversations", "stop", c, "--json")
    assert (again.returncode, json.loads(again.stdout)) == (0, [])
    nothing = cli(world.served, "conversations", "stop", c)
    assert (nothing.returncode, nothing.stdout.strip()) == (
        0, f"Nothing to stop: no run of {c} is queued or running.")
    third = world.send(c, "three")
    assert world.run(third)["status"] == "succeeded"
    assert len(endpoint.requests) == 2
    assert stored(world, c)["said"] == ["After the stop."]
    unknown = cli(world.served, "conversations", "stop", "ffffffff")
    assert unknown.returncode == 2  # an unmatched prefix is a usage error (section 10)
    with world.served.client() as client:
        viewer = client.call("device_pair", {"name": "tv", "mode": "read_only"})["token"]
    release_fourth = threading.Event()
    endpoint.plan.append(Reply(body=p.text("Four.").body, hold=release_fourth))
    fourth = world.send(c, "four")
    endpoint.wait_for_requests(3)
    refused = cli(world.served, "conversations", "stop", c, env={"CLANKIE_TOKEN": viewer})
    release_fourth.set()
    assert refused.returncode == 5, refused.stderr
    assert "forbidden" in refused.stderr
    assert world.run(fourth)["status"] == "succeeded"



@pytest.mark.parametrize("world", ["openai"], indirect=True)  # the CLI is the same for each
def test_r7_cli_show_says_which_runs_are_running_or_queued_and_how_to_stop_them(
        world: World):
    """R7: `clankie conversations show` says what `stop` would stop (the conversation's
    running and queued runs, from conversation_get's unfinished_runs), and the command."""
    p, endpoint = world.provider, world.endpoint
    release = threading.Event()
    endpoint.plan += [held(world, release), p.text("Two.")]
    c = world.conversation()
    idle = cli(world.served, "conversations", "show", c[:8])
    assert "runs: none queued or running" in idle.stdout
    first = world.send(c, "one")
    endpoint.wait_for_requests(1)
    second = world.send(c, "two")
    busy = cli(world.served, "conversations", "show", c[:8]).stdout
    assert f"  {first} (turn) running since " in busy
    assert f"  {second} (turn) queued since " in busy
    assert f"stop with: clankie conversations stop {c}" in busy
    cli(world.served, "conversations", "stop", c)
    release.set()
    assert "runs: none queued or running" in cli(world.served, "conversations", "show",
                                                 c).stdout

def test_r7_r6_a_run_stopped_while_it_waits_to_retry_ends_at_once(world: World):
    p, endpoint = world.provider, world.endpoint
    endpoint.plan += [error_reply(429, "slow down", {"Retry-After": "30"}),
                      p.text("The next run.")]
    c = world.conversation()
    first = world.send(c, "one")
    with world.served.client() as client:
        def waiting() -> list[dict[str, Any]]:
            events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
            return [e for e in events if e["type"] == "run_activity"]

        eventually(waiting, "the run to wait before trying again", timeout=10)
        second = world.send(c, "two")
        stopped = client.call("run_cancel", {"run_id": first})
        after = finished(client, second, timeout=5)
        assert len(waiting()) == 1
    gap = (at(after["started_at"]) - at(stopped["finished_at"])).total_seconds()
    assert gap <= 1.0, f"the next run started {gap:.3f} s after the stop"
    assert after["status"] == "succeeded" and len(endpoint.requests) == 2
    assert stored(world, c)["said"] == ["The next run."]
