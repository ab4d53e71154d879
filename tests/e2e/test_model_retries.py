"""SPEC R6 and V4 `run_activity`, end to end: a real `clankie serve` with each provider's
official SDK, against the fake endpoint on loopback (its real wire formats and errors).

A transient failure (429 with `Retry-After`, 500, 529, a dropped connection, a hang past
`model_timeout`) is tried again, each wait shown as one `run_activity` event, and the run
succeeds; a 400 is never tried again; giving up says how often and for how long; every
failure is in the run's error in words and in one line of the service's log. Settings are
kept small (`CLANKIE_MODEL_TIMEOUT` and friends) so that no test really waits more than a
second or two.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from clankie import dto, when
from tests.e2e.served import Served, finished
from tests.e2e.test_cli import cli
from tests.e2e.test_providers import PROVIDERS, Provider
from tests.fakes import Endpoint, Reply, dropped, error_reply, model_endpoint
from tests.polling import eventually


@dataclass
class Retrying:
    provider: Provider
    endpoint: Endpoint
    served: Served
    workspace: Path

    def turn(self, text: str = "Hello.") -> tuple[str, dict[str, Any]]:
        """A message sent and its run finished: the conversation and the run."""
        with self.served.client() as client:
            c = str(client.op(dto.CONVERSATION_CREATE,
                              dto.ConversationCreate(workspace=str(self.workspace))).conversation_id)
            run_id = client.call("conversation_send", {"conversation_id": c,
                                                       "text": text})["run_id"]
            return c, finished(client, run_id, timeout=30)

    def events(self, c: str) -> list[dict[str, Any]]:
        with self.served.client() as client:
            return list(client.call("events_tail", {"conversation_id": c,
                                                    "limit": 500})["events"])

    def activity(self, c: str) -> list[dict[str, Any]]:
        return [e for e in self.events(c) if e["type"] == "run_activity"]

    def logged(self, run_id: str) -> list[str]:
        """The log's `model_error` lines of the run, once there is one: the log is read on
        a thread, so a line the service wrote may reach `served.log` a moment after the
        run is seen ended (two failures on a loaded machine)."""
        def lines() -> list[str]:
            return [line for line in self.served.log if run_id in line
                    and "model_error" in line]
        return eventually(lines, f"the log line of run {run_id}", timeout=20)


SETTINGS = {"CLANKIE_MODEL_TIMEOUT": "1", "CLANKIE_MODEL_RETRIES": "3",
            "CLANKIE_MODEL_RETRY_WAIT": "10"}


@pytest.fixture(scope="module", params=sorted(PROVIDERS))
def serving(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Retrying]:
    """One service per provider for this module (each test has its own conversation)."""
    provider = PROVIDERS[request.param]
    tmp = tmp_path_factory.mktemp(f"retries-{provider.name}")
    workspace = tmp / "project"
    workspace.mkdir()
    with model_endpoint() as endpoint:
        served = Served.start(tmp / "home", script=None,
                              env={**provider.env(endpoint.url), **SETTINGS})
        try:
            yield Retrying(provider, endpoint, served, workspace)
        finally:
            served.stop()


@pytest.fixture
def retrying(serving: Retrying) -> Retrying:
    """The module's service, its endpoint's plan and record cleared for this test."""
    with serving.endpoint.arrived:
        serving.endpoint.plan.clear()
        serving.endpoint.requests.clear()
    return serving


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def test_r6_v4_a_429_with_retry_after_is_waited_out_and_shown_as_one_run_activity(
        retrying: Retrying):
    p, endpoint = retrying.provider, retrying.endpoint
    endpoint.plan += [error_reply(429, "slow down", {"Retry-After": "1"}), p.text("Hi!")]
    c, run = retrying.turn()
    assert run["status"] == "succeeded", run
    assert len(endpoint.requests) == 2
    assert endpoint.requests[0]["body"] == endpoint.requests[1]["body"]  # the same call again
    [event] = retrying.activity(c)
    assert set(event) >= {"type", "seq", "conversation_id", "run_id", "activity", "summary",
                          "retry_at", "at"}
    assert (event["run_id"], event["activity"]) == (run["run_id"], "model_retry")
    assert event["summary"] == f"{p.name}: 429 rate limited; try 2 of 4 in 1 s"
    waited = (_when(event["retry_at"]) - _when(event["at"])).total_seconds()
    assert 0 < waited <= 1.0  # retry_at is 1 s after the wait began; `at` a moment later
    kinds = [e["type"] for e in retrying.events(c)]
    assert kinds.index("run_activity") < kinds.index("message", 1)  # before the reply
    printed = cli(retrying.served, "conversations", "events", c).stdout
    assert (f"#{event['seq']} {when.local(event['at'])} run {run['run_id']} model_retry: "
            f"{p.name}: 429 rate limited; try 2 of 4 in 1 s (next try "
            f"{when.local(event['retry_at'])} (") in printed


def test_r6_a_500_and_a_529_are_tried_again_until_the_reply(retrying: Retrying):
    p, endpoint = retrying.provider, retrying.endpoint
    endpoint.plan += [error_reply(500), error_reply(529, "Overloaded",
                                                    {"retry-after-ms": "100"}),
                      p.text("Made it.")]
    c, run = retrying.turn()
    assert run["status"] == "succeeded", run
    assert len(endpoint.requests) == 3
    summaries = [e["summary"] for e in retrying.activity(c)]
    assert summaries[0].startswith(f"{p.name}: 500 server error; try 2 of 4 in ")
    assert summaries[1] == f"{p.name}: 529 overloaded; try 3 of 4 in 0.1 s"


def test_r6_a_dropped_connection_is_tried_again(retrying: Retrying):
    p, endpoint = retrying.provider, retrying.endpoint
    endpoint.plan += [dropped(), p.text("Back.")]
    c, run = retrying.turn()
    assert run["status"] == "succeeded", run
    assert len(endpoint.requests) == 2
    [event] = retrying.activity(c)
    assert event["summary"].startswith(f"{p.name}: the connection dropped before a reply; ")


def test_r6_a_call_hung_past_model_timeout_is_abandoned_and_tried_again(retrying: Retrying):
    p, endpoint = retrying.provider, retrying.endpoint
    hung = threading.Event()
    endpoint.plan += [Reply(body=p.text("too late").body, hold=hung), p.text("In time.")]
    try:
        c, run = retrying.turn()
    finally:
        hung.set()
    assert run["status"] == "succeeded", run
    [event] = retrying.activity(c)
    assert event["summary"].startswith(f"{p.name}: no reply within 1 s (model_timeout); ")
    said = [e["text"] for e in retrying.events(c) if e["type"] == "message"
            and e["author"] == "clankie"]
    assert said == ["In time."]


def test_r6_a_400_is_never_tried_again_and_the_run_says_why(retrying: Retrying):
    p, endpoint = retrying.provider, retrying.endpoint
    endpoint.plan += [error_reply(400, "messages.1: tool name is invalid"), p.text("never")]
    c, run = retrying.turn()
    # D18 `auto`: a 400 to the streamed request may be a refusal of streaming, so the call is
    # made once more without it (not an R6 try); its 400 fails the run at once.
    assert [r["body"].get("stream") for r in endpoint.requests] == [True, None]
    assert run["status"] == "failed"
    assert run["error"] == (f"model_error: {p.name}: 400 bad request: messages.1: tool name "
                            "is invalid")
    assert retrying.activity(c) == []
    assert len(retrying.logged(run["run_id"])) == 1


def test_r6_a_401_names_the_key_to_check(retrying: Retrying):
    p, endpoint = retrying.provider, retrying.endpoint
    endpoint.plan += [error_reply(401, "invalid api key")]
    _, run = retrying.turn()
    assert len(endpoint.requests) == 1
    key = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}[p.name]
    assert run["error"] == (f"model_error: {p.name}: 401 unauthorized: check {key}: "
                            "invalid api key")


def test_r6_it_gives_up_after_model_retries_saying_tries_and_seconds_and_logs_one_line(
        retrying: Retrying):
    p, endpoint = retrying.provider, retrying.endpoint
    endpoint.plan += [error_reply(429, "slow down", {"Retry-After": "0"})] * 4
    c, run = retrying.turn()
    assert len(endpoint.requests) == 4  # one try and CLANKIE_MODEL_RETRIES=3 more
    error = f"model_error: {p.name}: 429 rate limited, gave up after 4 tries and 0 s of waiting"
    assert (run["status"], run["error"]) == ("failed", error)
    assert len(retrying.activity(c)) == 3
    [line] = retrying.logged(run["run_id"])
    assert line.rstrip("\n").endswith(error) and " WARNING clankie.runs: " in line
    endpoint.plan.append(p.text("Fine now."))
    _, again = retrying.turn("again")
    assert again["status"] == "succeeded"  # the service goes on


def test_r6_a_retry_after_longer_than_model_retry_wait_gives_up_at_once(retrying: Retrying):
    p, endpoint = retrying.provider, retrying.endpoint
    endpoint.plan += [error_reply(429, "slow down", {"Retry-After": "60"}), p.text("never")]
    c, run = retrying.turn()
    assert len(endpoint.requests) == 1 and retrying.activity(c) == []
    assert run["error"] == (f"model_error: {p.name}: 429 rate limited, gave up after 1 try "
                            "and 0 s of waiting; it asked to wait 60 s, more than the 10 s left of "
                            "model_retry_wait")
