"""SPEC R5 and A11 on plain values: the words a later run reads next to an `ask_question`
result that said `pending`, for each way a question can stand."""

from __future__ import annotations

import json

import pytest

from clankie.agent.context import (
    A11,
    GONE,
    OUTCOME_KEY,
    QuestionOutcome,
    outcome_note,
    with_outcome,
)

ASKED = json.dumps({"status": "pending", "request_id": "r-1"})


def test_r5_a11_an_answered_question_says_what_and_by_whom_and_that_it_is_not_approval():
    chosen = outcome_note(QuestionOutcome("answered", answer="Saturate", by_option=True,
                                          answered_by="operator"))
    assert chosen == f"answered: the owner (operator) chose the option 'Saturate'. {A11}"
    typed = outcome_note(QuestionOutcome("answered", answer="use tabs", answered_by="device"))
    assert typed == f"answered: the owner (device) answered in text: 'use tabs'. {A11}"


@pytest.mark.parametrize(("outcome", "words"), [
    (QuestionOutcome("cancelled", "explicit"),
     "cancelled (explicit) without an answer; do not assume one."),
    (QuestionOutcome("cancelled", "restart"),
     "cancelled (restart) without an answer; do not assume one."),
    (QuestionOutcome("expired", "expired"), "expired without an answer; do not assume one."),
    (QuestionOutcome("invalidated", "reset"),
     "invalidated (reset) without an answer; do not assume one."),
    (QuestionOutcome("invalidated", "workspace_replaced"),
     "invalidated (workspace_replaced) without an answer; do not assume one."),
    (QuestionOutcome("pending"), "still pending: not answered yet."),
    (GONE, "ended; how is no longer on record, so do not assume any answer."),
])
def test_r5_an_unanswered_question_says_how_it_stands_and_that_there_is_no_answer(
        outcome: QuestionOutcome, words: str):
    assert outcome_note(outcome) == words
    assert A11 not in words


def test_r5_the_outcome_goes_next_to_the_pending_result_and_costs_a_few_dozen_bytes():
    outcome = QuestionOutcome("answered", answer="pytest", by_option=True,
                              answered_by="operator")
    annotated = with_outcome(ASKED, outcome)
    payload = json.loads(annotated)
    assert payload == {"status": "pending", "request_id": "r-1",
                       OUTCOME_KEY: outcome_note(outcome)}
    extra = len(annotated.encode()) - len(ASKED.encode()) - len(A11.encode())
    assert extra < 100, extra
    for other in (QuestionOutcome("cancelled", "explicit"), GONE, QuestionOutcome("pending")):
        assert len(with_outcome(ASKED, other).encode()) - len(ASKED.encode()) < 100


def test_r5_a_result_that_is_not_a_json_object_still_gets_its_outcome():
    annotated = json.loads(with_outcome("not json", GONE))
    assert annotated == {"result": "not json", OUTCOME_KEY: outcome_note(GONE)}
