"""Git's ignore rules and the attributes the Git tools read, matched by us (SPEC W5-W7).

Owns deciding, for a path beneath the top of a work tree, whether the ignore files say it
is ignored and what the attribute files set for it (`filter`, `text`, `eol`, `crlf`, with
macros). The rules come as bytes
(read by the caller: working-tree files through the confined opener, files above the
workspace from the index's blobs, `info/exclude` and `info/attributes` from the git
directory). Each line is translated to a regular expression over bytes by our own port of
Git's `parse_path_pattern` and `wildmatch` (pure functions; a rule matches the path itself,
never what lies in a folder it names) and compiled by RE2 only, never by Python's
backtracking `re` (W5: matching is linear in the path whatever the rule), into RE2 sets of
bounded size and memory. Bounds: per file (`RULE_FILE_BYTES`, `RULE_LINES`,
`RULE_LINE_CHARS`), per rule (`RULE_PROGRAM`), per call (`CALL_RULE_BYTES` of rule text,
`CALL_RULE_MEMORY` for RE2, each set's share also drawn on the call's memory account,
`bounds.Bounds`, when one is given) and the call's deadline (`check_time`, checked as a
file's lines are read, between rules and between sets); a rule past a bound, or that RE2
refuses, or for which the account has no room, is skipped and counted (`skipped`).
Precedence is Git's: a deeper file over a shallower one, later lines over earlier ones,
`info/attributes` over every `.gitattributes`, `info/exclude` under every `.gitignore`.
The owner's global ignore and attribute files are not read (the Git tools read nothing
outside the repository). Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import re2

from .bounds import Bounds

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
    options.never_capture = True
    options.encoding = re2.Options.Encoding.LATIN1  # paths and rules as bytes, as Git's
    return options


_ALONE = _options(_RULE_MEMORY)


def _no_deadline() -> None:
    return None


def _lines(data: bytes, check_time: Callable[[], None] = _no_deadline
           ) -> tuple[list[bytes], int]:
    """A file's rule lines as Git reads them (a UTF-8 byte order mark skipped, lines ended
    by LF with a CR before it dropped, blank lines and `#` comments left out, unescaped
    trailing spaces trimmed), within the per-file bounds, and how many it had past them."""
    lines: list[bytes] = []
    past = 0
    data = data[:RULE_FILE_BYTES]
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for n, line in enumerate(data.split(b"\n")):
        if not n % 4096:
            check_time()
        line = line.removesuffix(b"\r")
        if not line or line.startswith(b"#"):
            continue
        kept = len(line.rstrip(b" "))  # trimming keeps at most one space past these (an
        # escaped one), so a longer line is over the bound untrimmed and the rest is not read
        if kept > RULE_LINE_CHARS:
            past += 1
            continue
        line = _trimmed(line[:kept + 1])
        if len(line) > RULE_LINE_CHARS or len(lines) == RULE_LINES:
            past += 1
        else:
            lines.append(line)
    return lines, past


def _trimmed(line: bytes) -> bytes:
    """Git's `trim_trailing_spaces`: spaces at the end go unless escaped by a backslash."""
    last_space = None
    i = 0
    while i < len(line):
        if line[i] == 0x20:
            last_space = i if last_space is None else last_space
        elif line[i] == 0x5C:
            i += 1
            if i >= len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


@dataclass(frozen=True, slots=True)
class Pattern:
    """One rule line as Git's `parse_path_pattern` reads it."""

    body: bytes  # without `!`, the trailing `/` and (for a path pattern) the leading `/`
    negative: bool
    must_be_dir: bool
    basename: bool  # no `/` in it: matched against the last component, at any depth
    prefix: int  # Git's `nowildcardlen`: the literal bytes compared before wildmatch runs


def parse_pattern(line: bytes, negation: bool = True) -> Pattern:
    negative = negation and line.startswith(b"!")
    body = line[1:] if negative else line
    prefix = _simple_length(body)
    must_be_dir = body.endswith(b"/")
    if must_be_dir:
        body = body[:-1]
    prefix = min(prefix, len(body))
    basename = b"/" not in body
    if not basename and body.startswith(b"/"):
        body, prefix = body[1:], prefix - 1
    return Pattern(body, negative, must_be_dir, basename, max(prefix, 0))


def _simple_length(body: bytes) -> int:
    for i, byte in enumerate(body):
        if byte in b"*?[\\":
            return i
    return len(body)


_NOT_IN_NAME = (0, ord("/"))  # no component holds these: wildcards never match them
_ANY_IN_NAME = r"[^/\x00]"
_CLASSES: dict[bytes, Callable[[int], bool]] = {
    b"alnum": lambda c: chr(c).isalnum(), b"alpha": lambda c: chr(c).isalpha(),
    b"blank": lambda c: c in (9, 32), b"cntrl": lambda c: c < 32 or c == 127,
    b"digit": lambda c: 48 <= c <= 57, b"graph": lambda c: 33 <= c <= 126,
    b"lower": lambda c: 97 <= c <= 122, b"print": lambda c: 32 <= c <= 126,
    b"punct": lambda c: 33 <= c <= 126 and not chr(c).isalnum(),
    b"space": lambda c: c in (9, 10, 13, 32), b"upper": lambda c: 65 <= c <= 90,
    b"xdigit": lambda c: chr(c) in "0123456789abcdefABCDEF",
}  # (ASCII only, as Git's own ctype: bytes past 127 are in no class)


def _byte(c: int) -> str:
    return f"\\x{c:02x}"


def _bracket(body: bytes, at: int) -> tuple[str, int] | None:
    """The class for the bracket expression starting at `body[at] == '['`, as Git's
    wildmatch reads it, and where it ends; None when Git's wildmatch aborts on it (an
    unclosed bracket, an unknown `[:class:]`) or it can match no byte of a name: the rule
    then matches nothing."""
    p = at + 1
    members: set[int] = set()
    negated = p < len(body) and body[p] in b"!^"
    if negated:
        p += 1
    previous = 0
    first = True
    while first or (p < len(body) and body[p] != ord("]")):
        first = False
        if p >= len(body):
            return None
        c = body[p]
        if c == ord("\\"):
            p += 1
            if p >= len(body):
                return None
            c = body[p]
            members.add(c)
        elif c == ord("-") and previous and p + 1 < len(body) and body[p + 1] != ord("]"):
            p += 1
            c = body[p]
            if c == ord("\\"):
                p += 1
                if p >= len(body):
                    return None
                c = body[p]
            members.update(range(previous, c + 1))
            c = 0
        elif c == ord("[") and p + 1 < len(body) and body[p + 1] == ord(":"):
            end = body.find(b"]", p + 2)
            if end < 0:
                return None
            if end - 1 < p + 2 or body[end - 1] != ord(":"):  # not a class: a '['
                members.add(c)
            else:
                test = _CLASSES.get(body[p + 2:end - 1])
                if test is None:
                    return None
                members.update(b for b in range(128) if test(b))
                p, c = end, 0
        else:
            members.add(c)
        previous = c
        p += 1
    if p >= len(body):
        return None
    chosen = (set(range(256)) - members) if negated else members
    chosen.difference_update(_NOT_IN_NAME)
    if not chosen:
        return None
    return _class(sorted(chosen)), p + 1


def _class(chosen: list[int]) -> str:
    """A class of bytes (sorted, not empty), written as ranges."""
    ranges: list[list[int]] = []
    for c in chosen:
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return "[" + "".join(_byte(a) if a == b else f"{_byte(a)}-{_byte(b)}"
                         for a, b in ranges) + "]"


def _wild(body: bytes, start_is_top: bool) -> str | None:
    """Git's wildmatch with `WM_PATHNAME` as a regular expression over bytes (Latin-1 for
    RE2); None when it can match nothing. `start_is_top`: the pattern begins here (its
    `**` is then one at the start, as in Git, even after a literal prefix was cut)."""
    out: list[str] = []
    p = 0
    while p < len(body):
        c = body[p]
        if c == ord("\\"):
            if p + 1 >= len(body):
                return None  # a trailing backslash matches nothing
            out.append(_byte(body[p + 1]))
            p += 2
        elif c == ord("?"):
            out.append(_ANY_IN_NAME)
            p += 1
        elif c == ord("["):
            found = _bracket(body, p)
            if found is None:
                return None
            out.append(found[0])
            p = found[1]
        elif c == ord("*"):
            stars = p
            while p < len(body) and body[p] == ord("*"):
                p += 1
            double = p - stars >= 2
            before_ok = (stars == 0 and start_is_top) or (stars > 0 and body[stars - 1] == ord("/"))
            after_slash = body[p:p + 1] == b"/" or body[p:p + 2] == b"\\/"
            if double and before_ok and p == len(body):
                out.append(r"[^\x00]*")
            elif double and before_ok and after_slash:
                out.append(r"(?:[^\x00]*/)?")
                p += 1 if body[p:p + 1] == b"/" else 2
            else:
                out.append(_ANY_IN_NAME + "*")
        else:
            out.append(_byte(c))
            p += 1
    return "".join(out)


def translate(line: bytes, negation: bool = True) -> tuple[str, bool] | None:
    """A rule line as a regular expression over `PATH NUL KIND` (KIND `d` for a folder, `f`
    otherwise; PATH relative to the rule file's folder), and whether it excludes (`!`:
    False); None when Git would match nothing with it."""
    pattern = parse_pattern(line, negation)
    if not pattern.body:
        return None
    kind = r"\x00d$" if pattern.must_be_dir else r"\x00[df]$"
    if pattern.basename:
        body = _wild(pattern.body, True)
        if body is None:
            return None
        return rf"^(?:[^\x00]*/)?{body}{kind}", not pattern.negative
    literal = "".join(_byte(c) for c in pattern.body[:pattern.prefix])
    rest = _wild(pattern.body[pattern.prefix:], True)
    if rest is None:
        return None
    return f"^{literal}{rest}{kind}", not pattern.negative


def _size(regex: str) -> int | None:
    """How big the expression is for RE2 (None: RE2 refuses it): its program's instructions,
    or its length in bytes if more (RE2 keeps an anchored literal prefix out of the program
    of one expression, not out of a set's)."""
    try:
        # Built directly: `re2.compile` would keep it after the call in the module's
        # cache of 128 (a long rule is about 200 KB there)
        compiled = re2._Regexp(regex.encode("ascii"), _ALONE)
    except re2.error:
        return None
    return max(int(compiled.programsize), len(regex))


@dataclass(frozen=True, slots=True)
class _Rule:
    index: int  # the line's place among its file's rule lines
    include: bool  # a match ignores (True), or re-includes (`!`, False)
    expression: str
    size: int


@dataclass(frozen=True, slots=True)
class _Set:
    compiled: Any  # a compiled re2.Set (the module has no types)
    rules: tuple[tuple[int, bool], ...]  # per expression: the line's index, include


class _Matcher:
    """The compiled rules of one file."""

    def __init__(self, sets: list[_Set], check_time: Callable[[], None]) -> None:
        self._sets = sets
        self._check_time = check_time

    def matches(self, path: str, is_dir: bool) -> list[tuple[int, bool]]:
        """The rules that match the path itself (never a folder holding it: Git excludes
        what lies in an excluded folder by not looking further, which the caller does),
        as (index, include), in line order. The path is matched as the bytes of its name:
        a name that is not UTF-8 as Git sees it."""
        text = path.encode("utf-8", "surrogateescape") + (b"\x00d" if is_dir else b"\x00f")
        found: list[tuple[int, bool]] = []
        for rule_set in self._sets:
            self._check_time()
            # None is no match: a set that compiled never gives up (RE2 checks at compile
            # time that its automaton runs within its memory, then resets it when full)
            found.extend(rule_set.rules[n] for n in rule_set.compiled.Match(text) or ())
        return sorted(found)

    def match(self, path: str, is_dir: bool) -> bool | None:
        """Git's `last_matching_pattern_from_list`: whether the last rule that matches
        excludes (True) or re-includes (False) the path; None when none matches."""
        found = self.matches(path, is_dir)
        return found[-1][1] if found else None


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


# An attribute's state on a line: True (`name`), False (`-name`), None (`!name`: back to
# unspecified, which still decides), or a string (`name=value`)
State = bool | str | None
ATTRIBUTES = ("filter", "text", "eol", "crlf")  # what the Git tools need to know
_BUILTIN_MACROS: dict[str, tuple[tuple[str, State], ...]] = {
    "binary": (("diff", False), ("merge", False), ("text", False))}


def _state(word: str) -> tuple[str, State]:
    if word.startswith("-"):
        return word[1:], False
    if word.startswith("!"):
        return word[1:], None
    name, equal, value = word.partition("=")
    return name, (value if equal else True)


@dataclass(frozen=True, slots=True)
class _Attributes:
    """The lines of one attributes file that set anything the tools need: a matcher of
    their patterns and, per pattern, its states."""

    matcher: _Matcher | None
    states: tuple[tuple[tuple[str, State], ...], ...]


@dataclass
class _Call:
    """What one tool call's rules share: the compiled files, the macros, the budgets."""

    check_time: Callable[[], None]
    bounds: Bounds | None = None  # the call's memory account, which RE2's memory draws on
    text: int = CALL_RULE_BYTES
    memory: int = CALL_RULE_MEMORY
    skipped: int = 0
    macros: dict[str, tuple[tuple[str, State], ...]] = field(
        default_factory=lambda: dict(_BUILTIN_MACROS))
    # by a digest of the file's bytes, never the bytes (400 ignore files of 1 MiB each)
    ignores: dict[bytes, _Matcher | None] = field(default_factory=dict)
    attributes: dict[tuple[bytes, int, bool], _Attributes] = field(default_factory=dict)

    def ignore(self, data: bytes | None) -> _Matcher | None:
        """An ignore file compiled, once per content in a call."""
        if not data:
            return None
        key = _digest(data)
        if key not in self.ignores:
            lines, past = _lines(data, self.check_time)
            self.skipped += past
            self.ignores[key] = self.compile(lines, True)
        return self.ignores[key]

    def attribute_lines(self, data: bytes | None, macros_allowed: bool) -> _Attributes:
        """The lines of an attributes file that set an attribute of `ATTRIBUTES` or a macro
        that does. Lines that define a macro (`[attr]name ...`, read only where Git reads
        them: `info/attributes` and the top folder's file) add to `macros`."""
        if not data:
            return _Attributes(None, ())
        key = (_digest(data), len(self.macros), macros_allowed)  # macros only grow
        if key in self.attributes:
            return self.attributes[key]
        patterns: list[bytes] = []
        states: list[tuple[tuple[str, State], ...]] = []
        lines, past = _lines(data, self.check_time)
        self.skipped += past
        for raw in lines:
            words = raw.split()
            if not words:
                continue
            said = tuple(_state(w.decode("utf-8", "replace")) for w in words[1:])
            kept = tuple(s for s in said if s[0] in ATTRIBUTES or s[0] in self.macros)
            if words[0].startswith(b"[attr]"):
                if macros_allowed and kept:
                    if len(self.macros) < MACROS:
                        self.macros[words[0][6:].decode("utf-8", "replace")] = kept
                    else:
                        self.skipped += 1  # past the call's bound on macros
                continue
            if words[0].startswith(b"!") or not kept:
                continue  # negative patterns are not allowed in attribute files
            patterns.append(words[0])
            states.append(kept)
        found = _Attributes(self.compile(patterns, False), tuple(states))
        self.attributes[key] = found
        return found

    def compile(self, lines: Sequence[bytes], negation: bool) -> _Matcher | None:
        """The lines as one matcher (None: no rule kept). A line Git matches nothing with
        (an unclosed bracket, a trailing backslash) is left out, not counted."""
        rules: list[_Rule] = []
        for index, line in enumerate(lines):
            self.check_time()
            cost = len(line)
            if cost > self.text:
                self.skipped += 1
                continue
            self.text -= cost
            found = translate(line, negation)
            if found is None:
                continue
            size = _size(found[0])
            if size is None or size > RULE_PROGRAM:
                self.skipped += 1
                continue
            rules.append(_Rule(index, found[1], found[0], size))
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
        RE2 cannot take alone, or past the call's memory (`CALL_RULE_MEMORY`; with an
        account, also once the call would hold more than half of it: the other half is left
        for reading the repository), is skipped and counted. What RE2 may use for a set is
        counted on the account as held until the call ends (the rules are kept that long)."""
        if not rules:
            return []
        self.check_time()
        memory = _SET_BASE + _SET_MEMORY * sum(rule.size for rule in rules)
        if memory <= self.memory and (self.bounds is None or self.bounds.room(
                memory + self.bounds.memory // 2)):  # (the other half left for reading)
            compiled = re2.Set.SearchSet(_options(memory))
            try:
                for rule in rules:
                    compiled.Add(rule.expression)
                compiled.Compile()
            except re2.error:
                pass
            else:
                self.memory -= memory
                if self.bounds is not None:
                    self.bounds.take(memory, "the compiled ignore and attribute rules")
                return [_Set(compiled, tuple((rule.index, rule.include) for rule in rules))]
        if len(rules) == 1:
            self.skipped += 1
            return []
        return [one for rule in rules for one in self._sets([rule])]

    def fill(self, decided: dict[str, State], states: Sequence[tuple[str, State]],
             depth: int = 0) -> None:
        """Git's `fill_one`: a matching line's states, last first, each that is not yet
        decided; a macro set true brings its own states in at the same place."""
        for name, value in reversed(states):
            if name in decided:
                continue
            decided[name] = value
            macro = self.macros.get(name)
            if value is True and macro is not None and depth < 8:
                self.fill(decided, macro, depth + 1)


@dataclass(frozen=True, slots=True)
class _Level:
    base: str  # the folder the file lies in, relative to the top: '' or 'a/b/'
    ignore: _Matcher | None
    attributes: _Attributes


class Rules:
    """The ignore and attribute rules in force at one folder of a walk. `below` gives the
    rules of a subfolder; rules are shared, never changed. `check_time` raises when the
    call's time is up (W5: `time_limit`); RE2's memory is counted on `bounds` when given."""

    def __init__(self, exclude: bytes | None = None, attributes: bytes | None = None,
                 check_time: Callable[[], None] = _no_deadline,
                 bounds: Bounds | None = None) -> None:
        self._call = _Call(check_time, bounds)
        self._exclude = self._call.ignore(exclude)
        self._info = self._call.attribute_lines(attributes, True)
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
        child._levels = (*self._levels, _Level(
            base, self._call.ignore(ignore), self._call.attribute_lines(attributes,
                                                                        base == "")))
        return child

    def ignored(self, path: str, is_dir: bool) -> bool:
        """Whether the ignore rules exclude this path itself (relative to the top): the
        last rule that matches it, in the deepest file that has one, then `info/exclude`.
        Whether a folder above it is excluded is the caller's to ask (Git's walk)."""
        for level in reversed(self._levels):
            if level.ignore is not None and path.startswith(level.base):
                verdict = level.ignore.match(path[len(level.base):], is_dir)
                if verdict is not None:
                    return verdict
        if self._exclude is not None:
            return bool(self._exclude.match(path, is_dir))
        return False

    @property
    def any_attribute(self) -> bool:
        """Whether any attribute line in force sets anything the tools read (usually none)."""
        return self._info.matcher is not None or any(
            level.attributes.matcher is not None for level in self._levels)

    def attributes(self, path: str) -> dict[str, State]:
        """The attributes of `ATTRIBUTES` decided for a file (relative to the top), as
        Git's `git_check_attr` decides them: `info/attributes` first, then the deepest
        file first, each file's last matching line first."""
        decided: dict[str, State] = {}
        for base, found in [("", self._info)] + [(level.base, level.attributes)
                                                 for level in reversed(self._levels)]:
            if found.matcher is None or not path.startswith(base):
                continue
            for index, _ in reversed(found.matcher.matches(path[len(base):], False)):
                self._call.fill(decided, found.states[index])
        return decided

    def filtered(self, path: str) -> bool:
        """Whether the attributes name a filter (a clean/smudge command) for this path."""
        if not self.any_attribute:
            return False
        value = self.attributes(path).get("filter")
        return isinstance(value, str) and bool(value)
