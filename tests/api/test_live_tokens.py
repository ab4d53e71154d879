"""Issue 39: the edge looks at a bearer token in memory, on the event loop (`LiveTokens`),
before it reads a body (T6), and that look is never behind the store: a revoked, rotated or
owner-revoked token is refused from the very next request (H2, section 10's
`credential_revoke`, `credential_rotate`, `owner_revoke`), its body still unread; a token
made meanwhile by another process on the same store (`clankie init` makes one) is taken;
a browser's token is good only on the page (H3). Each request is the real app's, in
process."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from clankie.core.model import CredentialKind
from clankie.service.credentials import new_token, token_hash
from clankie.store import Store
from clankie.store.tx import CredentialRow

from .conftest import Http

GARBAGE = b"{not json"  # parsed only for a token the edge lets in: invalid_request


def looks(http: Http, token: str) -> tuple[int, str]:
    response = http.post("conversation_list", token=token, raw=GARBAGE)
    return response.status_code, response.json()["code"]


def issued(http: Http, kind: str = "captain") -> tuple[str, str]:
    """A new credential, known to the edge in memory (its table read anew since)."""
    made = http.post("credential_issue", {"kind": kind, "name": "x"}).json()
    assert http.world.service.known_token(made["token"])
    return made["credential_id"], made["token"]


def test_issue39_h2_a_revoked_token_is_refused_from_the_very_next_request(http: Http):
    credential_id, token = issued(http)
    assert looks(http, token) == (422, "invalid_request")  # known: its body was read
    assert http.post("credential_revoke", {"credential_id": credential_id}).status_code == 200
    assert not http.world.service.known_token(token)
    assert looks(http, token) == (401, "unauthenticated")  # refused, the body unread


def test_issue39_a_rotated_token_is_refused_at_once_and_its_new_one_taken(http: Http):
    credential_id, token = issued(http)
    assert looks(http, token)[0] == 422
    fresh = http.post("credential_rotate", {"credential_id": credential_id}).json()["token"]
    assert not http.world.service.known_token(token)
    assert looks(http, token) == (401, "unauthenticated")
    assert looks(http, fresh) == (422, "invalid_request")


def test_issue39_every_token_of_a_revoked_owner_is_refused_at_once(http: Http):
    _, token = issued(http)
    assert looks(http, token)[0] == 422
    assert looks(http, http.world.operator)[0] == 422
    assert http.post("owner_revoke").status_code == 200
    assert not http.world.service.known_token(token)
    assert looks(http, token) == (401, "unauthenticated")
    assert looks(http, http.world.operator) == (401, "unauthenticated")


def test_issue39_a_token_made_by_another_process_on_the_store_is_taken(http: Http):
    assert looks(http, http.world.operator)[0] == 422  # the table is read
    other = Store(http.world.store.path)  # as `clankie init --reissue` would, elsewhere
    token = new_token()
    try:
        with other.read() as tx:
            owner = tx.active_owner()
        assert owner is not None

        def insert() -> None:
            with other.write() as tx:
                tx.insert_credential(CredentialRow(
                    "c-elsewhere", owner, CredentialKind.OPERATOR, None, "elsewhere",
                    token_hash(token), datetime.now(UTC), None))
        other.run(insert)
    finally:
        other.close()
    assert not http.world.service.known_token(token)  # not in this process's table...
    assert looks(http, token) == (422, "invalid_request")  # ...but live in the store


def test_issue39_h3_a_browsers_token_is_refused_on_v1_ops(http: Http):
    pairing = http.post("device_pair_start", {"name": "phone", "mode": "control"}).json()
    browser = http.post("device_pair_finish", {"code": pairing["code"]}, token=None).json()
    assert looks(http, browser["token"]) == (401, "unauthenticated")
    assert "browser" in http.post("conversation_list", token=browser["token"]).json()["detail"]


def test_issue39_an_unknown_token_is_refused_without_its_body_read(http: Http):
    assert looks(http, "clk_" + "x" * 43) == (401, "unauthenticated")
    assert looks(http, http.world.operator)[0] == 422


def test_issue39_a_table_read_between_a_revocation_and_its_commit_is_not_kept(http: Http):
    """The race the second move of the generation closes: the edge reads the table after
    the revocation was written but before it committed (so the token still looks live);
    once committed, the very next look refuses it."""
    world = http.world
    credential_id, token = issued(http)
    written, go = threading.Event(), threading.Event()

    def revoke() -> None:  # on the writer: revoked, then held before the commit
        with world.store.write() as tx:
            tx.revoke_credential(credential_id, datetime.now(UTC))
        written.set()
        assert go.wait(10)

    thread = threading.Thread(target=world.store.run, args=(revoke,))
    thread.start()
    assert written.wait(10)
    assert world.service.known_token(token)  # read now: the revocation is not committed
    go.set()
    thread.join(10)
    assert not world.service.known_token(token)
    assert looks(http, token) == (401, "unauthenticated")
