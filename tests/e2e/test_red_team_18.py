"""Red team (issue 18), end to end: a real `clankie serve` with each provider's SDK against
the strict fake endpoint (tests/strict_endpoints.py), the model as attacker. SPEC R8: "one
bad stored step never fails more than the run that made it": after each hostile reply, the
next runs are all accepted by the strict validators, fit `context_budget`, and the service
stays up with no traceback reaching a client.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from clankie.agent.wire import estimate
from tests.e2e.test_replay import strict  # noqa: F401  (the fixture)
from tests.fakes import Reply

ASK = {"kind": "text", "prompt": "Which?"}


def raw(provider: str, calls: list[tuple[str, str, str]], content: Any = None) -> Reply:
    """A reply whose calls' arguments go on the wire as raw text (OpenAI) or, for
    Anthropic, as the JSON value the text holds when it holds one, else the text."""
    if provider == "openai":
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = [{"id": i, "type": "function", "function": {
                "name": n, "arguments": a}} for i, n, a in calls]
        return Reply(body={"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                           "choices": [{"index": 0, "message": message,
                                        "finish_reason": "tool_calls" if calls else "stop"}]})
    blocks: list[dict[str, Any]] = []
    if content is not None:
        blocks.append({"type": "text", "text": content})
    for i, n, a in calls:
        try:
            value: Any = json.loads(a) if isinstance(a, str) else a
        except (ValueError, RecursionError):
            value = a
        blocks.append({"type": "tool_use", "id": i, "name": n, "input": value})
    return Reply(body={"id": "msg", "type": "message", "role": "assistant", "model": "m",
                       "content": blocks, "stop_reason": "tool_use" if calls else "end_turn",
                       "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}})


ATTACKS: dict[str, Callable[[str], Reply]] = {
    "odd ids": lambda p: raw(p, [("x" * 10_000, "list_files", "{}"),
                                 ("é🙂\u0000", "list_files", "{}"), ("", "list_files", "{}"),
                                 ("dup", "list_files", "{}"), ("dup", "list_files", "{}")]),
    "odd names": lambda p: raw(p, [("a1", "ü🙂", "{}"), ("a2", "n" * 10_000, "{}"),
                                   ("a3", "ask_question", json.dumps(ASK)),
                                   ("a4", "ask_question", json.dumps(ASK)), ("a5", "", "{}")]),
    "odd arguments": lambda p: raw(p, [
        ("b1", "read_file", "[" * 50_000 + "]" * 50_000),
        ("b2", "read_file", json.dumps({"path": "x" * 5_000_000})),
        ("b3", "read_file", "NaN"), ("b4", "read_file", '{"path": NaN}'),
        ("b5", "read_file", '"notes.txt"'), ("b6", "read_file", '{"path": "\\ud800"}'),
        ("b7", "read_file", '{"path": "\\x41"}'), ("b8", "read_file", "")]),
    "thousands of calls": lambda p: raw(p, [(f"t{i}", "ask_question" if i % 2 else "list_files",
                                             json.dumps(ASK) if i % 2 else "{}")
                                            for i in range(3_000)]),
    "control characters": lambda p: raw(p, [], content="\x1b]0;pwned\x07\x1b[2J\x00\r\x08 ok"),
    "odd content": lambda p: raw(p, [], content=[{"type": "text", "text": "a list"}]),
    "odd types": lambda p: raw(p, [(5, None, {"path": 1})], content=7),  # type: ignore[list-item]
}
FAILS_ITS_RUN = {"odd content", "odd types"}  # unusable reply: the run that made it fails


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_r8_a_hostile_reply_fails_at_most_its_own_run_and_every_later_request_is_valid(
        strict: Any, provider: str, attack: str):  # noqa: F811
    budget = 8_000
    s = strict(provider, budget=budget)
    p, endpoint = s.provider, s.endpoint
    endpoint.plan += [ATTACKS[attack](provider)] + [p.text(f"Fine {n}.") for n in range(8)]
    c = s.conversation()
    first = s.turn(c, "Look at my project.")
    assert "Traceback" not in json.dumps(first)
    if attack in FAILS_ITS_RUN:
        assert first["status"] == "failed"
        assert first["error"].startswith(f"model_error: {provider}: unusable reply: "), first
    else:
        assert first["status"] == "succeeded", first
    for n in range(3):
        after = s.turn(c, f"Next {n}.")
        assert after["status"] == "succeeded", after
    assert endpoint.rejected == [], endpoint.rejected[0][1]
    for request in endpoint.requests[1:]:
        assert estimate(request["body"]) <= budget
    with s.served.client() as client:
        assert client.call("service_info", {})["version"]
