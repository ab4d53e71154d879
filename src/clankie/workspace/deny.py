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
    _compiled: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        alternatives = "|".join(f"(?:{_regex(p)})" for p in self.patterns if p.strip("/"))
        regex = f"(?:^|.*/)(?:{alternatives})$" if alternatives else r"(?!)"
        object.__setattr__(self, "_compiled", re.compile(regex, re.IGNORECASE | re.DOTALL))

    def denies(self, path: str) -> bool:
        """Whether `path` (relative, '/'-separated) is a secret-like path."""
        return path not in ("", ".") and self._compiled.match(path) is not None


@functools.cache
def deny_list(patterns: tuple[str, ...] = DEFAULT_DENY) -> DenyList:
    """The compiled list for these patterns, compiled once per distinct list."""
    return DenyList(patterns)
