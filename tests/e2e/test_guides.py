"""Issue 42: each guide's commands are run by a test, as the ntfy recipe's are.

Every `sh` block of the README and of its guides under docs/ that does not say
`# not run here: REASON` is run here as written: a document's blocks in order, in one bash
(`set -euo pipefail`, so a failing command fails the test), from the checkout, with this
checkout's `clankie` first on `PATH` and a home of the test's own; where no block starts a
service, a real `clankie serve` is started for them (tests/e2e/served.py). What a reader
fills in (`CONVERSATION`, `REQUEST --incarnation I --revision N`, `ID`) is filled in from
the service, as `SESSIONS` lists; a reader's pace is kept by two waits the runner adds: after
`clankie serve ... &` until it answers, and after `conversations send` without `--wait`
until the run it started has ended. Each block not run still has each of its `clankie`
commands' `--help` run, and every option it uses must be there. The rule is
docs/decisions.md ("Issue 42: a README people can read"); tests/test_guides.py checks the
rest in process.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.e2e.bridged import RawBridge
from tests.e2e.served import Served, clankie
from tests.guides import (
    DOCUMENTS,
    ROOT,
    Block,
    block_commands,
    blocks,
    clankie_command,
    commands,
    logical_lines,
    option_words,
    split_assignments,
)

# Words a reader replaces; none may be left in what runs.
PLACEHOLDERS = frozenset({"CONVERSATION", "REQUEST", "ID", "DIR", "OPTION", "FILE", "I", "N"})
AGENT_ASKS = {"kind": "text", "prompt": "What should the new module be called?"}

# Small readers of the CLI's `--json`, for the runner's waits and what a reader fills in.
PICK = '''
import json, sys
what, data = sys.argv[1], json.load(sys.stdin)
if what == "ids":  # REQUEST --incarnation I --revision N, as `questions` prints them
    print(data["pending"]["request_id"], "--incarnation", data["incarnation"],
          "--revision", data["revision"])
elif what == "unfinished":  # runs queued or running, from `conversations events --json`
    status = {e["run_id"]: e["status"] for e in data["events"] if e["type"] == "run_status"}
    print(sum(s in ("queued", "running") for s in status.values()))
else:  # the newest credential (`credentials list`) or device (`devices list`) so named
    print([c["credential_id"] for c in data["credentials"] if c["name"] == sys.argv[2]][-1])
'''

PRELUDE = '''
set -euo pipefail
__stop() { for job in $(jobs -p); do kill "$job" 2>/dev/null || true; done; wait || true; }
trap __stop EXIT
__pick() { "$GUIDE_PY" "$GUIDE_TMP/pick.py" "$@"; }
__ready() {  # after `clankie serve ... &`: until it answers, as a reader waits for its line
    for _ in $(seq 300); do clankie conversations list >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "the service did not answer" >&2; return 1
}
__settle() {  # after `conversations send` without --wait: until the run it started ended
    for _ in $(seq 300); do
        [ "$(clankie conversations events "$1" --json | __pick unfinished)" = 0 ] && return 0
        sleep 0.1
    done
    echo "the run did not end" >&2; return 1
}
__answer_ids() { clankie conversations questions "$1" --json | __pick ids; }
'''

TRY_HOME = ("/tmp/clankie-try", '"$GUIDE_TMP/clankie-try"')
ANSWER_IDS = ("REQUEST --incarnation I --revision N", "$(__answer_ids $C)")
PHONE_ID = ("revoke ID", "revoke $(clankie devices list --json | __pick named phone)")
AGENT_ID = ("revoke ID", "revoke $(clankie credentials list --json | __pick named claude-code)")


def agent_asks(served: Served) -> dict[str, str]:
    """A coding agent asks through a real `clankie mcp`, as the guide's agent would."""
    done = clankie("credentials", "issue", "--kind", "agent", "coder", "--json",
                   home=served.home.path)
    assert done.returncode == 0, done
    bridge = RawBridge(served.home.path, json.loads(done.stdout)["token"], ROOT)
    try:
        bridge.initialize()
        asked = bridge.tool("ask_owner", AGENT_ASKS)["structuredContent"]
    finally:
        assert bridge.close() == 0
    return {"AGENT_CONVERSATION": asked["conversation_id"]}


def a_phone_is_paired(served: Served) -> dict[str, str]:
    done = clankie("devices", "pair", "phone", home=served.home.path)
    assert done.returncode == 0, done
    return {}


@dataclass(frozen=True)
class Session:
    """How a document's blocks run: a service started for them (unless a block starts
    one), what is there before them, what a reader fills in, and what they must print."""
    serve: bool = True
    given: Callable[[Served], dict[str, str]] | None = None
    fill: tuple[tuple[str, str], ...] = ()
    shows: tuple[str, ...] = field(default_factory=tuple)


SESSIONS = {
    "README.md": Session(
        serve=False, fill=(TRY_HOME, ANSWER_IDS),
        shows=("Which license should this project use?", "Let me look at the project first.",
               "CLANKIE_AGENT_TOKEN")),
    "cli.md": Session(
        serve=False, fill=(TRY_HOME, ANSWER_IDS),
        shows=("complete -", "clankie 0.", "Which license should this project use?",
               "I found: ")),
    "phone.md": Session(given=a_phone_is_paired, fill=(PHONE_ID,), shows=("phone",)),
    "coding-agents.md": Session(
        given=agent_asks,
        fill=(("questions CONVERSATION", 'questions "$AGENT_CONVERSATION"'), AGENT_ID),
        shows=("What should the new module be called?", "claude-code", "claude mcp add",
               "revoked ")),
    "troubleshooting.md": Session(shows=("ok   service", '"ok": true')),
}


def runnable(document: Path) -> list[Block]:
    return [b for b in blocks(document) if b.runs]


def paced(text: str) -> str:
    """The block with the runner's two waits added (see the module's docstring)."""
    out = []
    for line in logical_lines(text):
        out.append(line)
        for words in commands(line):
            _, words = split_assignments(words)
            if words[:2] == ["clankie", "serve"] and line.split("#", 1)[0].rstrip().endswith("&"):
                out.append("__ready")
            if words[:3] == ["clankie", "conversations", "send"] and "--wait" not in words:
                out.append(f"__settle {words[3]}")
    return "\n".join(out) + "\n"


def script(document: Path, session: Session) -> str:
    text = "".join(f"echo '### {b}'\n{paced(b.text)}" for b in runnable(document))
    for written, run in session.fill:
        assert written in text, f"{document.name} no longer says {written!r}"
        text = text.replace(written, run)
    left = [w for line in logical_lines(text) for words in commands(line) for w in words
            if w in PLACEHOLDERS]
    assert left == [], f"{document.name}: nothing fills in {left}"
    return PRELUDE + text


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    """`clankie` on PATH: this checkout's, as `make demo` puts it in .venv/bin."""
    where = tmp_path / "bin"
    where.mkdir()
    (where / "clankie").write_text(f'#!/bin/sh\nexec "{sys.executable}" -m clankie "$@"\n')
    (where / "clankie").chmod(0o755)
    return where


def test_every_document_with_a_block_to_run_has_its_session():
    assert {d.name for d in DOCUMENTS if runnable(d)} == set(SESSIONS)


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_the_blocks_of_each_document_run_as_written(name: str, tmp_path: Path, bin_dir: Path):
    document = next(d for d in DOCUMENTS if d.name == name)
    session = SESSIONS[name]
    (tmp_path / "pick.py").write_text(PICK)
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("CLANKIE_URL", "CLANKIE_TOKEN")}
    env.update(PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", PYTHONPATH=str(ROOT / "src"),
               CLANKIE_HOME=str(home), GUIDE_TMP=str(tmp_path), GUIDE_PY=sys.executable,
               COLUMNS="200")
    with serving(home, session) as given:
        done = subprocess.run(["bash", "-c", script(document, session)], cwd=ROOT, text=True,
                              capture_output=True, timeout=180, env={**env, **given})
    said = f"{name}: exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, said
    for shown in session.shows:
        assert shown in done.stdout, said
    assert "Traceback" not in done.stdout + done.stderr, said


@contextlib.contextmanager
def serving(home: Path, session: Session) -> Iterator[dict[str, str]]:
    """The document's own service (when it needs one) and what is there before it runs:
    the variables the blocks are given."""
    if not session.serve:
        yield {}
        return
    served = Served.start(home)
    try:
        yield session.given(served) if session.given else {}
    finally:
        served.stop()


def not_run() -> Iterator[tuple[Block, list[str]]]:
    for document in DOCUMENTS:
        for block in blocks(document):
            if block.lang == "sh" and not block.runs:
                for words in block_commands(block):
                    _, words = split_assignments(words)
                    if words[:1] == ["clankie"]:
                        yield block, words


def test_each_command_of_a_block_not_run_answers_its_help_with_every_option_it_uses(
        tmp_path: Path):
    """The blocks not run (a real model, a phone, Tailscale, an install) still name
    commands the real `clankie` has: `clankie COMMAND --help` exits 0 and lists each option
    the block gives it."""
    wanted: dict[tuple[str, ...], set[str]] = {}
    for block, words in not_run():
        path, wrong = clankie_command(words)
        assert wrong == [], (str(block), wrong)
        wanted.setdefault(path, set()).update(option_words(words))
    assert len(wanted) >= 10
    for path, options in sorted(wanted.items()):
        done = clankie(*path, "--help", home=tmp_path / "home", env_extra={"COLUMNS": "200"})
        assert done.returncode == 0, (path, done)
        missing = sorted(o for o in options if o not in done.stdout)
        assert missing == [], (path, missing)
