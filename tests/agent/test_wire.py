"""SPEC R8 on plain values: the normaliser and the budget of `clankie.agent.wire`, each
request checked by the strict validators of both providers' published rules."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clankie.agent.context import TurnContext
from clankie.agent.providers import model_for_runs
from clankie.agent.scripted import ScriptedModel
from clankie.agent.tools import TOOL_SPECS
from clankie.agent.transcript import Text, ToolCall, ToolResult, Turn
from clankie.agent.wire import (
    INVALID_NAME,
    NO_REPLY,
    BudgetError,
    anthropic_request,
    estimate,
    normalise,
    openai_request,
)
from clankie.settings import SettingsError, load_settings
from tests.strict_endpoints import anthropic_problem, budget_problem, openai_problem

BUDGET = 100_000


def requests(turns: list[Turn], budget: int = BUDGET) -> list[dict[str, Any]]:
    """Both providers' requests for `turns`, each checked by its strict validator."""
    bodies = [openai_request("m", "system", turns, TOOL_SPECS, budget),
              anthropic_request("m", "system", turns, TOOL_SPECS, budget, 1024)]
    assert openai_problem(bodies[0]) is None, openai_problem(bodies[0])
    assert anthropic_problem(bodies[1]) is None, anthropic_problem(bodies[1])
    assert all(budget_problem(b, budget) is None for b in bodies)
    return bodies


def user(*blocks: Any) -> Turn:
    return Turn("user", tuple(Text(b) if isinstance(b, str) else b for b in blocks))


def assistant(*blocks: Any) -> Turn:
    return Turn("assistant", tuple(Text(b) if isinstance(b, str) else b for b in blocks))


def test_r8_a_hallucinated_tool_name_is_replayed_valid_and_its_result_says_what_was_sent():
    turns = [user("Look around."),
             assistant(ToolCall("call_1", "multi_tool_use.parallel", '{"tool_uses": []}')),
             user(ToolResult("call_1", '{"status": "refused", "code": "unknown_tool"}')),
             assistant("Sorry."), user("Go on.")]
    openai, anthropic = requests(turns)
    call = openai["messages"][2]["tool_calls"][0]
    assert call["function"] == {"name": INVALID_NAME, "arguments": '{"tool_uses": []}'}
    result = json.loads(openai["messages"][3]["content"])
    assert "multi_tool_use.parallel" in result["replayed"]
    assert result["result"] == {"status": "refused", "code": "unknown_tool"}
    assert anthropic["messages"][1]["content"][0]["name"] == INVALID_NAME
    assert "multi_tool_use.parallel" in anthropic["messages"][2]["content"][0]["content"]


@pytest.mark.parametrize("arguments", ["{not json", "[1, 2]", "", "NaN", '{"a": NaN}',
                                       '"text"', '{"a": "\\ud800"}'])
def test_r8_malformed_arguments_are_replayed_as_an_object_and_the_text_is_kept(arguments: str):
    turns = [user("Read it."), assistant(ToolCall("c1", "read_file", arguments)),
             user(ToolResult("c1", '{"status": "refused", "code": "invalid_argument"}'))]
    openai, anthropic = requests(turns)
    assert openai["messages"][2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert anthropic["messages"][1]["content"][0]["input"] == {}
    kept = json.loads(openai["messages"][3]["content"])["replayed"]
    assert json.dumps(arguments, ensure_ascii=False) in kept


def test_r8_whitespace_text_blocks_are_left_out_and_an_empty_assistant_turn_says_so():
    turns = [user("Hello", "   "), assistant(" \n", ToolCall("c1", "list_files", "{}")),
             user(ToolResult("c1", '{"status": "ok"}'), "\t"), assistant(""), user("  "),
             assistant("Done.", " ")]
    openai, anthropic = requests(turns)
    assert openai["messages"][2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "list_files",
                                                      "arguments": "{}"}}]}
    assert anthropic["messages"][3] == {"role": "assistant",
                                        "content": [{"type": "text", "text": NO_REPLY}]}
    assert anthropic["messages"][-1]["role"] == "user"
    texts = [b["text"] for m in anthropic["messages"] for b in m["content"]
             if b["type"] == "text"]
    assert all(t.strip() for t in texts)


def test_r8_repeated_call_ids_are_made_unique_and_each_result_follows_its_own_call():
    """A conversation begun with the scripted model and continued with another provider, and
    a model that reuses an ID within one reply."""
    turns = [user("One."), assistant(ToolCall("scripted-0", "list_files", "{}")),
             user(ToolResult("scripted-0", '"first"')), assistant("ok"), user("Two."),
             assistant(ToolCall("scripted-0", "git_status", "{}"),
                       ToolCall("scripted-0", "git_log", "{}")),
             user(ToolResult("scripted-0", '"second"'), ToolResult("scripted-0", '"third"')),
             assistant(ToolCall("bad id!", "git_diff", "{}")),
             user(ToolResult("bad id!", '"fourth"'))]
    openai, anthropic = requests(turns)
    ids = [c["id"] for m in openai["messages"] for c in m.get("tool_calls", [])]
    assert len(set(ids)) == 4 and ids[0] == "scripted-0"
    answered = {m["tool_call_id"]: m["content"] for m in openai["messages"]
                if m["role"] == "tool"}
    assert [answered[i] for i in ids] == ['"first"', '"second"', '"third"', '"fourth"']
    uses = [b["id"] for m in anthropic["messages"] for b in m["content"]
            if b["type"] == "tool_use"]
    assert uses == ids


def test_r8_a_call_without_a_result_gets_one_and_a_result_without_a_call_is_left_out():
    turns = [user("Hi.", ToolResult("ghost", '"orphan"')),
             assistant(ToolCall("c1", "list_files", "{}")), assistant("More."),
             user("next")]
    openai, _ = requests(turns)
    tools = [m for m in openai["messages"] if m["role"] == "tool"]
    assert [(t["tool_call_id"], json.loads(t["content"])["status"]) for t in tools] == \
        [("c1", "missing")]
    assert "orphan" not in json.dumps(openai)


def test_r8_first_turn_from_the_user_and_the_last_too():
    turns = [assistant("I spoke first."), user("Fine."), assistant("Last word.")]
    for body in requests(turns):
        assert body["messages"][-1]["role"] in ("user",)
    assert normalise(turns)[0].role == "user"


def _long_history(exchanges: int, size: int = 3_000) -> list[Turn]:
    turns: list[Turn] = []
    for n in range(exchanges):
        turns += [user(f"message {n} " + "x" * size),
                  assistant(ToolCall(f"c{n}", "read_file", '{"path": "a"}')),
                  user(ToolResult(f"c{n}", json.dumps({"content": "y" * size}))),
                  assistant(f"reply {n}")]
    return [*turns, user("the newest message")]


def test_r8_the_oldest_history_leaves_first_and_the_model_is_told_how_much():
    turns = _long_history(40)
    openai, anthropic = requests(turns, budget=20_000)
    for body in (openai, anthropic):
        assert estimate(body) <= 20_000
        text = json.dumps(body)
        assert "the newest message" in text and "message 0 " not in text
        assert "message 39 " in text
        assert "earlier turns of this conversation" in text
    first = anthropic["messages"][0]["content"][0]["text"]
    assert first.startswith("(") and "left out here to fit the context budget of 20,000" in first


def test_r8_within_the_budget_nothing_is_left_out():
    turns = _long_history(3)
    openai, _ = requests(turns)
    assert "left out" not in json.dumps(openai)
    assert "message 0 " in json.dumps(openai)


def test_r8_a_newest_turn_too_big_for_the_budget_is_cut_saying_so():
    turns = [user("Read both."), assistant(ToolCall("c1", "read_file", "{}"),
                                           ToolCall("c2", "read_file", "{}")),
             user(ToolResult("c1", "a" * 40_000), ToolResult("c2", "b" * 40_000))]
    openai, anthropic = requests(turns, budget=8_000)
    assert "characters left out here to fit the context budget" in json.dumps(openai)
    assert [b["type"] for b in anthropic["messages"][-1]["content"]] == ["tool_result"] * 2


def test_r8_a_request_that_cannot_fit_fails_only_its_run():
    with pytest.raises(BudgetError, match="context_budget"):
        openai_request("m", "s" * 60_000, [user("hi")], TOOL_SPECS, 4_000)


def test_r8_the_estimate_counts_every_non_ascii_character_as_at_least_two_tokens():
    ascii_body = {"messages": [{"role": "user", "content": "a" * 300}]}
    wide = {"messages": [{"role": "user", "content": "語" * 300}]}
    assert estimate(ascii_body) >= 100
    assert estimate(wide) >= 600


def test_r8_scripted_call_ids_are_unique_across_runs():
    model = ScriptedModel({"turns": [[{"tool": "list_files", "args": {}}]] * 2})
    ids = []
    for index in range(2):
        ctx = TurnContext("turn", index, "/w", (), None)
        blocks = model.for_run(ctx).step("", [], TOOL_SPECS)
        ids += [b.call_id for b in blocks if isinstance(b, ToolCall)]
    assert len(set(ids)) == 2, ids


def test_r8_context_budget_is_a_setting_in_tokens_given_to_both_providers(
        monkeypatch: pytest.MonkeyPatch):
    assert load_settings(None, {}).context_budget == 100_000
    assert load_settings(None, {"CLANKIE_CONTEXT_BUDGET": "8000"}).context_budget == 8_000
    with pytest.raises(SettingsError, match=r"context_budget.*4,000 to 10,000,000 tokens"):
        load_settings(None, {"CLANKIE_CONTEXT_BUDGET": "100"})
    monkeypatch.setenv("ANTHROPIC_API_KEY", "unused")
    for provider in ("openai", "anthropic"):
        settings = load_settings(None, {"CLANKIE_MODEL": provider,
                                        "CLANKIE_CONTEXT_BUDGET": "12345"})
        model = model_for_runs(settings)(TurnContext("turn", 0, "/w", (), None))
        assert model.context_budget == 12_345  # type: ignore[attr-defined]


# ------------------------------------------------------------------ red team (issue 18)


def _stored_step_then_owner(calls: list[ToolCall], results: list[ToolResult]) -> list[Turn]:
    """What `context.turns` makes of a run that called tools and then failed (nothing said
    after the results): the next owner message joins the user turn of those results."""
    return [user("hi"), assistant(*calls), user(*results, "The next message.")]


def test_r8_a_stored_step_of_calls_with_long_arguments_fails_no_later_run():
    """Arguments are kept up to 16,384 characters each (runs.ARGUMENTS_KEPT): twenty such
    calls, or one under a small budget, were pinned with the newest results and failed
    every later run with `context_budget`."""
    args = json.dumps({"path": "a" * 16_000})
    calls = [ToolCall(f"c{i}", "read_file", args) for i in range(20)]
    results = [ToolResult(f"c{i}", '{"ok": true}') for i in range(20)]
    openai, anthropic = requests(_stored_step_then_owner(calls, results))
    assert "of these arguments are left out here to fit the context budget" in json.dumps(openai)
    assert "The next message." in json.dumps(anthropic)
    requests(_stored_step_then_owner(calls[:1], results[:1]), budget=4_000)


def test_r8_a_stored_step_of_thousands_of_calls_fails_no_later_run():
    calls = [ToolCall(f"c{i}", "ask_question", "{}") for i in range(5_000)]
    results = [ToolResult(f"c{i}", '{"status": "refused"}') for i in range(5_000)]
    openai, anthropic = requests(_stored_step_then_owner(calls, results))
    for body in (openai, anthropic):
        text = json.dumps(body)
        assert "The next message." in text and "earlier turns of this conversation" in text


# ------------------------------------------------------------------ R8 as amended (issue 31)


OWNER = "Compare the three ledgers and tell me which balances. " + "Careful now. " * 150


def _run_reading(files: int, size: int = 9_000) -> list[Turn]:
    """An earlier exchange, then a run (as `run_turn` builds it) that read `files` long
    files, one a step."""
    turns = [user("An earlier message. " + "earlier " * 400), assistant("Hello."), user(OWNER)]
    for n in range(files):
        turns += [assistant(ToolCall(f"read_{n}", "read_file", json.dumps({"path": f"{n}"}))),
                  user(ToolResult(f"read_{n}", json.dumps({"content": f"{n}" * size})))]
    return turns


def _user_texts(openai: dict[str, Any]) -> list[str]:
    return [m["content"] for m in openai["messages"] if m["role"] == "user"]


def test_r8_the_owner_message_that_started_the_run_stays_whole_when_its_results_grow():
    """The issue's shape was `system, user: "earlier history left out", assistant, tool`:
    the run's owner message left out to fit its own tool results."""
    for files in range(4):
        openai, anthropic = requests(_run_reading(files), budget=8_000)
        assert any(OWNER in text for text in _user_texts(openai)), (files, _user_texts(openai))
        assert any(b.get("text", "").endswith(OWNER) for m in anthropic["messages"]
                   if m["role"] == "user" for b in m["content"])


def test_r8_the_earlier_history_leaves_first_then_the_runs_older_results_are_shortened():
    openai, _ = requests(_run_reading(3), budget=8_000)
    text = json.dumps(openai)
    assert "An earlier message." not in text and "earlier turns of this conversation" in text
    results = {m["tool_call_id"]: m["content"] for m in openai["messages"]
               if m["role"] == "tool"}
    assert list(results) == ["read_0", "read_1", "read_2"]
    assert "left out here" not in results["read_2"]  # the newest whole, as it fits
    for older in ("read_0", "read_1"):
        assert results[older].endswith("characters left out here to fit the context budget]")
    assert len(results["read_0"]) <= len(results["read_1"])  # the oldest first


def test_r8_with_the_budget_to_spare_the_earlier_history_stays_and_nothing_is_shortened():
    openai, _ = requests(_run_reading(3), budget=20_000)
    assert "left out" not in json.dumps(openai)


def test_r8_an_owner_message_that_cannot_fit_whole_fails_its_run_and_is_never_cut():
    with pytest.raises(BudgetError, match="context_budget"):
        openai_request("m", "system", [user("語" * 8_000)], TOOL_SPECS, 4_000)


def test_r8_a_step_of_the_run_too_big_even_cut_leaves_saying_so_and_the_owner_message_stays():
    """A reply of thousands of calls (red team, issue 18): the run's own step cannot fit
    even cut, so it leaves whole, said in the owner's turn; the owner's message stays."""
    calls = [ToolCall(f"c{i}", "list_files", "{}") for i in range(3_000)]
    results = [ToolResult(f"c{i}", '{"status": "refused"}') for i in range(3_000)]
    openai, anthropic = requests([user("Look at my project."), assistant(*calls),
                                  user(*results)], budget=8_000)
    assert _user_texts(openai) == [
        "Look at my project.\n\n(1 earlier steps of this run, your tool calls and their "
        "results, are left out here to fit the context budget of 8,000 tokens.)"]
    assert [m["role"] for m in anthropic["messages"]] == ["user"]
