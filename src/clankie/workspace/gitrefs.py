"""Refs and revisions, read by us (SPEC W7): `HEAD`, loose refs, `packed-refs`.

Owns what a revision a model gives may look like (a branch or tag name, `HEAD`, an object
ID or a prefix of at least 4 hex digits, each with `~N` or `^N`; anything else is
`invalid_argument`) and what commit it names, found as `git rev-parse` would find it:
`HEAD`, a full name (`refs/heads/main`), then `refs/NAME`, `refs/tags/NAME`,
`refs/heads/NAME`, `refs/remotes/NAME`, `refs/remotes/NAME/HEAD`, then an object ID or an
unambiguous prefix of a commit; tags peeled to their commit; each `~` or `^` step asks the
call's deadline, and a commit met again on the way (a cycle, which only objects whose names
lie can make) is `unsafe_repository`, found, not walked. Every ref file is read through the
git directory's confined opener; a symbolic ref is followed only to a well-formed name under
`refs/`, at most 5 deep. `packed-refs` is looked through a piece at a time for each name
asked, never kept (W5). Replace refs, grafts and `shallow` are never read.
"""

from __future__ import annotations

import os
import re
import stat

from clankie.core.vocabulary import WorkspaceCode

from .confine import Refusal
from .gitfiles import READ, GitDir, chunks, too_large
from .gitobjects import ObjectStore
from .gittrees import cycle, parse_commit

REF_BYTES = 4_096
PACKED_REFS_BYTES = 16 * 1024 * 1024
SYMREF_DEPTH = 5
TAG_DEPTH = 10
_NAME = re.compile(r"[A-Za-z0-9._/+,=@-]{1,200}")
_STEPS = re.compile(r"(?:[~^][0-9]{0,6})*")
_STEP = re.compile(r"([~^])([0-9]*)")
_RULES = ("refs/{}", "refs/tags/{}", "refs/heads/{}", "refs/remotes/{}", "refs/remotes/{}/HEAD")


def bad_revision() -> Refusal:
    return Refusal(WorkspaceCode.INVALID_ARGUMENT,
                   "a revision is a branch or tag name, HEAD, an object ID "
                   "or a prefix of at least 4 hex digits, with ~N or ^N if needed; no ':', "
                   "'@{', ranges or leading '-'")


def ref_name_ok(name: str) -> bool:
    """Whether `name` is a well-formed ref name (Git's `check-ref-format`, on a narrower
    alphabet): no empty, `.`-led or `.lock` component, no `..` or `@{`."""
    if not _NAME.fullmatch(name) or ".." in name or "@{" in name or name == "@":
        return False
    parts = name.split("/")
    return all(p and not p.startswith(".") and not p.endswith(".lock") for p in parts) \
        and not name.endswith(".")


def parse_revision(text: str) -> tuple[str, list[tuple[str, int]]]:
    """The revision's base name and its steps (`~` or `^`, with a number): neither sign
    can be part of a name."""
    cut = min((i for i in (text.find("~"), text.find("^")) if i >= 0), default=len(text))
    base, steps = text[:cut], text[cut:]
    if not base or base.startswith("-") or not ref_name_ok(base) \
            or not _STEPS.fullmatch(steps):
        raise bad_revision()
    return base, [(sign, int(count) if count else 1) for sign, count in _STEP.findall(steps)]


class Refs:
    """The refs of one git directory, for one tool call."""

    def __init__(self, gitdir: GitDir, store: ObjectStore) -> None:
        self.gitdir = gitdir
        self.store = store
        self.hash_size = store.hash_size

    def head(self) -> tuple[str | None, bytes | None]:
        """The checked-out branch (None when detached) and the commit HEAD names (None
        before the first commit)."""
        text = self._file("HEAD")
        if text is None:
            return None, None
        if text.startswith("ref: "):
            target = text[5:].strip()
            if not target.startswith("refs/") or not ref_name_ok(target):
                return None, None
            branch = target[len("refs/heads/"):] if target.startswith("refs/heads/") else None
            return branch, self.resolve(target)
        return None, self._hex(text)

    def resolve(self, name: str, depth: int = 0) -> bytes | None:
        """The object a ref names (`HEAD` or a full name under `refs/`), or None."""
        text = self._file(name)
        if text is None and name.startswith("refs/"):
            return self._packed_ref(name)
        if text is None:
            return None
        if text.startswith("ref: "):
            target = text[5:].strip()
            if depth >= SYMREF_DEPTH or not target.startswith("refs/") \
                    or not ref_name_ok(target):
                return None
            return self.resolve(target, depth + 1)
        return self._hex(text)

    def commit(self, revision: str) -> bytes | None:
        """The commit a revision names, or None when it names none; `invalid_argument` when
        it is not one these tools take."""
        base, steps = parse_revision(revision)
        oid = self._base(base)
        if oid is None:
            return None
        oid = self.peeled(oid)
        # Each step goes to a parent; a commit met again is a cycle (only objects whose
        # names lie make one), found by Brent's method without keeping the way walked.
        mark, walked, power = oid, 0, 1
        for sign, count in steps:
            for _ in range(count if sign == "~" else 1):
                self.store.check_time()  # a revision may take a million steps
                if oid is None:
                    return None
                parents = self._parents(oid)
                which = 1 if sign == "~" else count
                if which == 0:
                    break  # `^0`: the commit itself
                oid = parents[which - 1] if which <= len(parents) else None
                if oid is not None and oid == mark:
                    raise cycle()
                walked += 1
                if walked == power:
                    mark, walked, power = oid, 0, power * 2
        return oid

    def _base(self, name: str) -> bytes | None:
        if len(name) == 2 * self.hash_size and _is_hex(name.lower()):
            return bytes.fromhex(name)
        if name == "HEAD":
            return self.resolve("HEAD")
        if name.startswith("refs/"):  # a full name, as Git's first rule ("%s") takes it
            found = self.resolve(name)
            if found is not None:
                return found
        for rule in _RULES:
            found = self.resolve(rule.format(name))
            if found is not None:
                return found
        if len(name) >= 4 and _is_hex(name.lower()):
            commits = {oid for oid in self.store.expand(name.lower())
                       if self.peeled(oid) is not None}
            if len(commits) == 1:
                return commits.pop()
        return None

    def peeled(self, oid: bytes) -> bytes | None:
        """The commit an object is, or that its tags point at."""
        for _ in range(TAG_DEPTH):
            found = self.store.read(oid)
            if found is None:
                return None
            kind, data = found
            if kind == "commit":
                return oid
            if kind != "tag" or data[:7] != b"object ":
                return None
            target = self._hex(bytes(data[7:7 + 2 * self.hash_size]).decode("ascii", "replace"))
            if target is None:
                return None
            oid = target
        return None

    def _parents(self, oid: bytes) -> tuple[bytes, ...]:
        found = self.store.read(oid)
        if found is None or found[0] != "commit":
            return ()
        return parse_commit(oid, found[1], self.hash_size, self.store.check_time).parents

    def _file(self, name: str) -> str | None:
        """A loose ref's text; None if there is none (a folder of refs is none either)."""
        found = self.gitdir.lstat(name)
        if found is None or stat.S_ISDIR(found.st_mode):
            return None
        data = self.gitdir.read(name, REF_BYTES)
        return data.decode("ascii", "replace") if data is not None else None

    def _packed_ref(self, name: str) -> bytes | None:
        """The ID `packed-refs` gives `name`, its line (`ID NAME`) looked for a piece at a
        time: the file is never kept whole (W5), and read again for each name asked."""
        fd = self.gitdir.open_file("packed-refs")
        if fd is None:
            return None
        try:
            if os.fstat(fd).st_size > PACKED_REFS_BYTES:
                raise too_large(f"its packed-refs is more than the {PACKED_REFS_BYTES} bytes "
                                "these tools read")
            line = re.compile(rb"\n([0-9a-f]{%d}) %s\n" % (2 * self.hash_size,
                                                           re.escape(name.encode("ascii"))))
            keep = 2 * self.hash_size + len(name) + 3  # (a line cut between two pieces)
            carried = b"\n"  # (the first line starts after a newline too)
            with self.store.bounds.holding(2 * (READ + keep), "reading packed-refs"):
                for read, piece in enumerate(chunks(fd, 0)):
                    self.store.check_time()
                    if read * READ > PACKED_REFS_BYTES:  # it grew meanwhile
                        raise too_large(f"its packed-refs is more than the "
                                        f"{PACKED_REFS_BYTES} bytes these tools read")
                    window = carried + piece
                    found = line.search(window)
                    if found:
                        return bytes.fromhex(found[1].decode("ascii"))
                    carried = window[-keep:]
                found = line.search(carried + b"\n")  # (a last line without its newline)
                return bytes.fromhex(found[1].decode("ascii")) if found else None
        finally:
            os.close(fd)

    def _hex(self, text: str) -> bytes | None:
        text = text.strip()[:2 * self.hash_size + 1].split()[0] if text.strip() else ""
        if len(text) != 2 * self.hash_size or not _is_hex(text):
            return None
        return bytes.fromhex(text)


def _is_hex(text: str) -> bool:
    return bool(text) and all(c in "0123456789abcdef" for c in text)
