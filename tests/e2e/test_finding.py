"""SPEC section 10 "Finding what waits, as a person would", from a real shell's point of
view: the `clankie` CLI as a subprocess in real directories (the workspace, a
subdirectory of it, an unrelated one) against a real `clankie serve`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.e2e.served import Served, ask, clankie, settle


def sh(served: Served, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = clankie(*args, home=served.home.path, cwd=cwd)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def new(served: Served, workspace: Path) -> str:
    done = sh(served, workspace, "conversations", "new")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def asked(served: Served, c: str) -> str:
    with served.client() as client:
        return ask(client, c)


def cancel(served: Served, c: str) -> None:
    with served.client() as client:
        snap = client.call("input_get", {"conversation_id": c})
        client.call("input_cancel", {"conversation_id": c, "incarnation": snap["incarnation"],
                                     "revision": snap["revision"],
                                     "request_id": snap["pending"]["request_id"]})


def test_finding_list_marks_what_waits_with_its_prompt_and_relative_times(
        served: Served, workspace: Path, tmp_path: Path):
    """`conversations list` says "no conversations" when there are none; a waiting
    question is marked `?` with its prompt, shortened, below; times are relative."""
    empty = sh(served, tmp_path, "conversations", "list")
    assert empty.returncode == 0 and "no conversations" in empty.stdout.lower(), empty
    waiting, quiet = new(served, workspace), new(served, workspace)
    request = asked(served, waiting)
    lines = sh(served, tmp_path, "conversations", "list").stdout.splitlines()
    assert lines[0].split() == ["CONVERSATION", "KIND", "LAST", "ACTIVE", "RUN", "WORKSPACE"]
    assert lines[1].startswith(f"? {waiting}  owner"), lines
    assert re.search(r"  owner +(now|\d+ s ago) +- +" + re.escape(str(workspace.resolve())),
                     lines[1]), lines
    assert lines[2].strip().startswith('question waits: "Tabs or spaces?" (expires in 23 h'), \
        lines
    assert lines[3].startswith(f"  {quiet}  owner"), lines
    listed = json.loads(sh(served, tmp_path, "conversations", "list", "--json").stdout)
    first = listed["conversations"][0]
    assert first["pending"]["request_id"] == request and first["run"] is None
    assert first["last_activity_at"] >= listed["conversations"][1]["last_activity_at"]


def test_finding_archive_hides_all_lists_and_a_waiting_question_refuses_it(
        served: Served, workspace: Path, tmp_path: Path):
    """`conversations archive` is refused `question_pending` (exit 4) while a question
    waits; then it hides the conversation until `--all`; a message sent brings it back."""
    c = new(served, workspace)
    asked(served, c)
    refused = sh(served, workspace, "conversations", "archive")
    assert refused.returncode == 4, refused
    assert "a question waits" in refused.stderr and "not archived" in refused.stderr
    as_json = sh(served, workspace, "conversations", "archive", "--json")
    assert as_json.returncode == 4 and json.loads(as_json.stdout)["code"] == "question_pending"
    cancel(served, c)
    done = sh(served, workspace, "conversations", "archive")
    assert done.returncode == 0 and f"Archived {c}" in done.stdout, done
    assert "no conversations" in sh(served, tmp_path, "conversations", "list").stdout.lower()
    every = sh(served, tmp_path, "conversations", "list", "--all").stdout.splitlines()
    assert c in every[1] and every[1].endswith("(archived)"), every
    sent = sh(served, tmp_path, "conversations", "send", c[:8], "back to this")
    assert sent.returncode == 0, sent
    assert c in sh(served, tmp_path, "conversations", "list").stdout


def test_finding_commands_take_the_conversation_of_the_directory_or_its_nearest_parent(
        served: Served, workspace: Path, tmp_path: Path):
    """With CONVERSATION left out, `questions`, `show`, `send` and `answer` in a
    subdirectory act on the conversation bound to its nearest parent (issue 31: `questions`
    said `Missing argument 'CONVERSATION'` even inside the workspace)."""
    deep = workspace / "src" / "widget"
    deep.mkdir(parents=True)
    other = tmp_path / "other"
    other.mkdir()
    mine, theirs = new(served, workspace), new(served, other)
    request = asked(served, mine)
    asked(served, theirs)  # two questions wait: the directory decides, not the count
    shown = sh(served, deep, "conversations", "questions")
    assert shown.returncode == 0, shown
    assert f"Conversation {mine}" in shown.stdout and request in shown.stdout
    assert f"conversation_id: {mine}" in sh(served, deep, "conversations", "show").stdout
    snap = json.loads(sh(served, deep, "conversations", "questions", "--json").stdout)
    answered = sh(served, deep, "conversations", "answer", request[:8], "--incarnation",
                  snap["incarnation"], "--revision", str(snap["revision"]), "--choice", "2")
    assert answered.returncode == 0 and "Accepted" in answered.stdout, answered
    with served.client() as client:
        settle(client, mine)
    sent = sh(served, deep, "conversations", "send", "now the tests")
    assert sent.returncode == 0, sent
    with served.client() as client:
        settle(client, mine)
        texts = [e["text"] for e in client.call("events_tail", {"conversation_id": mine,
                                                                "limit": 500})["events"]
                 if e["type"] == "message" and e["author"] == "owner"]
    assert texts[-1] == "now the tests"
    assert "Missing argument 'TEXT'" in sh(served, deep, "conversations", "send").stderr


def test_finding_elsewhere_the_one_waiting_question_else_exit_2_listing_the_candidates(
        served: Served, tmp_path: Path):
    """In a directory no conversation is bound to: the one conversation whose question
    waits; with two waiting, exit 2 listing both (with --json, a problem document on
    stdout); with none, exit 2 too."""
    first, second, elsewhere = (tmp_path / name for name in ("first", "second", "elsewhere"))
    for directory in (first, second, elsewhere):
        directory.mkdir()
    a, b = new(served, first), new(served, second)
    none = sh(served, elsewhere, "conversations", "questions")
    assert none.returncode == 2 and "no question waits" in none.stderr, none
    assert a in none.stderr and b in none.stderr
    request = asked(served, a)
    one = sh(served, elsewhere, "conversations", "questions")
    assert one.returncode == 0 and f"Conversation {a}" in one.stdout and request in one.stdout
    asked(served, b)
    two = sh(served, elsewhere, "conversations", "questions")
    assert two.returncode == 2 and two.stdout == "", two
    assert "questions wait in several" in two.stderr
    assert a in two.stderr and b in two.stderr and "Tabs or spaces?" in two.stderr
    as_json = sh(served, elsewhere, "conversations", "questions", "--json")
    assert as_json.returncode == 2, as_json
    problem = json.loads(as_json.stdout)
    assert problem["code"] == "invalid_request" and set(problem["candidates"]) == {a, b}
    assert f"Conversation {b}" in sh(served, second, "conversations", "questions").stdout


def test_finding_an_archived_conversation_is_still_its_directorys(
        served: Served, workspace: Path, tmp_path: Path):
    """Archive only hides a conversation from lists and the page: in its workspace (or a
    subdirectory) a command that names none still means it, never another project's
    waiting question (red team of issue 31: a message went to the wrong project), and a
    message sent there brings it back. The command says which conversation it chose."""
    deep = workspace / "src"
    deep.mkdir()
    other = tmp_path / "other"
    other.mkdir()
    mine, theirs = new(served, workspace), new(served, other)
    assert sh(served, workspace, "conversations", "archive").returncode == 0
    asked(served, theirs)  # the one question that waits is another project's
    shown = sh(served, deep, "conversations", "show")
    assert f"conversation_id: {mine}" in shown.stdout, shown
    assert mine in shown.stderr and str(workspace.resolve()) in shown.stderr, shown
    sent = sh(served, deep, "conversations", "send", "for this project")
    assert sent.returncode == 0, sent
    with served.client() as client:
        settle(client, mine)
        texts = [e.get("text") for e in client.call("events_tail", {
            "conversation_id": theirs, "limit": 500})["events"] if e["type"] == "message"]
    assert "for this project" not in texts
    assert mine in sh(served, tmp_path, "conversations", "list").stdout  # brought back


def test_finding_a_deleted_current_directory_is_a_directory_with_no_conversation(
        served: Served, tmp_path: Path):
    """A current directory removed under the shell is no internal error: it is a
    directory no conversation is bound to (red team of issue 31)."""
    gone = tmp_path / "gone"
    gone.mkdir()
    c = new(served, tmp_path)
    request = asked(served, c)
    done = clankie("-c", f"cd {gone} && rmdir {gone} && exec \"$@\"", "sh", sys.executable,
                   "-m", "clankie", "conversations", "questions", home=served.home.path,
                   program=["sh"])
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done
    assert done.returncode == 0 and request in done.stdout, done
