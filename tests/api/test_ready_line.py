"""The ready line of `clankie serve` says what a new owner needs to know about the model
(issue 19, tried as a new user: the scripted model without a script says nothing at all)."""

from __future__ import annotations

from pathlib import Path

from clankie.serve import _model_said
from clankie.settings import Settings


def test_the_scripted_model_without_a_script_is_said_to_stay_silent_and_how_to_give_one():
    said = _model_said(Settings(), None)
    assert "no script" in said and "--script FILE" in said
    assert _model_said(Settings(), Path("examples/ask-license.json")) == ""
