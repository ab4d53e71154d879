"""The README's main job runs offline and shows the whole path."""

from clankie.demo import run_demo


def test_demo_runs_and_shows_the_question_path():
    lines: list[str] = []
    assert run_demo(lines.append) == 0
    text = "\n".join(lines)
    assert "clankie asks (tool result: pending" in text
    assert "still pending: True" in text
    assert "-> stale_revision: read again and decide" in text
    assert "-> accepted: receipt" in text
    assert "duplicate=True, same receipt: True, same run: True" in text
    assert "a different answer -> already_answered" in text
    assert "continuation=failed (orphaned_by_restart)" in text
