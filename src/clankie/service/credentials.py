"""Bearer tokens: made with high entropy, stored only as a hash, compared in constant time.

Owns token generation, hashing and the lookup of a token's live credential. It decides
whether a token is a live credential (`unauthenticated` otherwise), in a transaction
(`authenticate`) or, for the edge's first look (T6), in memory (`LiveTokens`); what that
credential may do is decided by `clankie.core.authority`. Also owns pairing codes (SPEC H2): their
making, their confirmation words, and the per-connection limit on wrong codes.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
from collections import OrderedDict, deque
from datetime import datetime, timedelta

from clankie.core.errors import ClankieError
from clankie.core.model import CredentialKind, Principal
from clankie.core.vocabulary import Code
from clankie.store import ReadTx, Store

TOKEN_PREFIX = "clk_"
PAIRING_TTL = timedelta(minutes=10)
ATTEMPT_WINDOW = timedelta(minutes=1)
ATTEMPTS_ALLOWED = 5  # wrong codes a connection may send in the window; more are refused
ATTEMPT_PEERS_MAX = 1024  # connections remembered at once; the oldest is forgotten first
USER_AGENT_MAX = 512  # characters of a pairing browser's User-Agent kept (H2)
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


class PairingAttempts:
    """SPEC H2: wrong pairing codes are rate-limited per connection, and nothing else is.
    A connection (the edge's `peer`: a TCP client's address and port) that sent more than
    `ATTEMPTS_ALLOWED` wrong codes within a minute is told so instead of "wrong"; a valid
    code pairs whoever sends it, however many wrong ones anybody sent (no global lockout).
    Kept in memory, bounded: at most `ATTEMPT_PEERS_MAX` connections, each with at most
    `ATTEMPTS_ALLOWED + 1` times; a restart forgets it (docs/decisions.md)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failures: OrderedDict[str, deque[datetime]] = OrderedDict()

    @property
    def tracked(self) -> int:
        """How many connections are remembered now."""
        with self._lock:
            return len(self._failures)

    def failed(self, peer: str | None, now: datetime) -> None:
        """Count a wrong code from `peer`; refuse `forbidden` once it sent too many."""
        key = peer or "local"
        with self._lock:
            times = self._failures.pop(key, None)
            if times is None:
                times = deque(maxlen=ATTEMPTS_ALLOWED + 1)
            times.append(now)
            while times and times[0] <= now - ATTEMPT_WINDOW:
                times.popleft()
            self._failures[key] = times  # the most recent last
            while len(self._failures) > ATTEMPT_PEERS_MAX:
                self._failures.popitem(last=False)
            over = len(times) > ATTEMPTS_ALLOWED
        if over:
            raise ClankieError(Code.FORBIDDEN, "too many wrong pairing codes from this "
                               "connection in a minute; wait a minute and try again")


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


class LiveTokens:
    """The live tokens in memory, for the edge's look before a body is read (T6) without a
    thread or a transaction: the hashes of every live credential's token, read whole from
    the store and read again once a write has changed a credential or an owner since
    (`Store.credential_generation`, moved as the write is made and again once it has
    committed, before its caller is answered), so a revocation refuses the very next
    request. A token it does not know may be new from another process (`clankie init`):
    the caller asks the store (`authenticate`)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._table: tuple[int, dict[str, bool]] = (-1, {})  # (generation, hash -> browser)

    def known(self, token: str) -> bool:
        """Whether `token` is a live credential's, and not a browser's (which is good only
        on the page, H3)."""
        generation = self._store.credential_generation
        read_at, table = self._table
        if read_at != generation:
            try:
                with self._store.read() as tx:
                    table = tx.live_tokens()
            except sqlite3.Error:  # the store says why, when asked (`authenticate`)
                return False
            if self._store.credential_generation == generation:  # no write meanwhile
                self._table = (generation, table)
        return table.get(token_hash(token)) is False
