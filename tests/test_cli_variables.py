"""Issue 31 (SPEC T3 as the issue amends it): an unknown `CLANKIE_` variable is said once on
standard error, with the nearest name clankie reads (setting or not), by EVERY command, and
the command goes on; its value is never printed. In process, through `main`; the subprocess
test is in tests/e2e/test_serve.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from clankie.cli.main import main

TYPOS = {"CLANKIE_ULR": "unix:///x-secret-url", "CLANKIE_TOKNE": "clk_secret_value"}
WARNED = ["clankie: warning: CLANKIE_TOKNE is not a setting (did you mean CLANKIE_TOKEN?); "
          "ignored",
          "clankie: warning: CLANKIE_ULR is not a setting (did you mean CLANKIE_URL?); ignored"]


def _clean(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """No `CLANKIE_` variable but the home: whatever the shell running the tests holds."""
    for name in [n for n in os.environ if n.startswith("CLANKIE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("CLANKIE_HOME", str(home))


@pytest.mark.parametrize("words", [["conversations", "list"], ["devices", "list"],
                                   ["conversations", "list", "--json"], ["completion", "bash"]],
                         ids=" ".join)
def test_t3_issue31_every_command_warns_once_about_a_misspelt_variable_never_its_value(
        words: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]):
    """Issue 31: `CLANKIE_ULR=... CLANKIE_TOKNE=... clankie conversations list` was silent
    (only `init`, `serve` and `doctor` warned); now each command says each unknown name once,
    with the nearest name clankie reads, not only settings (CLANKIE_URL, CLANKIE_TOKEN)."""
    _clean(monkeypatch, tmp_path / "home")
    for name, value in TYPOS.items():
        monkeypatch.setenv(name, value)
    main(words)  # no service runs here: what matters is what is said before
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "warning" in line] == WARNED, err
    assert not any(value in err for value in TYPOS.values()), err
    assert "Traceback" not in err


def test_t3_issue31_no_warning_and_no_settings_import_without_an_unknown_variable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """The common path pays nothing: with only the names clankie reads that are not settings,
    nothing is warned about and the settings module (pydantic) is not imported to check."""
    _clean(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("CLANKIE_AGENT_TOKEN", "x")
    monkeypatch.delitem(sys.modules, "clankie.settings", raising=False)
    assert main(["completion", "bash"]) == 0
    assert "warning" not in capsys.readouterr().err
    assert "clankie.settings" not in sys.modules


def test_t3_issue31_a_real_setting_in_the_environment_is_not_warned_about(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    _clean(monkeypatch, tmp_path / "home")
    monkeypatch.setenv("CLANKIE_QUESTION_TTL", "60")
    assert main(["completion", "bash"]) == 0
    assert "warning" not in capsys.readouterr().err
