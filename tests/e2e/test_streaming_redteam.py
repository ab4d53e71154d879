"""Red team of replies that stream, service side (SPEC section 14, D1-D14, D18-D20): a real
`clankie serve`, its scripted model writing slowly (`pace_ms`) or the SDK models reading a
hostile fake endpoint on loopback (tests/fakes.py), read by live long-polls as an attacker
would read them. Each test names the rule it holds the service to.
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clankie.clientcore import ApiError
from tests.e2e.served import ENDED, Served, finished, run_status
from tests.polling import eventually

WORDS = " ".join(f"word{n}" for n in range(400))
ENV = {"CLANKIE_STREAM_CHECKPOINT": "0.5", "CLANKIE_STREAM_INTERVAL": "0.05"}


def conversation(served: Served) -> str:
    workspace = served.home.path.parent / "workspace"
    workspace.mkdir(exist_ok=True)
    with served.client() as client:
        return str(client.call("conversation_create", {
            "kind": "owner", "workspace": str(workspace)})["conversation_id"])


def tail(client: Any, c: str, **more: Any) -> dict[str, Any]:
    return dict(client.call("events_tail", {"conversation_id": c, "limit": 500, **more}))


def live_of(client: Any, c: str, at_least: int = 1, timeout: float = 30,
            reply_id: str | None = None) -> dict[str, Any]:
    """The live reply (accumulated as a surface does) once it holds `at_least` characters
    (of `reply_id` when given, else any)."""
    at: dict[str, Any] = {"reply_id": None, "offset": 0}
    text = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        page = tail(client, c, after=0, wait_ms=1_000, live=at)
        live = page["live"]
        if live is None:
            continue
        text = (text if live["offset"] else "") + live["text"]
        at = {"reply_id": live["reply_id"], "offset": live["length"]}
        if len(text) >= at_least and reply_id in (None, live["reply_id"]):
            return {**live, "text": text}
    raise AssertionError(f"no live reply of {at_least} characters: {text!r}")


def clankie_messages(client: Any, c: str) -> list[dict[str, Any]]:
    return [e for e in tail(client, c)["events"]
            if e["type"] == "message" and e["author"] == "clankie"]


@pytest.fixture
def scripted(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Served]:
    script = getattr(request, "param", None) or {
        "turns": [[{"say": WORDS, "pace_ms": 40}]] * 10}
    served = Served.start(tmp_path / "home", script=script, env=ENV)
    yield served
    served.stop()


# ------------------------------------------------------------------ D2: attempt


TWO_CALLS = {"turns": [[{"say": "Looking first.", "pace_ms": 1},
                        {"tool": "list_files", "args": {"path": "."}},
                        {"say": WORDS, "pace_ms": 40}]] * 3}


@pytest.mark.parametrize("scripted", [TWO_CALLS], indirect=True)
def test_d2_attempt_is_the_try_number_of_its_call_not_the_count_of_calls_in_the_run(
        scripted: Served):
    """D2: a live reply's `attempt` is R6's try number, from 1. The run's second model
    call, tried once, is its try 1: it is not the run's second reply."""
    c = conversation(scripted)
    with scripted.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
        first = eventually(lambda: clankie_messages(client, c), "the first reply stored")
        live = live_of(client, c, at_least=20)
        assert live["reply_id"] != first[0]["message_id"]
        assert live["attempt"] == 1, live


# ------------------------------------------------------------------ D4: bad `live` inputs


def bad_lives() -> list[Any]:
    """`live` inputs D4 refuses: hand-picked, then generated (a fixed seed)."""
    import random

    good = str(uuid.uuid4())
    picked: list[Any] = [
        {}, {"reply_id": None}, {"offset": 0}, {"reply_id": good},
        {"reply_id": None, "offset": 0, "extra": 1}, {"reply_id": None, "offset": -1},
        {"reply_id": None, "offset": 16_777_217}, {"reply_id": None, "offset": 2**63},
        {"reply_id": None, "offset": 1.5}, {"reply_id": None, "offset": "5"},
        {"reply_id": None, "offset": True}, {"reply_id": None, "offset": None},
        {"reply_id": "not-a-uuid", "offset": 0}, {"reply_id": good.upper(), "offset": 0},
        {"reply_id": good.replace("-", ""), "offset": 0},
        {"reply_id": "{" + good + "}", "offset": 0}, {"reply_id": f"urn:uuid:{good}", "offset": 0},
        {"reply_id": 5, "offset": 0}, {"reply_id": [], "offset": 0}, {"reply_id": {}, "offset": 0},
        {"reply_id": good + "\n", "offset": 0}, {"reply_id": "\x00" * 36, "offset": 0},
        [], "live", 0, True, [None, 0],
    ]
    rng = random.Random(40)
    values: list[Any] = [None, -1, 0, 1, 2**24 + 1, 2**70, -2**70, 0.0, "", "0", good, [], {},
                         False, "x" * 1000, 1e300]
    generated: list[Any] = []
    while len(generated) < 150:
        keys = rng.sample(["reply_id", "offset", "Offset", "reply_ID", "length", "reply_id "],
                          rng.randint(0, 3))
        live = {k: rng.choice(values) for k in keys}
        if set(live) == {"reply_id", "offset"} and (
                live["reply_id"] is None or live["reply_id"] == good) and \
                type(live["offset"]) is int and 0 <= live["offset"] <= 16_777_216:
            continue  # a good one
        generated.append(live)
    return picked + generated


def test_d4_a_malformed_live_input_is_invalid_request_and_changes_nothing(scripted: Served):
    """D4: `live` with a field missing or extra, an offset out of 0..16,777,216 or not an
    integer, a reply_id that is not a UUID: `invalid_request`, and nothing moves."""
    c = conversation(scripted)
    with scripted.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
        before = live_of(client, c, at_least=20)
        snapshot = client.call("input_get", {"conversation_id": c})
        events = tail(client, c)["events"]
        accepted = []
        for live in bad_lives():
            try:
                got = client.call("events_tail", {"conversation_id": c, "after": 0,
                                                  "limit": 5, "wait_ms": 0, "live": live})
            except ApiError as exc:
                if exc.code != "invalid_request":
                    accepted.append((live, exc.code))
            else:
                accepted.append((live, got.get("live")))
        assert accepted == []
        assert client.call("input_get", {"conversation_id": c})["revision"] == \
            snapshot["revision"]
        after = live_of(client, c, at_least=len(before["text"]) + 1)
        assert after["reply_id"] == before["reply_id"]
        assert after["text"].startswith(before["text"])
        assert [e for e in tail(client, c)["events"] if e["seq"] <= events[-1]["seq"]] == events


def test_d4_a_reader_never_gets_another_conversations_live_reply(scripted: Served):
    """D4, S4: a reader of conversation B that names A's reply (its ID and an offset) gets
    B's live reply (none), never A's text; nor does an agent's credential reading A."""
    a, b = conversation(scripted), conversation(scripted)
    with scripted.client() as client:
        client.call("conversation_send", {"conversation_id": a, "text": "go"})
        seen = live_of(client, a, at_least=30)
        page = tail(client, b, after=0, wait_ms=300,
                    live={"reply_id": seen["reply_id"], "offset": 5})
        assert page["live"] is None
        page = tail(client, b, after=0, wait_ms=0, live={"reply_id": None, "offset": 0})
        assert page["live"] is None
        agent = client.call("credential_issue", {"kind": "agent", "name": "intruder"})
    with scripted.client(agent["token"]) as intruder:
        for live in ({"reply_id": None, "offset": 0},
                     {"reply_id": seen["reply_id"], "offset": 0}):
            with pytest.raises(ApiError) as refused:
                tail(intruder, a, after=0, wait_ms=500, live=live)
            assert "word" not in str(refused.value.detail)


def test_d3_a_tail_without_live_is_never_woken_by_a_publish(scripted: Served):
    """D3: a reply being written wakes no long-poll that did not ask for `live`: such a
    tail waits out its `wait_ms` with no events, and has no `live` field."""
    c = conversation(scripted)
    with scripted.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
        live_of(client, c, at_least=20)
        after = tail(client, c)["events"][-1]["seq"]
        began = time.monotonic()
        page = tail(client, c, after=after, wait_ms=2_000)
        waited = time.monotonic() - began
        assert page["events"] == [] and "live" not in page
        assert waited >= 1.9  # returning early would be the wake-up D3 forbids


ASK_THEN_STREAM = {"turns": [[{"ask": {"kind": "text", "prompt": "Name?"}}],
                             [{"say": WORDS, "pace_ms": 40}]] + [[{"say": WORDS,
                                                                   "pace_ms": 40}]] * 5}


@pytest.mark.parametrize("scripted", [ASK_THEN_STREAM], indirect=True)
def test_d3_a6_an_answer_bound_while_a_reply_streams_and_checkpoints_stays_current(
        scripted: Served):
    """D3, D9: publishes and checkpoints never move the revision, so an answer bound while
    a reply streams (checkpointed every 0.5 s here) is accepted, not stale."""
    c = conversation(scripted)
    with scripted.client() as client:
        run = client.call("conversation_send", {"conversation_id": c, "text": "ask me"})
        finished(client, run["run_id"])
        client.call("conversation_send", {"conversation_id": c, "text": "talk"})
        first = live_of(client, c, at_least=10)
        snapshot = client.call("input_get", {"conversation_id": c})
        assert snapshot["pending"] is not None
        live_of(client, c, at_least=len(first["text"]) + 80)  # > 1 s more: 2 checkpoints
        assert client.call("input_get", {"conversation_id": c})["revision"] == \
            snapshot["revision"]
        reply = client.call("input_answer", {
            "conversation_id": c, "request_id": snapshot["pending"]["request_id"],
            "incarnation": snapshot["incarnation"], "revision": snapshot["revision"],
            "text": "Ada"})
        assert reply["receipt"]["outcome"] == "answered", reply


# ------------------------------------------------------------------ a hostile endpoint

from dataclasses import dataclass, field  # noqa: E402

from tests.e2e.test_providers import PROVIDERS, Provider  # noqa: E402
from tests.fakes import (  # noqa: E402
    DONE,
    Endpoint,
    Reply,
    model_endpoint,
    sse,
)

HOSTILE_ENV = {"CLANKIE_MODEL_TIMEOUT": "5", "CLANKIE_MODEL_RETRIES": "2",
               "CLANKIE_MODEL_RETRY_WAIT": "20", "CLANKIE_MODEL_STALL_TIMEOUT": "5",
               "CLANKIE_STREAM_INTERVAL": "0.05", "CLANKIE_STREAM_CHECKPOINT": "0.5"}


def oa(delta: dict[str, Any], finish: str | None = None) -> bytes:
    """One chat-completions chunk."""
    return sse({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0,
                "model": "fake", "choices": [{"index": 0, "delta": delta,
                                              "finish_reason": finish}]})


def oa_text(*pieces: str | float, finish: str | None = "stop", done: bool = True
            ) -> list[bytes | float]:
    """A chat-completions stream of these text pieces (a number is a pause)."""
    events: list[bytes | float] = [oa({"role": "assistant", "content": ""})]
    events += [p if isinstance(p, float) else oa({"content": p}) for p in pieces]
    if finish is not None:
        events.append(oa({}, finish))
    if done:
        events.append(DONE)
    return events


def an(kind: str, **fields: Any) -> bytes:
    return sse({"type": kind, **fields}, kind)


def an_start() -> list[bytes | float]:
    return [an("message_start", message={
        "id": "msg_1", "type": "message", "role": "assistant", "model": "fake",
        "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1}})]


def an_end(reason: str = "end_turn") -> list[bytes | float]:
    return [an("message_delta", delta={"stop_reason": reason, "stop_sequence": None},
               usage={"output_tokens": 1}), an("message_stop")]


def an_block(index: int) -> bytes:
    return an("content_block_start", index=index, content_block={"type": "text", "text": ""})


def an_delta(index: int, text: str) -> bytes:
    return an("content_block_delta", index=index, delta={"type": "text_delta", "text": text})


def an_text(*pieces: str | float, end: bool = True) -> list[bytes | float]:
    """A Messages stream of one text block of these pieces (a number is a pause)."""
    events = [*an_start(), an_block(0)]
    events += [p if isinstance(p, float) else an_delta(0, p) for p in pieces]
    if end:
        events += [an("content_block_stop", index=0), *an_end()]
    return events


def text_stream(provider: str, *pieces: str | float, end: bool = True) -> list[bytes | float]:
    if provider == "anthropic":
        return an_text(*pieces, end=end)
    return oa_text(*pieces, finish="stop" if end else None, done=end)


@dataclass
class Hostile:
    provider: Provider
    endpoint: Endpoint
    served: Served
    workspace: Path
    # Where this test's share begins, in a service that tests share (`hostile`): its
    # requests, its standard error's lines and serve.log's bytes; and the runs it sent.
    requests_from: int = 0
    stderr_from: int = 0
    log_from: int = 0
    runs: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.provider.name

    def conversation(self) -> str:
        with self.served.client() as client:
            return str(client.call("conversation_create", {
                "kind": "owner", "workspace": str(self.workspace)})["conversation_id"])

    def send(self, c: str, text: str = "go") -> str:
        with self.served.client() as client:
            run_id = str(client.call("conversation_send", {"conversation_id": c,
                                                             "text": text})["run_id"])
        self.runs.append(run_id)
        return run_id

    def plan(self, *replies: Reply) -> None:
        with self.endpoint.arrived:
            self.endpoint.plan.extend(replies)

    def sent(self) -> list[str]:
        """Every request body the endpoint received, as JSON text."""
        with self.endpoint.arrived:
            return [json.dumps(r["body"], ensure_ascii=False)
                    for r in self.endpoint.requests[self.requests_from:]]

    def events(self, c: str) -> list[dict[str, Any]]:
        with self.served.client() as client:
            return tail(client, c)["events"]

    def stderr(self) -> list[str]:
        return self.served.log[self.stderr_from:]

    def log(self) -> str:
        with (self.served.home.path / "serve.log").open("rb") as f:
            f.seek(self.log_from)
            logged = f.read().decode(errors="replace")
        return "".join(self.stderr()) + logged

    def begin(self) -> Hostile:
        """This test's share of a service tests share: a plan of its own, and what came
        before it left out of `sent`, `stderr` and `log`."""
        with self.endpoint.arrived:
            self.endpoint.plan.clear()
            self.requests_from = len(self.endpoint.requests)
        self.stderr_from = len(self.served.log)
        self.log_from = (self.served.home.path / "serve.log").stat().st_size
        self.runs = []
        return self

    def end(self) -> None:
        """Every run this test sent is finished, stopped if it has not: none makes a
        request of the next test's plan."""
        with self.served.client() as client:
            for run_id in self.runs:
                if run_status(client, run_id)["status"] not in ENDED:
                    with contextlib.suppress(ApiError):
                        client.call("run_cancel", {"run_id": run_id})
                finished(client, run_id, timeout=30)


def hostile_service(provider: Provider, tmp: Path, endpoint: Endpoint,
                    env: dict[str, str] | None = None) -> Hostile:
    workspace = tmp / "project"
    workspace.mkdir(exist_ok=True)
    served = Served.start(tmp / "home", script=None, init=not (tmp / "home").exists(),
                          env={**provider.env(endpoint.url), **HOSTILE_ENV, **(env or {})})
    return Hostile(provider, endpoint, served, workspace)


@pytest.fixture(scope="module", params=sorted(PROVIDERS))
def shared(request: pytest.FixtureRequest,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    """One service and endpoint for each provider, for the tests that neither kill nor
    restart it nor measure its memory: a service's start and its SDK's import were most of
    this file's time (docs/testing.md)."""
    with model_endpoint() as endpoint:
        world = hostile_service(PROVIDERS[request.param],
                                tmp_path_factory.mktemp(request.param), endpoint)
        try:
            yield world
        finally:
            world.served.stop()


@pytest.fixture
def hostile(shared: Hostile) -> Iterator[Hostile]:
    yield shared.begin()
    shared.end()


@pytest.fixture(params=sorted(PROVIDERS))
def lone(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hostile]:
    """A service of the test's own: it is killed, restarted, or its memory measured."""
    with model_endpoint() as endpoint:
        world = hostile_service(PROVIDERS[request.param], tmp_path, endpoint)
        try:
            yield world
        finally:
            world.served.stop()


@pytest.mark.parametrize("events", [
    [an_block(1), an_delta(1, "BRAVO"), 0.6, an_block(0), an_delta(0, "ALPHA"), 0.6,
     an("content_block_stop", index=0), an("content_block_stop", index=1)],
    [an_block(0), an_delta(0, "ALPHA"), 0.6, an_block(1), an_delta(1, "BRAVO"), 0.6,
     an_delta(0, "CHARLIE"), 0.6, an("content_block_stop", index=0),
     an("content_block_stop", index=1)],
    [an_block(0), an_delta(0, "ALPHA"), 0.6, an_block(0), an_delta(0, "BRAVO"), 0.6,
     an("content_block_stop", index=0)]], ids=["out-of-order", "interleaved", "restarted"])
def test_d2_anthropic_text_blocks_are_stored_as_every_reader_was_shown_them(
        tmp_path: Path, events: list[bytes | float]):
    """D2: the live text is the call's text blocks in order, so that "the pieces joined
    equal the stored text character for character". A hostile endpoint that starts block
    1 before block 0, writes to an earlier block again, or starts a block twice must not
    make the stored reply (finished, or kept `failed`) differ from what readers saw."""
    with model_endpoint() as endpoint:
        world = hostile_service(PROVIDERS["anthropic"], tmp_path, endpoint)
        try:
            world.plan(Reply(events=[*an_start(), *events, *an_end()]))
            c = world.conversation()
            run_id = world.send(c)
            shown: list[str] = []
            at: dict[str, Any] = {"reply_id": None, "offset": 0}
            text = ""
            with world.served.client() as client:
                while True:
                    page = tail(client, c, after=0, wait_ms=1_000, live=at)
                    stored = [e for e in page["events"] if e["type"] == "message"
                              and e["author"] == "clankie"]
                    if stored:
                        break
                    live = page["live"]
                    if live is not None:
                        text = (text if live["offset"] else "") + live["text"]
                        at = {"reply_id": live["reply_id"], "offset": live["length"]}
                        shown.append(text)
                finished(client, run_id, timeout=30)
            [message] = stored
            assert len(set(shown)) >= 2 and all(
                message["text"].startswith(seen) for seen in shown), (shown, message["text"])
        finally:
            world.served.stop()


def test_d3_d2_a_reply_that_begins_thousands_of_tool_calls_is_held_in_bounded_memory(
        hostile: Hostile):
    """D3: the service holds for each reply only its text, at most twice its size plus
    64 KiB. A reply with no text that begins 20,000 tool calls (the turn runs at most 64
    of any reply) must not grow the live reply, nor each reader's answer, without bound."""
    calls = 20_000
    if hostile.name == "anthropic":
        events: list[bytes | float] = [*an_start()]
        events += [an("content_block_start", index=i, content_block={
            "type": "tool_use", "id": f"toolu_{i}", "name": "list_files", "input": {}})
            for i in range(calls)]
    else:
        fragments = [{"index": i, "id": f"call_{i}", "type": "function",
                      "function": {"name": "list_files", "arguments": ""}}
                     for i in range(calls)]
        events = [oa({"role": "assistant", "content": ""})]
        events += [oa({"tool_calls": fragments[i:i + 500]}) for i in range(0, calls, 500)]
    hostile.plan(Reply(events=events, ending="stall"))
    c = hostile.conversation()
    run_id = hostile.send(c)
    with hostile.served.client() as client:
        page = eventually(lambda: tail(client, c, after=0, wait_ms=1_000,
                                       live={"reply_id": None, "offset": 0}),
                          "every call begun", timeout=30,
                          until=lambda p: p["live"] is not None and (
                              len(p["live"]["calling"]) >= 64))
        page = eventually(lambda: tail(client, c, after=0, wait_ms=1_000,
                                       live={"reply_id": None, "offset": 0}),
                          "the stall", timeout=30,
                          until=lambda p: p["live"] is not None and p["live"]["state"] in (
                              "quiet", "writing") and p["live"]["idle_ms"] > 1_000)
        client.call("run_cancel", {"run_id": run_id})
    live = page["live"]
    assert live["text"] == ""
    assert len(json.dumps(live)) <= 64 * 1024, len(live["calling"])


def read_live_until(hostile: Hostile, c: str, marker: str, timeout: float = 30
                    ) -> dict[str, Any]:
    with hostile.served.client() as client:
        return eventually(lambda: tail(client, c, after=0, wait_ms=1_000,
                                       live={"reply_id": None, "offset": 0}),
                          f"{marker} shown live", timeout=timeout,
                          until=lambda p: p["live"] is not None and marker in p["live"]["text"]
                          )["live"]


def test_d8_d10_withdrawn_text_is_never_stored_nor_sent_to_the_model_again(
        hostile: Hostile):
    """D8: a try that drops after its text was published is tried again; its text is
    withdrawn (the run_activity says how much, under its reply_id), never stored, and
    never sent to the model: not on the next try, not in the next turn."""
    marker = "WITHDRAWNMARKER"
    hostile.plan(Reply(events=[*text_stream(hostile.name, f"{marker} one ", 0.8, "two ",
                                           end=False), 1.0], ending="drop"),
                 Reply(events=text_stream(hostile.name, "The real answer.")),
                 Reply(events=text_stream(hostile.name, "Second turn.")))
    c = hostile.conversation()
    run_id = hostile.send(c)
    seen = read_live_until(hostile, c, marker)
    with hostile.served.client() as client:
        assert finished(client, run_id, timeout=30)["status"] == "succeeded"
        hostile.send(c, "again")
        eventually(lambda: len(clankie_messages(client, c)), "the second reply",
                   until=lambda n: n >= 2, timeout=30)
    events = hostile.events(c)
    activities = [e for e in events if e["type"] == "run_activity"]
    assert len(activities) == 1, [(e["type"], e.get("text"), e.get("summary")) for e in events]
    [activity] = activities
    assert activity["withdrawn"] is not None
    assert activity["withdrawn"]["reply_id"] == seen["reply_id"]
    assert activity["withdrawn"]["length"] >= seen["length"]
    assert "withdrawn" in activity["summary"]
    messages = [e for e in events if e["type"] == "message" and e["author"] == "clankie"]
    assert [m["text"] for m in messages] == ["The real answer.", "Second turn."]
    assert all(m["message_id"] != seen["reply_id"] for m in messages)
    sent = hostile.sent()
    assert len(sent) == 3 and all(marker not in body for body in sent), sent


def test_d8_d10_a_call_that_fails_for_good_keeps_its_text_failed_and_the_model_reads_it_cut_off(
        hostile: Hostile):
    """D8, D10, D12: a chunk that is not JSON after published text fails the call at once;
    the published text is stored `failed`; the run's error names the kind and chunk number
    without quoting it; the next turn's request carries the text with its cut-off line."""
    marker = "FAILEDMARKER"
    bad = b"data: {NOTJSON" + marker.encode() + b"\n\n"
    hostile.plan(Reply(events=[*text_stream(hostile.name, f"{marker} shown ", 0.8,
                                            end=False), bad]),
                 Reply(events=text_stream(hostile.name, "Next.")))
    c = hostile.conversation()
    run_id = hostile.send(c)
    seen = read_live_until(hostile, c, marker)
    with hostile.served.client() as client:
        run = finished(client, run_id, timeout=30)
        assert run["status"] == "failed"
        assert "chunk" in run["error"] and "NOTJSON" not in run["error"], run["error"]
        [kept] = clankie_messages(client, c)
        assert kept["partial"] == "failed" and kept["message_id"] == seen["reply_id"]
        assert kept["text"].startswith(seen["text"])
        hostile.send(c, "and now?")
        eventually(lambda: len(hostile.sent()), "the next turn's request",
                   until=lambda n: n >= 2, timeout=30)
    request = hostile.sent()[1]
    assert "[cut off here:" in request and marker in request
    assert "NOTJSON" not in hostile.log()


def error_event(provider: str, kind: Any) -> bytes:
    error = {"type": kind, "message": "ERRMARKER said by the endpoint"}
    if provider == "anthropic":
        return sse({"type": "error", "error": error}, "error")
    return sse({"error": {**error, "code": None, "param": None}})


@pytest.mark.parametrize("kind, transient", [
    ("overloaded_error", "529"), ("api_error", "500"), ("rate_limit_error", "429"),
    ("invalid_request_error", None), ("authentication_error", None), ("", None),
    ("overloaded_error\x1b[31m", None), (529, None), (None, None)])
def test_d12_an_error_event_inside_a_200_is_classified_by_its_own_type(
        hostile: Hostile, kind: Any, transient: str | None):
    """D12: an `error` event or chunk inside an HTTP 200, after published text, is a 529,
    500 or 429 by its type (tried again, the text withdrawn), else fails the run at once
    (the text kept `failed`); a type that is not one of those three strings is never
    taken for one."""
    hostile.plan(Reply(events=[*text_stream(hostile.name, "ERRTEXT before ", 0.6, end=False),
                               error_event(hostile.name, kind)]),
                 Reply(events=text_stream(hostile.name, "Recovered.")))
    c = hostile.conversation()
    run_id = hostile.send(c)
    read_live_until(hostile, c, "ERRTEXT")
    with hostile.served.client() as client:
        run = finished(client, run_id, timeout=30)
    events = hostile.events(c)
    activity = [e for e in events if e["type"] == "run_activity"]
    kept = [e for e in events if e["type"] == "message" and e["author"] == "clankie"]
    if transient:
        assert run["status"] == "succeeded", run
        assert len(activity) == 1 and activity[0]["summary"].startswith(
            f"{hostile.name}: {transient} ") and activity[0]["withdrawn"] is not None
        assert [m["text"] for m in kept] == ["Recovered."]
    else:
        assert run["status"] == "failed" and activity == [], (run, activity)
        assert [(m["text"], m["partial"]) for m in kept] == [("ERRTEXT before ", "failed")]
        assert "\x1b" not in run["error"]


def test_d12_anthropic_a_block_index_that_is_not_a_number_fails_by_kind_and_place(
        tmp_path: Path):
    """D12: an event not of its documented shape fails the call at once, and the run's
    error names its kind and its chunk's number (never a bare Python exception name)."""
    with model_endpoint() as endpoint:
        world = hostile_service(PROVIDERS["anthropic"], tmp_path, endpoint)
        try:
            for bad in (an("content_block_stop", index=[0]),
                        an("content_block_delta", index={"a": 1},
                           delta={"type": "text_delta", "text": "x"}),
                        an("content_block_start", index=[1],
                           content_block={"type": "text", "text": ""})):
                world.plan(Reply(events=[*an_start(), an_block(0), an_delta(0, "fine "),
                                         bad, *an_end()]))
                c = world.conversation()
                with world.served.client() as client:
                    run = finished(client, world.send(c), timeout=30)
                assert run["status"] == "failed"
                assert "chunk 4" in run["error"], run["error"]
        finally:
            world.served.stop()


def checkpoint_of(served: Served) -> str | None:
    import sqlite3
    from contextlib import closing

    with closing(sqlite3.connect(f"file:{served.home.store}?mode=ro", uri=True)) as conn:
        row = conn.execute("SELECT text FROM reply_checkpoints").fetchone()
    return None if row is None else str(row[0])


def test_d9_r3_a_kill_mid_stream_keeps_the_checkpoint_and_asks_the_model_nothing_again(
        lone: Hostile, tmp_path: Path):
    """D9, R3: SIGKILL while a reply streams: the next start stores the checkpoint's text
    as an `interrupted` message before the run's failure, makes no model request for the
    killed run, and the next turn's request reads the reply cut off (D10)."""
    marker = "KILLMARKER"
    pieces: list[str | float] = [f"{marker} "] + [p for n in range(60)
                                                  for p in (0.1, f"w{n} ")]
    lone.plan(Reply(events=text_stream(lone.name, *pieces)))
    c = lone.conversation()
    lone.send(c)
    seen = read_live_until(lone, c, "w5 ")
    eventually(lambda: checkpoint_of(lone.served), "a checkpoint of what was seen",
               until=lambda text: text is not None and text.startswith(seen["text"]))
    lone.served.stop(signal.SIGKILL)
    asked = len(lone.sent())
    lone.served = Served.start(lone.served.home.path, init=False, script=None,
                               env={**lone.provider.env(lone.endpoint.url), **HOSTILE_ENV})
    with lone.served.client() as client:
        [kept] = clankie_messages(client, c)
        assert kept["partial"] == "interrupted" and kept["message_id"] == seen["reply_id"]
        assert kept["text"].startswith(seen["text"])
        assert len(lone.sent()) == asked  # nothing run again
        lone.plan(Reply(events=text_stream(lone.name, "After the restart.")))
        run_id = lone.send(c, "still there?")
        assert finished(client, run_id, timeout=30)["status"] == "succeeded"
    request = lone.sent()[-1]
    assert "[cut off here: clankie restarted; what followed was lost]" in request
    assert kept["text"].replace("\n", "\\n") in request or kept["text"] in request


def test_d14_the_log_carries_no_reply_text_no_tool_arguments_no_chunk_bytes(
        hostile: Hostile):
    """D14, T5: after streams that end well, drop, stall, break and fail, the service's
    log (standard error and serve.log) holds none of their text, arguments or bytes."""
    # An error event's own type is named, bounded and printable, as an HTTP error's own
    # message is (R6): it is what the endpoint says of itself, not the reply.
    markers = {"LOGTEXTA", "LOGTEXTB", "LOGARGS", "LOGCHUNK", "LOGSTALL"}
    if hostile.name == "anthropic":
        call = [*an_start(), an("content_block_start", index=0, content_block={
            "type": "tool_use", "id": "toolu_9", "name": "list_files", "input": {}}),
            an("content_block_delta", index=0, delta={
                "type": "input_json_delta", "partial_json": '{"path": "LOGARGS'}),
            an("content_block_delta", index=0, delta={
                "type": "input_json_delta", "partial_json": '/nope"}'}),
            an("content_block_stop", index=0), *an_end("tool_use")]
    else:
        call = [oa({"role": "assistant", "content": ""}),
                oa({"tool_calls": [{"index": 0, "id": "call_9", "type": "function",
                                    "function": {"name": "list_files",
                                                 "arguments": '{"path": "LOGARGS'}}]}),
                oa({"tool_calls": [{"index": 0, "function": {"arguments": '/nope"}'}}]}),
                oa({}, "tool_calls"), DONE]
    hostile.plan(
        Reply(events=text_stream(hostile.name, "LOGTEXTA ", 0.3, "fine.")),
        Reply(events=call), Reply(events=text_stream(hostile.name, "LOGTEXTB done.")),
        Reply(events=text_stream(hostile.name, "LOGSTALL ", end=False), ending="stall"),
        Reply(events=text_stream(hostile.name, "LOGTEXTB ", end=False), ending="drop"),
        Reply(events=[*text_stream(hostile.name, "LOGTEXTA ", end=False),
                      b"data: {LOGCHUNK\n\n"]),
        Reply(events=[*text_stream(hostile.name, "LOGTEXTA ", end=False),
                      error_event(hostile.name, "LOGTYPE")]))
    with hostile.served.client() as client:
        for _ in range(4):
            c = hostile.conversation()
            finished(client, hostile.send(c), timeout=60)
    log = hostile.log()
    assert "list_files" in log or "run" in log  # the log is there and was written
    assert {m for m in markers if m in log} == set()


EXPLAINS = ("run_activity", "run_status", "tool_activity")


def gaps(answers: list[dict[str, Any]]) -> list[str]:
    """D5 over a reader's answers in order: each reply that left `live` must have been
    explained (its message, or an event of its run, or a question asked) in the answer
    that lost it or an earlier one, by an event later than what the reader had read before
    the reply first showed."""
    found: list[str] = []
    seen: dict[str, tuple[str, int]] = {}  # reply_id -> (run_id, seq read before it showed)
    events: list[dict[str, Any]] = []
    last_seq = 0
    current: str | None = None
    for page in answers:
        live = page.get("live")
        events += page["events"]
        if live is not None and live["reply_id"] not in seen:
            seen[live["reply_id"]] = (live["run_id"], last_seq)
        now = None if live is None else live["reply_id"]
        if current is not None and now != current:
            run_id, before = seen[current]
            if not any(e["seq"] > before and (
                    (e["type"] == "message" and e.get("message_id") == current)
                    or (e["type"] in EXPLAINS and e.get("run_id") == run_id)
                    or e["type"] == "input_requested") for e in events):
                found.append(current)
        current = now
        last_seq = page["next_after"]
    return found


def test_d5_no_reply_ever_vanishes_from_live_without_its_explanation(hostile: Hostile):
    """D5: readers long-polling hard (one waiting, one not) while runs retry, fail, call a
    tool, are stopped, ask, and end, never see a reply leave `live` unexplained."""
    ask = {"kind": "text", "prompt": "Which one?"}
    if hostile.name == "anthropic":
        tool = [*an_start(), an_block(0), an_delta(0, "Looking. "), an(
            "content_block_stop", index=0), an("content_block_start", index=1, content_block={
                "type": "tool_use", "id": "toolu_1", "name": "list_files",
                "input": {"path": "."}}), an("content_block_stop", index=1),
            *an_end("tool_use")]
        asking = [*an_start(), an("content_block_start", index=0, content_block={
            "type": "tool_use", "id": "toolu_2", "name": "ask_question", "input": ask}),
            an("content_block_stop", index=0), *an_end("tool_use")]
    else:
        tool = [oa({"content": "Looking. "}), oa({"tool_calls": [{
            "index": 0, "id": "call_1", "type": "function", "function": {
                "name": "list_files", "arguments": '{"path": "."}'}}]}),
            oa({}, "tool_calls"), DONE]
        asking = [oa({"tool_calls": [{"index": 0, "id": "call_2", "type": "function",
                                      "function": {"name": "ask_question",
                                                   "arguments": json.dumps(ask)}}]}),
                  oa({}, "tool_calls"), DONE]
    slow: list[str | float] = [p for n in range(100) for p in (f"s{n} ", 0.05)]
    stream = text_stream
    runs = [
        [Reply(events=[*stream(hostile.name, "dropped ", 0.3, end=False), 0.3],
               ending="drop"), Reply(events=stream(hostile.name, "after the drop"))],
        [Reply(events=[*stream(hostile.name, "broken ", 0.3, end=False), b"data: {x\n\n"])],
        [Reply(events=tool), Reply(events=stream(hostile.name, "found ", 0.2, "them"))],
        [Reply(events=stream(hostile.name, *slow))],  # stopped
        [Reply(events=[*stream(hostile.name, end=False), 0.3,
                       error_event(hostile.name, "invalid_request_error")])],
        [Reply(events=asking), Reply(events=stream(hostile.name, "asked."))],
        [Reply(events=stream(hostile.name, "quick"))],
    ]
    c = hostile.conversation()
    answers: dict[int, list[dict[str, Any]]] = {1_000: [], 0: []}
    done = threading.Event()

    def read(wait_ms: int) -> None:
        at: dict[str, Any] = {"reply_id": None, "offset": 0}
        after = 0
        with hostile.served.client() as client:
            while not done.is_set():
                page = tail(client, c, after=after, wait_ms=wait_ms, live=at)
                answers[wait_ms].append(page)
                after = page["next_after"]
                live = page.get("live")
                at = {"reply_id": None, "offset": 0} if live is None else {
                    "reply_id": live["reply_id"], "offset": live["length"]}

    readers = [threading.Thread(target=read, args=(w,)) for w in answers]
    for thread in readers:
        thread.start()
    try:
        with hostile.served.client() as client:
            for number, plan in enumerate(runs):
                hostile.plan(*plan)
                run_id = hostile.send(c, f"turn {number}")
                if number == 3:
                    read_live_until(hostile, c, "s10 ")
                    client.call("run_cancel", {"run_id": run_id})
                finished(client, run_id, timeout=60)
                with hostile.endpoint.arrived:
                    hostile.endpoint.plan.clear()
    finally:
        done.set()
        for thread in readers:
            thread.join(30)
    for wait_ms, pages in answers.items():
        shown = {p["live"]["reply_id"] for p in pages if p.get("live")}
        assert len(shown) >= 6, (wait_ms, len(shown))
        assert gaps(pages) == [], (wait_ms, len(pages))


def test_d11_content_then_silence_goes_quiet_wakes_readers_then_stalls_and_is_withdrawn(
        hostile: Hostile):
    """D11, D2: a reply whose content stops (pings and comments go on) turns `quiet` after
    half of `model_stall_timeout` (5 s here), which wakes a reader holding all its text;
    at the stall timeout the try is withdrawn and tried again, its text never resent."""
    hostile.plan(Reply(events=text_stream(hostile.name, "QUIETMARKER ", end=False),
                       ending="stall"),
                 Reply(events=text_stream(hostile.name, "Back again.")))
    c = hostile.conversation()
    run_id = hostile.send(c)
    seen = read_live_until(hostile, c, "QUIETMARKER")
    with hostile.served.client() as client:
        page = tail(client, c, after=tail(client, c)["next_after"], wait_ms=20_000,
                    live={"reply_id": seen["reply_id"], "offset": seen["length"]})
        assert page["live"] is not None and page["live"]["reply_id"] == seen["reply_id"]
        assert page["live"]["state"] == "quiet" and page["live"]["text"] == ""
        assert page["live"]["idle_ms"] >= 2_000
        assert finished(client, run_id, timeout=40)["status"] == "succeeded"
    [activity] = [e for e in hostile.events(c) if e["type"] == "run_activity"]
    assert "model_stall_timeout" in activity["summary"]
    assert activity["withdrawn"] == {"reply_id": seen["reply_id"], "length": seen["length"]}
    assert all("QUIETMARKER" not in body for body in hostile.sent())
    assert sum("model_stall_timeout" in line for line in hostile.stderr()) <= 1


def test_d11_pings_and_comments_alone_are_no_content_and_time_out_as_model_timeout(
        hostile: Hostile):
    """D11: a stream of nothing but pings, comments and empty deltas never counts as
    content: `model_timeout` (5 s here) ends the try, tried again, nothing withdrawn."""
    if hostile.name == "anthropic":
        start = [*an_start(), an_block(0), an_delta(0, "")]
    else:
        start = [oa({"role": "assistant", "content": ""}), oa({"content": ""}),
                 oa({"tool_calls": []})]
    hostile.plan(Reply(events=start, ending="stall"),
                 Reply(events=text_stream(hostile.name, "Finally.")))
    c = hostile.conversation()
    run_id = hostile.send(c)
    with hostile.served.client() as client:
        waiting = eventually(lambda: tail(client, c, after=0, wait_ms=1_000,
                                          live={"reply_id": None, "offset": 0}),
                             "the try waiting", timeout=20,
                             until=lambda p: p["live"] is not None
                             and p["live"]["idle_ms"] >= 1_000)
        assert waiting["live"]["state"] == "waiting", waiting["live"]
        assert finished(client, run_id, timeout=40)["status"] == "succeeded"
    [activity] = [e for e in hostile.events(c) if e["type"] == "run_activity"]
    assert "model_timeout" in activity["summary"] and activity["withdrawn"] is None


def test_d7_a_stop_keeps_exactly_the_published_text_and_drops_the_calls_begun(
        hostile: Hostile):
    """D7: `run_cancel` while a reply (text, then a tool call begun) waits on the model
    stores exactly the text readers could see, `stopped`; the call begun is never made,
    never stored, and the model is asked nothing more."""
    if hostile.name == "anthropic":
        events = [*an_start(), an_block(0), an_delta(0, "STOPTEXT one "), 0.2,
                  an_delta(0, "two\x00 \u202e three"), an("content_block_stop", index=0),
                  an("content_block_start", index=1, content_block={
                      "type": "tool_use", "id": "toolu_1", "name": "list_files",
                      "input": {}}),
                  an("content_block_delta", index=1, delta={
                      "type": "input_json_delta", "partial_json": '{"path": "."'}), 30.0]
    else:
        events = [oa({"content": "STOPTEXT one "}), 0.2, oa({"content": "two\x00 \u202e three"}),
                  oa({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                      "function": {"name": "list_files",
                                                   "arguments": '{"path": "."'}}]}), 30.0]
    hostile.plan(Reply(events=events), Reply(events=text_stream(hostile.name, "never")))
    c = hostile.conversation()
    run_id = hostile.send(c)
    with hostile.served.client() as client:
        page = eventually(lambda: tail(client, c, after=0, wait_ms=1_000,
                                       live={"reply_id": None, "offset": 0}),
                          "the call begun", timeout=20,
                          until=lambda p: p["live"] is not None and p["live"]["calling"])
        seen = page["live"]
        assert seen["calling"] == ["list_files"] and seen["text"].endswith("three")
        client.call("run_cancel", {"run_id": run_id})
        assert finished(client, run_id)["status"] == "cancelled"
        [kept] = clankie_messages(client, c)
        events_after = tail(client, c)["events"]
    assert (kept["text"], kept["partial"], kept["message_id"]) == (
        seen["text"], "stopped", seen["reply_id"])
    assert [e for e in events_after if e["type"] in ("tool_activity", "input_requested")] == []
    assert len(hostile.sent()) == 1


def vm_hwm(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines()
                    if line.startswith("VmHWM:"))) * 1024


def test_d12_d3_a_reply_past_16_mib_fails_at_once_by_kind_and_place_in_bounded_memory(
        lone: Hostile):
    """D12: a reply past 16 MiB in all fails the call at once (not tried again), its
    published text kept `failed`, the run's error naming its kind and its chunk's number;
    memory stays bounded (measured: the service's peak grows by about 170 MB for it, the
    failed message's storage and events included; D3's bound of twice the text is for
    the live reply's own objects, which a process's RSS cannot show)."""
    piece = "x" * 65_536
    if lone.name == "anthropic":
        events = [*an_start(), an_block(0)] + [an_delta(0, piece)] * 300
    else:
        events = [oa({"content": piece})] * 300
    lone.plan(Reply(events=events, ending="stall"))
    c = lone.conversation()
    before = vm_hwm(lone.served.proc.pid)
    with lone.served.client() as client:
        run = finished(client, lone.send(c), timeout=60)
        assert run["status"] == "failed" and "16 MiB" in run["error"], run
        assert [e for e in tail(client, c)["events"] if e["type"] == "run_activity"] == []
        page = client.call("events_tail", {"conversation_id": c, "limit": 500})
    grown = vm_hwm(lone.served.proc.pid) - before
    [kept] = [e for e in page["events"] if e["type"] == "message" and e["author"] == "clankie"]
    assert kept["partial"] == "failed" and set(kept["text"]) == {"x"}
    assert len(lone.sent()) == 1
    assert grown < 24 * 16 * 2**20, grown
    assert "chunk" in run["error"], run["error"]


def stuck_reader(served: Served, c: str) -> Any:
    """A TCP connection that asks for the live reply whole (a snapshot) and a long wait,
    then never reads a byte of the answer."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(served.tcp_url)
    token = served.home.token_file.read_text().strip()
    body = json.dumps({"conversation_id": c, "after": 0, "limit": 500, "wait_ms": 30_000,
                       "live": {"reply_id": None, "offset": 0}}).encode()
    sock = socket.create_connection((where.hostname, where.port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(b"POST /v1/ops/events_tail HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                 token.encode() + b"\r\nContent-Type: application/json\r\nContent-Length: " +
                 str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def test_d13_readers_that_never_read_change_nothing_in_the_call(hostile: Hostile):
    """D13, D3: the model is read at its own pace: eight readers that ask for a 2 MB live
    reply and never read the answer neither slow the call nor keep it from ending, and a
    reader that does read gets the whole reply; the service still answers at once."""
    piece = "y" * 16_384
    hostile.plan(Reply(events=text_stream(hostile.name, *([piece, 0.02] * 128), "END")))
    c = hostile.conversation()
    run_id = hostile.send(c)
    read_live_until(hostile, c, "y" * 100)
    stuck = [stuck_reader(hostile.served, c) for _ in range(8)]
    try:
        with hostile.served.client() as client:
            run = finished(client, run_id, timeout=60)
            assert run["status"] == "succeeded"
            [kept] = clankie_messages(client, c)
            assert kept["text"] == piece * 128 + "END" and kept["partial"] is None
            assert client.call("service_info")["model"]["streaming"] is True
    finally:
        for sock in stuck:
            sock.close()


@pytest.mark.parametrize("mode", ["auto", "on"])
def test_d18_an_endpoint_answering_a_stream_with_plain_json_is_refused_or_asked_whole(
        tmp_path: Path, mode: str):
    """D18, D1: a streamed request carries `stream: true` and no `stream_options`. An
    endpoint that answers it with a body that is not an event stream: under `auto` the call
    is made once more whole (not an R6 try), later calls never stream, `service_info` says
    so and the log says it once; under `on` the run fails naming the setting."""
    provider = PROVIDERS["openai"]
    with model_endpoint() as endpoint:
        world = hostile_service(provider, tmp_path, endpoint, env={"CLANKIE_MODEL_STREAM": mode})
        try:
            whole = provider.text("Whole reply.")
            world.plan(Reply(events=[b'{"not": "an event stream"}'],
                             content_type="application/json"), whole,
                       provider.text("Second whole."))
            c = world.conversation()
            with world.served.client() as client:
                run = finished(client, world.send(c), timeout=30)
                if mode == "on":
                    assert run["status"] == "failed" and "model_stream" in run["error"]
                    assert len(world.sent()) == 1
                    return
                assert run["status"] == "succeeded", run
                run = finished(client, world.send(c, "more"), timeout=30)
                assert run["status"] == "succeeded", run
                assert client.call("service_info")["model"]["streaming"] is False
                assert [m["text"] for m in clankie_messages(client, c)] == [
                    "Whole reply.", "Second whole."]
            with endpoint.arrived:
                bodies = [r["body"] for r in endpoint.requests]
            assert [b.get("stream") for b in bodies] == [True, None, None]
            assert all("stream_options" not in b for b in bodies)
            assert [e for e in world.events(c) if e["type"] == "run_activity"] == []
            assert sum("does not stream" in line for line in world.served.log) == 1
        finally:
            world.served.stop()


def hostile_texts(count: int, seed: int) -> list[list[str]]:
    """Replies as pieces: escapes, controls, NUL, bidi overrides, astral characters and
    lone surrogates, cut at random places (an astral character's two halves apart too)."""
    import random

    rng = random.Random(seed)
    alphabet = ["a", "b", " ", "\n", "\r", "\x00", "\x1b", "[31m", "\u202e", "\u200b",
                "\ufeff", "\U0001f600", "\ud83d", "\ude00", "\\", '"', "é", "\u0301",
                "\x7f", "\u2028", "MARK"]
    replies = []
    for _ in range(count):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 60)))
        # cut into code units as UTF-16 would, so a pair may be split
        units = text.encode("utf-16-le", "surrogatepass")
        halves = [units[i:i + 2].decode("utf-16-le", "surrogatepass")
                  for i in range(0, len(units), 2)]
        cuts = sorted(rng.sample(range(1, len(halves)), min(len(halves) - 1,
                                                            rng.randint(1, 12))))
        pieces = ["".join(halves[a:b]) for a, b in zip([0, *cuts], [*cuts, len(halves)],
                                                       strict=True)]
        replies.append([p for p in pieces if p])
    return replies


def clean(piece: str) -> str:
    """A piece as a reader of its chunk's JSON gets it (a pair inside one piece is one
    character), a lone surrogate then `?`."""
    return json.loads(json.dumps(piece)).encode("utf-8", "replace").decode("utf-8")


def test_d2_generated_hostile_text_is_stored_exactly_as_it_was_shown(hostile: Hostile):
    """D2: whatever characters a reply holds, however its pieces are cut (a surrogate pair
    split across two chunks, lone surrogates, NUL, escapes, bidi controls), each piece is
    normalised as the stored message is: every text a reader was shown is a start of the
    stored text, and the stored text is the pieces, each normalised, joined."""
    replies = hostile_texts(12, seed=1440 + len(hostile.name))
    for pieces in replies:
        events: list[str | float] = []
        for piece in pieces:
            events += [piece, 0.05]
        hostile.plan(Reply(events=text_stream(hostile.name, *events)))
    c = hostile.conversation()
    mismatched = []
    with hostile.served.client() as client:
        for pieces in replies:
            run_id = hostile.send(c)
            shown: list[str] = []
            at: dict[str, Any] = {"reply_id": None, "offset": 0}
            text = ""
            while client.call("run_get", {"run_id": run_id})["status"] == "running":
                page = tail(client, c, after=0, wait_ms=500, live=at)
                live = page["live"]
                if live is not None and live["run_id"] == run_id:
                    text = (text if live["offset"] else "") + live["text"]
                    at = {"reply_id": live["reply_id"], "offset": live["length"]}
                    shown.append(text)
            run = finished(client, run_id, timeout=30)
            stored = clankie_messages(client, c)[-1]["text"]
            expected = "".join(clean(p) for p in pieces)
            if run["status"] != "succeeded" or stored != expected or not all(
                    stored.startswith(s) for s in shown):
                mismatched.append((pieces, expected, stored, shown[-1:]))
    assert mismatched == []


@pytest.mark.parametrize("action", ["stop", "kill"])
def test_d8_d7_d9_withdrawn_text_stays_withdrawn_when_the_wait_is_stopped_or_killed(
        lone: Hostile, action: str):
    """D8 with D7, D9: a try's text withdrawn (its run_activity committed), then, during
    the wait before the next try, the run is stopped or the service killed: the withdrawn
    text is never stored (not `stopped`, not `interrupted`), nor sent to the model."""
    marker = "WAITMARKER"
    lone.plan(Reply(events=[*text_stream(lone.name, f"{marker} ", 0.8, "more ",
                                            end=False), 0.8], ending="drop"),
                 Reply(events=[30.0]))
    c = lone.conversation()
    run_id = lone.send(c)
    read_live_until(lone, c, "more")
    with lone.served.client() as client:
        eventually(lambda: [e for e in tail(client, c)["events"]
                            if e["type"] == "run_activity"], "the withdrawal", timeout=20)
        if action == "stop":
            client.call("run_cancel", {"run_id": run_id})
    if action == "kill":
        lone.served.stop(signal.SIGKILL)
        lone.served = Served.start(lone.served.home.path, init=False, script=None,
                                   env={**lone.provider.env(lone.endpoint.url),
                                        **HOSTILE_ENV})
    with lone.served.client() as client:
        finished(client, run_id)
        assert [m["text"] for m in clankie_messages(client, c)
                if marker in m["text"]] == []
    assert sum(marker in body for body in lone.sent()) == 0


def test_d4_a_page_cut_short_by_limit_carries_no_live_and_the_last_page_does(
        scripted: Served):
    """D4: with `live`, a page cut short by `limit` has no `live`; the page that reaches
    the newest event has it."""
    c = conversation(scripted)
    with scripted.client() as client:
        client.call("conversation_send", {"conversation_id": c, "text": "go"})
        live_of(client, c, at_least=10)
        at = {"reply_id": None, "offset": 0}
        first = tail(client, c, after=0, limit=1, live=at)
        assert "live" not in first and first["events"]
        rest = tail(client, c, after=first["next_after"], limit=500, live=at)
        assert rest["live"] is not None and rest["live"]["text"]


def test_d7_d8_text_received_but_not_yet_published_goes_with_the_call(tmp_path: Path):
    """D7, D8: with `stream_interval` 1 s, text that came after the first publish and
    before a drop (or a stop) was never published: no reader sees it, the withdrawal
    counts only what was published (summary and `withdrawn` alike), a stop stores only
    what was published."""
    provider = PROVIDERS["openai"]
    with model_endpoint() as endpoint:
        world = hostile_service(provider, tmp_path, endpoint,
                                env={"CLANKIE_STREAM_INTERVAL": "1.0"})
        try:
            world.plan(Reply(events=[*oa_text("SHOWN ", 0.1, "UNSHOWN ", finish=None,
                                              done=False), 0.1], ending="drop"),
                       Reply(events=oa_text("Fine.")),
                       Reply(events=[*oa_text("SHOWN2 ", 0.1, "UNSHOWN2 ", finish=None,
                                              done=False), 30.0]))
            c = world.conversation()
            run_id = world.send(c)
            texts: list[str] = []
            with world.served.client() as client:
                while client.call("run_get", {"run_id": run_id})["status"] == "running":
                    page = tail(client, c, after=0, wait_ms=200,
                                live={"reply_id": None, "offset": 0})
                    if page["live"] is not None:
                        texts.append(page["live"]["text"])
                assert finished(client, run_id)["status"] == "succeeded"
                [activity] = [e for e in tail(client, c)["events"]
                              if e["type"] == "run_activity"]
                second = world.send(c, "again")
                seen = read_live_until(world, c, "SHOWN2")
                client.call("run_cancel", {"run_id": second})
                finished(client, second)
                kept = clankie_messages(client, c)[-1]
            assert not any("UNSHOWN" in t for t in texts), texts
            assert activity["withdrawn"]["length"] == len("SHOWN ")
            assert f"after {len('SHOWN ')} characters" in activity["summary"], activity
            assert (kept["text"], kept["partial"]) == ("SHOWN2 ", "stopped"), (kept, seen)
        finally:
            world.served.stop()


def mutated_streams(provider: str, count: int, seed: int) -> list[list[bytes | float]]:
    """Streams of a good reply (text, then a tool call) with one field of one event
    replaced by a value of another type: each is read, skipped or refused by kind and
    place, never crashes the reader."""
    import random

    rng = random.Random(seed)
    weird: list[Any] = [None, [], [1], {}, {"a": 1}, 0, -1, 1.5, True, "", "x" * 300,
                        ["text_delta"], {"type": "text_delta"}]
    if provider == "anthropic":
        good: list[dict[str, Any]] = [
            {"type": "message_start", "message": {"id": "m", "type": "message",
                                                  "role": "assistant", "content": []}},
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "text", "text": ""}},
            {"type": "content_block_delta", "index": 0,
             "delta": {"type": "text_delta", "text": "hello "}},
            {"type": "content_block_stop", "index": 0},
            {"type": "content_block_start", "index": 1, "content_block": {
                "type": "tool_use", "id": "toolu_1", "name": "list_files", "input": {}}},
            {"type": "content_block_delta", "index": 1,
             "delta": {"type": "input_json_delta", "partial_json": '{"path": "."}'}},
            {"type": "content_block_stop", "index": 1},
            {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
            {"type": "message_stop"}]
    else:
        good = [{"choices": [{"index": 0, "delta": {"content": "hello "},
                              "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {"tool_calls": [{
                    "index": 0, "id": "call_1", "type": "function",
                    "function": {"name": "list_files", "arguments": '{"path": "."}'}}]},
                    "finish_reason": None}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}]

    def paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        found = [at] if at else []
        if isinstance(value, dict):
            for key, inner in value.items():
                found += paths(inner, (*at, key))
        elif isinstance(value, list):
            for number, inner in enumerate(value):
                found += paths(inner, (*at, number))
        return found

    streams = []
    for _ in range(count):
        events = json.loads(json.dumps(good))
        number = rng.randrange(len(events))
        path = rng.choice(paths(events[number]))
        target = events[number]
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = rng.choice(weird)
        if provider == "anthropic":
            stream: list[bytes | float] = [
                sse(e, e.get("type") if isinstance(e.get("type"), str) else "x")
                for e in events]
        else:
            stream = [sse(e) for e in events] + [DONE]
        streams.append(stream)
    return streams


def test_d12_generated_chunks_of_the_wrong_shape_fail_by_kind_and_place(hostile: Hostile):
    """D12: chunks whose fields hold values of another type (generated: one field of one
    event of a good reply, 30 streams) are read, skipped or fail the call by kind and
    place; never an `unusable reply` named by a Python exception."""
    import re

    streams = mutated_streams(hostile.name, 30, seed=12)
    bare = re.compile(r"unusable reply: [A-Za-z]*(Error|Exception)\b")
    bad = []
    with hostile.served.client() as client:
        for stream in streams:
            with hostile.endpoint.arrived:
                hostile.endpoint.plan[:] = [Reply(events=stream),
                                            Reply(events=text_stream(hostile.name, "ok"))]
            c = hostile.conversation()
            run = finished(client, hostile.send(c), timeout=60)
            if run["status"] == "failed" and bare.search(run["error"] or ""):
                bad.append((stream, run["error"]))
    assert bad == []


def test_d2_d4_replies_streaming_at_once_in_many_conversations_never_cross(tmp_path: Path):
    """D2, D4: six conversations stream at once through the one run process, each read by
    two live readers: a reader only ever sees its own conversation's reply, and each
    stored reply is its own, whole."""
    import re

    def answer(path: str, body: dict[str, Any]) -> Reply | None:
        said = json.dumps(body)
        mark = re.search(r"CONV(\d)", said)
        assert mark is not None
        words: list[str | float] = [p for n in range(40) for p in (f"C{mark.group(1)}w{n} ",
                                                                     0.03)]
        return Reply(events=oa_text(*words))

    with model_endpoint(check=answer) as endpoint:
        world = hostile_service(PROVIDERS["openai"], tmp_path, endpoint)
        try:
            chats = [world.conversation() for _ in range(6)]
            crossed: list[tuple[int, str]] = []
            seen = [0] * 6
            done = threading.Event()

            def read(number: int) -> None:
                c = chats[number]
                at: dict[str, Any] = {"reply_id": None, "offset": 0}
                with world.served.client() as client:
                    while not done.is_set():
                        live = tail(client, c, after=10**6, limit=1, wait_ms=500,
                                    live=at).get("live")
                        if live is None:
                            continue
                        seen[number] += 1
                        at = {"reply_id": live["reply_id"], "offset": live["length"]}
                        if live["conversation_id"] != c or re.search(
                                rf"C[^{number}]w", live["text"]):
                            crossed.append((number, live["text"]))

            readers = [threading.Thread(target=read, args=(n,)) for n in range(6)
                       for _ in range(2)]
            for thread in readers:
                thread.start()
            try:
                runs = [world.send(c, f"CONV{n}") for n, c in enumerate(chats)]
                with world.served.client() as client:
                    for run_id in runs:
                        assert finished(client, run_id, timeout=60)["status"] == "succeeded"
                    stored = [clankie_messages(client, c)[0]["text"] for c in chats]
            finally:
                done.set()
                for thread in readers:
                    thread.join(30)
            assert crossed == [] and min(seen) >= 2, seen
            assert stored == ["".join(f"C{n}w{k} " for k in range(40)) for n in range(6)]
        finally:
            world.served.stop()


def test_d6_the_words_before_a_question_are_stored_with_it_and_come_first(hostile: Hostile):
    """D6: a reply that says something and then asks (its `calling` naming ask_question
    while it streams, meaning nothing yet) stores the words and the question in one
    transaction: the `message` event, then `input_requested`, with no event between."""
    ask = {"kind": "text", "prompt": "Your name?"}
    if hostile.name == "anthropic":
        events = [*an_start(), an_block(0), an_delta(0, "Before I go on: "), 0.3,
                  an("content_block_stop", index=0),
                  an("content_block_start", index=1, content_block={
                      "type": "tool_use", "id": "toolu_1", "name": "ask_question",
                      "input": {}}), 0.8,
                  an("content_block_delta", index=1, delta={
                      "type": "input_json_delta", "partial_json": json.dumps(ask)}),
                  an("content_block_stop", index=1), *an_end("tool_use")]
    else:
        events = [oa({"content": "Before I go on: "}), 0.3,
                  oa({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                      "function": {"name": "ask_question",
                                                   "arguments": ""}}]}), 0.8,
                  oa({"tool_calls": [{"index": 0, "function": {"arguments": json.dumps(ask)}}]}),
                  oa({}, "tool_calls"), DONE]
    hostile.plan(Reply(events=events), Reply(events=text_stream(hostile.name, "Asked.")))
    c = hostile.conversation()
    run_id = hostile.send(c)
    with hostile.served.client() as client:
        page = eventually(lambda: tail(client, c, after=0, wait_ms=1_000,
                                       live={"reply_id": None, "offset": 0}),
                          "ask_question begun", timeout=20,
                          until=lambda p: p["live"] is not None and p["live"]["calling"])
        assert page["live"]["calling"] == ["ask_question"]
        assert [e for e in page["events"] if e["type"] == "input_requested"] == []
        assert client.call("input_get", {"conversation_id": c})["pending"] is None
        finished(client, run_id, timeout=30)
    events_ = hostile.events(c)
    words = next(i for i, e in enumerate(events_) if e["type"] == "message"
                 and e["author"] == "clankie")
    assert events_[words]["text"] == "Before I go on: "
    assert events_[words]["message_id"] == page["live"]["reply_id"]
    assert events_[words + 1]["type"] == "input_requested"


def run_process(served: Served) -> int:
    """The pid of the service's run process (its child `clankie.service.runner_main`)."""
    children = Path(f"/proc/{served.proc.pid}/task/{served.proc.pid}/children").read_text()
    for pid in children.split():
        if b"runner_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
            return int(pid)
    raise AssertionError(f"no run process among {children!r}")


def test_d8_d5_a_killed_run_process_keeps_the_shown_reply_failed_and_leaves_no_ghost(
        lone: Hostile):
    """D8, D5: the run process killed (the OOM killer, say) mid-reply: the run fails, the
    text readers saw is kept `failed` under its reply_id, the live reply leaves memory
    (no ghost left `writing`), and the next turn is served by a new run process."""
    words: list[str | float] = [p for n in range(200) for p in (f"g{n} ", 0.05)]
    lone.plan(Reply(events=text_stream(lone.name, *words)))
    c = lone.conversation()
    run_id = lone.send(c)
    seen = read_live_until(lone, c, "g10 ")
    import os

    os.kill(run_process(lone.served), signal.SIGKILL)
    with lone.served.client() as client:
        run = finished(client, run_id, timeout=30)
        assert run["status"] == "failed" and "run process" in run["error"]
        [kept] = clankie_messages(client, c)
        assert kept["partial"] == "failed" and kept["message_id"] == seen["reply_id"]
        assert kept["text"].startswith(seen["text"])
        assert tail(client, c, after=0, live={"reply_id": None, "offset": 0})["live"] is None
        lone.plan(Reply(events=text_stream(lone.name, "Alive again.")))
        assert finished(client, lone.send(c, "again"), timeout=30)["status"] == \
            "succeeded"
        assert clankie_messages(client, c)[-1]["text"] == "Alive again."
