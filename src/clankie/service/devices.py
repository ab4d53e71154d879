"""The credentials and devices part: owners, tokens, pairing (SPEC H2), Take Control.

Owns issuing, rotating, listing and revoking credentials, pairing a browser by a one-time
code (and the per-connection limit on wrong codes), the page's key (H3), the Take Control
lease, owner revocation, and who a token is for a surface to show.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import NoReturn

from clankie import dto
from clankie.core import lifecycle
from clankie.core.errors import ClankieError
from clankie.core.model import CredentialKind, DeviceMode, iso
from clankie.core.vocabulary import Code
from clankie.store import ReadTx, WriteTx
from clankie.store.tx import CredentialRow, LeaseRow, PairingRow

from . import views
from .base import Caller, Context, serves, storage
from .credentials import (
    PAIRING_TTL,
    USER_AGENT_MAX,
    PairingAttempts,
    confirmation_word,
    new_pairing_code,
    new_token,
    token_hash,
)


def _wrong_code() -> ClankieError:
    """H2: a wrong, used or expired code, refused alike (nothing says which)."""
    return ClankieError(Code.UNAUTHENTICATED, "this pairing code is wrong, used or expired")


@dataclass(frozen=True, slots=True)
class DeviceStatus:
    credential_id: str
    name: str
    kind: str
    mode: str | None
    lease_expires_at: str | None  # set while this credential holds Take Control


class Devices:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.attempts = PairingAttempts()

    def init_owner(self, *, reissue: bool = False) -> str | None:
        """Create the owner and a first operator token, unless a live owner exists.

        With `reissue`, a live owner gets one more operator token (for a lost token file).
        """
        return self.ctx.on_store(partial(self._init_owner, reissue))

    def _init_owner(self, reissue: bool) -> str | None:
        now = self.ctx.clock()
        with self.ctx.internal_write() as tx:
            owner_id = tx.active_owner()
            if owner_id is not None and not reissue:
                return None
            if owner_id is None:
                owner_id = self.ctx.new_id()
                tx.insert_owner(owner_id, now)
            return self._issue(tx, owner_id, CredentialKind.OPERATOR, None, "operator", now).token

    def _issue(self, tx: WriteTx, owner_id: str, kind: CredentialKind, mode: DeviceMode | None,
               name: str, now: datetime, credential_id: str | None = None,
               user_agent: str | None = None) -> dto.TokenOut:
        token = new_token()
        row = CredentialRow(credential_id or self.ctx.new_id(), owner_id, kind, mode, name,
                            token_hash(token), now, None, user_agent=user_agent)
        tx.insert_credential(row)
        return dto.TokenOut(credential_id=row.credential_id, token=token)

    @serves(dto.DEVICE_PAIR, writes=True)
    def device_pair(self, caller: Caller, r: dto.DevicePair) -> dto.TokenOut:
        with self.ctx.write(caller) as c:
            return self._issue(c.tx, c.principal.owner_id, CredentialKind.DEVICE,
                               DeviceMode(r.mode), r.name, c.now)

    @serves(dto.DEVICE_PAIR_START, writes=True)
    def device_pair_start(self, caller: Caller, r: dto.DevicePairStart) -> dto.PairingOut:
        """SPEC H2: a one-time code (stored as a hash only) for a browser to pair with."""
        with self.ctx.write(caller) as c:
            code = new_pairing_code()
            pairing = PairingRow(self.ctx.new_id(), c.principal.owner_id, token_hash(code), r.name,
                                 DeviceMode(r.mode), confirmation_word(), c.now,
                                 c.now + PAIRING_TTL)
            c.tx.insert_pairing(pairing)
            return dto.PairingOut(pairing_id=pairing.pairing_id, code=code,
                                  expires_at=iso(pairing.expires_at), word=pairing.word)

    def page_key(self) -> bytes:
        """The phone page's key (H3): made once, kept in the store, so a browser's second
        half (derived from it) outlives a restart."""
        return self.ctx.on_store(self._page_key)

    def _page_key(self) -> bytes:
        with self.ctx.internal_write() as tx:
            return tx.page_key(secrets.token_bytes(32))

    def pairing_preview(self, code: str) -> PairingRow:
        """What a pairing code would pair (the page asks "Pair this browser as NAME?"),
        without using it. A wrong, used or expired code is refused alike, but is not a
        failed attempt (H2): opening a link pairs nothing, and any web page in the owner's
        browser can open links (`<img src=...>`). Guessing a 192-bit code by looking is as
        hopeless as by pairing."""
        now = self.ctx.clock()
        with storage(), self.ctx.store.read() as tx:
            pairing = self._live_pairing(tx, code, now)
        if pairing is None:
            raise _wrong_code()
        return pairing

    @serves(dto.DEVICE_PAIR_FINISH)
    def device_pair_finish(self, caller: Caller, r: dto.DevicePairFinish) -> dto.TokenOut:
        """SPEC H2: the code is the credential; it makes one device credential, once. Any
        bearer token is ignored: nobody's token grants this, and none is needed. A valid
        code always pairs: wrong codes are only counted against their own connection
        (`caller.peer`), and a wrong code never takes the store's write lock."""
        now = self.ctx.clock()
        with storage(), self.ctx.store.read() as tx:
            live = self._live_pairing(tx, r.code, now) is not None
        user_agent = (caller.user_agent or "")[:USER_AGENT_MAX] or None
        issued = self.ctx.on_store(partial(self._pair, r.code, now, user_agent)) \
            if live else None
        if issued is None:
            self._pairing_failed(caller.peer, now)
        return issued

    def _pair(self, code: str, now: datetime, user_agent: str | None) -> dto.TokenOut | None:
        """Use a live pairing code, once: its device credential, or None if it is not."""
        with self.ctx.internal_write() as tx:
            pairing = self._live_pairing(tx, code, now)
            if pairing is None or not tx.use_pairing(pairing.pairing_id, now):
                return None
            return self._issue(tx, pairing.owner_id, CredentialKind.DEVICE, pairing.mode,
                               pairing.name, now, credential_id=pairing.pairing_id,
                               user_agent=user_agent)

    def _live_pairing(self, tx: ReadTx, code: str, now: datetime) -> PairingRow | None:
        pairing = tx.pairing_by_hash(token_hash(code))
        if pairing is None or pairing.used_at is not None or now >= pairing.expires_at \
                or tx.owner_revoked(pairing.owner_id):
            return None
        return pairing

    def _pairing_failed(self, peer: str | None, now: datetime) -> NoReturn:
        self.attempts.failed(peer, now)  # forbidden, once this connection sent too many
        raise _wrong_code()

    @serves(dto.CREDENTIAL_REVOKE, writes=True)
    def credential_revoke(self, caller: Caller, r: dto.CredentialRevoke) -> dto.Empty:
        """SPEC H2: the credential is refused from its next request; its lease ends. An
        agent's question that waits ends at once, `invalidated`/`asker_revoked` (issue 42):
        no answer could reach the agent."""
        with self.ctx.write(caller) as c:
            row = c.tx.credential(r.credential_id)
            if row is None or row.owner_id != c.principal.owner_id:
                raise ClankieError(Code.NOT_FOUND, "there is no such credential")
            if row.credential_id == c.principal.credential_id:
                raise ClankieError(Code.NOT_ELIGIBLE, "a credential cannot revoke itself")
            c.tx.revoke_credential(row.credential_id, c.now)
            c.tx.clear_lease(row.credential_id)
            for conversation in c.tx.conversations(row.owner_id):
                if conversation.agent is not None and \
                        conversation.agent.credential_id == row.credential_id:
                    pending = c.tx.pending_question(conversation.conversation_id)
                    self.ctx.save(c.tx, lifecycle.asker_revoked(conversation, pending, c.now,
                                                                self.ctx.new_id))
            return dto.Empty()

    @serves(dto.CREDENTIAL_ISSUE, writes=True)
    def credential_issue(self, caller: Caller, r: dto.CredentialIssue) -> dto.TokenOut:
        with self.ctx.write(caller) as c:
            return self._issue(c.tx, c.principal.owner_id, CredentialKind(r.kind), None, r.name,
                               c.now)

    @serves(dto.CREDENTIAL_ROTATE, writes=True)
    def credential_rotate(self, caller: Caller, r: dto.CredentialRotate) -> dto.TokenOut:
        with self.ctx.write(caller) as c:
            target = r.credential_id or c.principal.credential_id
            if target != c.principal.credential_id and \
                    c.principal.kind is not CredentialKind.OPERATOR:
                raise ClankieError(Code.FORBIDDEN, "only an operator rotates another credential")
            row = c.tx.credential(target)
            if row is None or row.owner_id != c.principal.owner_id:
                raise ClankieError(Code.NOT_FOUND, "there is no such credential")
            fresh = new_token()
            c.tx.replace_token(target, token_hash(fresh), c.now)
            return dto.TokenOut(credential_id=target, token=fresh)

    @serves(dto.CREDENTIAL_LIST)
    def credential_list(self, caller: Caller, r: dto.Nothing) -> dto.CredentialsOut:
        with self.ctx.read(caller) as c:
            lease = c.tx.lease()
            return dto.CredentialsOut(credentials=[
                views.credential(row, lease is not None and lease.held_by(row.credential_id,
                                                                          c.now),
                                 self.ctx.last_used.get(row.credential_id))
                for row in c.tx.credentials() if row.owner_id == c.principal.owner_id])

    @serves(dto.DEVICE_TAKE_CONTROL, writes=True)
    def device_take_control(self, caller: Caller, r: dto.DeviceTakeControl) -> dto.LeaseOut:
        with self.ctx.write(caller) as c:
            ttl = r.ttl_s if r.ttl_s is not None else self.ctx.settings.take_control_ttl
            lease = LeaseRow(self.ctx.new_id(), c.principal.credential_id, c.now,
                             c.now + timedelta(seconds=ttl))
            c.tx.set_lease(lease)  # supersedes any other device's lease
            return dto.LeaseOut(lease_id=lease.lease_id, expires_at=iso(lease.expires_at))

    @serves(dto.DEVICE_RELEASE, writes=True)
    def device_release(self, caller: Caller, r: dto.Nothing) -> dto.Empty:
        with self.ctx.write(caller) as c:
            c.tx.clear_lease(c.principal.credential_id)
            return dto.Empty()

    @serves(dto.OWNER_REVOKE, writes=True)
    def owner_revoke(self, caller: Caller, r: dto.Nothing) -> dto.Empty:
        """Known owner revocation: every pending question of the owner ends at once."""
        with self.ctx.write(caller) as c:
            owner_id = c.principal.owner_id
            c.tx.revoke_owner(owner_id, c.now)
            for conversation in c.tx.conversations(owner_id):
                pending = c.tx.pending_question(conversation.conversation_id)
                self.ctx.save(c.tx, lifecycle.owner_revoked(conversation, pending, c.now,
                                                         self.ctx.new_id))
            return dto.Empty()

    def device_status(self, token: str | None) -> DeviceStatus:
        """Who this token is, for a surface to show (the phone page, H5): its name, mode and
        Take Control lease. Any live credential may ask about itself."""
        with self.ctx.read(Caller(None, token)) as c:  # any live credential, about itself
            row = c.tx.credential(c.principal.credential_id)
            lease = c.tx.lease()
        assert row is not None
        held = lease is not None and lease.held_by(row.credential_id, c.now)
        return DeviceStatus(row.credential_id, row.name, row.kind.value,
                            row.mode.value if row.mode else None,
                            iso(lease.expires_at) if held and lease else None)
