"""SPEC W7 "even while someone else changes it during a call", as an attacker tries it: a
second process swaps the repository's files (`packed-refs`, refs, `HEAD`, the index, an
`objects/xx` folder, pack files) for symlinks to a secret outside and back, and creates
and removes `objects/info/alternates` and `commondir` naming another repository, in a
loop, while the Git tools are called again and again. No byte of the secret ever
appears in a result, a summary or a log line, no commit of the other repository ever
appears, and every call ends ok or refused (never an error). Bounded: a fixed number of
calls; the mutator is stopped by the test."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

from tests.workspace.hostile import Mutator
from tests.workspace.tooling import SECRET, Place, git, make_place

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="symlink races on Linux"),
]

CALLS = (("git_status", {}), ("git_log", {}), ("git_log", {"path": "app.py"}),
         ("git_diff", {}), ("git_diff", {"staged": True}), ("git_diff", {"revision": "HEAD~1"}),
         ("list_files", {"depth": 2}), ("search_text", {"pattern": "print"}))
ROUNDS = 100  # each round calls every tool once: 800 calls

def _victim(place: Place) -> tuple[Path, set[str]]:
    """A repository outside whose commits must never be shown."""
    victim = place.outside / "victim"
    victim.mkdir()
    (victim / "app.py").write_text(f"print('{SECRET}')\n")
    git("init", "-q", "-b", "main", cwd=victim)
    git("add", ".", cwd=victim)
    git("commit", "-q", "-m", f"PRIVATE {SECRET}", cwd=victim)
    return victim, set(git("rev-list", "--all", cwd=victim).split())


def _repository(place: Place) -> list[str]:
    """The workspace's repository: packed history, loose newer objects; the names the
    mutator swaps."""
    ws = place.ws
    (ws / "app.py").write_text("print('one')\n")
    git("init", "-q", "-b", "main", cwd=ws)
    git("add", ".", cwd=ws)
    git("commit", "-q", "-m", "first", cwd=ws)
    git("gc", "-q", cwd=ws)
    (ws / "app.py").write_text("print('two')\n")
    git("commit", "-qam", "second", cwd=ws)
    (ws / "app.py").write_text("print('three')\n")
    head = git("rev-parse", "HEAD", cwd=ws).strip()
    packs = sorted(p.name for p in (ws / ".git" / "objects" / "pack").iterdir())
    return ["packed-refs", "refs/heads/main", "HEAD", "index", f"objects/{head[:2]}",
            *(f"objects/pack/{name}" for name in packs)]


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return make_place(tmp_path)


def test_w7_a_repository_changed_during_calls_never_leaks_a_byte_or_a_foreign_commit(
        place: Place, caplog: pytest.LogCaptureFixture):
    secret = place.outside / "credentials"
    secret.write_text(f"SECRET_API_KEY={SECRET}\n{SECRET} second line\n")
    victim, foreign = _victim(place)
    targets = _repository(place)
    mutator = Mutator(place.ws / ".git", secret, victim / ".git", targets)
    said: dict[str, int] = {}
    try:
        with caplog.at_level(logging.DEBUG, logger="clankie"):
            for _ in range(ROUNDS):
                for tool, args in CALLS:
                    outcome = place.call(tool, **args)
                    text = json.dumps({k: v for k, v in outcome.result.items()
                                       if k != "pattern"}) + outcome.summary
                    assert SECRET not in text, (tool, args, outcome.result)
                    assert not any(commit in text or commit[:12] in text
                                   for commit in foreign), (tool, args, outcome.result)
                    assert outcome.status in ("ok", "refused"), (tool, args, outcome.result)
                    key = f"{tool}:{outcome.code or 'ok'}"
                    said[key] = said.get(key, 0) + 1
        assert SECRET not in caplog.text
    finally:
        assert mutator.stop() == 0
    assert said.get("git_log:ok", 0) + said.get("git_status:ok", 0) > 0, said


RACING = 60.0  # seconds the control reads for at most (it ends at the first leak)


def test_w7_the_mutator_really_races_the_reads(place: Place):
    """A control: the same swaps do make a plain reader that follows names read the
    secret (so the test above would catch a reader that opened files by name). The reads
    start once the mutator has swapped every target (`Mutator` waits for its word) and
    go on until one leaks, within a deadline, not for a fixed count: a busy machine
    slows both sides, never the proof."""
    secret = place.outside / "credentials"
    secret.write_text(f"SECRET_API_KEY={SECRET}\n")
    victim, _ = _victim(place)
    targets = _repository(place)
    mutator = Mutator(place.ws / ".git", secret, victim / ".git", targets)
    leaked = reads = 0
    deadline = time.monotonic() + RACING
    try:
        while not leaked and time.monotonic() < deadline:
            reads += 1
            try:
                with open(place.ws / ".git" / "packed-refs") as naive:
                    leaked += SECRET in naive.read()
            except OSError:
                continue
    finally:
        assert mutator.stop() == 0
    assert leaked, f"the mutator never swapped packed-refs while it was read ({reads} reads)"
    assert os.path.exists(place.ws / ".git" / "packed-refs")
