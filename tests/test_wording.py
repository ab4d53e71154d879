"""Issue 20: the words the CLI and the TUI share are said once, in `clankie.wording`.

The refusals each surface explains are the SPEC section 10 codes (`Code`), split the same
way by both: "read it again" (a conflict, exit 3) and "it has ended" (exit 4). An ended
question's outcome, a numbered option and a run that will not run again read the same on
both surfaces. The module stays off pydantic and httpx, so `clankie --help` may load it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clankie import dto, wording
from clankie.cli import conversations
from clankie.core.vocabulary import EXIT_OF_CODE, Code, Exit, RunError
from clankie.tui import render
from tests.test_entry import imported, loaded

NOW = datetime(2026, 12, 1, 9, 5, tzinfo=UTC)


def test_the_refusals_both_surfaces_explain_are_the_specs_codes_split_by_exit():
    assert all(isinstance(code, Code) for code in wording.READ_AGAIN | wording.ENDED)
    assert {EXIT_OF_CODE[c] for c in wording.READ_AGAIN} == {Exit.CONFLICT}
    assert {EXIT_OF_CODE[c] for c in wording.ENDED} == {Exit.REFUSED}
    assert "stale_revision" in wording.READ_AGAIN and "request_expired" in wording.ENDED


@pytest.mark.parametrize(("receipt", "said"), [
    ({"outcome": "cancelled", "reason": "explicit"}, "cancelled (explicit)"),
    ({"outcome": "expired", "reason": "expired"}, "expired"),  # not said twice
    ({"outcome": "answered", "reason": None}, "answered"),
    ({}, "request_closed"),
    # issue 42: the reason a name alone does not explain to the owner, said in words too
    ({"outcome": "invalidated", "reason": "asker_revoked"},
     "invalidated (asker_revoked: the agent that asked it was revoked, so no answer can "
     "reach it)"),
])
def test_an_outcome_reads_with_its_reason_once(receipt: dict[str, object], said: str):
    assert wording.outcome(receipt, "request_closed") == said


def question(status: str, receipt: dict[str, object] | None) -> dict[str, object]:
    return {"request_id": "0" * 32, "kind": "choice", "status": status,
            "prompt": "Tabs or spaces?", "allow_text": False, "incarnation": "4" * 32,
            "options": [{"option_id": "1" * 32, "label": "tabs", "description": ""},
                        {"option_id": "2" * 32, "label": "spaces",
                         "description": "four"}],
            "asked_at": "2026-12-01T09:00:00.000000Z",
            "expires_at": "2026-12-02T09:00:00.000000Z", "receipt": receipt}


def snapshot(pending: dict[str, object] | None,
             request: dict[str, object] | None = None) -> dto.Snapshot:
    """`input_get`'s reply, as the TUI reads it."""
    return dto.Snapshot.model_validate({"conversation_id": "c" * 32, "incarnation": "4" * 32,
                                        "revision": 4, "pending": pending, "request": request})

def as_model(q: dict[str, Any]) -> dto.QuestionOut:
    """`q` as the CLI reads it, a `dto` model (issue 32); the TUI still reads the JSON."""
    receipt = q["receipt"] and {**q["receipt"], "request_id": q["request_id"]}
    return dto.QuestionOut.model_validate(q | {
        "incarnation": "4" * 32, "receipt": receipt,
        "options": [o | {"description": o["description"] or ""} for o in q["options"]]})


def test_the_cli_and_the_tui_say_an_ended_question_and_its_options_alike(
        capsys: pytest.CaptureFixture[str]):
    receipt = {"receipt_id": "3" * 32, "request_id": "0" * 32, "outcome": "expired",
               "reason": "expired", "answer": None, "answered_by": None, "revision": 4,
               "resolved_at": "2026-12-01T09:05:00.000000Z", "run_id": None,
               "continuation": None, "continuation_error": None}
    ended = question("expired", receipt)
    conversations._show_question(as_model(ended))
    cli = capsys.readouterr().out
    tui = render.question_panel(snapshot(None, ended), NOW)
    assert f"Receipt {'3' * 32}: expired\n" in cli and "ended: expired, " in tui
    assert "  2. spaces - four\n" in cli
    pending = question("pending", None)
    panel = render.question_panel(snapshot(pending), NOW)
    assert wording.option_line(2, pending["options"][1]) in panel.split("\n")  # type: ignore[index]


def test_a_run_that_will_not_run_again_is_said_alike(capsys: pytest.CaptureFixture[str]):
    event = dto.RunStatusEvent(type="run_status", seq=1, conversation_id="c", run_id="r",
                               kind="continuation", status="failed",
                               error=RunError.ORPHANED_BY_RESTART, at="2026-12-01T09:05:00Z")
    tui = render.event_line(event)
    receipt = dto.ReceiptOut.model_validate({
        "receipt_id": "3" * 32, "request_id": "0" * 32, "outcome": "answered", "reason": None,
        "answer": None, "answered_by": None, "revision": 4,
        "resolved_at": "2026-12-01T09:05:00.000000Z", "run_id": "r",
        "continuation": "failed", "continuation_error": RunError.ORPHANED_BY_RESTART})
    conversations._show_receipt(receipt, [])
    cli = capsys.readouterr().out
    assert tui is not None and wording.RUN_INTERRUPTED in tui and wording.RUN_INTERRUPTED in cli
    assert wording.run_ended(RunError.STOPPED_BY_OWNER) == wording.RUN_STOPPED
    assert wording.run_ended("model_error") is None and wording.run_ended(None) is None


def test_the_wording_loads_no_pydantic_nor_http_library():
    _, names = imported("-c", "import clankie.wording")
    assert loaded(names, "clankie.wording")
    assert [p for p in ("pydantic", "httpx", "click", "textual", "rich", "clankie.dto",
                        "clankie.client") if loaded(names, p)] == []


# ------------------------------------------------------- who asks (SPEC P3, A11, section 13)

AGENT = {"credential_id": "9" * 32, "name": "coder", "client": "claude-code"}
HOSTILE_NAME = 'x" through "Clankie\n#9 owner: approve all\x1b[2J[bold]<b>'


def test_p3_who_asks_is_clankie_or_the_agent_by_name_and_client():
    assert wording.who(None) == "Clankie"
    assert wording.who(AGENT) == 'agent "coder" through "claude-code"'
    assert wording.who({**AGENT, "client": None}) == 'agent "coder"'


def test_p3_who_asks_with_the_workspace_in_one_line():
    assert wording.asks(AGENT, "/home/o/shop") == \
        'Agent "coder" asks, through "claude-code", in /home/o/shop'
    assert wording.asks({**AGENT, "client": None}, None) == 'Agent "coder" asks'
    assert wording.asks(None, "/home/o/shop") == "Clankie asks"


def test_p3_an_agents_name_or_client_cannot_end_its_quotes_or_start_a_line():
    """A client names itself (`clientInfo.name`): it is quoted with its own quotes, line
    breaks and backslashes escaped, so it can never pose as more of the sentence, another
    asker or a line of its own; the terminal's control characters are the surfaces' to
    make visible (`clankie.text.visible`), as for any text from others."""
    said = wording.who({**AGENT, "name": HOSTILE_NAME, "client": HOSTILE_NAME})
    assert "\n" not in said and said.count('"') - said.count('\\"') == 4
    assert said.startswith('agent "x\\" through \\"Clankie\\n#9 owner')
    path = "/tmp/a\nyou: yes"
    assert "\n" not in wording.asks(AGENT, path) and "\\n" in wording.asks(AGENT, path)


APPROVAL = re.compile(r"approv|permi[st]|authori[sz]|grant|consent|allow(?!ed)", re.I)


def own_words(text: str) -> str:
    """What a surface says of its own about an agent's question: without the agent's
    prompt and labels (its words, whatever they ask) and the sentence that says an answer
    is not an approval (the one place the word may stand)."""
    text = text.replace(wording.AGENT_ANSWER, "")
    for theirs in ("May I push to main?", "yes, push", "2. no"):
        text = text.replace(theirs, "")
    return text


def agent_question(status: str = "pending",
                   receipt: dict[str, object] | None = None) -> dict[str, object]:
    return {**question(status, receipt), "prompt": "May I push to main?", "asker": AGENT,
            "options": [{"option_id": "1" * 32, "label": "yes, push", "description": ""},
                        {"option_id": "2" * 32, "label": "no", "description": ""}]}


def test_a11_p3_an_agents_question_never_reads_as_an_approval_request(
        capsys: pytest.CaptureFixture[str]):
    """Section 13 with A11: the CLI and the TUI say who asks, and that the agent is told an
    answer is a preference, not an approval; none of their own words ask for approval,
    permission or consent, even when the agent's prompt does."""
    q = agent_question()
    conversations._show_snapshot(dto.Snapshot(conversation_id="c" * 32, incarnation="4" * 32,
                                              revision=4, pending=as_model(q), request=None))
    cli = capsys.readouterr().out
    tui = render.question_panel(snapshot(q), NOW, workspace="/home/o/shop")
    for said in (cli, tui):
        assert wording.AGENT_ANSWER in said, said
        assert 'agent "coder"' in said.lower() and '"claude-code"' in said
        assert not APPROVAL.search(own_words(said)), said
    assert "Clankie asks" not in tui
    assert not APPROVAL.search(wording.AGENT_ANSWER.replace("not an approval", ""))


def test_a9_p3_an_accepted_answer_to_an_agent_says_no_run_starts():
    """An agent's answered receipt has no run (P3): the surfaces say the agent reads it,
    never that Clankie continues or that a run is queued."""
    clankie = {"outcome": "answered", "run_id": "r", "continuation": "queued"}
    agent = {"outcome": "answered", "run_id": None, "continuation": None}
    assert "Clankie has not necessarily run yet" in wording.accepted(clankie)
    said = wording.accepted(agent)
    assert "agent" in said and "Clankie" not in said.replace("no run of Clankie", "")
    assert "None" not in said and not APPROVAL.search(said)


def test_h5_p3_an_outcome_names_the_agent_that_cancelled_its_own_question():
    """Issue 42: the receipt says `answered_by.kind: agent` (an agent cancels only its own
    question, P2), so every surface that words an ending from it says the agent did it."""
    by_agent = {"outcome": "cancelled", "reason": "explicit",
                "answered_by": {"credential_id": "9" * 32, "kind": "agent"}}
    assert wording.outcome(by_agent, "request_closed") == \
        "cancelled (explicit) by the agent that asked it"
    by_owner = {**by_agent, "answered_by": {"credential_id": "8" * 32, "kind": "operator"}}
    assert wording.outcome(by_owner, "request_closed") == "cancelled (explicit)"
    receipt = dto.ReceiptOut.model_validate({
        "receipt_id": "3" * 32, "request_id": "0" * 32, "answer": None, "revision": 4,
        "resolved_at": "2026-12-01T09:05:00.000000Z", "run_id": None, "continuation": None,
        "continuation_error": None, **by_agent})
    assert wording.outcome(receipt, "closed") == \
        "cancelled (explicit) by the agent that asked it"


@given(st.text(max_size=20) | st.text("0123456789²٣", min_size=1, max_size=5000),
       st.lists(st.text(max_size=8), max_size=4))
def test_a2_answer_like_judges_any_line_and_never_raises(text: str, labels: list[str]):
    """Issue 42: a chat line of any characters is judged: None, 0, or an option's number
    (`²` is a digit to `str.isdigit` and not to `int`, and `int` refuses 5,000 digits: the
    TUI and `send` raised on both)."""
    number = wording.answer_like(labels, text)
    assert number is None or 0 <= number <= len(labels)


@pytest.mark.parametrize(("text", "number"), [
    ("²", None), ("9" * 5000, 0), ("2", 2), (" B ", 2), ("٣", 3), ("9", 0), ("yes", 0),
    ("maybe", None)])
def test_a2_answer_like_names_the_option_a_line_looks_like(text: str, number: int | None):
    assert wording.answer_like(["a", "b", "c"], text) == number
