"""Issue 19, red team: the CLI against a service that is not clankie (F2, NaN, F7), with
arguments that are not UTF-8 (F6) and a broken completion request: always a SPEC section 10
exit code and a line, never `internal error` or a traceback.

The CLI runs as a real process (`python -m clankie`) against a scripted Unix-socket peer
(CLANKIE_URL); what the peer received is asserted.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.api.test_client_wire import reply

ROOT = Path(__file__).resolve().parents[1]
C = "abcdef01-0000-4000-8000-000000000000"


def clankie(url: str, *args: str | bytes, cwd: Path | bytes = ROOT,
            **extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), CLANKIE_URL=url,
               CLANKIE_TOKEN="clk_x", CLANKIE_HOME=str(Path(url[7:]).parent / "home"),
               **extra)
    return subprocess.run([sys.executable, "-m", "clankie", *args], capture_output=True,
                          text=True, timeout=60, cwd=cwd, env=env)


def said_plainly(done: subprocess.CompletedProcess[str]) -> None:
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr, done


@pytest.mark.parametrize("body,status", [
    (b"{}", b"200 OK"),
    (b'{"conversations":[{"conversation_id":"x"}],"next_after":null}', b"200 OK"),
    (b'{"code":"forbidden","status":null}', b"403 Forbidden"),
    (b'{"code":"forbidden","status":"abc"}', b"403 Forbidden"),
    (b'{"code":"forbidden","status":1e999}', b"403 Forbidden"),
    # issue 42: a problem code that is none of SPEC section 10's was said as a refusal
    (b'{"code":"brew_coffee","status":418,"detail":"I am a teapot"}', b"418 I'm a teapot"),
    (b'{"code":"gone_fishing","status":409,"detail":"later"}', b"409 Conflict"),
], ids=["empty-object", "conversation-without-fields", "status-null", "status-abc",
        "status-overflowing", "418-unknown-code", "409-unknown-code"])
def test_f2_f3_an_answer_that_is_not_clankies_exits_1_saying_so(peer: Any, body: bytes,
                                                                status: bytes):
    p = peer(reply(body, status))
    done = clankie(p.url, "conversations", "list")
    said_plainly(done)
    assert done.returncode == 1 and "did not answer like clankie" in done.stderr, done
    assert "refused" not in done.stderr.lower()
    assert len(p.requests) == 1


def test_nan_in_a_reply_is_not_clankie_and_json_prints_valid_json(peer: Any):
    p = peer(reply(b'{"conversations":[],"next_after":NaN}'))
    done = clankie(p.url, "conversations", "list", "--json")
    said_plainly(done)

    def no_constant(name: str) -> Any:
        raise AssertionError(f"{name} printed")
    printed = json.loads(done.stdout, parse_constant=no_constant)
    assert done.returncode == 1 and printed["code"] == "not_clankie", done


def test_f7_events_whose_cursor_does_not_move_stops_as_not_clankie(peer: Any):
    page = {"events": [{"seq": 1, "at": "2026-01-01T00:00:00Z", "type": "x"}] * 500,
            "next_after": 0, "trimmed": False, "oldest_seq": 1}
    p = peer(reply(json.dumps(page).encode()))
    done = clankie(p.url, "conversations", "events", C)
    said_plainly(done)
    assert done.returncode == 1 and "cursor stayed at 0" in done.stderr, done
    assert len(p.requests) == 1


@pytest.mark.parametrize("args", [
    ["conversations", "send", C, b"caf\xe9"],
    ["conversations", "answer", C, C, "--incarnation", C, "--revision", "1", "--text",
     b"\xff"],
], ids=["send", "answer-text"])
def test_f6_an_argument_that_is_not_utf8_is_exit_2_and_nothing_is_sent(
        peer: Any, args: list[str | bytes]):
    snapshot = {"conversation_id": C, "incarnation": C, "revision": 1, "pending": None,
                "request": None}
    p = peer(reply(json.dumps(snapshot).encode()))
    done = clankie(p.url, *args)
    said_plainly(done)
    assert done.returncode == 2 and "is not UTF-8" in done.stderr, done
    assert not any(b"conversation_send" in r or b"input_answer" in r for r in p.requests)


def test_f6_new_in_a_folder_whose_name_is_not_utf8_is_exit_2_and_nothing_is_sent(
        peer: Any, tmp_path: Path):
    """docs/decisions.md "Issue 19: red team": such a workspace is refused, not mangled."""
    folder = os.fsencode(tmp_path) + b"/caf\xe9"
    os.mkdir(folder)
    p = peer(reply(b"{}"))
    done = clankie(p.url, "conversations", "new", cwd=folder)
    said_plainly(done)
    assert done.returncode == 2 and "workspace" in done.stderr and "\\xe9" in done.stderr
    assert p.requests == []


@pytest.mark.parametrize("cword", [None, "abc", ""], ids=["missing", "not-a-number", "empty"])
def test_completion_with_a_broken_comp_cword_prints_nothing_and_exits_0(
        tmp_path: Path, cword: str | None):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), CLANKIE_HOME=str(tmp_path / "h"),
               _CLANKIE_COMPLETE="bash_complete", COMP_WORDS="clankie conv")
    env.pop("COMP_CWORD", None)
    if cword is not None:
        env["COMP_CWORD"] = cword
    done = subprocess.run([sys.executable, "-m", "clankie"], capture_output=True, text=True,
                          timeout=60, cwd=ROOT, env=env)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done


def test_f8_ctrl_c_while_an_answer_is_in_flight_is_uncertain_exit_7(peer: Any):
    """SPEC section 10: 7 uncertain, the request may have reached the service; the CLI
    says how to inspect and never resends. A read interrupted stays 130."""
    from tests.api.test_client_wire import SILENT
    from tests.polling import eventually

    p = peer(SILENT)  # whole IDs: the answer is the first request, and no reply comes
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), CLANKIE_URL=p.url,
               CLANKIE_TOKEN="clk_x", CLANKIE_HOME=str(p.path.parent / "home"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "clankie", "conversations", "answer", C, C, "--incarnation",
         C, "--revision", "1", "--text", "yes"], env=env, cwd=ROOT, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        eventually(lambda: any(b"input_answer" in r for r in p.requests), "the answer sent",
                   timeout=30)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 7, err
    assert "uncertain" in err and f"clankie conversations questions {C} --request {C}" in err
    assert "Traceback" not in err
    assert sum(b"input_answer" in r for r in p.requests) == 1
