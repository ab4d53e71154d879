"""SPEC R8, a generated campaign: random conversations stored the way the service stores
them, replayed through the real context (`agent/context.py`), the real turn loop
(`agent/turn.py`) and both providers' requests (`agent/wire.py`); every request of every
model step is checked by the strict validators of both providers' published rules and
against `context_budget`. In process, no HTTP: fast.

A conversation is a sequence of runs. Each run starts with an owner message (or is a
continuation after an answer), and its model replies with texts (empty, whitespace,
long, non-ASCII) and tool calls (parallel, refused, unknown, hallucinated names such as
`multi_tool_use.parallel`, malformed arguments, IDs that repeat across runs as the old
scripted model's did, or within one reply) over several steps. Between runs: answers,
cancellations, resets (which keep the history) and switches of the model. Histories grow
past the 40-message window and past the budget.

The default run is small and derandomized; `CLANKIE_CAMPAIGN_EXAMPLES=500` runs more.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from clankie.agent.context import HISTORY, AnsweredQuestion, EndedQuestion, TurnContext
from clankie.agent.transcript import Text, ToolCall, ToolSpec, Turn
from clankie.agent.turn import run_turn
from clankie.agent.wire import (
    BudgetError,
    anthropic_request,
    estimate,
    left_out_note,
    normalise,
    openai_request,
    owner_turn,
    run_steps_note,
)
from clankie.service.runs import _steps
from clankie.store.tx import ToolCallRow
from tests.strict_endpoints import anthropic_problem, openai_problem

LONG_RUN = os.environ.get("CLANKIE_CAMPAIGN_EXAMPLES")
CAMPAIGN = settings(
    max_examples=int(LONG_RUN) if LONG_RUN else 60,
    derandomize=not LONG_RUN,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
)

TEXTS = st.one_of(
    st.sampled_from(["", " ", "\n\t ", "Looking.", "Done: pytest it is.", "語" * 50,
                     "\u200b", "emoji 🙂"]),
    st.text(max_size=40),
    st.integers(1_000, 30_000).map(lambda n: "long " * (n // 5)),
)
NAMES = st.sampled_from(["list_files", "read_file", "git_log", "ask_question",
                         "multi_tool_use.parallel", "functions.read_file", "", "rm_rf",
                         "x" * 80, "read file", "ünïcode", "tool\x00"])
ARGUMENTS = st.one_of(
    st.sampled_from(['{"path": "src/app.py"}', "{}", "{not json", "", "[1, 2]", "null",
                     '{"a": NaN}', '"text"', '{"kind": "text", "prompt": "Which?"}',
                     '{"a": "\\ud800"}', " {} "]),
    st.text(max_size=30),
)
RESULTS = st.one_of(
    st.sampled_from(['{"status": "ok", "entries": []}',
                     '{"status": "refused", "code": "unknown_tool", "reason": "no such tool"}',
                     '{"status": "pending", "request_id": "r-1"}', "", "   "]),
    st.integers(100, 40_000).map(lambda n: json.dumps({"status": "ok", "content": "y" * n})),
)


@st.composite
def call_ids(draw: st.DrawFn, run: int, model: str, n: int) -> str:
    if model == "scripted":
        return draw(st.sampled_from([f"scripted-{n}", f"scripted-{run}-{n}"]))
    return draw(st.sampled_from(["call_1", "toolu_1", f"call_{run}_{n}", "call 1!", "",
                                 "c" * 80, "call_1"]))


@st.composite
def replies(draw: st.DrawFn, run: int, model: str) -> list[list[Text | ToolCall]]:
    """The model's steps in one run: all but the last call tools."""
    steps: list[list[Text | ToolCall]] = []
    number = 0
    for index in range(draw(st.integers(1, 4))):
        last = index == 3 or draw(st.booleans())
        blocks: list[Text | ToolCall] = [Text(t) for t in draw(st.lists(TEXTS, max_size=2))]
        if not last:
            for _ in range(draw(st.integers(1, 3))):
                blocks.append(ToolCall(draw(call_ids(run, model, number)), draw(NAMES),
                                       draw(ARGUMENTS)))
                number += 1
            if draw(st.booleans()):  # text beside a call, often blank
                blocks.append(Text(draw(TEXTS)))
        steps.append(blocks)
        if last:
            break
    return steps


class StrictModel:
    """Plays planned steps; first checks the request each provider would be sent. Only a
    run whose owner message cannot fit whole fails (R8 as amended: it is never cut)."""

    name = "strict"

    def __init__(self, steps: list[list[Text | ToolCall]], budget: int) -> None:
        self.steps = steps
        self.budget = budget
        self.requests = 0
        self.too_big = False

    def owner_alone(self, system: str, turns: list[Turn], tools: list[ToolSpec]) -> int:
        """The smallest request that holds the run's owner message whole: its texts, with
        the notes of the history and the steps left out."""
        normalised = normalise(turns)
        owner = normalised[owner_turn(normalised)]
        texts = tuple(b for b in owner.blocks if isinstance(b, Text))
        alone = Turn("user", (Text(left_out_note(1, self.budget)), *texts,
                              Text(run_steps_note(1, self.budget))))
        return estimate(openai_request("gpt", system, [alone], tools, 10**9))

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: object = None) -> list[Text | ToolCall]:
        self.requests += 1
        try:
            openai = openai_request("gpt", system, turns, tools, self.budget)
            anthropic = anthropic_request("claude", system, turns, tools, self.budget, 2048)
        except BudgetError:
            self.too_big = True
            assert self.owner_alone(system, turns, tools) > self.budget
            raise
        assert openai_problem(openai) is None, openai_problem(openai)
        assert anthropic_problem(anthropic) is None, anthropic_problem(anthropic)
        assert estimate(openai) <= self.budget and estimate(anthropic) <= self.budget
        return self.steps.pop(0) if self.steps else []


class Store:
    """A conversation as the service stores it: messages and tool-call rows."""

    def __init__(self) -> None:
        self.messages: list[tuple[int, str, str]] = []  # (position, author, text)
        self.calls: list[tuple[int, ToolCallRow]] = []
        self.position = 0

    def add(self, author: str, text: str) -> None:
        self.position += 1
        self.messages.append((self.position, author, text))

    def context(self, run: int, answered: AnsweredQuestion | None,
                ended: EndedQuestion | None, pending: str | None) -> TurnContext:
        window = self.messages[-HISTORY:]
        first = window[0][0] if window else 0
        calls = [(after, row) for after, row in self.calls if after >= first]
        return TurnContext(
            run_kind="continuation" if answered else "turn", run_index=run, workspace="/w",
            history=tuple((author, text) for _, author, text in window),
            membership=None, answered=answered, ended=ended, pending_prompt=pending,
            steps=_steps([p for p, _, _ in window], calls))


class Tools:
    def __init__(self, store: Store, run: int, results: list[str]) -> None:
        self.store, self.run, self.results = store, run, results
        self.said: list[str] = []

    def call(self, step: int, call: ToolCall) -> str:
        result = self.results[len(self.store.calls) % len(self.results)]
        self.store.calls.append((self.store.position, ToolCallRow(
            "c", f"run-{self.run}", step, call.call_id[:200], call.name[:200],
            call.arguments[:16_384], result, datetime.now(UTC))))
        return result

    def say(self, reply_id: str | None, text: str) -> None:
        self.said.append(text)


@CAMPAIGN
@given(data=st.data())
def test_r8_campaign_no_request_is_rejected_and_none_exceeds_the_budget(data: st.DataObject):
    budget = data.draw(st.sampled_from([4_000, 8_000, 20_000, 100_000]), label="budget")
    store = Store()
    model = "scripted"
    answered: AnsweredQuestion | None = None
    ended: EndedQuestion | None = None
    pending: str | None = None
    for run in range(data.draw(st.integers(1, 30), label="runs")):
        between = data.draw(st.sampled_from(["send", "send", "send", "answer", "cancel",
                                             "reset", "switch"]))
        if between == "switch":
            model = "provider" if model == "scripted" else "scripted"
        if between == "answer" and pending is not None:
            answered = AnsweredQuestion(pending, ("a", "b"), "a", True, "owner")
            pending = None
        else:
            if between in ("cancel", "reset") and pending is not None:
                ended, pending = EndedQuestion(pending, "cancelled", "explicit"), None
            store.add("owner", data.draw(TEXTS))
        steps = data.draw(replies(run, model))
        results = data.draw(st.lists(RESULTS, min_size=1, max_size=4))
        tools = Tools(store, run, results)
        strict = StrictModel(steps, budget)
        try:
            run_turn(strict, store.context(run, answered, ended, pending), tools, max_steps=6)
        except BudgetError:
            assert strict.too_big  # only as the model checked it: the owner's message
        assert strict.requests >= 1
        for text in tools.said:
            store.add("clankie", text)
        answered = None
        if any(row.name == "ask_question" and row.run_id == f"run-{run}"
               for _, row in store.calls):
            pending = "Which?"
