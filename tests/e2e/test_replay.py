"""SPEC R8 end to end: a real `clankie serve` with each provider's official SDK against a
strict fake endpoint that answers any request the real API would reject with that API's
own 400 (tests/strict_endpoints.py). One bad step of a model (a hallucinated
`multi_tool_use.parallel`, malformed arguments, a whitespace text block beside a call)
never makes a later request invalid; a conversation begun with the scripted model goes on
with a provider; a long conversation stays within a small `context_budget` and the model
is told what was left out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clankie import dto
from clankie.agent.wire import estimate
from tests.e2e.served import Served, finished
from tests.e2e.test_providers import PROVIDERS, Provider
from tests.fakes import Endpoint, Reply
from tests.strict_endpoints import strict_endpoint


class Strict:
    def __init__(self, provider: Provider, endpoint: Endpoint, home: Path, workspace: Path,
                 budget: int | None = None, script: dict[str, Any] | None = None) -> None:
        self.provider, self.endpoint, self.home, self.workspace = (provider, endpoint, home,
                                                                   workspace)
        self.env = provider.env(endpoint.url)
        if budget is not None:
            self.env["CLANKIE_CONTEXT_BUDGET"] = str(budget)
        if script is not None:  # begun with the scripted model
            self.served = Served.start(home, script=script)
        else:
            self.served = Served.start(home, env=self.env, script=None)

    def to_provider(self) -> None:
        assert self.served.stop() == 0
        self.served = Served.start(self.home, init=False, script=None, env=self.env)

    def conversation(self) -> str:
        with self.served.client() as client:
            return str(client.op(dto.CONVERSATION_CREATE,
                                 dto.ConversationCreate(workspace=str(self.workspace))).conversation_id)

    def turn(self, c: str, text: str) -> dict[str, Any]:
        with self.served.client() as client:
            run_id = client.call("conversation_send", {"conversation_id": c,
                                                       "text": text})["run_id"]
            return finished(client, run_id)


@pytest.fixture
def strict(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    started: list[Strict] = []
    workspace = tmp_path / "project"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("hello\n")

    with strict_endpoint(budget=getattr(request, "param", None)) as endpoint:
        def start(provider: str, budget: int | None = None,
                  script: dict[str, Any] | None = None) -> Strict:
            s = Strict(PROVIDERS[provider], endpoint, tmp_path / "home", workspace, budget,
                       script)
            started.append(s)
            return s
        try:
            yield start
        finally:
            for s in started:
                s.served.stop()


def _hallucination(provider: str) -> Reply:
    """A reply with a call of `multi_tool_use.parallel`, a call with malformed arguments and
    a whitespace text block beside them, as each wire format can carry them."""
    if provider == "openai":
        return PROVIDERS["openai"].calls(
            ("call_1", "multi_tool_use.parallel",
             '{"tool_uses": [{"recipient_name": "functions.list_files", "parameters": {}}]}'),
            ("call_2", "read_file", '{"path": "notes.txt"'), text="  \n")
    return PROVIDERS["anthropic"].calls(
        ("toolu_1", "multi_tool_use.parallel", {"tool_uses": []}),
        ("toolu_2", "read_file", ["notes.txt"]), text=" ")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_r8_a_hallucinated_call_and_a_blank_text_block_never_invalidate_a_later_request(
        strict: Any, provider: str):
    s = strict(provider)
    p, endpoint = s.provider, s.endpoint
    endpoint.plan += [_hallucination(provider), p.text("Let me try again."),
                      p.text("Second."), p.text("Third.")]
    c = s.conversation()
    assert s.turn(c, "Look at my project.")["status"] == "succeeded"
    assert s.turn(c, "And now?")["status"] == "succeeded"
    assert s.turn(c, "Once more.")["status"] == "succeeded"
    assert endpoint.rejected == []
    assert len(endpoint.requests) == 4
    later = json.dumps(endpoint.requests[3]["body"])
    assert "invalid_tool_name" in later and "multi_tool_use.parallel" in later
    results = p.results(endpoint.requests[1]["body"])  # the run's own next step
    assert len(results) == 2
    replayed = [json.loads(text) for text in results.values()]
    assert all("replayed" in r for r in replayed)
    assert any("multi_tool_use.parallel" in r["replayed"] for r in replayed)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_r8_a_conversation_begun_with_the_scripted_model_goes_on_with_a_provider(
        strict: Any, provider: str):
    """The scripted model's calls of several runs, then a provider replays them all."""
    script = {"turns": [[{"tool": "list_files", "args": {}}, {"say": "Listed."}]] * 3}
    s = strict(provider, script=script)
    c = s.conversation()
    for text in ("one", "two", "three"):
        assert s.turn(c, text)["status"] == "succeeded"
    s.to_provider()
    s.endpoint.plan += [s.provider.text("Carrying on.")]
    assert s.turn(c, "four")["status"] == "succeeded"
    assert s.endpoint.rejected == []
    assert len(s.provider.results(s.endpoint.requests[0]["body"])) == 3


@pytest.mark.parametrize("strict", [4_000], indirect=True)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_r8_a_long_conversation_stays_within_a_small_context_budget(strict: Any,
                                                                     provider: str):
    s = strict(provider, budget=4_000)
    s.endpoint.plan += [s.provider.text(f"Reply {n}.") for n in range(6)]
    c = s.conversation()
    for n in range(6):
        assert s.turn(c, f"Message {n}: " + "words " * 600)["status"] == "succeeded"
    assert s.endpoint.rejected == []
    last = s.endpoint.requests[-1]["body"]
    assert estimate(last) <= 4_000
    text = json.dumps(last)
    assert "Message 5: " in text and "Message 0: " not in text
    assert "left out here to fit the context budget of 4,000 tokens" in text


OWNER = ("Read a.txt, b.txt and c.txt one after another and tell me which ledger balances. "
         + "Every detail of this request matters to me. " * 40 + "That is all.")


def _ledger(name: str) -> str:
    return "".join(f"{name} line {n:03}: " + "entry " * 10 + "\n" for n in range(120)) + \
        f"end of {name}\n"


def _owner_texts(provider: str, body: dict[str, Any]) -> list[str]:
    """The texts of the request's user messages (tool results aside), in order."""
    if provider == "openai":
        return [m["content"] for m in body["messages"] if m["role"] == "user"]
    return ["\n\n".join(b["text"] for b in m["content"] if b["type"] == "text")
            for m in body["messages"] if m["role"] == "user"]


@pytest.mark.parametrize("strict", [8_000], indirect=True)
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_r8_a_run_reading_three_long_files_keeps_its_owner_message_whole_in_every_request(
        strict: Any, provider: str):
    """Issue 31: the last request of a run that read three long files was `system, user:
    "earlier history left out", assistant, tool`. R8 as amended: the owner message that
    started the run is in every request of it, in full; the earlier history leaves first,
    saying so; then the run's older tool results are shortened, each saying how much."""
    s = strict(provider, budget=8_000)
    p = s.provider
    for name in ("a", "b", "c"):
        (s.workspace / f"{name}.txt").write_text(_ledger(name))
    reads = [p.calls((f"read_{name}", "read_file", {"path": f"{name}.txt"}))
             for name in ("a", "b", "c")]
    s.endpoint.plan += [p.text("Hello."), *reads, p.text("Ledger c balances.")]
    c = s.conversation()
    assert s.turn(c, "An earlier message. " + "earlier " * 600)["status"] == "succeeded"
    assert s.turn(c, OWNER)["status"] == "succeeded"
    assert s.endpoint.rejected == []
    run = [r["body"] for r in s.endpoint.requests[1:]]
    assert len(run) == 4
    for body in run:
        assert estimate(body) <= 8_000
        assert any(OWNER in text for text in _owner_texts(provider, body)), \
            _owner_texts(provider, body)
    last = run[-1]
    assert "An earlier message." not in json.dumps(last)
    assert "left out here to fit the context budget of 8,000 tokens" in json.dumps(last)
    results = p.results(last)
    assert list(results) == ["read_a", "read_b", "read_c"]
    assert "end of c" in results["read_c"]  # the newest result whole
    for older in ("read_a", "read_b"):  # the older ones shortened, each saying by how much
        assert "end of" not in results[older]
        assert "characters left out here to fit the context budget" in results[older]
