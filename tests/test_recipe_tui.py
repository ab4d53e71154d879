"""The recipe "Change what the TUI shows for a question" (docs/architecture.md), followed
once on its pure parts (issue 32), outside `tests/tui` so that `make check` runs it. A typed
`dto.Snapshot`, as `input_get` replies, is worded by `render.question_panel` (the panel)
and `render.question_state` (the status line's word), from the snapshot and the clock
alone (step 1). A change of the words shared with the CLI, made once in
`clankie.wording` (here a throwaway one, by `monkeypatch`), lands in the TUI's panel and
in the CLI's `_show_question` / `_show_snapshot` alike; a word of the TUI's own (how to
answer with `/question`) is `render.py`'s and the CLI never says it. The look (step 2),
the widgets (step 3) and the pictures (step 5) are `tests/tui/`'s."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from clankie import dto, wording
from clankie.cli import conversations
from clankie.tui import render

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
C, INCARNATION, REQUEST = "c" * 32, "1" * 32, "a" * 32


def question(status: str = "pending", receipt: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    return {"request_id": REQUEST, "kind": "choice", "prompt": "Tabs or spaces?",
            "options": [{"option_id": "o1", "label": "tabs", "description": ""},
                        {"option_id": "o2", "label": "spaces", "description": "four"}],
            "allow_text": False, "status": status, "incarnation": INCARNATION,
            "asked_at": "2026-12-01T11:00:00Z", "expires_at": "2026-12-01T14:00:00Z",
            "receipt": receipt}


def snapshot(pending: dict[str, Any] | None, request: dict[str, Any] | None = None
             ) -> dto.Snapshot:
    return dto.Snapshot.model_validate({"conversation_id": C, "incarnation": INCARNATION,
                                        "revision": 7, "pending": pending,
                                        "request": request})


PENDING = snapshot(question())
CANCELLED = snapshot(None, question("cancelled", {
    "receipt_id": "r" * 32, "request_id": REQUEST, "outcome": "cancelled",
    "reason": "cancelled_by_owner", "answer": None, "answered_by": None, "run_id": None,
    "continuation": None, "continuation_error": None,
    "resolved_at": "2026-12-01T11:30:00Z", "revision": 7}))


def cli(capsys: pytest.CaptureFixture[str], shown: dto.Snapshot) -> str:
    capsys.readouterr()
    conversations._show_snapshot(shown)
    return capsys.readouterr().out


def test_the_panel_and_the_status_line_are_words_of_the_snapshot_and_the_clock():
    panel = render.question_panel(PENDING, NOW).splitlines()
    assert panel[:4] == ["Clankie asks: Tabs or spaces?", "  1. tabs",
                         "  2. spaces - four",
                         "  Answer with /question answer N (text is not allowed)"]
    assert panel[-1] == f"  request {REQUEST[:8]}, incarnation {INCARNATION[:8]}, revision 7"
    assert render.question_state(PENDING, NOW) == "question pending, expires in 2 h"
    assert render.question_state(CANCELLED, NOW) == "no question"
    assert render.question_state(None, NOW) == "question: ?"  # nothing read yet
    ended = render.question_panel(CANCELLED, NOW).splitlines()
    assert ended[:2] == ["No question is pending.", "  Clankie asked: Tabs or spaces?"]
    assert ended[2].startswith("  That question ended: cancelled")
    assert "1. tabs" not in "\n".join(ended)  # an ended question never shows its options


def test_a_shared_word_changed_in_wording_reaches_the_tui_and_the_cli(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setattr(wording, "NO_QUESTION", "Nothing is being asked")
    monkeypatch.setattr(wording, "option_line",
                        lambda number, option: f"  [{number}] {option['label']}"
                        if isinstance(option, dict) else f"  [{number}] {option.label}")
    assert render.question_panel(CANCELLED, NOW).startswith("Nothing is being asked.")
    assert cli(capsys, snapshot(None)) == (f"Conversation {C}: incarnation {INCARNATION}, "
                                           "revision 7\nNothing is being asked.\n")
    assert "  [2] spaces" in render.question_panel(PENDING, NOW).splitlines()
    assert "  [2] spaces" in cli(capsys, PENDING).splitlines()


def test_a_word_of_the_tui_s_own_is_render_s_and_the_cli_frames_the_question_its_way(
        capsys: pytest.CaptureFixture[str]):
    said = cli(capsys, PENDING)
    assert "/question" not in said and "--choice N" in said
    assert "  2. spaces - four" in said.splitlines()  # the same shared option line
    assert "/question answer N" in render.question_panel(PENDING, NOW)
