"""The `clankie` CLI against a real `clankie serve`: every command, output and exit code
(SPEC section 10 "CLI"), run as a subprocess the way a script would."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from clankie import __version__ as clankie_version
from clankie import dto, when
from tests.e2e.served import ROOT, LineReader, Served, ask, settle
from tests.peers import CommittingDropper, DroppingPeer, OtherProgram
from tests.squatter import Squatter, needs_root

IST = timezone(timedelta(hours=5, minutes=30))
TEXT_SCRIPT = {"turns": [[{"ask": {"kind": "text",
                                   "prompt": "What should the module be called?"}}]] * 50}


@pytest.fixture(scope="module")
def served(shared_served: Served) -> Served:
    """Issue 32: here `served` is the module's one service (tests/e2e/conftest.py), for the
    tests that each work in a conversation of their own; a test that lists every
    conversation, rotates the token or stops the service takes `own_served`."""
    return shared_served


def cli(served: Served, *args: str, stdin: str | bytes | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, CLANKIE_HOME=str(served.home.path), PYTHONPATH=str(ROOT / "src"),
                    COLUMNS="200")
    for name in ("CLANKIE_URL", "CLANKIE_TOKEN"):
        full_env.pop(name, None)
    full_env.update(env or {})
    data = stdin.encode() if isinstance(stdin, str) else stdin
    done = subprocess.run([sys.executable, "-m", "clankie", *args], env=full_env, cwd=ROOT,
                          input=data if data is not None else b"", capture_output=True,
                          timeout=60)
    result = subprocess.CompletedProcess(done.args, done.returncode,
                                         done.stdout.decode(), done.stderr.decode())
    assert "Traceback" not in result.stderr, result.stderr
    return result


def ok_json(served: Served, *args: str, **kw: Any) -> Any:
    done = cli(served, *args, "--json", **kw)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def asked_on(served: Served, workspace: Path) -> tuple[str, str]:
    c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    with served.client() as client:
        return c, ask(client, c)


@pytest.fixture
def asked(served: Served, workspace: Path) -> tuple[str, str]:
    return asked_on(served, workspace)


@pytest.fixture
def own_asked(own_served: Served, workspace: Path) -> tuple[str, str]:
    return asked_on(own_served, workspace)


def settled(served: Served, c: str) -> None:
    with served.client() as client:
        settle(client, c)


def answer_args(c: str, r: str, snap: dict[str, Any]) -> list[str]:
    return ["conversations", "answer", c, r, "--incarnation", snap["incarnation"],
            "--revision", str(snap["revision"])]


# ---------------------------------------------------------------------------------- help


def test_help_lists_every_command_with_a_line(served: Served):
    top = cli(served, "--help")
    for name in ("init", "serve", "demo", "conversations", "devices", "credentials"):
        assert name in top.stdout
    assert "Exit codes" in top.stdout
    groups = {"conversations": ["new", "list", "show", "send", "reset", "events", "questions",
                                "answer", "cancel-question", "stop"],
              "devices": ["pair", "list", "revoke", "take-control", "release"],
              "credentials": ["issue", "rotate"]}
    for group, commands in groups.items():
        shown = cli(served, group, "--help").stdout
        for command in commands:
            line = next(x for x in shown.splitlines() if f" {command} " in x)
            assert len(line.split(command, 1)[1].strip(" │")) > 10, line


def test_conversations_list_has_headings_and_json_has_none(own_served: Served, workspace: Path):
    """Issue 19: `conversations list` says what each column is (always; scripts read
    --json, which is the service's object unchanged); with none, it says how to start."""
    empty = cli(own_served, "conversations", "list")
    assert empty.returncode == 0 and "No conversations" in empty.stdout, empty
    c = cli(own_served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    lines = cli(own_served, "conversations", "list").stdout.splitlines()
    assert lines[0].split() == ["CONVERSATION", "KIND", "LAST", "ACTIVE", "RUN", "WORKSPACE"]
    row = lines[1].split()
    assert row[:2] == [c, "owner"] and str(workspace.resolve()) in lines[1], lines
    for column, value in (("KIND", "owner"), ("CONVERSATION", c)):
        assert lines[0].index(column) == lines[1].index(value)
    listed = ok_json(own_served, "conversations", "list")
    assert set(listed) == {"conversations", "next_after"}
    assert [x["conversation_id"] for x in listed["conversations"]] == [c]


# ------------------------------------------------------------------------ the questions


def test_questions_shows_prompt_options_ids_incarnation_revision_and_json(
        served: Served, asked: tuple[str, str]):
    c, r = asked
    shown = cli(served, "conversations", "questions", c)
    assert shown.returncode == 0
    with served.client() as client:
        snap = client.call("input_get", {"conversation_id": c})
    for text in ("Tabs or spaces?", "1. tabs - one per level", "2. spaces", r,
                 snap["incarnation"], f"revision {snap['revision']}", "pending", "expires",
                 *(o["option_id"] for o in snap["pending"]["options"])):
        assert text in shown.stdout
    assert ok_json(served, "conversations", "questions", c) == snap


def test_times_are_local_to_the_minute_and_relative_never_raw_utc(
        served: Served, asked: tuple[str, str]):
    """Issue 19: the question's times, the receipt's and the events' are shown in the
    owner's local time with how long from now, as the TUI shows them (`clankie.when`);
    `--json` keeps the service's own stamps."""
    c, _ = asked
    env = {"TZ": "IST-5:30"}  # POSIX for UTC+05:30: a UTC stamp shown as local cannot pass
    shown = cli(served, "conversations", "questions", c, env=env).stdout
    snap = ok_json(served, "conversations", "questions", c)
    asked_at = snap["pending"]["asked_at"]
    assert asked_at not in shown and not re.search(r"\d\dT\d\d:\d\d:\d\d", shown)
    expires = when.parse(snap["pending"]["expires_at"]).astimezone(IST)
    assert re.search(re.escape(expires.strftime("%Y-%m-%d %H:%M")) + r" \(in 2[34] h", shown)
    events = cli(served, "conversations", "events", c, env=env).stdout
    assert not re.search(r"\d\dT\d\d:\d\d:\d\d", events)
    first = ok_json(served, "conversations", "events", c)["events"][0]
    assert first["at"].endswith("Z")
    local = when.parse(first["at"]).astimezone(IST)
    assert f"#1 {local.strftime('%Y-%m-%d %H:%M')}" in events


def test_stale_answer_exits_3_then_read_again_0_then_repeat_is_a_duplicate(
        served: Served, asked: tuple[str, str]):
    c, r = asked
    snap = ok_json(served, "conversations", "questions", c)
    option = snap["pending"]["options"][0]["option_id"]
    cli(served, "conversations", "send", c, "moving on")  # the revision moves
    stale = cli(served, *answer_args(c, r, snap), "--option", option)
    assert stale.returncode == 3
    assert "read it again" in stale.stderr.lower()
    assert ok_json(served, "conversations", "questions", c)["pending"]["status"] == "pending"
    settled(served, c)  # Clankie's run for "moving on" finishes, and moves the revision too
    fresh = ok_json(served, "conversations", "questions", c)
    first = cli(served, *answer_args(c, r, fresh), "--option", option)
    assert first.returncode == 0 and "Accepted" in first.stdout
    again = ok_json(served, *answer_args(c, r, fresh), "--option", option)
    assert again["duplicate"] is True
    receipt = ok_json(served, "conversations", "questions", c, "--request", r)["request"]
    assert again["receipt"] == receipt["receipt"]
    shown = cli(served, "conversations", "questions", c, "--request", r).stdout
    assert re.search(r"; ended \d{4}-\d\d-\d\d \d\d:\d\d", shown) and "expires" not in shown


def test_refusals_and_their_exit_codes(served: Served, asked: tuple[str, str]):
    c, r = asked
    snap = ok_json(served, "conversations", "questions", c)
    tabs, spaces = (o["option_id"] for o in snap["pending"]["options"])
    bogus = "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b"
    assert cli(served, *answer_args(c, r, snap), "--option", bogus).returncode == 2
    assert cli(served, *answer_args(c, bogus, snap), "--option", tabs).returncode == 6
    assert cli(served, *answer_args(c, r, snap), "--option", "not-a-uuid").returncode == 2
    assert cli(served, *answer_args(c, r, snap)).returncode == 2  # no answer given
    captain = ok_json(served, "credentials", "issue", "cap", "--kind", "captain")["token"]
    denied = cli(served, *answer_args(c, r, snap), "--option", tabs,
                 env={"CLANKIE_TOKEN": captain})
    assert denied.returncode == 5
    assert cli(served, *answer_args(c, r, snap), "--option", tabs,
               env={"CLANKIE_TOKEN": "clk_nope"}).returncode == 5
    snap = ok_json(served, "conversations", "questions", c)
    assert cli(served, *answer_args(c, r, snap), "--option", tabs).returncode == 0
    different = cli(served, *answer_args(c, r, snap), "--option", spaces)
    assert different.returncode == 4 and "never answered twice" in different.stderr
    problem = cli(served, *answer_args(c, r, snap), "--option", spaces, "--json")
    assert problem.returncode == 4
    assert json.loads(problem.stdout)["code"] == "already_answered"
    cancel = cli(served, "conversations", "cancel-question", c, r, "--incarnation",
                 snap["incarnation"], "--revision", str(snap["revision"]))
    assert cancel.returncode == 4
    assert cli(served, "conversations", "questions", bogus).returncode == 6


def test_cli_request_option_and_incarnation_prefixes_and_choice_n(
        served: Served, asked: tuple[str, str]):
    """SPEC section 10 "CLI": a request, option or incarnation ID may be a unique prefix of
    at least 4 hex characters, resolved against the snapshot read; an unmatched or too
    short one is exit 2 naming the candidates; `--choice N` is the N-th option as
    `questions` prints them; the service receives whole IDs."""
    c, r = asked
    snap = ok_json(served, "conversations", "questions", c)
    tabs, spaces = (o["option_id"] for o in snap["pending"]["options"])
    named = ok_json(served, "conversations", "questions", c[:6], "--request", r[:6])
    assert named["request"]["request_id"] == r
    assert "--choice N" in cli(served, "conversations", "questions", c).stdout
    short = ["conversations", "answer", c[:6], r[:6], "--incarnation",
             snap["incarnation"][:6], "--revision", str(snap["revision"])]
    assert cli(served, *short, "--choice", "3").returncode == 2
    too_short = cli(served, "conversations", "answer", c, r[:3], "--incarnation",
                    snap["incarnation"], "--revision", str(snap["revision"]), "--choice", "1")
    assert too_short.returncode == 2 and "at least 4 hex" in too_short.stderr
    other = next(p for p in ("0000", "ffff") if not tabs.startswith(p)
                 and not spaces.startswith(p))
    unmatched = cli(served, *short, "--option", other)
    assert unmatched.returncode == 2 and "no option" in unmatched.stderr
    assert cli(served, *short, "--choice", "1", "--option", tabs[:6]).returncode == 2
    assert ok_json(served, "conversations", "questions", c)["pending"]["status"] == "pending"
    done = ok_json(served, *short, "--choice", "2")
    assert done["receipt"]["answer"] == {"option_id": spaces}
    # Answered, it is no longer the pending one: named whole, its options still resolve.
    again = ok_json(served, "conversations", "answer", c, r, "--incarnation",
                    snap["incarnation"], "--revision", str(snap["revision"]),
                    "--option", spaces[:5])
    assert again["duplicate"] is True
    assert again["receipt"]["receipt_id"] == done["receipt"]["receipt_id"]


def test_cancel_question_then_repeat(served: Served, asked: tuple[str, str]):
    c, r = asked
    snap = ok_json(served, "conversations", "questions", c)
    args = ["conversations", "cancel-question", c, r, "--incarnation", snap["incarnation"],
            "--revision", str(snap["revision"])]
    first = cli(served, *args)
    assert first.returncode == 0 and first.stdout.startswith("Cancelled")
    again = cli(served, *args)
    assert again.returncode == 0 and again.stdout.startswith("Already cancelled")
    closed = cli(served, *answer_args(c, r, snap), "--option",
                 snap["pending"]["options"][0]["option_id"])
    assert closed.returncode == 4 and "ended: cancelled (explicit)" in closed.stderr


# ----------------------------------------------------------------------------- --stdin


def test_stdin_takes_multiline_utf8_and_strips_one_newline(tmp_path: Path, workspace: Path):
    served = Served.start(tmp_path / "text-home", script=TEXT_SCRIPT)
    try:
        c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
        with served.client() as client:
            r = ask(client, c)
        snap = ok_json(served, "conversations", "questions", c)
        text = "Zeile eins: café ☕\nline two\n\n"
        reply = ok_json(served, *answer_args(c, r, snap), "--stdin", stdin=text)
        assert reply["receipt"]["answer"] == {"text": text[:-1]}
    finally:
        assert served.stop() == 0


@pytest.mark.parametrize(("data", "why"), [
    ("", "empty"), ("\n", "empty"), ("x" * 8_001, "longer than 8000"),
    (b"\xff\xfe bad", "not valid UTF-8"), ("é" * 8_001, "longer than 8000"),
])
def test_stdin_refuses_empty_or_oversize_and_sends_nothing(
        served: Served, asked: tuple[str, str], data: str | bytes, why: str):
    c, r = asked
    snap = ok_json(served, "conversations", "questions", c)
    done = cli(served, *answer_args(c, r, snap), "--stdin", stdin=data)
    assert done.returncode == 2 and why in done.stderr
    after = ok_json(served, "conversations", "questions", c)
    assert after == snap  # nothing was sent: same revision, still pending


def test_stdin_at_the_limit_is_accepted(served: Served, asked: tuple[str, str]):
    c, r = asked
    snap = ok_json(served, "conversations", "questions", c)
    assert cli(served, *answer_args(c, r, snap), "--stdin",
               stdin="é" * 8_000 + "\n").returncode == 0


# -------------------------------------------------------------------------- uncertainty


def test_no_reply_exits_7_prints_the_inspect_command_and_sends_once(
        served: Served, asked: tuple[str, str], tmp_path: Path):
    c, r = asked
    snap = ok_json(served, "conversations", "questions", c)
    peer = DroppingPeer(tmp_path / "drop.sock")
    try:
        done = cli(served, *answer_args(c, r, snap), "--option",
                   snap["pending"]["options"][0]["option_id"],
                   env={"CLANKIE_URL": f"unix://{tmp_path / 'drop.sock'}"})
    finally:
        peer.close()
    assert done.returncode == 7
    assert f"clankie conversations questions {c} --request {r}" in done.stderr
    assert len(peer.requests) == 1
    assert ok_json(served, "conversations", "questions", c)["pending"]["status"] == "pending"


def test_committed_but_unanswered_exits_7_and_the_receipt_shows_it_was_accepted(
        served: Served, asked: tuple[str, str], tmp_path: Path):
    c, r = asked
    snap = ok_json(served, "conversations", "questions", c)
    proxy = CommittingDropper(tmp_path / "proxy.sock", served.home.socket)
    try:
        done = cli(served, *answer_args(c, r, snap), "--option",
                   snap["pending"]["options"][1]["option_id"],
                   env={"CLANKIE_URL": f"unix://{tmp_path / 'proxy.sock'}"})
    finally:
        proxy.close()
    assert done.returncode == 7
    inspect = f"clankie conversations questions {c} --request {r}"
    assert inspect in done.stderr
    assert len(proxy.requests) == 1 and proxy.statuses == [200]
    receipt = ok_json(served, *inspect.split()[1:])["request"]["receipt"]
    assert receipt["outcome"] == "answered"


# ------------------------------------------------------------------- day-to-day commands


def test_new_list_show_send_reset_and_prefixes(own_served: Served, workspace: Path):
    """SPEC section 10 "CLI": a conversation is named by its ID or a unique prefix of at
    least 4 hex characters; a shorter or unmatched prefix is exit 2 (usage), the unmatched
    one saying that none starts with it and how to list them. (An ambiguous prefix, which 18
    random IDs cannot be made to share, is tests/test_cli_common.py's.)"""
    ids = [cli(own_served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()]
    with own_served.client() as client:  # creation through the CLI is shown by the line above
        ids += [client.op(dto.CONVERSATION_CREATE,
                          dto.ConversationCreate(workspace=str(workspace))).conversation_id
                for _ in range(17)]
    listed = cli(own_served, "conversations", "list").stdout
    assert all(i in listed for i in ids)
    unique = next(i[:n] for i in ids for n in range(4, 37)
                  if sum(j.startswith(i[:n]) for j in ids) == 1)
    shown = cli(own_served, "conversations", "show", unique)
    assert shown.returncode == 0 and "revision: 1" in shown.stdout
    assert "native_owner: none (no native app holds it)" in shown.stdout  # not Python's None
    assert "None" not in shown.stdout and "not_member" not in shown.stdout
    short = cli(own_served, "conversations", "show", ids[0][:3])
    assert short.returncode == 2 and "at least 4" in short.stderr, short.stderr
    nothing = next(p for p in (d * 8 for d in "0123456789abcdef")
                   if not any(i.startswith(p) for i in ids))
    for command in (["show", nothing], ["questions", nothing[:4]], ["send", nothing, "hi"]):
        missing = cli(own_served, "conversations", *command)
        assert missing.returncode == 2, (command, missing)
        assert "no conversation starts with" in missing.stderr, missing.stderr
        assert "clankie conversations list" in missing.stderr, missing.stderr
    assert cli(own_served, "conversations", "show", "zz").returncode == 2
    sent = cli(own_served, "conversations", "send", unique, "yes")
    assert sent.returncode == 0 and "turn run" in sent.stdout
    target = next(i for i in ids if i.startswith(unique))
    settled(own_served, target)
    before = ok_json(own_served, "conversations", "show", unique)["revision"]
    reset = ok_json(own_served, "conversations", "reset", unique)
    assert reset["revision"] == before + 1
    cwd_default = subprocess.run(
        [sys.executable, "-m", "clankie", "conversations", "new", "--json"], cwd=workspace,
        env=dict(os.environ, CLANKIE_HOME=str(own_served.home.path),
                 PYTHONPATH=str(ROOT / "src")), capture_output=True, text=True, timeout=60)
    assert json.loads(cwd_default.stdout)["workspace"]["path"] == str(workspace.resolve())


def test_events_and_follow(served: Served, workspace: Path):
    c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    cli(served, "conversations", "send", c, "first")
    listed = cli(served, "conversations", "events", c)
    assert "#1" in listed.stdout and "owner: first" in listed.stdout
    env = dict(os.environ, CLANKIE_HOME=str(served.home.path), PYTHONPATH=str(ROOT / "src"))
    follower = subprocess.Popen([sys.executable, "-m", "clankie", "conversations", "events", c,
                                 "--after", "2", "--follow"], env=env, cwd=ROOT, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                # A shell's background job inherits SIGINT ignored, and Python
                                # then installs no KeyboardInterrupt handler: restore it.
                                preexec_fn=_default_sigint)
    try:
        cli(served, "conversations", "send", c, "second")
        line = _read_line(follower, "owner: second")
        assert re.match(r"#\d+ \d{4}-\d\d-\d\d \d\d:\d\d owner: second$", line.strip())
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
    assert follower.returncode == 130 and "Traceback" not in err


def test_events_say_when_trimmed_and_show_the_question(tmp_path: Path, workspace: Path):
    served = Served.start(tmp_path / "home", env={"CLANKIE_EVENT_RETENTION": "3"})
    try:
        c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
        with served.client() as client:
            ask(client, c)
        shown = cli(served, "conversations", "events", c)
        assert shown.returncode == 0
        assert "were trimmed" in shown.stdout and "Tabs or spaces?" in shown.stdout
    finally:
        served.stop()


def test_devices_and_credentials(own_served: Served, own_asked: tuple[str, str]):
    c, r = own_asked
    # Issue 42: with none paired, `devices list` printed nothing at all.
    none = cli(own_served, "devices", "list")
    assert none.returncode == 0
    assert none.stdout == "No paired devices; pair a phone with `clankie devices pair --web`.\n"
    assert ok_json(own_served, "devices", "list") == {"credentials": []}
    phone = ok_json(own_served, "devices", "pair", "phone", "--mode", "control")
    tv = cli(own_served, "devices", "pair", "tv", "--mode", "read_only")
    assert tv.returncode == 0 and "token (shown once): clk_" in tv.stdout
    device = {"CLANKIE_TOKEN": phone["token"]}
    assert cli(own_served, "devices", "take-control", "--ttl", "600", env=device).returncode == 0
    listed = cli(own_served, "devices", "list").stdout
    assert "phone" in listed and "holds Take Control" in listed and "tv" in listed
    snap = ok_json(own_served, "conversations", "questions", c)
    by_phone = ok_json(own_served, *answer_args(c, r, snap), "--option",
                       snap["pending"]["options"][0]["option_id"], env=device)
    assert by_phone["receipt"]["answered_by"]["kind"] == "device"
    assert cli(own_served, "devices", "release", env=device).returncode == 0
    assert "holds Take Control" not in cli(own_served, "devices", "list").stdout
    assert cli(own_served, "devices", "take-control", env={"CLANKIE_TOKEN": "x"}).returncode == 5
    old = own_served.home.token_file.read_text()
    rotated = cli(own_served, "credentials", "rotate")
    assert rotated.returncode == 0
    assert own_served.home.token_file.read_text() != old
    assert cli(own_served, "conversations", "list").returncode == 0  # the file was updated
    assert cli(own_served, "conversations", "list",
               env={"CLANKIE_TOKEN": old.strip()}).returncode == 5


def test_a_missing_service_says_how_to_start_it(served: Served, tmp_path: Path):
    done = cli(served, "conversations", "list",
               env={"CLANKIE_URL": f"unix://{tmp_path / 'nothing.sock'}"})
    assert done.returncode == 1 and "clankie serve" in done.stderr


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _read_line(proc: subprocess.Popen[str], needle: str) -> str:
    return LineReader(proc.stdout).until(lambda line: needle in line, 30)


def test_chat_with_an_unknown_conversation_exits_2_before_any_screen_opens(own_served: Served):
    """SPEC section 10 "CLI" (issue 19): `clankie chat` names a conversation that does not
    exist (a whole ID or a prefix): exit 2 with the reason on stderr, and no TUI started
    (nothing written to the terminal, no escape sequence)."""
    for given in ("11111111-1111-4111-8111-111111111111", "1111", "11111111-11"):
        done = cli(own_served, "chat", given)
        assert done.returncode == 2, (given, done)
        assert "no conversation" in done.stderr, done.stderr
        assert "clankie conversations list" in done.stderr, done.stderr
        assert "\x1b" not in done.stdout + done.stderr, done
        assert done.stdout == "", done.stdout


def test_version_prints_the_version():
    done = subprocess.run([sys.executable, "-m", "clankie", "--version"], capture_output=True,
                          text=True, timeout=60, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
    assert (done.returncode, done.stdout.strip()) == (0, f"clankie {clankie_version}")


def _complete(home: Path, words: str, url: str | None = None
              ) -> subprocess.CompletedProcess[str]:
    """click's protocol (`_CLANKIE_COMPLETE=bash_complete`), as the bash script runs it."""
    env = dict(os.environ, CLANKIE_HOME=str(home), PYTHONPATH=str(ROOT / "src"),
               _CLANKIE_COMPLETE="bash_complete", COMP_WORDS=words,
               COMP_CWORD=str(len(words.split()) - (0 if words.endswith(" ") else 1)))
    env.pop("CLANKIE_URL", None)
    if url is not None:
        env["CLANKIE_URL"] = url
    return subprocess.run([sys.executable, "-m", "clankie"], env=env, capture_output=True,
                          text=True, timeout=60, cwd=ROOT)


def offered(done: subprocess.CompletedProcess[str]) -> list[str]:
    """The values of click's bash completion lines (`TYPE,VALUE`)."""
    return [line.split(",", 1)[1] for line in done.stdout.splitlines()]


def test_shell_completion_offers_conversation_ids_from_the_running_service(
        served: Served, workspace: Path, tmp_path: Path):
    c = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    done = _complete(served.home.path, f"clankie conversations show {c[:6]}")
    assert done.returncode == 0 and offered(done) == [c], done
    everything = _complete(served.home.path, "clankie conversations questions ")
    assert c in offered(everything)
    two = _complete(served.home.path, f"clankie conversations answer {c[:2]}")
    assert c in offered(two) and all(i.startswith(c[:2]) for i in offered(two)), two
    chat = _complete(served.home.path, f"clankie chat {c[:6]}")
    assert offered(chat) == [c], chat
    nobody_home = _complete(tmp_path / "no-service", f"clankie conversations show {c[:6]}")
    assert (nobody_home.returncode, nobody_home.stdout.strip(), nobody_home.stderr) == (0, "", "")


def test_completion_prints_each_shells_script_and_the_bash_one_completes_a_command(
        tmp_path: Path):
    """docs/cli.md "Shell completion": `clankie completion bash|zsh|fish` prints the script; the
    bash one, sourced in a real bash, completes `clankie conv` to `conversations`."""
    env = dict(os.environ, CLANKIE_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT / "src"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               COLUMNS="200")
    env.pop("CLANKIE_URL", None)

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "clankie", *args], capture_output=True,
                              text=True, timeout=60, cwd=ROOT, env=dict(env, **extra))

    scripts = {}
    for shell in ("bash", "zsh", "fish"):
        done = run("completion", shell)
        assert done.returncode == 0 and "_CLANKIE_COMPLETE=" in done.stdout, done
        scripts[shell] = done.stdout
    assert "complete -o nosort -F" in scripts["bash"] and "compdef" in scripts["zsh"]
    assert "complete --no-files --command clankie" in scripts["fish"]
    instruction = re.search(r"_CLANKIE_COMPLETE=(\w+)", scripts["bash"])
    assert instruction is not None and instruction.group(1) == "bash_complete"
    done = run(_CLANKIE_COMPLETE=instruction.group(1), COMP_WORDS="clankie conv",
               COMP_CWORD="1")
    assert done.returncode == 0 and offered(done) == ["conversations"], done
    function = re.search(r"^(\w+)\(\)", scripts["bash"], re.M)
    assert function is not None
    in_bash = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c",
         f'eval "$(clankie completion bash)"; COMP_WORDS=(clankie conv); COMP_CWORD=1; '
         f'{function.group(1)} clankie; printf "%s\\n" "${{COMPREPLY[@]}}"'],
        capture_output=True, text=True, timeout=60, env=env)
    assert in_bash.stdout.split() == ["conversations"], in_bash
    unknown = run("completion", "tcsh")
    assert unknown.returncode == 2 and "bash, zsh or fish" in unknown.stderr, unknown


# ---------------------------------------------------------------------- CLANKIE_URL

MALFORMED_URLS = ["http://::1:18901", "http://[::1]:abc", "http://127.0.0.1",
                  "http://127.0.0.1:99999", "ftp://127.0.0.1:18900", "unix://relative.sock"]


def test_cli_a_malformed_clankie_url_is_a_usage_error_said_in_one_sentence(served: Served):
    """Exit 2 (usage or invalid input) with what a valid CLANKIE_URL looks like, from every
    command; never an internal error. Without --json nothing on stdout; with it (issue 42)
    only the `invalid_request` problem document there, and nothing on stderr."""
    for url in MALFORMED_URLS:
        for args in (("conversations", "list"), ("conversations", "list", "--json"),
                     ("chat",)):
            done = cli(served, *args, env={"CLANKIE_URL": url})
            assert done.returncode == 2, (url, args, done)
            said = done.stdout if "--json" in args else done.stderr
            assert "internal error" not in said, said
            assert repr(url) in said, said
            assert "http://HOST:PORT" in said and "unix:///" in said
            if "--json" in args:
                assert json.loads(done.stdout)["code"] == "invalid_request"
                assert done.stderr == "", done.stderr
                continue
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
            assert done.stdout == "", done.stdout


def test_cli_an_uppercase_scheme_in_clankie_url_is_accepted(own_served: Served):
    url = own_served.tcp_url.replace("http://", "HTTP://")
    listed = ok_json(own_served, "conversations", "list", env={"CLANKIE_URL": url})
    assert listed["conversations"] == []


def test_cli_another_program_at_clankie_url_did_not_answer_like_clankie(served: Served):
    """Some other program of the owner's at CLANKIE_URL (it is the owner's, so T2 lets the
    request go): said as such, with CLANKIE_URL to check, never as an internal error."""
    with OtherProgram() as other:
        done = cli(served, "conversations", "list", env={"CLANKIE_URL": other.url})
        as_json = cli(served, "conversations", "list", "--json",
                      env={"CLANKIE_URL": other.url})
    assert done.returncode == 1, done
    assert (f"the service at {other.url} did not answer like clankie (HTTP 501); check "
            "CLANKIE_URL") in done.stderr, done.stderr
    assert "internal_error" not in done.stderr + as_json.stdout
    assert as_json.returncode == 1
    problem = json.loads(as_json.stdout)
    assert problem["code"] == "not_clankie" and problem["status"] == 501, problem


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_cli_nothing_listening_at_clankie_url_says_serve_tcp_there_or_unset_it(
        served: Served, tmp_path: Path):
    """Plain `clankie serve` listens only on the home's socket, so with CLANKIE_URL set the
    advice is to serve on that address, or to unset CLANKIE_URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    done = cli(served, "conversations", "list", env={"CLANKIE_URL": url})
    assert done.returncode == 1, done
    assert f"nothing listens at CLANKIE_URL={url}" in done.stderr, done.stderr
    assert (f"start `clankie serve --tcp 127.0.0.1:{port}` there, or unset CLANKIE_URL to "
            "use the home's socket") in done.stderr, done.stderr
    assert "or set CLANKIE_URL" not in done.stderr
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    url = f"unix://{folder}/clankie.sock"
    done = cli(served, "conversations", "list", env={"CLANKIE_URL": url})
    assert done.returncode == 1, done
    assert f"nothing listens at CLANKIE_URL={url}" in done.stderr, done.stderr
    assert (f"start `CLANKIE_HOME={folder} clankie serve` there, or unset CLANKIE_URL to use "
            "the home's socket") in done.stderr, done.stderr


# ----------------------------------------------------------- T2: whose service it is


@needs_root
@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_t2_another_users_listener_at_clankie_url_gets_nothing_and_the_cli_exits_5(
        served: Served, kind: str):
    token = served.home.token_file.read_text().strip()
    with Squatter.unix() if kind == "unix" else Squatter.tcp() as squatter:
        listed = cli(served, "conversations", "list", env={"CLANKIE_URL": squatter.url})
        chat = cli(served, "chat", env={"CLANKIE_URL": squatter.url})
    heard = squatter.close()
    for done in (listed, chat):
        assert done.returncode == 5, done
        assert f"the service at {squatter.url} is not yours" in done.stderr
        assert "the token was not sent" in done.stderr and "fix:" in done.stderr
    assert heard.connections == 2 and heard.everything == b"", heard
    assert token.encode() not in heard.everything


@needs_root
@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_t2_not_yours_with_json_prints_a_problem_and_the_fix_fits_the_address(
        served: Served, kind: str):
    """--json prints a problem-like document on stdout, as for the service's refusals; the
    fix suggests `serve --tcp` for a port and unsetting CLANKIE_URL for a socket, says who
    can stop another user's process, and that the trust mark does not cover it."""
    with Squatter.unix() if kind == "unix" else Squatter.tcp() as squatter:
        env = {"CLANKIE_URL": squatter.url, "CLANKIE_URL_TRUSTED": squatter.url}
        plain = cli(served, "conversations", "list", env=env)
        as_json = cli(served, "conversations", "list", "--json", env=env)
    heard = squatter.close()
    assert heard.connections == 2 and heard.everything == b"", heard
    assert (plain.returncode, as_json.returncode) == (5, 5), (plain, as_json)
    problem = json.loads(as_json.stdout)
    assert problem["code"] == "not_yours", problem
    assert problem["detail"].startswith(f"the service at {squatter.url} is not yours")
    for fix in (problem["fix"], plain.stderr):
        assert "only that user or root can stop it" in fix, fix
        assert "CLANKIE_URL_TRUSTED does not cover a listener known to be someone else's" \
            in fix, fix
        assert "unset, it is the home's socket" not in fix
        if kind == "tcp":
            assert "`clankie serve --tcp 127.0.0.1:PORT`" in fix, fix
        else:
            assert "unset CLANKIE_URL" in fix and "--tcp" not in fix, fix


@needs_root
def test_t1_t2_a_swapped_home_socket_gets_nothing(own_served: Served, own_asked: tuple[str, str]):
    """Another user's socket put in the place of the home's: T1 refuses it as someone
    else's file in the home before anything connects (T2 would refuse it next)."""
    c, r = own_asked
    snap = ok_json(own_served, "conversations", "questions", c)
    assert own_served.stop() == 0
    with Squatter.unix() as squatter:
        squatter.socket_path.rename(own_served.home.socket)
        done = cli(own_served, *answer_args(c, r, snap), "--option",
                   snap["pending"]["options"][0]["option_id"])
    heard = squatter.close()
    assert done.returncode == 2, done
    assert f"unsafe home: {own_served.home.socket}" in done.stderr
    assert heard.connections == 0 and heard.everything == b"", heard


@needs_root
def test_t2_completion_completes_nothing_from_another_users_listener(
        served: Served, workspace: Path):
    cli(served, "conversations", "new", "--workspace", str(workspace))
    with Squatter.tcp() as squatter:
        done = _complete(served.home.path, "clankie conversations show ", url=squatter.url)
    heard = squatter.close()
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "", ""), done
    assert heard.connections == 1 and heard.everything == b"", heard


def test_issue42_a_chat_line_that_looks_like_an_answer_is_said_not_to_be_one(
        served: Served, asked: tuple[str, str], workspace: Path):
    """Tried as a new owner: `send C MIT` while a question waited said nothing, and the
    script's "Noted: MIT." read as if it were answered. As the TUI does (A2), the CLI says
    on standard error that it was chat, the question is still open, and how to answer;
    only for a line that looks like an answer, and never on standard output or in --json."""
    c, request = asked
    label = cli(served, "conversations", "questions", c).stdout.split("1. ")[1].split()[0]
    for text in ("1", label.upper(), " yes "):
        sent = cli(served, "conversations", "send", c, text)
        assert sent.returncode == 0, sent
        assert "not an answer" in sent.stderr and "still open" in sent.stderr, sent.stderr
        assert f"clankie conversations questions {c}" in sent.stderr, sent.stderr
        assert "not an answer" not in sent.stdout
    for args in (("hello there",), ("1", "--json")):
        sent = cli(served, "conversations", "send", c, *args)
        assert sent.returncode == 0 and sent.stderr == "", sent
    # Judged against the question that waited when the line was sent, never against the
    # one its own run asks at once (this module's script asks in every run).
    fresh = cli(served, "conversations", "new", "--workspace", str(workspace)).stdout.strip()
    for _ in range(5):
        sent = cli(served, "conversations", "send", fresh, "1", "--wait")
        assert "not an answer" not in sent.stderr, sent.stderr
        with served.client() as client:
            ended = client.call("input_get", {"conversation_id": fresh})["pending"]
            if ended is not None:
                client.call("conversation_reset", {"conversation_id": fresh})
    with served.client() as client:
        assert client.call("input_get", {"conversation_id": c})["pending"]["request_id"] \
            == request
