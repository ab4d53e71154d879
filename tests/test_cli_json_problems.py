"""SPEC section 10 "CLI": "`--json` prints the service's object (or problem document) on
stdout", with the section's exit codes; issue 42: also when the service cannot be reached,
when no reply came, and when the command fails before it sends anything (a CLANKIE_URL that
is no address, a home that is not the owner's alone, T1). Each is one problem document
shaped like the service's (`type`, `title`, `detail`, `code`), made by the client, with
`sent` saying whether the request reached the service. In process, through `main`, against
a real home whose service is not running (or a peer that never replies); the service's own
problems with --json are tests/e2e/test_cli.py's."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clankie.cli.common import OTHER, UNCERTAIN, USAGE
from clankie.cli.main import main
from tests.peers import DroppingPeer
from tests.test_cli_json_usage import WITH_JSON

C = "0b7e4a4e-8f5b-4d7e-9c3a-2f1d5e6a7b8c"
R = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
BOUND = ["--incarnation", "a6f0c7de-0b4e-4a8e-9a55-6f2f4f0f7d11", "--revision", "1"]
# Each --json command with arguments that send at once (whole IDs: nothing to resolve).
ARGS: dict[tuple[str, ...], list[str]] = {
    ("conversations", "new"): [], ("conversations", "list"): [],
    ("conversations", "archive"): [C], ("conversations", "show"): [C],
    ("conversations", "send"): [C, "hello"], ("conversations", "reset"): [C],
    ("conversations", "stop"): [C], ("conversations", "events"): [C],
    ("conversations", "questions"): [C],
    ("conversations", "answer"): [C, R, *BOUND, "--option", R],
    ("conversations", "cancel-question"): [C, R, *BOUND],
    ("devices", "pair"): ["phone"], ("devices", "list"): [], ("devices", "revoke"): [C],
    ("devices", "take-control"): [], ("devices", "release"): [],
    ("credentials", "issue"): ["bot"], ("credentials", "rotate"): [],
    ("credentials", "list"): [], ("credentials", "revoke"): [C],
}
# `doctor --json` reports an unreachable service as one of its checks, in its own document;
# `init` makes a home and `service install|uninstall|status` talk to the login's service
# manager: none sends to clankie's service (tests/test_cli_service.py reads theirs).
SENDING = [w for w in WITH_JSON if w not in {("doctor",), ("init",)} and w[0] != "service"]


def test_every_json_command_but_doctor_has_arguments_here():
    assert set(ARGS) == set(SENDING)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home made by `clankie init`, whose service is not running."""
    path = tmp_path / "home"
    monkeypatch.setenv("CLANKIE_HOME", str(path))
    for name in ("CLANKIE_URL", "CLANKIE_TOKEN", "CLANKIE_URL_TRUSTED"):
        monkeypatch.delenv(name, raising=False)
    assert main(["init"]) == 0
    return path


def problem_of(out: str, code: str) -> dict[str, object]:
    """The one problem document on stdout, shaped like the service's."""
    problem = json.loads(out)
    assert isinstance(problem, dict), out
    assert problem["code"] == code, problem
    assert problem["type"] == f"urn:clankie:problem:{code}"
    assert problem["title"] == code.replace("_", " ")
    assert isinstance(problem["detail"], str) and problem["detail"]
    return problem


@pytest.mark.parametrize("words", SENDING, ids=" ".join)
def test_section10_issue42_json_with_the_service_unreachable_is_a_problem_document(
        home: Path, words: tuple[str, ...], capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(home)
    capsys.readouterr()
    assert main([*words, *ARGS[words], "--json"]) == OTHER  # 1: anything else
    said = capsys.readouterr()
    problem = problem_of(said.out, "service_unreachable")
    assert problem["sent"] == "no" and "clankie serve" in str(problem["fix"])


def test_section10_issue42_pair_web_json_with_the_service_unreachable(
        home: Path, capsys: pytest.CaptureFixture[str]):
    capsys.readouterr()
    assert main(["devices", "pair", "--web", "--json"]) == OTHER
    assert problem_of(capsys.readouterr().out, "service_unreachable")["sent"] == "no"


def test_section10_issue42_json_with_no_reply_is_uncertain_exit_7_with_the_inspect_command(
        home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch):
    peer = DroppingPeer(tmp_path / "drop.sock")
    monkeypatch.setenv("CLANKIE_URL", f"unix://{tmp_path / 'drop.sock'}")
    capsys.readouterr()
    try:
        answered = main(["conversations", "answer", *ARGS[("conversations", "answer")],
                         "--json"])
        answer = capsys.readouterr()
        listed = main(["conversations", "list", "--json"])  # a read: nothing to inspect
        read = capsys.readouterr()
    finally:
        peer.close()
    assert (answered, listed) == (UNCERTAIN, UNCERTAIN)
    problem = problem_of(answer.out, "uncertain")
    assert problem["sent"] == "unknown"
    assert problem["inspect"] == f"clankie conversations questions {C} --request {R}"
    assert problem_of(read.out, "uncertain").get("inspect") is None
    assert len(peer.requests) == 2  # each sent once, never again


def test_section10_issue42_json_with_a_clankie_url_that_is_no_address_is_invalid_request(
        home: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLANKIE_URL", "ftp://nowhere")
    capsys.readouterr()
    assert main(["conversations", "list", "--json"]) == USAGE
    problem = problem_of(capsys.readouterr().out, "invalid_request")
    assert problem["status"] == 422 and "unix:///" in str(problem["detail"])
    assert problem["sent"] == "no"


def test_t1_issue42_json_with_a_home_that_is_not_the_owners_alone_is_unsafe_home(
        home: Path, capsys: pytest.CaptureFixture[str]):
    os.chmod(home, 0o770)
    capsys.readouterr()
    try:
        assert main(["conversations", "list", "--json"]) == USAGE
    finally:
        os.chmod(home, 0o700)
    problem = problem_of(capsys.readouterr().out, "unsafe_home")
    assert str(home) in str(problem["detail"]) and "chmod" in str(problem["fix"])
    assert problem["sent"] == "no"


def test_section10_without_json_unreachable_leaves_stdout_empty(
        home: Path, capsys: pytest.CaptureFixture[str]):
    capsys.readouterr()
    assert main(["conversations", "list"]) == OTHER
    said = capsys.readouterr()
    assert said.out == "" and "fix:" in said.err
