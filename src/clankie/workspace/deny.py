"""The secret-path deny list of SPEC W4: glob patterns on the whole relative path, any depth.

Owns the matching rule. A pattern matches a relative path when it matches the path or any
of its trailing parts starting at a component boundary, case-insensitively: `.env`
matches `app/.env` and `APP/.ENV`; `.ssh/**` matches `.ssh`, `.ssh/id` and `home/.ssh/x`.
In a pattern `*` and `?` stay inside one component and `**` crosses components.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

DEFAULT_DENY: tuple[str, ...] = (
    ".env", ".env.*", "*.pem", "*.key", "*.p12", "*.pfx", "id_rsa*", "id_ed25519*",
    "id_ecdsa*", ".ssh/**", ".aws/**", ".netrc", ".git/**",
)


def _regex(pattern: str) -> str:
    body = pattern.strip("/")
    tail = ""
    if body.endswith("/**"):
        body, tail = body[:-3], "(?:/.*)?"
    out = []
    i = 0
    while i < len(body):
        if body.startswith("**", i):
            out.append(".*")
            i += 2
        elif body[i] == "*":
            out.append("[^/]*")
            i += 1
        elif body[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(body[i]))
            i += 1
    return "".join(out) + tail


@dataclass(frozen=True)
class DenyList:
    patterns: tuple[str, ...] = DEFAULT_DENY
    # Three matchers, one rule: a pattern with no `/` can only match the last component
    # (`.env`); `X/**` matches where a component is X (`.ssh/**`); any other pattern is
    # tried on each trailing part of the path. Split so that the common cases look at a
    # short string: the Git tools ask this of every path the index names.
    _names: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _folders: re.Pattern[str] = field(init=False, repr=False, compare=False)
    _others: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        names, folders, others = [], [], []
        for pattern in self.patterns:
            body = pattern.strip("/")
            if not body:
                continue
            if body.endswith("/**") and "/" not in body[:-3] and "**" not in body[:-3]:
                folders.append(_regex(body[:-3]))
            elif "/" not in body and "**" not in body:
                names.append(_regex(body))
            else:
                others.append(_regex(body))
        flags = re.IGNORECASE | re.DOTALL
        object.__setattr__(self, "_names", re.compile(_any(names), flags))
        object.__setattr__(self, "_folders",
                           re.compile(f"(?:^|/)(?:{_any(folders)})(?:/|$)", flags))
        object.__setattr__(self, "_others", re.compile(f"(?:^|.*/)(?:{_any(others)})$", flags))

    def denies(self, path: str) -> bool:
        """Whether `path` (relative, '/'-separated) is a secret-like path."""
        if path in ("", "."):
            return False
        return (self._names.fullmatch(path.rpartition("/")[2]) is not None
                or self._folders.search(path) is not None
                or self._others.match(path) is not None)


def _any(alternatives: list[str]) -> str:
    """One regular expression of the alternatives; one that matches nothing if none."""
    return "|".join(f"(?:{a})" for a in alternatives) if alternatives else "(?!)"


@functools.cache
def deny_list(patterns: tuple[str, ...] = DEFAULT_DENY) -> DenyList:
    """The compiled list for these patterns, compiled once per distinct list."""
    return DenyList(patterns)
