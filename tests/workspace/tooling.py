"""Helpers for the workspace-tool tests: a workspace beside an 'outside' folder holding a
secret, the tools called exactly as a run calls them, and Git run as a user would."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clankie.core.model import WorkspaceIdentity
from clankie.workspace import confine
from clankie.workspace.deny import DenyList
from clankie.workspace.identity import identify
from clankie.workspace.tools import Outcome, ToolSettings, call_tool

SECRET = "OUTSIDE-SECRET-4d1f"


def git(*args: str, cwd: Path, input: str | None = None) -> str:
    return git_run(*args, cwd=cwd, input=input, check=True).stdout


def git_run(*args: str, cwd: Path, input: str | None = None,
            check: bool = False) -> subprocess.CompletedProcess[str]:
    """Git run as a user would (`git` without its exit status checked, for a merge that
    stops on conflicts)."""
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
           "HOME": str(cwd), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
           # no automatic `git gc` in the background: it would change .git under a test
           "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "gc.auto", "GIT_CONFIG_VALUE_0": "0"}
    return subprocess.run(["git", *args], cwd=cwd, check=check, capture_output=True,
                          text=True, env=env, input=input)


@dataclass
class Place:
    """`root/ws` is the workspace; `root/outside` holds `secret.txt` and a folder."""

    root: Path
    deny: DenyList = field(default_factory=DenyList)
    home: tuple[int, int] | None = None  # clankie's home, by (device, inode), if one is near
    home_files: frozenset[tuple[int, int]] = frozenset()  # the home's files, by identity

    @property
    def ws(self) -> Path:
        return self.root / "ws"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    @property
    def identity(self) -> WorkspaceIdentity:
        found = identify(str(self.ws))
        assert found is not None
        return found

    def call(self, tool: str, identity: WorkspaceIdentity | None = None,
             **args: Any) -> Outcome:
        return call_tool(tool, json.dumps(args), identity or self.identity,
                         ToolSettings(self.deny, self.home, self.home_files))

    def ok(self, tool: str, **args: Any) -> dict[str, Any]:
        outcome = self.call(tool, **args)
        assert outcome.status == "ok", outcome.result
        assert SECRET not in json.dumps({k: v for k, v in outcome.result.items()
                                         if k != "pattern"})  # a search echoes its pattern
        return outcome.result

    def refused(self, tool: str, **args: Any) -> str:
        outcome = self.call(tool, **args)
        assert outcome.status == "refused", outcome.result
        assert set(outcome.result) == {"status", "code", "reason"}
        assert len(outcome.text) < 300 and SECRET not in outcome.text
        return str(outcome.code)


def make_place(root: Path) -> Place:
    place = Place(root)
    place.ws.mkdir(parents=True)
    place.outside.mkdir()
    (place.outside / "secret.txt").write_text(f"{SECRET}\n")
    (place.outside / "dir").mkdir()
    (place.outside / "dir" / "inner.txt").write_text(f"{SECRET} inner\n")
    (place.ws / "README.md").write_text("# Demo\nhello\n")
    return place


def committed(place: Place, message: str = "first") -> Place:
    """The place with its workspace a Git repository holding one commit of what is there."""
    git("init", "-q", "-b", "main", cwd=place.ws)
    git("add", ".", cwd=place.ws)
    git("commit", "-q", "-m", message, cwd=place.ws)
    return place


@contextmanager
def opener(kind: str) -> Iterator[None]:
    """The confined opener of `kind` (`openat2`, or the portable `walk`) for the block;
    skips the test where the platform has no openat2."""
    old = confine.use_openat2(kind == "openat2")
    if kind == "openat2" and not confine.openat2_in_use():
        confine.use_openat2(old)
        pytest.skip("this platform has no openat2")
    try:
        yield
    finally:
        confine.use_openat2(old)
