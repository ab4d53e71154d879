"""SPEC R5 on a real store: every later run's context gives each earlier `ask_question`
result that said `pending` with how its question stands as of that run (A11 for an
answer), and the scripted model's `{tool_result}` says it back. SPEC R8's last rule about
owner messages: one of only whitespace is `invalid_request` and changes nothing."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from clankie.agent.context import A11, HISTORY, OUTCOME_KEY, TurnContext
from clankie.core.errors import ClankieError
from clankie.core.model import RunStatus
from clankie.service.executor import RunExecutor
from clankie.service.runs import CallRecord
from clankie.settings import Settings

from ..world import CHOICE, TEXT, World
from .test_runs import runs


@pytest.fixture
def executors() -> Iterator[list[RunExecutor]]:
    made: list[RunExecutor] = []
    yield made
    for executor in made:
        executor.stop(timeout=5)


def ask(world: World, c: str, call_id: str, args: dict[str, Any] | None = None
        ) -> dict[str, Any]:
    """A turn run that asks through the tool (so the call is recorded, W9) and finishes."""
    args = args or CHOICE
    run_id = world.running_turn(c, f"please ask ({call_id})")
    result = world.service.runs.ask_question(run_id, args, CallRecord(0, call_id, "ask_question",
                                                                 json.dumps(args)))
    assert result.status == "pending", result
    world.service.runs.finish_run(run_id, RunStatus.SUCCEEDED)
    return world.snapshot(c)


def next_context(world: World, c: str) -> TurnContext:
    """The context of the next turn run (the owner sends another message); the run then
    finishes."""
    run_id = world.running_turn(c, "and now?")
    ctx = world.service.runs.run_context(run_id)
    world.service.runs.finish_run(run_id, RunStatus.SUCCEEDED)
    return ctx


def asked_results(ctx: TurnContext) -> dict[str, dict[str, Any]]:
    """Each replayed `ask_question` call's result as the model reads it, by call ID."""
    return {call.call_id: json.loads(call.result) for step in ctx.steps for call in step.calls
            if call.name == "ask_question"}


def outcome(ctx: TurnContext, call_id: str) -> str:
    result = asked_results(ctx)[call_id]
    assert result["status"] == "pending"  # what the model was told when it asked ...
    return str(result[OUTCOME_KEY])  # ... never alone: the later outcome next to it


def test_r5_a11_an_answered_option_is_remembered_in_every_later_turn(world: World):
    c = world.conversation()
    snap = ask(world, c, "call-1")
    world.answer(c, snap, option=1)
    for _ in range(3):  # after the continuation, turn after turn
        ctx = next_context(world, c)
        assert outcome(ctx, "call-1") == (
            f"answered: the owner (operator) chose the option 'unittest'. {A11}")


def test_r5_a11_an_answered_text_is_remembered(world: World):
    c = world.conversation()
    snap = ask(world, c, "call-1", TEXT)
    world.answer(c, snap, text="fizzbuzz")
    assert outcome(next_context(world, c), "call-1") == (
        f"answered: the owner (operator) answered in text: 'fizzbuzz'. {A11}")


def test_r5_a_cancelled_question_says_so_and_that_there_is_no_answer(world: World):
    c = world.conversation()
    world.cancel(c, ask(world, c, "call-1"))
    assert outcome(next_context(world, c), "call-1") == (
        "cancelled (explicit) without an answer; do not assume one.")


def test_r5_a_still_pending_question_says_so(world: World):
    c = world.conversation()
    ask(world, c, "call-1")
    assert outcome(next_context(world, c), "call-1") == "still pending: not answered yet."


@pytest.mark.parametrize("read_first", [False, True])
def test_r5_s5_a_question_past_its_ttl_is_expired_as_of_the_run(world: World,
                                                                 read_first: bool):
    """Whether or not a read has committed the expiry yet (S5): it can no longer be
    answered, so the run is told it expired, not that it is pending."""
    c = world.conversation()
    ask(world, c, "call-1")
    world.clock.advance(Settings().question_ttl + 1)
    if read_first:
        assert world.snapshot(c)["pending"] is None
    ctx = next_context(world, c)
    assert outcome(ctx, "call-1") == "expired without an answer; do not assume one."
    assert ctx.pending_prompt is None
    assert ctx.ended is not None and ctx.ended.outcome == "expired"


def test_r5_a_question_invalidated_by_a_reset_says_why(world: World):
    """A reset keeps the messages and tool calls (it rotates the incarnation): the next
    turn still sees the question, invalidated by the reset."""
    c = world.conversation()
    ask(world, c, "call-1")
    world.call("conversation_reset", {"conversation_id": c})
    assert outcome(next_context(world, c), "call-1") == (
        "invalidated (reset) without an answer; do not assume one.")


def test_r5_each_question_in_the_window_has_its_own_outcome(world: World):
    c = world.conversation()
    world.answer(c, ask(world, c, "call-1"), option=0)
    world.service.runs.finish_run(world.service.runs.claim_next_run(c).run_id,  # type: ignore[union-attr]
                             RunStatus.SUCCEEDED)
    world.cancel(c, ask(world, c, "call-2"))
    ask(world, c, "call-3")
    ctx = next_context(world, c)
    assert outcome(ctx, "call-1").startswith("answered: the owner (operator) chose the "
                                             "option 'pytest'.")
    assert outcome(ctx, "call-2").startswith("cancelled (explicit)")
    assert outcome(ctx, "call-3") == "still pending: not answered yet."


def test_r1_r5_a_question_no_longer_on_record_says_no_answer_may_be_assumed(
        make_world: Callable[..., World]):
    world = make_world(Settings(receipt_limit=1))
    c = world.conversation()
    world.answer(c, ask(world, c, "call-1"), option=0)
    world.service.runs.finish_run(world.service.runs.claim_next_run(c).run_id,  # type: ignore
                             RunStatus.SUCCEEDED)
    world.cancel(c, ask(world, c, "call-2"))  # evicts the receipt of call-1's question
    ctx = next_context(world, c)
    assert outcome(ctx, "call-1") == (
        "ended; how is no longer on record, so do not assume any answer.")
    assert "pytest" not in json.dumps(asked_results(ctx)["call-1"])
    assert outcome(ctx, "call-2").startswith("cancelled (explicit)")


def test_r5_a_refused_ask_is_replayed_as_it_was(world: World):
    c = world.conversation()
    ask(world, c, "call-1")
    run_id = world.running_turn(c)
    refused = world.service.runs.ask_question(run_id, CHOICE, CallRecord(
        0, "call-2", "ask_question", json.dumps(CHOICE)))
    assert refused.status == "refused"
    world.service.runs.finish_run(run_id, RunStatus.SUCCEEDED)
    results = asked_results(next_context(world, c))
    assert results["call-2"] == {"status": "refused", "reason": "question_pending"}


def test_r5_the_scripted_models_tool_result_carries_the_outcome(
        world: World, executors: list[RunExecutor]):
    """The scripted model's `{tool_result}` is the latest result exactly as a model
    received it: in the turn after an answer, the replayed `ask_question` result with the
    answer next to it."""
    r = runs(world, {"turns": [[{"ask": CHOICE}], [{"say": "Noted."}],
                               [{"say": "{tool_result}"}]]}, executors)
    c = world.conversation()
    r.writes(lambda: world.call("conversation_send", {"conversation_id": c, "text": "hi"}), c)
    snap = world.snapshot(c)
    r.writes(lambda: world.answer(c, snap, option=2), c)
    r.writes(lambda: world.call("conversation_send", {"conversation_id": c, "text": "so?"}), c)
    said = [e["text"] for e in world.events(c) if e["type"] == "message"
            and e["author"] == "clankie"]
    assert said[0] == "Noted."
    result = json.loads(said[1])
    assert result == {"status": "pending", "request_id": snap["pending"]["request_id"],
                      OUTCOME_KEY: f"answered: the owner (operator) chose the option 'nose'. "
                                   f"{A11}"}


@pytest.mark.parametrize("text", ["  \n\t", " ", "\u2003\u3000", "\r\n"])
def test_r8_an_owner_message_of_only_whitespace_is_invalid_and_changes_nothing(
        world: World, text: str):
    c = world.conversation()
    before = world.dump()
    revision = world.snapshot(c)["revision"]
    with pytest.raises(ClankieError) as refused:
        world.call("conversation_send", {"conversation_id": c, "text": text})
    assert refused.value.code == "invalid_request"
    assert "whitespace" in refused.value.detail
    assert world.dump() == before
    assert world.snapshot(c)["revision"] == revision
    sent = world.call("conversation_send", {"conversation_id": c, "text": " hi\n"})
    assert sent["run_id"] is not None  # text around words is kept as it is


def test_r8_run_context_says_when_messages_older_than_the_window_exist(world: World):
    """R8: the run is told that older messages were left out (only past the window)."""
    c = world.conversation()
    contexts = [next_context(world, c) for _ in range(HISTORY + 1)]
    assert [ctx.older_messages for ctx in contexts[HISTORY - 1:]] == [False, True]
    assert len(contexts[-1].history) == HISTORY


def test_r9_run_context_names_each_owner_message_whose_run_did_not_finish(world: World):
    """R9 on a real store: each owner message of the window whose turn run was stopped,
    failed or orphaned by a restart is named with its run's status and error; a message
    whose run succeeded is not."""
    c = world.conversation()
    world.service.runs.finish_run(world.running_turn(c, "done"), RunStatus.SUCCEEDED)
    world.call("run_cancel", {"run_id": world.running_turn(c, "stopped")})
    world.service.runs.finish_run(world.running_turn(c, "failed"), RunStatus.FAILED,
                             "model_error: openai: 400 bad request")
    world.running_turn(c, "orphaned")
    world.service.runs.recover()
    ctx = next_context(world, c)
    assert [(ctx.history[u.message], u.status, u.error) for u in ctx.unfinished] == [
        (("owner", "stopped"), "cancelled", "stopped_by_owner"),
        (("owner", "failed"), "failed", "model_error: openai: 400 bad request"),
        (("owner", "orphaned"), "failed", "orphaned_by_restart")]


@pytest.mark.parametrize("ending", ["orphaned", "stopped", "failed"])
def test_r5_r9_an_answer_whose_continuation_did_not_finish_says_so(world: World, ending: str):
    """R5 with R9 (new-owner trial of issue 31): an answer stays remembered, and when
    Clankie's run for it was stopped, failed or orphaned by a restart, the model reads that
    too, next to the answer: it neither redoes stopped work unasked nor loses it."""
    c = world.conversation()
    snap = ask(world, c, "call-1")
    world.answer(c, snap, option=1)
    run = world.service.runs.claim_next_run(c)
    assert run is not None and run.kind.value == "continuation"
    if ending == "orphaned":
        world.service.runs.recover()
        said = "clankie restarted before it was done"
    elif ending == "stopped":
        world.call("run_cancel", {"run_id": run.run_id})
        said = "the owner stopped it before you finished"
    else:
        world.service.runs.finish_run(run.run_id, RunStatus.FAILED, "model_error: openai: 400 bad")
        said = "it failed: model_error: openai: 400 bad"
    assert outcome(next_context(world, c), "call-1") == (
        f"answered: the owner (operator) chose the option 'unittest'. {A11} Your run that "
        f"followed this answer did not finish: {said}.")
