"""Issue 20: the words the CLI and the TUI share are said once, in `clankie.wording`.

The refusals each surface explains are the SPEC section 10 codes (`Code`), split the same
way by both: "read it again" (a conflict, exit 3) and "it has ended" (exit 4). An ended
question's outcome, a numbered option and a run that will not run again read the same on
both surfaces. The module stays off pydantic and httpx, so `clankie --help` may load it.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from clankie import wording
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
])
def test_an_outcome_reads_with_its_reason_once(receipt: dict[str, object], said: str):
    assert wording.outcome(receipt, "request_closed") == said


def question(status: str, receipt: dict[str, object] | None) -> dict[str, object]:
    return {"request_id": "0" * 32, "kind": "choice", "status": status,
            "prompt": "Tabs or spaces?", "allow_text": False,
            "options": [{"option_id": "1" * 32, "label": "tabs", "description": None},
                        {"option_id": "2" * 32, "label": "spaces",
                         "description": "four"}],
            "asked_at": "2026-12-01T09:00:00.000000Z",
            "expires_at": "2026-12-02T09:00:00.000000Z", "receipt": receipt}


def test_the_cli_and_the_tui_say_an_ended_question_and_its_options_alike(
        capsys: pytest.CaptureFixture[str]):
    receipt = {"receipt_id": "3" * 32, "outcome": "expired", "reason": "expired",
               "answer": None, "answered_by": None, "revision": 4,
               "resolved_at": "2026-12-01T09:05:00.000000Z", "run_id": None,
               "continuation": None, "continuation_error": None}
    ended = question("expired", receipt)
    conversations._show_question(ended)
    cli = capsys.readouterr().out
    tui = render.question_panel({"pending": None, "request": ended, "incarnation": "4" * 32,
                                 "revision": 4}, NOW)
    assert f"Receipt {'3' * 32}: expired\n" in cli and "ended: expired, " in tui
    assert "  2. spaces - four\n" in cli
    pending = question("pending", None)
    panel = render.question_panel({"pending": pending, "request": None,
                                   "incarnation": "4" * 32, "revision": 4}, NOW)
    assert wording.option_line(2, pending["options"][1]) in panel.split("\n")  # type: ignore[index]


def test_a_run_that_will_not_run_again_is_said_alike(capsys: pytest.CaptureFixture[str]):
    event = {"type": "run_status", "status": "failed", "run_id": "r",
             "error": RunError.ORPHANED_BY_RESTART}
    tui = render.event_line(event)
    receipt = {"receipt_id": "3" * 32, "outcome": "answered", "reason": None,
               "answer": None, "answered_by": None, "revision": 4,
               "resolved_at": "2026-12-01T09:05:00.000000Z", "run_id": "r",
               "continuation": "failed", "continuation_error": RunError.ORPHANED_BY_RESTART}
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
