"""The one error type of clankie, and the SPEC codes it may carry.

Every refusal in the project is a `ClankieError` with one of the codes of
`core.vocabulary` (where each code's HTTP status and exit code are declared); nothing
matches on messages.
"""

from __future__ import annotations

from typing import Any

from .vocabulary import STATUS_OF_CODE, Code

__all__ = ["STATUS_OF_CODE", "ClankieError", "Code"]


class ClankieError(Exception):
    """A refusal with a SPEC code, a human sentence, and optional machine-readable extras."""

    def __init__(self, code: Code | str, detail: str, **extra: Any) -> None:
        if code not in STATUS_OF_CODE:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(f"{code}: {detail}")
        self.code = Code(code)
        self.detail = detail
        self.extra: dict[str, Any] = extra

    @property
    def status(self) -> int:
        return STATUS_OF_CODE[self.code]
