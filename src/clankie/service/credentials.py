"""Bearer tokens: made with high entropy, stored only as a hash, compared in constant time.

Owns token generation, hashing and the lookup of a token's live credential. It decides
whether a token is a live credential (`unauthenticated` otherwise); what that credential
may do is decided by `clankie.core.authority`.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime

from clankie.core.errors import ClankieError
from clankie.core.model import CredentialKind, Principal
from clankie.core.vocabulary import Code
from clankie.store import ReadTx

TOKEN_PREFIX = "clk_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def authenticate(tx: ReadTx, token: str | None, now: datetime) -> Principal:
    """The principal of a live token, found in the caller's transaction (SPEC A1)."""
    if not token:
        raise ClankieError(Code.UNAUTHENTICATED, "a bearer token is required")
    digest = token_hash(token)
    row = tx.credential_by_hash(digest)
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise ClankieError(Code.UNAUTHENTICATED, "this token is unknown, rotated or revoked")
    if tx.owner_revoked(row.owner_id):
        raise ClankieError(Code.UNAUTHENTICATED, "the owner of this token was revoked")
    holds_lease = False
    if row.kind is CredentialKind.DEVICE:
        lease = tx.lease()
        holds_lease = lease is not None and lease.held_by(row.credential_id, now)
    return Principal(row.credential_id, row.kind, row.owner_id, row.mode,
                     holds_lease and row.mode is not None and row.mode.value == "control")
