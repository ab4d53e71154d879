"""SPEC section 10 "CLI, Finding what waits": with `--json`, a usage error is a problem
document on stdout too (code `invalid_request`, shaped like the service's), exit 2, for
every command that takes `--json`; without it, stdout stays empty. In process, through
`main`: these errors are click's parsing, before any service is reached (the e2e tests in
tests/e2e/test_cli_waiting.py show the ones said after a read, an unmatched prefix)."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from clankie.cli.common import USAGE
from clankie.cli.main import app, main
from tests.test_cli_help import COMMANDS


def _takes_json(words: tuple[str, ...]) -> bool:
    command: click.Command = app
    for word in words:
        assert isinstance(command, click.Group)
        command = command.commands[word]
    return any(p.name == "as_json" for p in command.params)


WITH_JSON = [w for w in COMMANDS if w and _takes_json(w)]


def test_the_commands_with_json_are_found():
    assert {("conversations", "answer"), ("conversations", "list"), ("doctor",),
            ("devices", "list"), ("credentials", "issue")} <= set(WITH_JSON)


def problem_of(out: str) -> dict[str, object]:
    problem = json.loads(out)
    assert problem["code"] == "invalid_request", problem
    assert problem["type"] == "urn:clankie:problem:invalid_request"
    assert problem["status"] == 422 and problem["title"] == "invalid request"
    assert isinstance(problem["detail"], str)
    return problem


@pytest.mark.parametrize("words", WITH_JSON, ids=" ".join)
def test_section10_json_usage_error_unknown_option_is_a_problem_document(
        words: tuple[str, ...], capsys: pytest.CaptureFixture[str]):
    for line in ([*words, "--json", "--no-such-option"], [*words, "--no-such-option", "--json"]):
        assert main(line) == USAGE
        said = capsys.readouterr()
        assert "--no-such-option" in str(problem_of(said.out)["detail"])
        assert "No such option" in said.err  # a person still reads click's words


def test_section10_json_usage_error_missing_argument_and_bad_value(
        capsys: pytest.CaptureFixture[str]):
    assert main(["conversations", "answer", "--json"]) == USAGE
    assert "Missing" in str(problem_of(capsys.readouterr().out)["detail"])
    for line in (["conversations", "list", "--json", "--limit", "0"],
                 ["conversations", "list", "--limit", "0", "--json"]):
        assert main(line) == USAGE
        assert "0 is not allowed" in str(problem_of(capsys.readouterr().out)["detail"])
    assert main(["credentials", "issue", "--json"]) == USAGE  # NAME missing
    problem_of(capsys.readouterr().out)
    assert main(["conversations", "lst", "--json"]) == USAGE  # a mistyped command
    assert "lst" in str(problem_of(capsys.readouterr().out)["detail"])


def test_section10_without_json_a_usage_error_leaves_stdout_empty(
        capsys: pytest.CaptureFixture[str]):
    assert main(["conversations", "list", "--limit", "0"]) == USAGE
    said = capsys.readouterr()
    assert said.out == "" and "0 is not allowed" in said.err
    # `--json` as the value of an option (a text answer) or after `--` asks for nothing.
    assert main(["conversations", "list", "--", "--json"]) == USAGE
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("line", [["chat", "--json"], ["mcp", "config", "--json"],
                                  ["mcp", "config", "claude", "--json"],
                                  ["init", "--json", "--no-such-option"],
                                  ["--json", "conversations", "list"],
                                  ["serve", "--json"]], ids=" ".join)
def test_section10_json_anywhere_makes_a_usage_error_a_problem_document(
        line: list[str], capsys: pytest.CaptureFixture[str]):
    """Issue 42 (a new owner's trial): `--json` anywhere before `--` asks for JSON, also on
    a command that has no such option (its usage error is then that very option): the
    problem document on stdout, click's words on stderr, exit 2."""
    assert main(line) == USAGE
    said = capsys.readouterr()
    problem_of(said.out)
    assert said.err


def test_issue42_init_json_says_the_home_and_the_token_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """`init --json`: the home, the operator token's file, and whether this run set it up
    (it is idempotent: a second run sets up nothing); never the token itself."""
    home = tmp_path / "home"
    monkeypatch.setenv("CLANKIE_HOME", str(home))
    monkeypatch.delenv("CLANKIE_TOKEN", raising=False)
    for created in (True, False):
        assert main(["init", "--json"]) == 0
        result = json.loads(capsys.readouterr().out)
        assert result == {"home": str(home), "token_file": str(home / "operator.token"),
                          "created": created}
    assert (home / "operator.token").read_text().strip() not in json.dumps(result)
