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
    result = t.SearchTextResult(pattern="x", matches=[t.Match(path="a", line=1, text="x")] * found,
                                truncated=truncated, skipped_denied=0, hidden_by_ignore=0)
    summary = TOOLS["search_text"].summary(t.SearchTextArgs(pattern="x"), result)
    assert summary == f"searched . for 'x': {words}"


@pytest.mark.parametrize(("listed", "words"), [(1, "1 entry"), (4, "4 entries")])
def test_list_summary_counts_in_words(listed: int, words: str) -> None:
    result = t.ListFilesResult(
        entries=[t.Entry(path="a", type="file", size=1, denied=False)] * listed,
        truncated=False, hidden_by_ignore=0)
    assert TOOLS["list_files"].summary(t.ListFilesArgs(), result) == \
        f"listed . depth 1: {words}"


def test_issue32_a_tool_row_is_typed_and_its_summary_reads_the_text_only_result() -> None:
    """Issue 32 (typed tool rows): the summary takes the result's model, made from the
    result the model reads, whose file names are text (W9: the event carries only text)."""
    from clankie.workspace.tools import Tool, ToolSettings

    def run(root: object, a: t.ReadFileArgs, s: ToolSettings) -> t.ReadFileResult:
        return t.ReadFileResult(path="caf\udce9.txt", content="", start_line=1, end_line=0,
                                total_lines=0, truncated=False, next_offset=None,
                                replaced_bytes=0)

    row = TOOLS["read_file"]
    tool = Tool("read_file", t.ReadFileArgs, t.ReadFileResult, run, row.summary)
    result, summary = tool.call(None, t.ReadFileArgs(path="x"), None)  # type: ignore[arg-type]
    assert result["path"] == "caf\ufffd.txt"
    assert summary == "read caf\ufffd.txt: no lines from 1 (of 0)"
    assert {name: (row.args, row.result) for name, row in TOOLS.items()} == {
        name: (args, getattr(t, args.__name__.replace("Args", "Result")))
        for name, args in t.TOOL_ARGS.items()}
