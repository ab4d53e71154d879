"""The one error type of clankie, and the SPEC codes it may carry.

Owns the list of error codes a client can see and their HTTP status. Every refusal in
the project is a `ClankieError` with one of these codes; nothing matches on messages.
"""

from __future__ import annotations

from typing import Any, Final

# SPEC section 10, "Failure": code -> HTTP status.
STATUS_OF_CODE: Final[dict[str, int]] = {
    "invalid_request": 422,
    "payload_too_large": 413,
    "unauthenticated": 401,
    "forbidden": 403,
    "not_found": 404,
    "unknown_request": 404,
    "stale_incarnation": 409,
    "stale_revision": 409,
    "already_answered": 409,
    "request_closed": 409,
    "request_expired": 409,
    "not_eligible": 409,
    "invalid_answer": 422,
    "storage_unavailable": 503,
    "internal_error": 500,
}


class ClankieError(Exception):
    """A refusal with a SPEC code, a human sentence, and optional machine-readable extras."""

    def __init__(self, code: str, detail: str, **extra: Any) -> None:
        if code not in STATUS_OF_CODE:
            raise ValueError(f"unknown error code {code!r}")
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.extra: dict[str, Any] = extra

    @property
    def status(self) -> int:
        return STATUS_OF_CODE[self.code]
