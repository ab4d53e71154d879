"""The README's main job runs offline against a real service and shows the whole path."""

from clankie.demo import run_demo


def test_demo_runs_the_whole_question_path():
    lines: list[str] = []
    assert run_demo(lines.append) == 0
    text = "\n".join(lines)
    assert "[list_files] listed . depth 1: 4 entries" in text
    assert "[read_file] read pyproject.toml lines 1-4 of 4" in text
    assert "[read_file] read_file .env: refused denied_path" in text
    assert '"code": "denied_path"' in text and "demo-secret-never-shown" not in text
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
