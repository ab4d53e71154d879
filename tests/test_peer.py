"""`clankie.peer`: who listens at the other end of a connection (SPEC T2), read from the
kernel: SO_PEERCRED for a Unix socket, the connection's own row in /proc/net/tcp{,6}."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest

from clankie import peer
from tests.peers import own_non_loopback_address

linux = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
OWN_ADDRESS = own_non_loopback_address()
needs_own_address = pytest.mark.skipif(OWN_ADDRESS is None,
                                       reason="this host has no non-loopback address")

# 127.0.0.1:8765 (the server) <- 127.0.0.1:40000 (us), as the kernel prints it on a
# little-endian machine; a time-wait mini-socket of the same four-tuple says uid 0.
HEADER = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
          "   uid  timeout inode\n")
TCP = HEADER + (
    "   0: 0100007F:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000"
    "        0 11 1 0000000000000000 100 0 0 10 0\n"
    "   1: 0100007F:223D 0100007F:9C40 06 00000000:00000000 03:00001770 00000000     0"
    "        0 0 3 0000000000000000\n"
    "   2: 0100007F:223D 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000"
    "        0 12 1 0000000000000000 20 4 30 10 -1\n"
    "   3: 0100007F:9C40 0100007F:223D 01 00000000:00000000 00:00000000 00000000     0"
    "        0 13 1 0000000000000000 20 4 30 10 -1\n")
TCP6 = HEADER + (  # a dual-stack listener's accepted socket: IPv4 as ::ffff:a.b.c.d
    "   0: 0000000000000000FFFF00000100007F:223D 0000000000000000FFFF00000100007F:9C41 01"
    " 00000000:00000000 00:00000000 00000000  1001        0 14 1 0000000000000000 20 4 1"
    " 10 -1\n")
SERVER = peer._endpoint(("127.0.0.1", 8765))


@pytest.mark.skipif(sys.byteorder != "little", reason="the table above is little-endian")
def test_t2_the_row_is_the_connections_own_server_end_and_time_wait_rows_say_nothing():
    assert peer._row_uids(TCP, local=SERVER, remote=peer._endpoint(("127.0.0.1", 40000))) \
        == {1000}
    assert peer._row_uids(TCP, local=SERVER, remote=peer._endpoint(("127.0.0.1", 40002))) \
        == set()
    assert peer._row_uids(TCP6, local=SERVER, remote=peer._endpoint(("127.0.0.1", 40001))) \
        == {1001}


@linux
@pytest.mark.parametrize(("family", "host", "connect_to"), [
    (socket.AF_INET, "127.0.0.1", "127.0.0.1"),
    (socket.AF_INET6, "::1", "::1"),
    (socket.AF_INET6, "::", "127.0.0.1"),  # dual stack: the server end is in tcp6
])
def test_t2_an_own_loopback_listener_is_told_as_the_current_user(family: int, host: str,
                                                                  connect_to: str):
    with socket.socket(family, socket.SOCK_STREAM) as server:
        server.bind((host, 0))
        server.listen(1)
        with socket.create_connection((connect_to, server.getsockname()[1]), 5) as client:
            queued = peer.listener_of(client)
            accepted, _ = server.accept()
            with accepted:
                assert peer.listener_of(client) == queued
    assert queued == peer.Listener(os.geteuid(), "/proc/net/tcp")


def test_t2_an_own_unix_socket_is_told_by_its_peer_credentials(tmp_path: Path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(str(tmp_path / "s.sock"))
        server.listen(1)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(tmp_path / "s.sock"))
            told = peer.listener_of(client)
    assert told.uid == os.geteuid()
    assert told.pid in (None, os.getpid())


@linux
def test_t2_without_proc_nobody_can_tell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(peer, "PROC_NET_TCP", (tmp_path / "tcp", tmp_path / "tcp6"))
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), 5) as client:
            told = peer.listener_of(client)
    assert told.uid is None and "cannot be read" in told.how


@linux
@needs_own_address
def test_t2_an_own_listener_on_this_hosts_non_loopback_address_is_told_as_the_current_user():
    """Not only loopback: a connection to one of this host's own addresses (eth0's, say)
    has its server end in /proc/net/tcp{,6} as well, so its user is told, not guessed."""
    assert OWN_ADDRESS is not None
    family = socket.AF_INET6 if ":" in OWN_ADDRESS else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as server:
        server.bind((OWN_ADDRESS, 0))
        server.listen(1)
        with socket.create_connection((OWN_ADDRESS, server.getsockname()[1]), 5) as client:
            told = peer.listener_of(client)
    assert told == peer.Listener(os.geteuid(), "/proc/net/tcp")


@linux
def test_t2_no_row_for_one_of_this_hosts_addresses_cannot_tell_and_says_not_another_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "tcp").write_text(HEADER)
    (tmp_path / "tcp6").write_text(HEADER)
    monkeypatch.setattr(peer, "PROC_NET_TCP", (tmp_path / "tcp", tmp_path / "tcp6"))
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), 5) as client:
            told = peer.listener_of(client)
    assert told.uid is None
    assert "not in /proc/net/tcp" in told.how and "another machine" not in told.how


class FakeTcpSocket:
    """A connected socket as far as `listener_of` asks: its family and two ends."""

    def __init__(self, ours: tuple[str, int], theirs: tuple[str, int]) -> None:
        self.family = socket.AF_INET
        self._ours, self._theirs = ours, theirs

    def fileno(self) -> int:
        return -1

    def getsockname(self) -> tuple[str, int]:
        return self._ours

    def getpeername(self) -> tuple[str, int]:
        return self._theirs

    def getsockopt(self, level: int, option: int, length: int) -> bytes:
        raise OSError("not a real socket")


@linux
def test_t2_an_address_that_is_not_this_hosts_is_on_another_machine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "tcp").write_text(HEADER)
    (tmp_path / "tcp6").write_text(HEADER)
    monkeypatch.setattr(peer, "PROC_NET_TCP", (tmp_path / "tcp", tmp_path / "tcp6"))
    told = peer.listener_of(FakeTcpSocket(("192.0.2.2", 40000), ("198.51.100.7", 18900)))
    assert told.uid is None
    assert "198.51.100.7 is not one of this host's addresses" in told.how
    assert "another machine" in told.how
