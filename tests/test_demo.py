"""The README's main job runs offline against a real service and shows the whole path, as
one story told with the real CLI (issue 19: `make demo` mixed two examples)."""

import re

from clankie.demo import run_demo


def test_demo_runs_the_whole_question_path():
    lines: list[str] = []
    assert run_demo(lines.append) == 0
    text = "\n".join(lines)
    assert "[list_files] listed . depth 1: 4 entries" in text
    assert "[read_file] read pyproject.toml lines 1-4 of 4" in text
    assert "[read_file] read_file .env: refused denied_path" in text
    assert ("clankie> I read pyproject.toml; the .env file stays private: refused "
            "(denied_path)") in text and "demo-secret-never-shown" not in text
    assert not [line for line in text.splitlines() if line.startswith("clankie> {")
                or '{"' in line]  # what Clankie says is words, not a tool's JSON
    assert "before I set up tests, one preference question." in text
    assert text.index("[list_files]") < text.index("[ask_question] asked question")
    assert "Which test runner should this project use?" in text
    assert "1. pytest - plain asserts, fixtures" in text
    assert "the question is still pending" in text
    assert "clankie> That was a chat message, not an answer" in text
    assert "Accepted: receipt" in text
    assert "clankie> Thanks. I will set up pytest for this project" in text
    assert "Already accepted (the same answer)" in text
    assert "continuation succeeded; one run, never two." in text
    # The owner's every step is a `clankie` command, run as printed, and none failed.
    commands = [line.split()[3] for line in text.splitlines() if line.startswith("$ clankie")]
    assert commands == ["new", "send", "questions", "send", "answer", "answer"], commands
    assert re.search(r"^\$ clankie conversations answer [0-9a-f]{8} [0-9a-f]{8} --incarnation "
                     r"[0-9a-f]{8} --revision \d+ --choice 1$", text, re.MULTILINE)
    assert "Usage:" not in text and "Error" not in text and "membership" not in text
