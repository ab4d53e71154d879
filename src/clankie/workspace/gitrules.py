"""Git's ignore rules and its `filter` attribute, matched by us (SPEC W5, W6, W7).

Owns deciding, for a path beneath the top of a work tree, whether the ignore files say it
is ignored and whether the attribute files name a filter for it. The rules come as bytes
(read by the caller: working-tree files through the confined opener, files above the
workspace from the index's blobs, `info/exclude` and `info/attributes` from the git
directory). Each line is translated to a regular expression by `pathspec`'s translation of
Git's wildmatch rules (a pure function) and compiled by RE2 only, never by Python's
backtracking `re` (W5: matching is linear in the path whatever the rule), into RE2 sets of
bounded size and memory. Bounds: per file (`RULE_FILE_BYTES`, `RULE_LINES`,
`RULE_LINE_CHARS`), per rule (`RULE_PROGRAM`), per call (`CALL_RULE_BYTES` of rule text,
`CALL_RULE_MEMORY` for RE2) and the call's deadline (`check_time`, checked between rules
and between sets); a rule past a bound, or that RE2 refuses, is skipped and counted
(`skipped`). Precedence is Git's: a deeper file over a shallower one, later lines over
earlier ones, `info/attributes` over every `.gitattributes`, `info/exclude` under every
`.gitignore`. The owner's global ignore and attribute files are not read (the Git tools
read nothing outside the repository). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2
from pathspec.patterns.gitignore.spec import (
    _DIR_MARK_CG,
    _DIR_MARK_OPT,
    GitIgnoreSpecPattern,
)

RULE_FILE_BYTES = 1024 * 1024  # the most of one ignore or attributes file that is read
RULE_LINES = 1_000  # patterns of one file that are kept; a line over RULE_LINE_CHARS is not
RULE_LINE_CHARS = 1_000  # (Git has no such bounds; W5 does: a file of 10,000 patterns or of
# one 100 KB line is a repository's way to make matching slow or big)
RULE_PROGRAM = 10_000  # the size (`_size`) of one rule: an ordinary rule is under 500, and
# a `?` alone is 8 RE2 instructions (any UTF-8 character but `/`)
CALL_RULE_BYTES = 256 * 1024  # rule text one call compiles, all its rule files together
MACROS = 1_000  # attribute macros one call keeps (a name each: `[attr]NAME filter=x`)
CALL_RULE_MEMORY = 32 * 1024 * 1024  # what RE2 may use for them (half of W5's 64 MiB): about
# 50 KiB of ordinary rules (`_SET_MEMORY`); past that, rules are skipped and counted
_SET_SIZE = 10_000  # rules share an RE2 set up to this size: a small set keeps its automaton
# small, so matching a path stays fast (measured on 1,000 ordinary rules: sets of about 200
# expressions matched a path 3 to 20 times faster than one set) and each match is short
# between two checks of the deadline
_SET_MEMORY = 160  # bytes of RE2 memory a set gets per unit of size, plus a base: at least
_SET_BASE = 16 * 1024  # 1.4 times what RE2 needs to build and run the set (it wants room for
# 20 states of its automaton, 4 bytes an instruction each: measured up to 111 bytes a unit)
_RULE_MEMORY = 192 * 1024  # for checking one rule alone: a program much past RULE_PROGRAM
# is refused by RE2 itself, so checking costs little whatever the line


def _options(max_mem: int) -> Any:
    options = re2.Options()
    options.max_mem = max_mem
    options.log_errors = False
    options.never_capture = True  # a set has no groups; pathspec's marker group is split
    return options


_ALONE = _options(_RULE_MEMORY)


def _no_deadline() -> None:
    return None


def _lines(data: bytes) -> tuple[list[str], int]:
    """A file's rule lines within the per-file bounds, and how many it had past them."""
    lines: list[str] = []
    past = 0
    for line in data[:RULE_FILE_BYTES].decode("utf-8", "replace").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if len(line) > RULE_LINE_CHARS or len(lines) == RULE_LINES:
            past += 1
        else:
            lines.append(line)
    return lines, past


def _variants(regex: str) -> list[tuple[str, bool]]:
    """The expressions RE2 matches for one translated rule, each with whether it matches
    the path as a folder holding it (`is_dir`). pathspec marks that with a group, which a
    set cannot report: its own RE2 backend splits the rule in two the same way."""
    if regex.endswith(_DIR_MARK_OPT):  # a folder and what is in it, or the path itself
        base = regex[:-len(_DIR_MARK_OPT)]
        return [(f"{base}/", True), (f"{base}$", False)]
    if _DIR_MARK_CG in regex:  # a folder only (`name/`)
        return [(regex.replace(_DIR_MARK_CG, "/"), True)]
    return [(regex, False)]


def _size(regex: str) -> int | None:
    """How big the expression is for RE2 (None: RE2 refuses it): its program's instructions,
    or its length in bytes if more (RE2 keeps an anchored literal prefix out of the program
    of one expression, not out of a set's)."""
    try:
        # Built directly: `re2.compile` would keep it after the call in the module's
        # cache of 128 (a long rule is about 200 KB there)
        compiled = re2._Regexp(regex, _ALONE)
    except re2.error:
        return None
    return max(int(compiled.programsize), len(regex.encode()))


@dataclass(frozen=True, slots=True)
class _Rule:
    index: int  # the line's place among its file's rule lines
    include: bool  # a match ignores (True), or re-includes (`!`, False)
    variants: list[tuple[str, bool]]
    size: int


@dataclass(frozen=True, slots=True)
class _Set:
    compiled: Any  # a compiled re2.Set (the module has no types)
    rules: tuple[tuple[int, bool, bool], ...]  # per expression: index, include, is_dir


class _Matcher:
    """The compiled rules of one file; `match` decides as pathspec's `GitIgnoreSpec` does."""

    def __init__(self, sets: list[_Set], check_time: Callable[[], None]) -> None:
        self._sets = sets
        self._check_time = check_time

    def match(self, path: str) -> tuple[bool | None, int | None]:
        """Whether the last deciding rule ignores (True) or re-includes (False) the path,
        and its index; (None, None) when no rule matches."""
        try:
            text = path.encode()
        except UnicodeEncodeError:  # a name that is not UTF-8 (surrogate escapes): each
            # byte as U+FFFD, as the rule files are read, so `?` and `*` match it as in Git
            text = path.encode("utf-8", "surrogateescape").decode("utf-8", "replace").encode()
        found: list[tuple[int, bool, bool]] = []
        for rule_set in self._sets:
            self._check_time()
            # None is no match: a set that compiled never gives up (RE2 checks at compile
            # time that its automaton runs within its memory, then resets it when full)
            found.extend(rule_set.rules[n] for n in rule_set.compiled.Match(text) or ())
        return _decide(found)


def _decide(found: list[tuple[int, bool, bool]]) -> tuple[bool | None, int | None]:
    """pathspec's RE2 backend's choice among matched rules (a later rule wins, a match of
    the path itself over a match of a folder holding it, except that a folder ignored by a
    later rule stays ignored), taken in line order so it never depends on the order in
    which RE2 reports matches."""
    include: bool | None = None
    index = priority = -1
    for at, includes, is_dir in sorted(found, key=lambda rule: (rule[0], not rule[2])):
        rank = 1 if is_dir else 2
        if ((includes and is_dir and at > index) or (rank == priority and at > index)
                or rank > priority):
            include, index, priority = includes, at, rank
    return include, (index if index >= 0 else None)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass
class _Call:
    """What one tool call's rules share: the compiled files, the macros, the budgets."""

    check_time: Callable[[], None]
    text: int = CALL_RULE_BYTES
    memory: int = CALL_RULE_MEMORY
    skipped: int = 0
    macros: set[str] = field(default_factory=set)
    # by a digest of the file's bytes, never the bytes (400 ignore files of 1 MiB each)
    ignores: dict[bytes, _Matcher | None] = field(default_factory=dict)
    filters: dict[tuple[bytes, int], tuple[_Matcher | None, tuple[bool, ...]]] = \
        field(default_factory=dict)

    def ignore(self, data: bytes | None) -> _Matcher | None:
        """An ignore file compiled, once per content in a call."""
        if not data:
            return None
        key = _digest(data)
        if key not in self.ignores:
            lines, past = _lines(data)
            self.skipped += past
            self.ignores[key] = self.compile(lines)
        return self.ignores[key]

    def filter_lines(self, data: bytes | None) -> tuple[_Matcher | None, tuple[bool, ...]]:
        """The lines of an attributes file that decide `filter`, and how. Lines that define
        a macro (`[attr]name filter=x`) add to `macros`."""
        if not data:
            return None, ()
        key = (_digest(data), len(self.macros))  # macros only grow: their count says which
        if key in self.filters:
            return self.filters[key]
        patterns: list[str] = []
        values: list[bool] = []
        lines, past = _lines(data)
        self.skipped += past
        for raw in lines:
            words = raw.split()
            if not words or words[0].startswith("#"):
                continue
            if words[0].startswith("[attr]"):
                if any(_sets_filter(w, self.macros) for w in words[1:]):
                    if len(self.macros) < MACROS:
                        self.macros.add(words[0][len("[attr]"):])
                    else:
                        self.skipped += 1  # past the call's bound on macros
                continue
            if words[0].startswith("!"):
                continue  # negative patterns are not allowed in attribute files
            decided = None
            for word in words[1:]:
                if _sets_filter(word, self.macros):
                    decided = True
                elif word in ("-filter", "!filter"):
                    decided = False
            if decided is not None:
                patterns.append(words[0])
                values.append(decided)
        self.filters[key] = self.compile(patterns), tuple(values)
        return self.filters[key]

    def compile(self, lines: Sequence[str]) -> _Matcher | None:
        """The lines as one matcher (None: no rule kept). A line that pathspec cannot
        translate, or translates to nothing (an invalid range), matches nothing in Git
        either: left out, not counted."""
        rules: list[_Rule] = []
        for index, line in enumerate(lines):
            self.check_time()
            cost = len(line.encode())
            if cost > self.text:
                self.skipped += 1
                continue
            self.text -= cost
            try:
                regex, include = GitIgnoreSpecPattern.pattern_to_regex(line)
            except ValueError:  # pathspec's GitIgnorePatternError: a trailing backslash
                continue
            if regex is None or include is None:
                continue
            variants = _variants(regex)
            sizes = [_size(expression) for expression, _ in variants]
            total = sum(size or 0 for size in sizes)
            if None in sizes or total > RULE_PROGRAM:
                self.skipped += 1
                continue
            rules.append(_Rule(index, include, variants, total))
        sets: list[_Set] = []
        batch: list[_Rule] = []
        for rule in rules:
            if batch and sum(r.size for r in batch) + rule.size > _SET_SIZE:
                sets.extend(self._sets(batch))
                batch = []
            batch.append(rule)
        sets.extend(self._sets(batch))
        return _Matcher(sets, self.check_time) if sets else None

    def _sets(self, rules: list[_Rule]) -> list[_Set]:
        """The rules as one RE2 set or, when RE2 cannot build that, one set a rule; a rule
        RE2 cannot take alone, or past the call's memory, is skipped and counted."""
        if not rules:
            return []
        self.check_time()
        memory = _SET_BASE + _SET_MEMORY * sum(rule.size for rule in rules)
        if memory <= self.memory:
            compiled = re2.Set.SearchSet(_options(memory))
            try:
                for rule in rules:
                    for expression, _ in rule.variants:
                        compiled.Add(expression)
                compiled.Compile()
            except re2.error:
                pass
            else:
                self.memory -= memory
                return [_Set(compiled, tuple((rule.index, rule.include, is_dir)
                                             for rule in rules
                                             for _, is_dir in rule.variants))]
        if len(rules) == 1:
            self.skipped += 1
            return []
        return [one for rule in rules for one in self._sets([rule])]


def _sets_filter(word: str, macros: set[str]) -> bool:
    return (word.startswith("filter=") and len(word) > len("filter=")) or word in macros


@dataclass(frozen=True, slots=True)
class _Level:
    base: str  # the folder the file lies in, relative to the top: '' or 'a/b/'
    ignore: _Matcher | None
    filters: _Matcher | None  # patterns of lines that set or unset `filter`
    filter_set: tuple[bool, ...]  # per pattern: names a filter (True) or unsets it


class Rules:
    """The ignore and attribute rules in force at one folder of a walk. `below` gives the
    rules of a subfolder; rules are shared, never changed. `check_time` raises when the
    call's time is up (W5: `time_limit`)."""

    def __init__(self, exclude: bytes | None = None, attributes: bytes | None = None,
                 check_time: Callable[[], None] = _no_deadline) -> None:
        self._call = _Call(check_time)
        self._exclude = self._call.ignore(exclude)
        self._info = self._call.filter_lines(attributes)
        self._levels: tuple[_Level, ...] = ()

    @property
    def skipped(self) -> int:
        """Rule lines of this call's rule files left out: past a bound, or refused by RE2."""
        return self._call.skipped

    def below(self, base: str, ignore: bytes | None, attributes: bytes | None) -> Rules:
        """These rules with a folder's own `.gitignore` and `.gitattributes` added."""
        if not ignore and not attributes:
            return self
        child = Rules.__new__(Rules)
        child._call, child._exclude, child._info = self._call, self._exclude, self._info
        filters, values = self._call.filter_lines(attributes)
        child._levels = (*self._levels, _Level(base, self._call.ignore(ignore),
                                               filters, values))
        return child

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether the ignore rules exclude this path (relative to the top)."""
        for level in reversed(self._levels):
            if level.ignore is not None and path.startswith(level.base):
                verdict = _check(level.ignore, path[len(level.base):], is_dir)
                if verdict is not None:
                    return verdict
        if self._exclude is not None:
            return bool(_check(self._exclude, path, is_dir))
        return False

    @property
    def any_filter(self) -> bool:
        """Whether any attribute line in force decides `filter` at all (usually none)."""
        return self._info[0] is not None or any(level.filters is not None
                                                 for level in self._levels)

    def filtered(self, path: str) -> bool:
        """Whether the attributes name a filter (a clean/smudge command) for this path."""
        info, values = self._info
        if info is not None:
            _, index = info.match(path)
            if index is not None:
                return values[index]
        for level in reversed(self._levels):
            if level.filters is not None and path.startswith(level.base):
                _, index = level.filters.match(path[len(level.base):])
                if index is not None:
                    return level.filter_set[index]
        return False


def _check(matcher: _Matcher, path: str, is_dir: bool) -> bool | None:
    return matcher.match(path + "/" if is_dir else path)[0]
