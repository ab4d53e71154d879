"""DESIGN: the diagram in docs/ is generated from the transition tables, and kept in sync."""

from pathlib import Path

from clankie.core.diagram import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md"


def test_docs_lifecycle_is_generated_from_the_tables():
    assert DOC.read_text(encoding="utf-8") == render(), "run `make docs`"


def test_every_transition_appears_in_the_diagram():
    text = render()
    assert "pending --> answered: answer" in text
    assert "pending --> cancelled: restart" in text
    assert "queued --> running: start" in text
    assert "running --> queued" not in text
