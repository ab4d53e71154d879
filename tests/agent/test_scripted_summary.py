"""The scripted model's `{tool_summary}` (issue 19): a tool result in words a person reads,
whatever the result; `tests/e2e/test_workspace_tools.py` shows it on the real tools."""

from __future__ import annotations

import json

import pytest

from clankie.agent.scripted import SHOWN_ITEMS, readable


def entry(path: str, kind: str = "file", denied: bool = False) -> dict[str, object]:
    return {"path": path, "type": kind, "size": 1, "denied": denied}


def test_a_long_listing_names_the_first_entries_and_counts_the_rest():
    names = [entry(f"f{n:02}") for n in range(SHOWN_ITEMS + 5)]
    said = readable(json.dumps({"entries": [entry("src", "directory"), *names],
                                "truncated": True, "hidden_by_ignore": 0}))
    assert said.startswith("src/, f00, f01")
    assert said.endswith(", and 6 more (26+ entries)")


@pytest.mark.parametrize(("result", "said"), [
    ({"branch": "main", "entries": [{"path": "a.py", "status": " M"}], "truncated": False},
     "on main: a.py (M) (1 change)"),
    ({"branch": None, "entries": [], "truncated": False}, "on a detached HEAD: no changes"),
    ({"commits": [{"commit": "0123456789ab", "author": "a", "date": "d", "subject": "Fix"}]},
     "01234567 Fix (1 commit)"),
    ({"diff": "", "truncated": False}, "no changes"),
    ({"status": "refused", "code": "too_many_calls", "reason": "at most 8 calls a step"},
     "refused (too_many_calls): at most 8 calls a step"),
    ({"status": "refused", "reason": "a question is already pending"},
     "refused: a question is already pending"),
    ({"entries": "not a list"}, "entries: not a list"),  # no known shape: its pairs
    ({"answer": 42, "why": "life"}, "answer: 42, why: life"),
])
def test_each_kind_of_result_in_words(result: dict[str, object], said: str):
    assert readable(json.dumps(result)) == said


@pytest.mark.parametrize("text", ["", "plain words", "[1, 2]", "{"])
def test_text_that_is_not_a_json_object_is_said_as_it_is(text: str):
    assert readable(text) == text
