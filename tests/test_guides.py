"""Issue 42: the README keeps what a new owner needs in five minutes and links a guide under
docs/ for the rest; every code block of the README and the guides says what it holds, and
every command in them is one clankie has (tests/guides.py says how blocks are read;
tests/e2e/test_guides.py runs them; the rule is in docs/decisions.md, "Issue 42: a README
people can read")."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from clankie.agent.scripted import load_script
from clankie.home import NOT_SETTINGS
from clankie.settings import Settings, SettingsError, unknown_variables
from tests.guides import (
    DOCUMENTS,
    GUIDES,
    LANGUAGES,
    NOT_RUN,
    README,
    ROOT,
    block_commands,
    blocks,
    clankie_command,
    indented_code,
    split_assignments,
)

EVERY_BLOCK = [b for doc in DOCUMENTS for b in blocks(doc)]
SH = [b for b in EVERY_BLOCK if b.lang == "sh"]
EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
    "optional-dependencies"])
TARGETS = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE))


def test_the_readme_links_every_guide_and_stays_short():
    readme = README.read_text(encoding="utf-8")
    for guide in GUIDES:
        assert f"](docs/{guide.name})" in readme, f"the README does not link {guide.name}"
    assert len(readme.splitlines()) < 250, "the README is for a new owner's five minutes"
    # its first lines still give the two commands that set up a fresh machine
    head = "\n".join(readme.splitlines()[:12])
    assert "make demo" in head and "make test" in head


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_code_block_is_fenced_and_says_what_it_holds(document: Path):
    assert indented_code(document) == [], f"{document.name}: an unfenced code block"
    found = blocks(document)
    assert [str(b) for b in found if b.lang not in LANGUAGES] == []
    if document.read_text(encoding="utf-8").count("```") != 2 * len(found):
        raise AssertionError(f"{document.name}: a fence is not closed")


def test_every_sh_block_is_run_or_says_why_not():
    assert len(SH) > 20  # the collection itself works
    for block in SH:
        first = block.text.split("\n", 1)[0]
        if first.startswith("# not run"):
            assert first.startswith(NOT_RUN) and len(block.reason or "") > 10, block
    assert any(b.runs for b in SH) and any(not b.runs for b in SH)


def test_every_clankie_command_in_a_block_is_one_clankie_has():
    """Run or not, each `clankie ...` line names a real command and only its options
    (`[--all]` is the option --all); `make` a target of the Makefile; `pip install` and
    `pipx install` extras of pyproject.toml."""
    wrong: list[str] = []
    seen = 0
    for block in SH:
        for words in block_commands(block):
            _, words = split_assignments(words)
            if words[:1] == ["clankie"]:
                seen += 1
                wrong += [f"{block}: {w}" for w in clankie_command(words)[1]]
            elif words[:1] == ["make"]:
                wrong += [f"{block}: no target {t}" for t in words[1:] if t not in TARGETS]
            if words and words[0].endswith(("pip", "pipx")) and "install" in words:
                for word in (w for w in words if w.startswith(".[") and w.endswith("]")):
                    wrong += [f"{block}: no extra {e}" for e in word[2:-1].split(",")
                              if e not in EXTRAS]
    assert seen > 40
    assert wrong == []


def test_every_clankie_variable_in_a_block_is_a_setting_with_a_value_it_takes():
    """`CLANKIE_NAME=value` (and `export ...`) in a block: a setting, and a value its
    reader takes (or a variable clankie reads otherwise, such as CLANKIE_HOME)."""
    seen = 0
    for block in SH:
        for words in block_commands(block):
            assigned, _ = split_assignments(words)
            ours = {k: v for k, v in assigned.items()
                    if k.startswith("CLANKIE_") and k not in NOT_SETTINGS}
            if not ours:
                continue
            seen += len(ours)
            assert unknown_variables(ours) == [], block
            try:
                Settings.load(None, environ=ours)
            except SettingsError as exc:
                raise AssertionError(f"{block}: {exc}") from None
    assert seen >= 10


def test_every_toml_block_is_a_settings_file_clankie_reads(tmp_path: Path):
    toml = [b for b in EVERY_BLOCK if b.lang == "toml"]
    assert len(toml) >= 5
    for n, block in enumerate(toml):
        home = tmp_path / f"home{n}"
        home.mkdir()
        (home / "settings.toml").write_text(block.text)
        assert tomllib.loads(block.text), block
        try:
            Settings.load(home, environ={})
        except SettingsError as exc:
            raise AssertionError(f"{block}: {exc}") from None


def test_every_json_block_is_json_and_a_script_loads_as_one(tmp_path: Path):
    scripts = 0
    for block in (b for b in EVERY_BLOCK if b.lang == "json"):
        shown = json.loads(block.text)
        if "turns" in shown:
            path = tmp_path / "script.json"
            path.write_text(block.text)
            assert load_script(path)["turns"], block
            scripts += 1
    assert scripts >= 1
