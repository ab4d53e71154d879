"""The code blocks of the README and of its guides under docs/, as the tests read them
(issue 42; the rule is docs/decisions.md ("Issue 42: a README people can read")):

- every code block is fenced and names what it holds: `sh` (commands), `toml` (settings),
  `json` (a script), `text` (what a command prints, or a file that is none of ours);
- an `sh` block is run as written by tests/e2e/test_guides.py, unless its first line is
  `# not run here: REASON`, which says, where the reader sees it, why not; the commands of
  every `sh` block are still parsed: each `clankie` command and option must exist
  (tests/test_guides.py), and `clankie COMMAND --help` is run (tests/e2e/test_guides.py);
- a `toml` block is read by clankie's own settings reader; a `json` script by the scripted
  model's parser.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDES = tuple(ROOT / "docs" / f"{name}.md" for name in (
    "models", "cli", "phone", "coding-agents", "notifications", "security", "troubleshooting"))
DOCUMENTS = (README, *GUIDES)
LANGUAGES = frozenset({"sh", "toml", "json", "text"})
NOT_RUN = "# not run here: "
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# Where a command is split in two: `;`, `&&`, `||`, a pipe, `&`.
SEPARATORS = frozenset({";", "&&", "||", "|", "&"})
ASSIGNMENT = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.DOTALL)
SUBSTITUTION = re.compile(r"\$\(([^()]*)\)")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    lang: str
    text: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def reason(self) -> str | None:
        """Why the block is not run (`# not run here: REASON`), or None: it is run."""
        first = self.text.split("\n", 1)[0]
        return first.removeprefix(NOT_RUN).strip() if first.startswith(NOT_RUN) else None

    @property
    def runs(self) -> bool:
        return self.lang == "sh" and self.reason is None


def blocks(path: Path) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    return [Block(path, text.count("\n", 0, m.start()) + 1, m.group(1).strip(), m.group(2))
            for m in FENCE.finditer(text)]


def indented_code(path: Path) -> list[int]:
    """Lines that start an indented (unfenced) code block: four spaces after a blank line,
    outside every fence. The guides have none, so no block escapes the rule."""
    found, fenced, blank = [], False, True
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and blank and line.startswith("    ") and line.strip():
            found.append(number)
        blank = not line.strip()
    return found


def logical_lines(text: str) -> list[str]:
    """The block's lines, a line ending in a backslash joined with the next."""
    return text.replace("\\\n", " ").splitlines()


def commands(line: str) -> list[list[str]]:
    """The simple commands of one line as the shell splits them into words (quotes
    removed, comments dropped); a `$(...)` is a command of its own, and a word in its place."""
    found: list[list[str]] = []
    while (inner := SUBSTITUTION.search(line)) is not None:
        found += commands(inner.group(1))
        line = line[:inner.start()] + "SUBSTITUTED" + line[inner.end():]
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    current: list[str] = []
    for word in lexer:
        if word in SEPARATORS:
            found.append(current)
            current = []
        else:
            current.append(word)
    found.append(current)
    return [c for c in found if c]


def split_assignments(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """`NAME=value` words before the command (and `export NAME=value`), and the rest."""
    if words[:1] == ["export"]:
        words = words[1:]
    assigned: dict[str, str] = {}
    while words and (match := ASSIGNMENT.match(words[0])) is not None:
        assigned[match.group(1)] = match.group(2)
        words = words[1:]
    return assigned, words


def block_commands(block: Block) -> list[list[str]]:
    return [words for line in logical_lines(block.text) for words in commands(line)]


def option_words(words: list[str]) -> list[str]:
    """The options a command line uses: `--name`, `--name=value`, `[--name]`, `-x`."""
    return [w.strip("[]").split("=", 1)[0] for w in words
            if w.strip("[]").startswith("-") and w.strip("[]") not in ("-", "--")]


def clankie_command(words: list[str]) -> tuple[tuple[str, ...], list[str]]:
    """For `clankie ...` as written in a block: the command's path (`conversations answer`)
    and what is wrong with the line: a command or an option `clankie` does not have, or a
    group named without one of its commands."""
    import click

    from clankie.cli.main import app

    command: click.Command = app
    path: list[str] = []
    rest = words[1:]
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        found = command.get_command(click.Context(command), rest[0])
        if found is None:
            return tuple(path), [f"`clankie {' '.join(path)}` has no command {rest[0]!r}"]
        command, path, rest = found, [*path, rest[0]], rest[1:]
    wrong: list[str] = []
    known = {"--help"} | {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
    options = option_words(rest)
    wrong += [f"`clankie {' '.join(path)}` has no option {o}" for o in options if o not in known]
    if isinstance(command, click.Group) and not {"--help", "--version"} & set(options):
        wrong.append(f"`clankie {' '.join(path)}` is a group: it needs one of its commands")
    return tuple(path), wrong
