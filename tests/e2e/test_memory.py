"""SPEC R5 (memory across runs) and A11, through real `clankie serve` and the official SDKs,
against the recording fake endpoint in both wire formats (OpenAI chat completions,
Anthropic messages): a question asked in one run, then answered (an option, a text),
cancelled, expired, invalidated by a reset, or answered with a continuation that failed;
in the NEXT turn the request body the model receives has the later outcome next to the
`ask_question` result, with A11's wording for an answer, and a `pending` result never
stands alone. And SPEC R8's owner-message rule: the CLI refuses whitespace, saying why.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from clankie import dto
from clankie.agent.context import A11, OUTCOME_KEY
from tests.e2e.served import Served
from tests.e2e.test_cli import cli
from tests.e2e.test_providers import ASK, PROVIDERS, World
from tests.fakes import error_reply, model_endpoint
from tests.polling import eventually

TEXT_ASK = {"kind": "text", "prompt": "What should the module be called?"}
NO_ANSWER = "without an answer; do not assume one."


@contextmanager
def served_world(provider: str, tmp_path: Path, **settings: str) -> Iterator[World]:
    """A real `clankie serve` on this provider, against a fresh recording endpoint."""
    p = PROVIDERS[provider]
    workspace = tmp_path / "project"
    workspace.mkdir()
    with model_endpoint() as endpoint:
        env = p.env(endpoint.url) | {f"CLANKIE_{k.upper()}": v for k, v in settings.items()}
        served = Served.start(tmp_path / "home", env=env, script=None)
        w = World(p, endpoint, served, tmp_path / "home", workspace)
        try:
            yield w
        finally:
            w.served.stop()


def asked_in_run_one(w: World, args: dict[str, Any] = ASK) -> str:
    """Run 1 asks through the tool (call ID `ask-1`) and ends; the conversation."""
    p = w.provider
    w.endpoint.plan += [p.calls(("ask-1", "ask_question", args)), p.text("I asked you.")]
    c = w.conversation()
    assert w.run(w.send(c))["status"] == "succeeded"
    return c


def next_turn(w: World, c: str) -> dict[str, Any]:
    """The owner sends another message; the first request body of that turn's run."""
    w.endpoint.plan.append(w.provider.text("Noted."))
    before = len(w.endpoint.requests)
    assert w.run(w.send(c, "What now?"))["status"] == "succeeded"
    return dict(w.endpoint.requests[before]["body"])


def outcome(w: World, body: dict[str, Any]) -> str:
    """The outcome next to the `ask_question` result the model reads, after checking that
    no result saying `pending` stands alone anywhere in the request."""
    results = {k: json.loads(v) for k, v in w.provider.results(body).items()}
    for result in results.values():
        if isinstance(result, dict) and result.get("status") == "pending":
            assert OUTCOME_KEY in result, result
    asked = results["ask-1"]
    assert asked["status"] == "pending" and asked["request_id"]
    return str(asked[OUTCOME_KEY])


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_r5_a11_an_answered_option_reaches_every_later_turn(tmp_path: Path, provider: str):
    with served_world(provider, tmp_path) as w:
        c = asked_in_run_one(w)
        w.endpoint.plan.append(w.provider.text("Using unittest, then."))
        continuation = w.answer(c, option=1)["receipt"]["run_id"]
        assert w.run(continuation)["status"] == "succeeded"
        expected = f"answered: the owner (operator) chose the option 'unittest'. {A11}"
        assert outcome(w, w.endpoint.requests[2]["body"]) == expected
        for _ in range(2):  # not only the continuation: every later run
            assert outcome(w, next_turn(w, c)) == expected


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_r5_a11_an_answered_text_reaches_the_next_turn(tmp_path: Path, provider: str):
    with served_world(provider, tmp_path) as w:
        c = asked_in_run_one(w, TEXT_ASK)
        w.endpoint.plan.append(w.provider.text("Calling it fizzbuzz."))
        with w.served.client() as client:
            snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
            assert snap.pending is not None
            run_id = client.op(dto.INPUT_ANSWER,
                               dto.InputAnswer(conversation_id=c,
                                               request_id=snap.pending.request_id,
                                               incarnation=snap.incarnation,
                                               revision=snap.revision,
                                               text="fizzbuzz")).receipt.run_id
        assert w.run(str(run_id))["status"] == "succeeded"
        assert outcome(w, next_turn(w, c)) == (
            f"answered: the owner (operator) answered in text: 'fizzbuzz'. {A11}")


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_r5_a_cancelled_question_reaches_the_next_turn_without_an_answer(tmp_path: Path,
                                                                          provider: str):
    with served_world(provider, tmp_path) as w:
        c = asked_in_run_one(w)
        with w.served.client() as client:
            snap = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c))
            assert snap.pending is not None
            client.op(dto.INPUT_CANCEL,
                      dto.InputCancel(conversation_id=c, request_id=snap.pending.request_id,
                                      incarnation=snap.incarnation, revision=snap.revision))
        body = next_turn(w, c)
        assert outcome(w, body) == f"cancelled (explicit) {NO_ANSWER}"
        assert A11 not in json.dumps(body)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_r5_an_expired_question_reaches_the_next_turn_without_an_answer(tmp_path: Path,
                                                                         provider: str):
    with served_world(provider, tmp_path, question_ttl="1") as w:
        c = asked_in_run_one(w)
        with w.served.client() as client:  # a read after the TTL commits the expiry (S5)
            eventually(lambda: client.op(dto.INPUT_GET,
                                         dto.InputGet(conversation_id=c)).pending,
                                                      "the question to expire",
                       timeout=20, until=lambda pending: pending is None)
        assert outcome(w, next_turn(w, c)) == f"expired {NO_ANSWER}"


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_r5_a_question_invalidated_by_a_reset_reaches_the_next_turn(tmp_path: Path,
                                                                     provider: str):
    """A reset rotates the incarnation but keeps the messages and tool calls: the next
    turn still replays the question, invalidated by the reset."""
    with served_world(provider, tmp_path) as w:
        c = asked_in_run_one(w)
        with w.served.client() as client:
            client.call("conversation_reset", {"conversation_id": c})
        body = next_turn(w, c)
        assert outcome(w, body) == f"invalidated (reset) {NO_ANSWER}"
        assert "Set up tests." in json.dumps(body)


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_r5_a11_an_answer_whose_continuation_failed_reaches_the_next_turn(tmp_path: Path,
                                                                         provider: str):
    """The answer was stored (A9) but its continuation never reached the model (a 400):
    the next turn is where the model first learns it, with the run that did not finish
    (R9's words, issue 31's new-owner trial)."""
    with served_world(provider, tmp_path) as w:
        c = asked_in_run_one(w)
        w.endpoint.plan.append(error_reply(400, "bad request"))
        continuation = w.answer(c, option=0)["receipt"]["run_id"]
        assert w.run(continuation)["status"] == "failed"
        error = w.run(continuation)["error"]
        assert error.startswith(f"model_error: {provider}: 400")
        assert outcome(w, next_turn(w, c)) == (
            f"answered: the owner (operator) chose the option 'pytest'. {A11} Your run that "
            f"followed this answer did not finish: it failed: {error}.")


@pytest.mark.parametrize("provider", ["openai"])
def test_r8_the_cli_refuses_an_owner_message_of_only_whitespace_and_says_why(
        tmp_path: Path, provider: str):
    with served_world(provider, tmp_path) as w:
        c = w.conversation()
        with w.served.client() as client:
            revision = client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).revision
        done = cli(w.served, "conversations", "send", c, "  \n\t")
        assert done.returncode != 0
        assert done.stderr.strip() == ("clankie: invalid_request: text: a message must have "
                                       "some text besides whitespace"), done.stderr
        with w.served.client() as client:
            assert client.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).revision == revision
            events = client.call("events_tail", {"conversation_id": c, "limit": 500})["events"]
        assert [e for e in events if e["type"] in ("message", "run_status")] == []
        assert w.endpoint.requests == []
