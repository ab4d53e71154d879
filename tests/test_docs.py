"""The project's own documents stay true to the repository: every SPEC rule a test cites is
described in docs/contract.md, the README and docs/ name only files that exist here (never
a path outside the repository, issue 19), and the guides show each example script as it is
in examples/ (the script format of SPEC section 10 "Models"; tests/e2e/test_examples.py runs
them through `clankie serve --script`). The README's sections live in guides under docs/
since issue 42 (tests/guides.py); the recipes read here are read there."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from clankie.agent.scripted import load_script
from tests.guides import DOCUMENTS as GUIDE_DOCUMENTS

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = ROOT / "docs" / "contract.md"
README = ROOT / "README.md"
DOCUMENTS = [README, *sorted((ROOT / "docs").glob("*.md"))]
# The README and the guides it links (tests/guides.py), read as one text.
SHOWN = "\n".join(p.read_text(encoding="utf-8") for p in GUIDE_DOCUMENTS)
# A rule name: a section letter and 1..99 (not a lint code like E501, not a variable like T0).
RULE = re.compile(r"\b[QSAERVMTWHP][1-9][0-9]?\b")
# A rule described in the contract: a list item that starts with the rule's name in bold.
DESCRIBED = re.compile(r"^- \*\*([QSAERVMTWHP][1-9][0-9]?)\*\*", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")
# A path in backquotes that names something in this repository (a top-level folder).
REPO_PATH = re.compile(r"`((?:docs|examples|bench|src|tests)/[\w./-]*)`")
# A path that starts by leaving its folder (`../shared/SPEC.md`), not `a/../b` or `../` alone.
UPWARD = re.compile(r"(?:^|[\s`(\[\"'])\.\./\w", re.MULTILINE)


def rules_cited_in_tests() -> set[str]:
    cited: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        cited |= set(RULE.findall(path.read_text(encoding="utf-8")))
    return cited


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(line.lstrip("#")) for line in path.read_text(encoding="utf-8").splitlines()
            if line.startswith("#")}


def test_every_rule_a_test_cites_is_described_in_the_contract():
    cited = rules_cited_in_tests()
    assert {"Q1", "A1", "T1", "W1"} <= cited  # the collection itself works
    described = set(DESCRIBED.findall(CONTRACT.read_text(encoding="utf-8")))
    assert sorted(cited - described, key=lambda r: (r[0], int(r[1:]))) == []


def test_the_contract_describes_each_rule_once():
    described = DESCRIBED.findall(CONTRACT.read_text(encoding="utf-8"))
    assert sorted(r for r in set(described) if described.count(r) > 1) == []


def test_the_readme_and_docs_name_only_files_in_the_repository():
    for doc in DOCUMENTS:
        text = doc.read_text(encoding="utf-8")
        assert UPWARD.findall(text) == [], f"{doc.name} points outside the repository"
        for target in LINK.findall(text):
            if re.match(r"[a-z]+://", target):
                continue
            file, _, anchor = target.partition("#")
            where = (doc.parent / file) if file else doc
            assert where.is_file(), f"{doc.name} links to {target}, which is not here"
            if anchor and where.suffix == ".md":
                assert anchor in anchors(where), f"{doc.name}: no heading for {target}"
        for path in REPO_PATH.findall(text):
            assert (ROOT / path).exists(), f"{doc.name} names {path}, which is not here"


def test_the_readme_points_at_the_contract():
    assert "](docs/contract.md" in README.read_text(encoding="utf-8")


def test_each_example_script_loads_and_a_guide_shows_it_as_it_is():
    examples = sorted((ROOT / "examples").glob("*.json"))
    assert examples
    for example in examples:
        assert load_script(example)["turns"]  # the parser `clankie serve --script` uses
        shown = f"```json\n{example.read_text(encoding='utf-8')}```\n"
        assert shown in SHOWN, f"no guide shows {example.name} as it is"


ARCHITECTURE = ROOT / "docs" / "architecture.md"
SOURCES = ROOT / "src" / "clankie"


def test_every_file_docs_architecture_names_exists():
    """Issue 20: the layers and the recipes of docs/architecture.md name only files that
    exist: a path whole (from the repository's root), a module by its name in the package,
    and each folder or module in the picture."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    named = re.findall(r"`([^`\s]+)`", text)
    paths = [n for n in named if "/" in n and not n.startswith("/") and "{" not in n]
    assert len(paths) > 30  # the recipes name their files whole
    assert [p for p in paths if not (ROOT / p).exists()] == []
    in_package = {p.name for p in SOURCES.rglob("*")}
    modules = [n for n in named if "/" not in n and re.fullmatch(r"\w+\.(py|tcss)", n)]
    assert [m for m in modules if m not in in_package] == []
    picture = text.split("```")[1]
    drawn = re.findall(r"(?<![\w/])([a-z_]+(?:/(?![\w{])|\.py\b))", picture)
    assert {"core/", "store/", "service/", "api/", "client.py", "dto.py"} <= set(drawn)
    assert [d for d in drawn if d.rstrip("/").removesuffix(".py") not in
            {p.stem for p in SOURCES.rglob("*")}] == []


def test_each_recipe_in_docs_architecture_names_the_source_files_it_touches():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    recipes = re.split(r"^### ", text.split("## Recipes", 1)[1], flags=re.MULTILINE)[1:]
    titles = [r.splitlines()[0] for r in recipes]
    assert titles == ["Add a dispatcher op", "Add a workspace tool", "Add a setting",
                      "Change what the TUI shows for a question"]
    for recipe in recipes:
        touched = re.findall(r"`(src/clankie/[\w/]+\.(?:py|tcss))`", recipe)
        assert len(touched) >= 2, recipe.splitlines()[0]


def test_the_readme_links_the_architecture():
    assert "](docs/architecture.md)" in README.read_text(encoding="utf-8")


NOTIFY = re.compile(r"^notify_command = (\[.*\])$", re.MULTILINE)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the guides' recipes use jq")
def test_h7_the_readmes_notify_recipes_send_the_prompt_as_it_is_and_read_no_file(
        tmp_path: Path):
    """Issue 21's trial: `curl -d "$(... .prompt)"` read a file when the prompt (the model's
    words) began with `@`, and `-d @-` dropped the prompt's line breaks. Each recipe runs
    here with a `curl` that records what it was given."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-FILE-CONTENT")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "curl"
    fake.write_text('#!/bin/sh\nprintf "%s\\n" "$@" > "$RECORD.args"\ncat > "$RECORD.stdin"\n')
    fake.chmod(0o755)
    for other in ("notify-send", "xargs"):  # the desktop recipe: not what this test is about
        (bin_dir / other).write_text("#!/bin/sh\ncat > /dev/null\n")
        (bin_dir / other).chmod(0o755)
    prompt = f"@{secret}\nsecond line"
    document = json.dumps({"event": "input_requested", "asked_by": "Clankie",
                           "prompt": prompt, "read_with": "clankie conversations questions c",
                           "answer_url": "https://laptop.example.ts.net/c/x"})
    recipes = [tomllib.loads(f"x = {m}")["x"] for m in NOTIFY.findall(SHOWN)]
    assert len(recipes) >= 2, recipes
    for n, argv in enumerate(recipes):
        record = tmp_path / f"recipe{n}"
        done = subprocess.run(argv, input=document, text=True, capture_output=True, timeout=30,
                              env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
                                   "RECORD": str(record)})
        assert done.returncode == 0, done
        if not Path(f"{record}.args").exists():
            continue  # the desktop one
        sent = Path(f"{record}.args").read_text() + Path(f"{record}.stdin").read_text()
        assert "SECRET-FILE-CONTENT" not in sent
        args = Path(f"{record}.args").read_text().splitlines()
        assert not any(a.startswith("@") and a != "@-" for a in args), args
        # curl's -d (--data) drops line breaks from what it reads; --data-binary keeps them
        assert "--data-binary" in args and "-d" not in args and "--data" not in args, args
        assert prompt in Path(f"{record}.stdin").read_text(), sent  # line breaks and all


QUESTION = {"event": "input_requested", "conversation_id": "c1", "request_id": "r1",
            "kind": "choice", "prompt": "Tabs or spaces?", "options": ["tabs", "spaces"],
            "asked_by": "Clankie", "read_with": "clankie conversations questions c1",
            "answer_url": "https://laptop.example.ts.net/?c=c1&r=r1"}
# The two endings `notify_on_resolved = true` adds (service/notify.py): no prompt, no kind.
CANCELLED = {"event": "input_resolved", "conversation_id": "c1", "request_id": "r1",
             "outcome": "cancelled", "reason": "restart", "asked_by": "Clankie",
             "read_with": "clankie conversations questions c1 --request r1",
             "answer_url": "https://laptop.example.ts.net/?c=c1&r=r1"}
ORPHANED = {"event": "continuation_failed", "conversation_id": "c1", "request_id": "r1",
            "run_id": "run1", "reason": "restart", "error": "orphaned_by_restart",
            "asked_by": "Clankie", "read_with": "clankie conversations questions c1 --request r1",
            "answer_url": "https://laptop.example.ts.net/?c=c1&r=r1"}


@pytest.mark.skipif(shutil.which("jq") is None, reason="the guides' recipes use jq")
def test_h7_r9_issue31_the_readmes_notify_recipes_say_an_ending_as_an_ending(tmp_path: Path):
    """Issue 31: with `notify_on_resolved = true` the desktop recipe (docs/notifications.md)
    popped "Clankie asks: " (an ending has no prompt) for a restart's endings. Each recipe, fed a
    question and the two endings a restart sends (R9), says the question as one, and an
    ending as what it was, with how to carry on; never "asks" or "null" for an ending."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text('#!/bin/sh\ncat > "$RECORD"\n')
    (bin_dir / "notify-send").write_text('#!/bin/sh\nshift\nprintf "%s" "$*" > "$RECORD"\n')
    for fake in bin_dir.iterdir():
        fake.chmod(0o755)
    recipes = [tomllib.loads(f"x = {m}")["x"] for m in NOTIFY.findall(SHOWN)]
    assert len(recipes) >= 3, recipes
    for n, argv in enumerate(recipes):
        said = {}
        for name, document in (("question", QUESTION), ("cancelled", CANCELLED),
                               ("orphaned", ORPHANED)):
            record = tmp_path / f"recipe{n}-{name}"
            done = subprocess.run(argv, input=json.dumps(document), text=True, timeout=30,
                                  capture_output=True,
                                  env={**os.environ, "RECORD": str(record),
                                       "PATH": f"{bin_dir}:{os.environ['PATH']}"})
            assert done.returncode == 0, done
            said[name] = record.read_text()
        assert "Tabs or spaces?" in said["question"], (argv, said)
        for ending in ("cancelled", "orphaned"):
            assert "asks" not in said[ending] and "null" not in said[ending], (argv, said)
            assert "restart" in said[ending] and "carry on" in said[ending], (argv, said)
        assert "question ended: cancelled" in said["cancelled"], (argv, said)
        assert "answer" in said["orphaned"] and "interrupted" in said["orphaned"], said


@pytest.mark.skipif(shutil.which("jq") is None, reason="the guides' recipes use jq")
def test_r9_p5_the_readmes_notify_recipes_say_an_agents_restart_ending_as_the_agent_asks_again(
        tmp_path: Path):
    """Issue 42: each recipe said of any question a restart cancelled "send a message to
    carry on"; a message to an agent's conversation is refused `not_eligible`, and P5's way
    on is that the agent asks again. Clankie's ending still says to send a message."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text('#!/bin/sh\ncat > "$RECORD"\n')
    (bin_dir / "notify-send").write_text('#!/bin/sh\nshift\nprintf "%s" "$*" > "$RECORD"\n')
    for fake in bin_dir.iterdir():
        fake.chmod(0o755)
    agents = {**CANCELLED, "asked_by": 'agent "coder" through "claude-code"',
              "asker": {"credential_id": "9" * 32, "name": "coder", "client": "claude-code"}}
    recipes = [tomllib.loads(f"x = {m}")["x"] for m in NOTIFY.findall(SHOWN)]
    assert len(recipes) >= 3, recipes
    for n, argv in enumerate(recipes):
        said = {}
        for name, document in (("agent", agents), ("clankie", CANCELLED)):
            record = tmp_path / f"recipe{n}-{name}"
            done = subprocess.run(argv, input=json.dumps(document), text=True, timeout=30,
                                  capture_output=True,
                                  env={**os.environ, "RECORD": str(record),
                                       "PATH": f"{bin_dir}:{os.environ['PATH']}"})
            assert done.returncode == 0, done
            said[name] = record.read_text()
        assert "the agent may ask again" in said["agent"], (argv, said)
        assert "send a message" not in said["agent"], (argv, said)
        assert "send a message to carry on" in said["clankie"], (argv, said)
