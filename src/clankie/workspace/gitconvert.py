"""Git's clean conversion of line endings, done by us (SPEC W7; issue 41).

Owns what Git's `convert.c` does to a working-tree file's bytes before it hashes or diffs
them, for line endings only: the `text`, `eol` and (old) `crlf` attributes and the
repository's `core.autocrlf` decide whether CRLF becomes LF (`text`), whether that is
guessed from the content (`auto`: not for a file Git takes for binary, nor one whose
index version already holds CRLF), or whether nothing is done. A filter is never run
(`filter` is told apart by the caller); `ident` and `working-tree-encoding` are not
applied. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping

from .gitrules import State

CONVERT_BYTES = 16 * 1024 * 1024  # a larger file is hashed as it is (W5: memory)
_NONPRINTABLE = bytes(c for c in range(32) if c not in b"\b\t\x1b\x0c\r\n") + b"\x7f"


def clean_action(attributes: Mapping[str, State], autocrlf: str) -> str | None:
    """`text` (CRLF to LF), `auto` (the same when the content looks like text) or None, as
    Git's `convert_attrs` decides for the way into the repository."""
    action = _crlf(attributes.get("text"))
    if action is None:
        action = _crlf(attributes.get("crlf"))
    if action != "binary":
        eol = attributes.get("eol")
        if eol in ("lf", "crlf") and action != "auto":
            action = "text"
    if action is None:
        action = "auto" if autocrlf in ("true", "input") else "binary"
    return None if action == "binary" else action


def _crlf(value: State) -> str | None:
    if value is True or value == "input":
        return "text"
    if value is False:
        return "binary"
    if value == "auto":
        return "auto"
    return None


def _stats(data: bytes | bytearray) -> tuple[int, int, bool]:
    """Git's `gather_stats`, what the conversion needs of it: (CRLF pairs, lone CRs,
    whether Git takes the content for binary)."""
    crlf = data.count(b"\r\n")
    lone_cr = data.count(b"\r") - crlf
    nonprintable = len(data) - len(data.translate(None, _NONPRINTABLE))
    if data.endswith(b"\x1a"):
        nonprintable -= 1
    printable = len(data) - data.count(b"\r") - data.count(b"\n") - nonprintable \
        - (1 if data.endswith(b"\x1a") else 0)
    binary = lone_cr > 0 or b"\0" in data or (printable >> 7) < nonprintable
    return crlf, lone_cr, binary


def has_crlf(blob: bytes | bytearray) -> bool:
    """Git's `has_crlf_in_index` for the index's version of a file: text holding CRLF."""
    if b"\r" not in blob:
        return False
    crlf, _, binary = _stats(blob)
    return crlf > 0 and not binary


def needs_index(data: bytes, action: str | None) -> bool:
    """Whether `clean` needs to know if the index's version holds CRLF (only `auto` on
    text that holds CRLF asks)."""
    if action != "auto" or b"\r\n" not in data:
        return False
    return not _stats(data)[2]


def clean(data: bytes, action: str | None, index_has_crlf: bool = False) -> bytes:
    """The bytes Git would hash for a working-tree file's `data`."""
    if action is None or not data or b"\r\n" not in data:
        return data
    if action == "auto" and (_stats(data)[2] or index_has_crlf):
        return data
    return data.replace(b"\r\n", b"\n")
