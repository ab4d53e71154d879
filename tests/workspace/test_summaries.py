"""The one-line summary of a tool call (W9), read by the owner in the TUI's log: counts
in words a person would write ("1 match", not "1 matches"; issue 19)."""

from __future__ import annotations

import pytest

from clankie import tool_dto as t
from clankie.workspace.tools import TOOLS


@pytest.mark.parametrize(("found", "truncated", "words"), [
    (0, False, "0 matches"), (1, False, "1 match"), (2, False, "2 matches"),
    (100, True, "100+ matches")])
def test_search_summary_counts_in_words(found: int, truncated: bool, words: str) -> None:
    result = {"matches": [{"path": "a", "line": 1, "text": "x"}] * found,
              "truncated": truncated}
    summary = TOOLS["search_text"].summary(t.SearchTextArgs(pattern="x"), result)
    assert summary == f"searched . for 'x': {words}"


@pytest.mark.parametrize(("listed", "words"), [(1, "1 entry"), (4, "4 entries")])
def test_list_summary_counts_in_words(listed: int, words: str) -> None:
    result = {"entries": [{"path": "a"}] * listed, "truncated": False}
    assert TOOLS["list_files"].summary(t.ListFilesArgs(), result) == \
        f"listed . depth 1: {words}"
