"""`clankie.client`: results, problems, and the difference between unreachable and uncertain."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from clankie import dto, peer
from clankie.client import (
    ApiError,
    AsyncClient,
    Client,
    NotYours,
    ServiceUnreachable,
    Uncertain,
)
from clankie.clientcore import Target, unreachable
from tests.e2e.served import Served
from tests.peers import DroppingPeer, own_non_loopback_address
from tests.squatter import Heard, Squatter, needs_root


def test_no_reply_after_sending_is_uncertain_and_is_sent_once(tmp_path: Path):
    peer = DroppingPeer(tmp_path / "drop.sock")
    try:
        with Client(f"unix://{tmp_path / 'drop.sock'}", "clk_x") as client, \
                pytest.raises(Uncertain):
            client.call("input_answer", {"conversation_id": "x"})
        assert len(peer.requests) == 1 and b"POST /v1/ops/input_answer" in peer.requests[0]
    finally:
        peer.close()


def test_nothing_listening_is_unreachable(tmp_path: Path):
    with Client(f"unix://{tmp_path / 'none.sock'}", "clk_x") as client, \
            pytest.raises(ServiceUnreachable):
        client.call("conversation_list")
    with Client("http://127.0.0.1:9", "clk_x") as client, pytest.raises(ServiceUnreachable):
        client.call("conversation_list")


def test_bad_url_is_refused_early():
    with pytest.raises(ValueError, match="CLANKIE_URL"):
        Client("ftp://somewhere", "clk_x")


def test_problems_become_api_errors_and_results_become_shapes(tmp_path: Path):
    served = Served.start(tmp_path / "home")
    try:
        with served.client() as client:
            assert client.op(dto.CONVERSATION_LIST, dto.ConversationList()).conversations == []
            with pytest.raises(ApiError) as err:
                client.op(dto.CONVERSATION_GET,
                          dto.ConversationRef(conversation_id="0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b"))
            assert (err.value.code, err.value.status) == ("not_found", 404)

        async def use_async() -> list:
            async with AsyncClient(f"unix://{served.home.socket}",
                                   served.home.token_file.read_text().strip()) as client:
                return (await client.op(dto.CONVERSATION_LIST,
                                        dto.ConversationList())).conversations

        assert asyncio.run(use_async()) == []
    finally:
        assert served.stop() == 0


# ------------------------------------------------------------- T2: whose service it is

TOKEN = "clk_the-owners-secret-token"


def _refused(heard: Heard) -> None:
    """The other user's listener was reached, and it was sent nothing at all."""
    assert heard.connections >= 1, "the client never reached the listener"
    assert heard.everything == b"", heard


@needs_root
@pytest.mark.parametrize("kind", ["unix", "tcp"])
def test_t2_a_listener_of_another_user_gets_nothing_sync_and_async(kind: str):
    with Squatter.unix() if kind == "unix" else Squatter.tcp() as squatter:
        with Client(squatter.url, TOKEN) as client, pytest.raises(NotYours) as err:
            client.call("conversation_list")
        assert str(err.value).startswith(f"the service at {squatter.url} is not yours")
        assert err.value.certain and err.value.fix

        async def use_async() -> None:
            async with AsyncClient(squatter.url, TOKEN) as client:
                await client.call("conversation_list")

        with pytest.raises(NotYours) as err:
            asyncio.run(use_async())
        assert err.value.certain, err.value
    heard = squatter.close()
    assert heard.connections == 2
    _refused(heard)


@needs_root
@pytest.mark.parametrize("asynchronous", [False, True])
def test_t2_every_new_connection_is_checked_not_only_the_first(tmp_path: Path,
                                                                asynchronous: bool):
    """A client that worked with the owner's service keeps no trust for the address: when
    the service stops and another user takes its port, the next call is refused."""
    served = Served.start(tmp_path / "home")
    token = served.home.token_file.read_text().strip()
    port = int(served.tcp_url.rsplit(":", 1)[1])

    def squat() -> Squatter:
        assert served.stop() == 0
        return Squatter.tcp(port)

    try:
        if asynchronous:
            async def use() -> Squatter:
                async with AsyncClient(served.tcp_url, token) as client:
                    assert (await client.call("conversation_list"))["conversations"] == []
                    with squat() as squatter, pytest.raises(NotYours) as err:
                        await client.call("conversation_list")
                    assert err.value.certain, err.value
                    return squatter
            squatter = asyncio.run(use())
        else:
            with Client(served.tcp_url, token) as client:
                assert client.call("conversation_list")["conversations"] == []
                with squat() as squatter, pytest.raises(NotYours) as err:
                    client.call("conversation_list")
                assert err.value.certain, err.value
    finally:
        served.stop()
    heard = squatter.close()
    _refused(heard)
    assert token.encode() not in heard.everything


@needs_root
def test_t2_trust_never_covers_a_listener_known_to_be_someone_elses(
        monkeypatch: pytest.MonkeyPatch):
    with Squatter.tcp() as squatter:
        monkeypatch.setenv("CLANKIE_URL_TRUSTED", squatter.url)
        with Client(squatter.url, TOKEN) as client, pytest.raises(NotYours) as err:
            client.call("conversation_list")
        assert err.value.certain
    _refused(squatter.close())


@needs_root
def test_t2_another_users_listener_on_this_hosts_own_address_is_not_yours_even_when_trusted(
        monkeypatch: pytest.MonkeyPatch):
    """A listener on one of this host's own non-loopback addresses (eth0's, say) is told
    from /proc/net/tcp like one on loopback: another user's is refused for certain, and a
    trust mark for that very URL does not make it the owner's."""
    address = own_non_loopback_address()
    if address is None:
        pytest.skip("this host has no non-loopback address")
    with Squatter.tcp(host=address) as squatter:
        monkeypatch.setenv("CLANKIE_URL_TRUSTED", squatter.url)
        with Client(squatter.url, TOKEN) as client, pytest.raises(NotYours) as err:
            client.call("conversation_list")
        assert err.value.certain, err.value
        assert "another machine" not in str(err.value)
    _refused(squatter.close())


def test_t2_the_not_yours_fix_fits_the_address_and_says_who_can_stop_the_listener(
        monkeypatch: pytest.MonkeyPatch):
    someone = peer.Listener(65534, "/proc/net/tcp", 4242)
    monkeypatch.delenv("CLANKIE_URL", raising=False)
    tcp = NotYours("http://127.0.0.1:18900", someone, trusted=False)
    assert "`clankie serve --tcp 127.0.0.1:PORT`" in tcp.fix
    assert "`ss -ltnp 'sport = :18900'`" in tcp.fix
    assert "only that user or root can stop it" in tcp.fix
    assert "unset, it is" not in tcp.fix and "CLANKIE_URL_TRUSTED" not in tcp.fix
    sock = NotYours("unix:///tmp/squat/clankie.sock", someone, trusted=False)
    assert "unset CLANKIE_URL" in sock.fix and "--tcp" not in sock.fix
    assert "`ss -xlp src /tmp/squat/clankie.sock`" in sock.fix
    assert "only that user or root can stop it" in sock.fix
    marked = NotYours("http://[::1]:18900", someone, trusted=True)
    assert "`clankie serve --tcp [::1]:PORT`" in marked.fix
    assert marked.fix.endswith("CLANKIE_URL_TRUSTED does not cover a listener known to be "
                               "someone else's")


def test_t2_where_it_cannot_tell_it_refuses_unless_the_url_is_marked_trusted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Without /proc/net/tcp{,6} nobody can tell who listens on a TCP port: refused, and
    nothing sent, until the owner marks that very URL trusted."""
    served = Served.start(tmp_path / "home")
    try:
        token = served.home.token_file.read_text().strip()
        monkeypatch.setattr(peer, "PROC_NET_TCP", (tmp_path / "no-tcp", tmp_path / "no-tcp6"))
        monkeypatch.delenv("CLANKIE_URL_TRUSTED", raising=False)
        with Client(served.tcp_url, token) as client, pytest.raises(NotYours) as err:
            client.call("conversation_list")
        assert not err.value.certain
        assert "cannot tell" in str(err.value) and "CLANKIE_URL_TRUSTED" in err.value.fix
        monkeypatch.setenv("CLANKIE_URL_TRUSTED", "1")  # a mark names the URL it trusts
        with Client(served.tcp_url, token) as client, pytest.raises(NotYours):
            client.call("conversation_list")
        monkeypatch.setenv("CLANKIE_URL_TRUSTED", served.tcp_url)
        with Client(served.tcp_url, token) as client:
            assert client.call("conversation_list")["conversations"] == []
    finally:
        assert served.stop() == 0


def test_t2_a_unix_socket_whose_peer_cannot_be_told_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Where the system tells no Unix socket's peer (neither SO_PEERCRED nor getpeereid),
    the client refuses rather than guesses."""
    peer_sock = DroppingPeer(tmp_path / "own.sock")
    try:
        monkeypatch.setattr(peer, "_peercred", None)
        monkeypatch.setattr(peer, "_libc_getpeereid", lambda: None)
        with Client(f"unix://{tmp_path / 'own.sock'}", TOKEN) as client, \
                pytest.raises(NotYours) as err:
            client.call("conversation_list")
        assert not err.value.certain
    finally:
        peer_sock.close()
    assert all(request == b"" for request in peer_sock.requests), peer_sock.requests


def test_t2_the_owners_own_listener_is_used_over_the_socket_and_tcp(tmp_path: Path):
    served = Served.start(tmp_path / "home")
    try:
        for url in (f"unix://{served.home.socket}", served.tcp_url):
            with served.client(url=url) as client:
                for _ in range(3):  # kept-alive and new connections alike
                    assert client.call("conversation_list")["conversations"] == []
    finally:
        assert served.stop() == 0


def test_issue19_an_out_of_range_port_is_said_as_such():
    """Issue 19's second trial: `http://localhost:99999` got the generic sentence."""
    with pytest.raises(ValueError, match=r"port 99999 is not one \(1 to 65535\)"):
        Client("http://localhost:99999", "clk_x")


def test_issue19_unreachable_is_said_in_words_not_exception_names(tmp_path: Path):
    """Issue 19's second trial: `FileNotFoundError: [Errno 2] ...` in the TUI's notice, and
    `gaierror` with a fix to start clankie on a host name that does not resolve."""
    with Client(f"unix://{tmp_path / 'none.sock'}", "clk_x") as client, \
            pytest.raises(ServiceUnreachable) as err:
        client.call("conversation_list")
    assert "no such file or directory" in str(err.value), err.value
    assert "Error" not in str(err.value) and "Errno" not in str(err.value), err.value
    target = Target("http://no-such-host.invalid:80", "clk_x", None, 1.0)
    target.via_env = True
    said = unreachable(socket.gaierror(-2, "Name or service not known"), target)
    assert "the host name no-such-host.invalid does not resolve" in str(said), said
    assert "gaierror" not in str(said) and "clankie serve" not in said.fix, said.fix
    assert "CLANKIE_URL" in said.fix, said.fix
