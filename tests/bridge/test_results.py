"""The bridge's tool results (SPEC P4), as pure functions of what the service said: each
status's sentence, carried as `note` and first in the one line of text; which refusals are
errors; every result fits its tool's output schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from clankie.bridge import results
from clankie.bridge.results import (
    ANSWERED,
    NO_ANSWER,
    PENDING,
    AskResult,
    CancelResult,
    ListResult,
    QuestionResult,
)

REQUEST = "0b7e4a4e-8f5b-4d7e-9c3a-2f1d5e6a7b8c"
OPTION = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
QUESTION: dict[str, Any] = {
    "request_id": REQUEST, "conversation_id": "a6f0c7de-0b4e-4a8e-9a55-6f2f4f0f7d11",
    "status": "pending", "prompt": "Tabs or spaces?", "kind": "choice",
    "options": [{"option_id": OPTION, "label": "tabs"}], "asked_at": "2026-12-04T10:00:00Z",
    "expires_at": "2026-12-05T10:00:00Z", "reason": None, "answer": None, "receipt_id": None,
    "answered_by": None, "resolved_at": None, "collected_at": None}
ANSWERED_Q = {**QUESTION, "status": "answered", "answer": {"option_id": OPTION,
                                                           "label": "tabs"},
              "receipt_id": "5d0b3a3e-1f6e-4c1b-8f3a-0e2d9c8b7a61",
              "answered_by": {"kind": "operator", "name": "owner"},
              "resolved_at": "2026-12-04T10:05:00Z", "collected_at": "2026-12-04T10:06:00Z"}


def text_is_note_then_compact_json(result: results.ToolResult) -> None:
    compact = json.dumps(result.structured, ensure_ascii=False, separators=(",", ":"))
    assert result.text == f"{result.structured['note']} {compact}"


def test_p4_a_pending_question_says_the_owner_has_not_answered():
    got = results.question(QUESTION)
    assert got.structured["note"] == PENDING == ("The owner has not answered yet. Do not "
                                                 "assume an answer.")
    assert got.structured["status"] == "pending" and not got.is_error
    assert "answer" not in got.structured and "conversation_id" not in got.structured
    assert "collected_at" not in got.structured  # the owner's information, not the agent's
    text_is_note_then_compact_json(got)
    QuestionResult.model_validate(got.structured)


@pytest.mark.parametrize(("status", "reason"), [("cancelled", "explicit"),
                                                ("cancelled", "restart"),
                                                ("expired", "expired"),
                                                ("invalidated", "workspace_missing")])
def test_p4_an_ended_question_without_answer_is_not_consent(status: str, reason: str):
    got = results.question({**QUESTION, "status": status, "reason": reason,
                            "receipt_id": "5d0b3a3e-1f6e-4c1b-8f3a-0e2d9c8b7a61"})
    assert NO_ANSWER == "No answer: this is not consent."
    assert got.structured["note"].startswith(NO_ANSWER)
    assert (got.structured["status"], got.structured["reason"]) == (status, reason)
    assert not got.is_error
    text_is_note_then_compact_json(got)


def test_p4_a11_an_answer_is_the_owners_preference_not_an_approval():
    got = results.question(ANSWERED_Q)
    assert got.structured["note"] == ANSWERED
    assert "preference" in ANSWERED and "not an approval" in ANSWERED
    assert got.structured["answer"] == {"option_id": OPTION, "label": "tabs"}
    assert got.structured["answered_by"] == {"kind": "operator", "name": "owner"}
    text = results.question({**ANSWERED_Q, "answer": {"text": "tabs, always"}})
    assert text.structured["answer"] == {"text": "tabs, always"}
    QuestionResult.model_validate(text.structured)


def test_p4_ask_pending_duplicate_and_refused_question_pending():
    out = {"status": "pending", "request_id": REQUEST, "conversation_id": "x",
           "options": [{"option_id": OPTION, "label": "tabs"}],
           "expires_at": "2026-12-05T10:00:00Z", "duplicate": False, "reason": None,
           "pending_request_id": None}
    got = results.asked(out)
    assert got.structured["note"].startswith(PENDING) and not got.is_error
    assert got.structured == {**got.structured, "status": "pending", "request_id": REQUEST,
                              "conversation_id": "x", "duplicate": False}  # issue 42
    assert "reason" not in got.structured
    AskResult.model_validate(got.structured)
    again = results.asked({**out, "duplicate": True})
    assert again.structured["duplicate"] is True and again.structured["note"].startswith(PENDING)
    refused = results.asked({"status": "refused", "request_id": None, "conversation_id": "x",
                             "options": [], "expires_at": None, "duplicate": False,
                             "reason": "question_pending", "pending_request_id": REQUEST})
    assert refused.structured == {**refused.structured, "status": "refused",
                                  "reason": "question_pending", "pending_request_id": REQUEST}
    assert REQUEST in refused.structured["note"] and not refused.is_error
    AskResult.model_validate(refused.structured)


def test_p4_cancel_carries_duplicate_and_the_receipt():
    got = results.cancelled({"question": {**QUESTION, "status": "cancelled",
                                          "reason": "explicit",
                                          "receipt_id": "5d0b3a3e-1f6e-4c1b-8f3a-0e2d9c8b7a61"},
                             "duplicate": True})
    assert got.structured["duplicate"] is True and got.structured["status"] == "cancelled"
    assert got.structured["note"].startswith(NO_ANSWER)
    CancelResult.model_validate(got.structured)


def test_p4_list_gives_each_question_its_own_note():
    got = results.listed({"questions": [QUESTION, ANSWERED_Q]})
    assert got.structured["status"] == "ok" and not got.is_error
    assert [q["note"] for q in got.structured["questions"]] == [PENDING, ANSWERED]
    ListResult.model_validate(got.structured)
    assert results.listed({"questions": []}).structured["questions"] == []


# Refusals of the service: a plain result where the question's state answered the call;
# an error where the call itself could not be served (wrong, unknown, not allowed).
@pytest.mark.parametrize(("code", "is_error"), [
    ("already_answered", False), ("request_closed", False), ("request_expired", False),
    ("invalid_request", True), ("unknown_request", True), ("not_found", True),
    ("forbidden", True), ("unauthenticated", True), ("payload_too_large", True),
    ("internal_error", True)])
def test_p4_a_refusal_is_a_result_with_its_spec_code(code: str, is_error: bool):
    got = results.refused(code, "because", request_id=REQUEST)
    assert got.structured == {**got.structured, "status": "refused", "reason": code,
                              "detail": "because", "request_id": REQUEST}
    assert got.is_error is is_error
    for model in (AskResult, QuestionResult, CancelResult, ListResult):
        model.model_validate(got.structured)
    text_is_note_then_compact_json(got)


def test_p1_unavailable_is_an_error_result_that_says_whether_the_call_was_sent():
    """P1; issue 42: whether the call was sent is a field (`sent`), not only words, and
    `reason` is a code, as a refusal's is (the words are `detail`)."""
    got = results.unavailable("service_unreachable",
                              "cannot reach clankie at unix:///h/clankie.sock", sent="no")
    assert got.structured == {**got.structured, "status": "unavailable", "sent": "no",
                              "reason": "service_unreachable",
                              "detail": "cannot reach clankie at unix:///h/clankie.sock"}
    assert got.is_error and "Do not assume an answer" in got.structured["note"]
    storage = results.refused("storage_unavailable", "the store is busy")
    assert storage.structured["status"] == "unavailable" and storage.is_error
    assert storage.structured["sent"] == "yes"  # the service had it, and changed nothing
    assert (storage.structured["reason"], storage.structured["detail"]) == (
        "storage_unavailable", "the store is busy")
    unsure = results.unavailable("uncertain", "no reply", sent="unknown")
    assert unsure.structured["sent"] == "unknown"
    assert "list_questions" in unsure.structured["note"]
    for made in (got, storage, unsure):
        for model in (AskResult, QuestionResult, CancelResult, ListResult):
            model.model_validate(made.structured)
    schema = AskResult.model_json_schema()
    assert schema["properties"]["sent"]["anyOf"][0]["enum"] == ["no", "unknown", "yes"]


def test_p2_a_token_of_another_kind_is_an_error_that_says_so():
    got = results.not_an_agent("operator")
    assert (got.structured["status"], got.structured["reason"]) == ("refused",
                                                                    "not_an_agent_token")
    assert got.is_error and "operator" in got.structured["note"]
    assert "clankie credentials issue --kind agent" in got.structured["note"]


def test_p4_a_wait_the_services_stop_cut_short_is_unavailable_and_says_it_stopped():
    """Issue 42: a wait cut short by the service's stop read `pending`, as if `wait_s` had
    passed; P4's wait returns when the question ends or after `wait_s`, so it is said
    `unavailable`, the service stopped (and never an answer)."""
    got = results.question({**QUESTION, "service_stopping": True})
    assert got.is_error and got.structured == {
        "status": "unavailable", "note": results.STOPPED, "reason": "service_stopped",
        "detail": "the service stopped while this call waited", "sent": "yes",
        "request_id": REQUEST}
    assert "stopped while this call waited" in results.STOPPED
    assert "Do not assume an answer" in results.STOPPED
    QuestionResult.model_validate(got.structured)
    text_is_note_then_compact_json(got)
    # a question that ended before the stop is said as it ended; no flag, no change
    assert results.question({**ANSWERED_Q, "service_stopping": True}) == \
        results.question(ANSWERED_Q)
    assert results.question({**QUESTION, "service_stopping": False}).structured[
        "status"] == "pending"


def test_e_p2_a_revoked_agents_refusal_says_its_waiting_question_ended_unanswered():
    """Issue 42: a wait in flight when the owner revokes the agent ends at once, refused
    `unauthenticated`; the agent is told its question has ended without an answer."""
    got = results.refused("unauthenticated", "this token is unknown, rotated or revoked")
    note = got.structured["note"]
    assert "revoked" in note and "asker_revoked" in note and "Do not assume an answer" in note
    assert got.is_error
