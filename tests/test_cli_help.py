"""The CLI's help and usage errors, in process (issue 19; SPEC section 10 "CLI"): plain
click, every argument shown one way, no Typer artefacts (`<bool>` on flags, `[[X]]`,
`{X}`), and a missing --incarnation or --revision says which command shows them."""

from __future__ import annotations

import click
import pytest

from clankie.cli.common import USAGE
from clankie.cli.main import app, main


def every_command(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            found += every_command(command, (*path, name))
        else:
            found.append((*path, name))
    return found


COMMANDS = every_command(app)


def test_every_command_is_walked():
    assert {("conversations", "answer"), ("devices", "pair"), ("credentials", "rotate"),
            ("chat",), ("completion",), ("serve",), ()} <= set(COMMANDS)


@pytest.mark.parametrize("words", COMMANDS, ids=lambda w: " ".join(w) or "clankie")
def test_issue_19_help_shows_no_typer_artefacts(words: tuple[str, ...],
                                                  capsys: pytest.CaptureFixture[str]):
    """Issue 19: no `<bool>` on flags, one way to show an argument (`[CONVERSATION]`, never
    `[[CONVERSATION]]` or `{CONVERSATION}`), choices shown once."""
    assert main([*words, "--help"]) == 0
    shown = capsys.readouterr().out
    assert shown.startswith("Usage: clankie"), shown
    for artefact in ("<bool>", "[[", "{"):
        assert artefact not in shown, (artefact, shown)


def test_an_optional_argument_is_shown_once_in_brackets(capsys: pytest.CaptureFixture[str]):
    main(["chat", "--help"])
    shown = capsys.readouterr().out
    assert "Usage: clankie chat [OPTIONS] [CONVERSATION]\n" in shown
    assert "A conversation ID or unique prefix" in shown  # the argument's help


@pytest.mark.parametrize("command", ["answer", "cancel-question"])
@pytest.mark.parametrize("missing", ["--incarnation", "--revision"])
def test_issue_19_a_missing_binding_option_says_which_command_shows_it(
        command: str, missing: str, capsys: pytest.CaptureFixture[str]):
    """Issue 19: a new user who leaves out --incarnation (or --revision) is told the
    command that prints both, with the conversation they named; exit 2, nothing sent."""
    given = {"--incarnation": ["--incarnation", "abcd"], "--revision": ["--revision", "3"]}
    other = next(v for k, v in given.items() if k != missing)
    code = main(["conversations", command, "abcd1234", "ef01", *other,
                 *(["--choice", "1"] if command == "answer" else [])])
    err = capsys.readouterr().err
    assert code == USAGE, err
    assert f"Missing option '{missing}'" in err
    assert "`clankie conversations questions abcd1234`" in err
    assert "Traceback" not in err


def test_a_usage_error_is_exit_2_with_clicks_message(capsys: pytest.CaptureFixture[str]):
    assert main(["conversations", "list", "--limit", "0"]) == USAGE
    err = capsys.readouterr().err
    assert "Invalid value for '--limit'" in err and "Usage: clankie" in err
    assert main(["no-such-command"]) == USAGE
    assert "No such command 'no-such-command'" in capsys.readouterr().err


def test_version_through_the_full_cli(capsys: pytest.CaptureFixture[str]):
    from clankie import __version__

    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"clankie {__version__}\n"


@pytest.mark.parametrize("option,value,said", [
    ("--choice", "0", "0 is not allowed: give a whole number of 1 or more"),
    ("--choice", "١", "'١' is not a whole number"),  # int() would read it as 1
    ("--choice", "9" * 40, "is not a whole number"),
    ("--revision", "٣", "'٣' is not a whole number"),
    ("--revision", "-1", "-1 is not allowed: give a whole number of 0 or more"),
])
def test_a_number_option_is_refused_in_plain_words_and_only_ascii_digits_count(
        option: str, value: str, said: str, capsys: pytest.CaptureFixture[str]):
    """Tried as a new user: click's `x>=1` leaked into messages and help; Python's int()
    reads other scripts' digits. Refused before anything is sent (exit 2)."""
    given = {"--choice": "1", "--revision": "3", option: value}
    code = main(["conversations", "answer", "abcd1234", "ef01", "--incarnation", "abcd",
                 *[w for k, v in given.items() for w in (k, v)]])
    err = capsys.readouterr().err
    assert code == USAGE, err
    assert said in err and "x>=" not in err and "Traceback" not in err
    assert main(["conversations", "answer", "--help"]) == 0
    assert "x>=" not in capsys.readouterr().out
