"""SPEC W5 on rule files (`.gitignore`, `info/exclude`, `.gitattributes`): compiled by RE2
only, never by Python's backtracking `re`, within the call's deadline and a bound on their
total size; a rule RE2 cannot take is skipped and counted in `rules_skipped`, the others
still apply. And a control: on ordinary rules the listing hides what Git itself ignores."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clankie.workspace import gitrules
from clankie.workspace.confine import Refusal
from clankie.workspace.gitrules import CALL_RULE_BYTES, Rules
from tests.workspace.tooling import Place, committed, git, make_place

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ROOT = Path(__file__).resolve().parents[2]
BACKTRACKING = "*a*a*a*a*a*a*a*a*a*a*a*a*b"  # exponential in the name's length for `re`
NAME = "a" * 40  # no `b`: a backtracking engine tries every way to split it
LONG_LINES = "".join(f"{n:03d}-" + "x" * 990 + "\n" for n in range(100))  # RE2 cannot hold
# these in one set with its default memory: pathspec then fell back to Python's `re`


@pytest.fixture
def repo(tmp_path: Path) -> Place:
    return committed(make_place(tmp_path))


@pytest.fixture
def rules_never_reach_re(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every pattern Python's `re` is asked to compile that is a translated rule (pathspec's
    translations carry its directory marker `ps_d`, or `[^/]` for a wildcard)."""
    asked: list[str] = []
    original = re._compile  # type: ignore[attr-defined]  # re.compile, re.match... all call it

    def watched(pattern: Any, flags: Any) -> Any:
        text = pattern if isinstance(pattern, str) else repr(pattern)
        if "ps_d" in text or "[^/]" in text:
            asked.append(text)
        return original(pattern, flags)

    monkeypatch.setattr(re, "_compile", watched)
    return asked


def _tools(place: Place) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    return (place.ok("list_files", depth=3), place.ok("search_text", pattern="content"),
            place.ok("git_status"))


def test_w5_a_backtracking_rule_among_long_lines_is_never_given_to_pythons_re(
        repo: Place, rules_never_reach_re: list[str]):
    (repo.ws / ".gitignore").write_text(f"{BACKTRACKING}\n{LONG_LINES}")
    (repo.ws / NAME).write_text("content kept\n")
    (repo.ws / f"{NAME}b").write_text("content ignored\n")
    listing, search, status = _tools(repo)
    shown = {e["path"] for e in listing["entries"]}
    assert NAME in shown and f"{NAME}b" not in shown and listing["hidden_by_ignore"] == 1
    assert [m["path"] for m in search["matches"]] == [NAME] and search["hidden_by_ignore"] == 1
    assert {(e["path"], e["status"]) for e in status["entries"]} == {
        (".gitignore", "??"), (NAME, "??")}
    assert rules_never_reach_re == []


def test_w5_the_backtracking_rule_cannot_stall_a_call_run_in_a_child(repo: Place):
    """A hang detector, not a timing: the old matcher took minutes on these names."""
    (repo.ws / ".gitignore").write_text(f"{LONG_LINES}{BACKTRACKING}\n")
    for n in range(33, 41):
        (repo.ws / ("a" * n)).write_text("content\n")
    probe = ("import json, sys\nsys.path.insert(0, sys.argv[1])\n"
             "from clankie.workspace.deny import DenyList\n"
             "from clankie.workspace.identity import identify\n"
             "from clankie.workspace.tools import ToolSettings, call_tool\n"
             "ws, settings = identify(sys.argv[2]), ToolSettings(DenyList())\n"
             "print(json.dumps([call_tool(t, a, ws, settings).result for t, a in (\n"
             "    ('list_files', '{}'), ('search_text', '{\"pattern\": \"content\"}'),\n"
             "    ('git_status', '{}'))]))\n")
    done = subprocess.run([sys.executable, "-c", probe, str(ROOT / "src"), str(repo.ws)],
                          capture_output=True, text=True, timeout=120, check=True)
    listing, search, status = json.loads(done.stdout)
    names = {"a" * n for n in range(33, 41)}
    assert names <= {e["path"] for e in listing["entries"]}
    assert {m["path"] for m in search["matches"]} == names
    assert names <= {e["path"] for e in status["entries"]}


def test_w5_a_thousand_long_rules_are_compiled_up_to_the_bound_and_the_rest_counted(
        repo: Place, rules_never_reach_re: list[str]):
    lines = [f"{n:04d}-" + "y" * 985 for n in range(1_000)]  # 990 characters each
    (repo.ws / ".gitignore").write_text("*.log\n" + "".join(f"{line}\n" for line in lines))
    (repo.ws / "debug.log").write_text("content ignored\n")
    (repo.ws / "kept.txt").write_text("content kept\n")
    listing, search, status = _tools(repo)
    at_most = (CALL_RULE_BYTES - len("*.log")) // 990  # rules the byte bound lets through
    for result in (listing, search, status):
        assert 1_000 - at_most <= result["rules_skipped"] < 1_000
    assert listing["rules_skipped"] == search["rules_skipped"] == status["rules_skipped"]
    assert "debug.log" not in {e["path"] for e in listing["entries"]}
    assert "kept.txt" in {m["path"] for m in search["matches"]}
    assert rules_never_reach_re == []


@pytest.mark.parametrize(("refused", "skipped"), [
    ("[[:nope:]]*", 0),  # a class Git does not know: it matches nothing, nor do we (issue41)
    ("*a" + "?" * 900, 1),  # a program past the bound on one rule (lowered for the test)
], ids=["unknown-class", "too-big"])
def test_w5_a_rule_re2_cannot_take_is_skipped_and_counted_and_the_others_apply(
        repo: Place, refused: str, skipped: int, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(gitrules, "RULE_PROGRAM", 5_000)  # `refused` is about 7,200
    (repo.ws / ".gitignore").write_text(f"*.log\n{refused}\nbuild/\n!keep.log\n")
    for name in ("debug.log", "keep.log", "build/out.o", "kept.txt", "[nope]x", "ab"):
        (repo.ws / name).parent.mkdir(exist_ok=True)
        (repo.ws / name).write_text("content\n")
    listing, search, status = _tools(repo)
    shown = {e["path"] for e in listing["entries"]}
    assert shown >= {"keep.log", "kept.txt", "[nope]x", "ab"}
    assert not shown & {"debug.log", "build"}
    for result in (listing, search, status):
        assert result["rules_skipped"] == skipped


def test_w5_compiling_rules_stops_at_the_calls_deadline_and_so_does_matching():
    lines = b"".join(b"rule-%04d-*.tmp\n" % n for n in range(1_000))
    asked = 0

    def deadline_after(allowed: int) -> Any:
        def check_time() -> None:
            nonlocal asked
            asked += 1
            if asked > allowed:
                raise Refusal("time_limit", "the tool call took longer than 10 s")
        return check_time

    with pytest.raises(Refusal) as stopped:
        Rules(lines, None, deadline_after(10))
    assert stopped.value.code == "time_limit" and asked == 11  # it stopped at once
    asked = 0
    rules = Rules(lines, None, deadline_after(100_000))
    assert rules.ignored("rule-0007-x.tmp", False) and not rules.ignored("x.txt", False)
    asked = 100_000  # the deadline passes between two paths
    with pytest.raises(Refusal):
        rules.ignored("rule-0007-y.tmp", False)


def test_w5_a_name_that_is_not_utf8_is_matched_as_git_does_never_an_error(repo: Place):
    (repo.ws / ".gitignore").write_text("*.log\nbad?.txt\n")
    for name in (b"bad\xff.log", b"bad\xff.txt", b"bad\xff\xfe.txt"):
        (repo.ws / name.decode("utf-8", "surrogateescape")).write_text("content\n")
    listing = repo.ok("list_files")
    assert {e["path"] for e in listing["entries"]} == {  # shown as text (U+FFFD)
        ".gitignore", "README.md", "bad\ufffd\ufffd.txt"}
    assert listing["hidden_by_ignore"] == 2


ORDINARY = "".join(f"{rule}\n" for rule in (
    "*.log", "!keep.log", "build/", "/root-only.txt", "docs/**/tmp", "**/cache", "[Tt]emp*.txt",
    "a\\ b.txt", "trailing\\ ", "*.py[co]", "sub/*.md", "!sub/keep.md", "?x.dat", "dir-only/",
    "*.d/", "\\#hash", "\\!bang", "[!a-c]*.bak"))
SUB_IGNORE = "!*.log\nlocal/\n/anchored.txt\n"
FILES = ["debug.log", "keep.log", "sub/more.log", "build/out.o", "sub/build/x.o",
         "root-only.txt", "sub/root-only.txt", "docs/a/b/tmp/f", "docs/tmp/g", "docs/tmpx",
         "x/cache/h", "cache", "Temp1.txt", "temp2.txt", "tEmp3.txt", "a b.txt", "trailing ",
         "trailing", "m.pyc", "m.py", "sub/r.md", "sub/keep.md", "sub/deep/r.md", "ax.dat",
         "abx.dat", "dir-only", "sub/dir-only/f", "conf.d/f", "conf.d.txt", "#hash", "!bang",
         "a.bak", "d.bak", "sub/local/f", "sub/anchored.txt", "sub/deep/anchored.txt",
         "anchored.txt", "src/main.c", "src/other.c"]


def test_w6_on_ordinary_rules_the_listing_hides_exactly_what_git_ignores(repo: Place):
    (repo.ws / ".gitignore").write_text(ORDINARY)
    (repo.ws / "sub").mkdir()
    (repo.ws / "sub" / ".gitignore").write_text(SUB_IGNORE)
    (repo.ws / ".git" / "info" / "exclude").write_text("src/*.c\n!src/main.c\n*.dat\n")
    for name in FILES:
        (repo.ws / name).parent.mkdir(parents=True, exist_ok=True)
        (repo.ws / name).write_text("content\n")
    theirs = set(git("ls-files", "-z", "--cached", "--others", "--exclude-standard",
                     cwd=repo.ws).split("\0")) - {""}
    listing, search, status = _tools(repo)
    assert {e["path"] for e in listing["entries"] if e["type"] == "file"} == {
        path for path in theirs if path.count("/") < 3}  # depth 3
    assert {m["path"] for m in search["matches"]} == theirs - {"README.md", ".gitignore",
                                                               "sub/.gitignore"}
    untracked = {item[3:] for item in git("status", "--porcelain", "-z",
                                          "--untracked-files=all", cwd=repo.ws).split("\0")
                 if item.startswith("??")}
    assert {e["path"] for e in status["entries"] if e["status"] == "??"} == untracked
    assert listing["rules_skipped"] == 0
