"""Bearer tokens: made with high entropy, stored only as a hash, compared in constant time.

Owns token generation, hashing and the lookup of a token's live credential. It decides
whether a token is a live credential (`unauthenticated` otherwise); what that credential
may do is decided by `clankie.core.authority`. Also owns pairing codes (SPEC H2): their
making, their confirmation words, and the lockout after too many failed attempts.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
from collections import deque
from datetime import datetime, timedelta

from clankie.core.errors import ClankieError
from clankie.core.model import CredentialKind, Principal
from clankie.core.vocabulary import Code
from clankie.store import ReadTx

TOKEN_PREFIX = "clk_"
PAIRING_TTL = timedelta(minutes=10)
LOCKOUT_WINDOW = timedelta(minutes=1)
LOCKOUT_AFTER = 5  # failed attempts within the window; one more locks pairing
# Short, distinct, easy to read aloud and to compare on a phone's screen.
WORDS = ("amber", "anchor", "badger", "basil", "beacon", "birch", "bison", "cactus",
         "cedar", "cobalt", "comet", "coral", "cricket", "dahlia", "delta", "ember",
         "falcon", "fern", "fjord", "garnet", "glacier", "harbor", "hazel", "heron",
         "indigo", "iris", "jasper", "juniper", "kestrel", "lagoon", "lantern", "lemon",
         "lotus", "magnet", "maple", "meadow", "mango", "nectar", "nutmeg", "oasis",
         "olive", "orchid", "otter", "pebble", "pepper", "quartz", "quill", "raven",
         "ripple", "saffron", "sequoia", "sparrow", "summit", "tango", "thistle", "tulip",
         "umber", "valley", "violet", "walnut", "willow", "yarrow", "zephyr", "zinnia")


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def new_pairing_code() -> str:
    """A one-time pairing code: 192 random bits (H2 asks for at least 128)."""
    return secrets.token_urlsafe(24)


def confirmation_word() -> str:
    return secrets.choice(WORDS)


class PairingLock:
    """SPEC H2: more than `LOCKOUT_AFTER` failed pairing attempts within a minute lock
    pairing (every code, right or wrong) for a minute. Kept in memory: a restart of the
    service forgets it, as it forgets nothing else that matters (docs/decisions.md)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: deque[datetime] = deque()
        self._locked_until: datetime | None = None

    def check(self, now: datetime) -> None:
        with self._lock:
            if self._locked_until is not None and now < self._locked_until:
                raise ClankieError(Code.FORBIDDEN, "pairing is locked for a minute after too "
                                   "many failed attempts; try again later")

    def failed(self, now: datetime) -> None:
        with self._lock:
            self._failures.append(now)
            while self._failures and self._failures[0] <= now - LOCKOUT_WINDOW:
                self._failures.popleft()
            if len(self._failures) > LOCKOUT_AFTER:
                self._locked_until = now + LOCKOUT_WINDOW
                self._failures.clear()


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
    if row.revoked_at is not None:  # SPEC H2: refused from its next request
        raise ClankieError(Code.UNAUTHENTICATED, "this token is unknown, rotated or revoked")
    if tx.owner_revoked(row.owner_id):
        raise ClankieError(Code.UNAUTHENTICATED, "the owner of this token was revoked")
    holds_lease = False
    if row.kind is CredentialKind.DEVICE:
        lease = tx.lease()
        holds_lease = lease is not None and lease.held_by(row.credential_id, now)
    return Principal(row.credential_id, row.kind, row.owner_id, row.mode,
                     holds_lease and row.mode is not None and row.mode.value == "control")
