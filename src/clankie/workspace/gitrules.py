"""Git's ignore rules and its `filter` attribute, matched by us (SPEC W6, W7).

Owns deciding, for a path beneath the top of a work tree, whether the ignore files say it
is ignored and whether the attribute files name a filter for it. The rules come as bytes
(read by the caller: working-tree files through the confined opener, files above the
workspace from the index's blobs, `info/exclude` and `info/attributes` from the git
directory); patterns are matched with `pathspec`'s implementation of Git's wildmatch
rules. Precedence is Git's: a deeper file over a shallower one, later lines over earlier
ones, `info/attributes` over every `.gitattributes`, `info/exclude` under every
`.gitignore`. The owner's global ignore and attribute files are not read (the Git tools
read nothing outside the repository). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from pathspec import GitIgnoreSpec

RULE_FILE_BYTES = 1024 * 1024  # the most of one ignore or attributes file that is read
RULE_LINES = 1_000  # patterns of one file that are kept; a line over RULE_LINE_CHARS is not
RULE_LINE_CHARS = 1_000  # (Git has no such bounds; W5 does: a file of 10,000 patterns or of
# one 100 KB line is a repository's way to make matching slow or big)


@dataclass(frozen=True, slots=True)
class _Level:
    base: str  # the folder the file lies in, relative to the top: '' or 'a/b/'
    ignore: GitIgnoreSpec | None
    filters: GitIgnoreSpec | None  # patterns of lines that set or unset `filter`
    filter_set: tuple[bool, ...]  # per pattern: names a filter (True) or unsets it


def _lines(data: bytes) -> list[str]:
    lines = []
    for line in data[:RULE_FILE_BYTES].decode("utf-8", "replace").splitlines():
        if len(line) <= RULE_LINE_CHARS and line.strip() and not line.startswith("#"):
            lines.append(line)
            if len(lines) == RULE_LINES:
                break
    return lines


def _ignore_spec(data: bytes | None) -> GitIgnoreSpec | None:
    return _spec(_lines(data)) if data else None


def _spec(lines: list[str]) -> GitIgnoreSpec | None:
    """The patterns as one matcher; a line that no matcher understands (Git would match
    nothing with it either) is left out, never an error."""
    try:
        spec = GitIgnoreSpec.from_lines(lines)
    except Exception:  # re.error, RE2's errors: whatever the input
        kept = [line for line in lines if _single(line)]
        try:
            spec = GitIgnoreSpec.from_lines(kept)
        except Exception:  # RE2 cannot hold them together: one by one
            spec = GitIgnoreSpec.from_lines(kept, backend="simple")
    return spec if spec.patterns else None


def _single(pattern: str) -> bool:
    """Whether the pattern compiles to exactly one pattern (so a match's index names its
    line), whatever it holds."""
    try:
        return len(GitIgnoreSpec.from_lines([pattern]).patterns) == 1
    except Exception:  # re.error, RE2's own errors
        return False


def _filter_lines(data: bytes | None, macros: set[str]
                  ) -> tuple[GitIgnoreSpec | None, tuple[bool, ...]]:
    """The lines of an attributes file that decide `filter`, and how. Lines that define a
    macro (`[attr]name filter=x`) add to `macros`."""
    if not data:
        return None, ()
    patterns: list[str] = []
    values: list[bool] = []
    for raw in _lines(data):
        words = raw.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0].startswith("[attr]"):
            if any(_sets_filter(w, macros) for w in words[1:]):
                macros.add(words[0][len("[attr]"):])
            continue
        if words[0].startswith("!"):
            continue  # negative patterns are not allowed in attribute files
        decided = None
        for word in words[1:]:
            if _sets_filter(word, macros):
                decided = True
            elif word in ("-filter", "!filter"):
                decided = False
        if decided is not None and _single(words[0]):
            patterns.append(words[0])
            values.append(decided)
    return _spec(patterns), tuple(values)


def _sets_filter(word: str, macros: set[str]) -> bool:
    return (word.startswith("filter=") and len(word) > len("filter=")) or word in macros


class Rules:
    """The ignore and attribute rules in force at one folder of a walk. `below` gives the
    rules of a subfolder; rules are shared, never changed."""

    def __init__(self, exclude: bytes | None = None, attributes: bytes | None = None) -> None:
        self._macros: set[str] = set()
        # One walk's ignore files compiled once each: many folders hold the same file
        self._compiled: dict[bytes, GitIgnoreSpec | None] = {}
        self._exclude = _ignore_spec(exclude)
        self._info = _filter_lines(attributes, self._macros)
        self._levels: tuple[_Level, ...] = ()

    def below(self, base: str, ignore: bytes | None, attributes: bytes | None) -> Rules:
        """These rules with a folder's own `.gitignore` and `.gitattributes` added."""
        if not ignore and not attributes:
            return self
        child = Rules.__new__(Rules)
        child._macros, child._compiled = self._macros, self._compiled
        child._exclude, child._info = self._exclude, self._info
        filters, values = _filter_lines(attributes, self._macros)
        if ignore and ignore not in self._compiled:
            self._compiled[ignore] = _ignore_spec(ignore)
        child._levels = (*self._levels, _Level(base, self._compiled.get(ignore or b""),
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
            found = info.check_file(path)
            if found.index is not None:
                return values[found.index]
        for level in reversed(self._levels):
            if level.filters is not None and path.startswith(level.base):
                found = level.filters.check_file(path[len(level.base):])
                if found.index is not None:
                    return level.filter_set[found.index]
        return False


def _check(spec: GitIgnoreSpec, path: str, is_dir: bool) -> bool | None:
    return spec.check_file(path + "/" if is_dir else path).include
