"""Who listens at the other end of a connected socket (SPEC T2), as this system can tell.

Owns the facts `clankie.client` checks before a token is written to a new connection:
- a Unix socket: its peer's user, from `SO_PEERCRED` (Linux) or `getpeereid` (macOS and
  the BSDs, through ctypes); the user who bound the listening socket;
- a TCP connection, to any address: the user of the server's end of this very
  connection, its row in `/proc/net/tcp` or `/proc/net/tcp6` (Linux): the listening
  socket's user while the connection waits to be accepted, the accepting process's user
  once accepted. Our own connection's four-tuple names the row, so no other listener on
  the port (wildcard, IPv4 or IPv6) can be taken for it, and a listener swapped after we
  connected is not it. A listener on one of this host's own addresses that are not
  loopback (eth0's, say) has its row there too, and is told the same way.

Where the system cannot tell (another platform, no `/proc`, no row: a listener on another
machine or in another network namespace) the answer is "unknown" with the reason, never a
guess. It only looks: it neither reads from nor writes to the socket, and decides nothing
(the client's core does: `clankie.clientcore.admit`).
"""

from __future__ import annotations

import ipaddress
import os
import pwd
import socket
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

__all__ = ["ConnectedSocket", "Listener", "listener_of"]


class ConnectedSocket(Protocol):
    """What is asked of a socket: a `socket.socket`, or asyncio's `TransportSocket`."""

    @property
    def family(self) -> int: ...

    def fileno(self) -> int: ...

    def getsockname(self) -> Any: ...

    def getpeername(self) -> Any: ...

    def getsockopt(self, level: int, option: int, length: int) -> bytes: ...


_peercred: int | None = getattr(socket, "SO_PEERCRED", None)  # Linux; None elsewhere
PROC_NET_TCP = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
_TIME_WAIT_TIMER = "03"  # a time-wait mini-socket: its uid column is always 0
_NO_UID = 0xFFFFFFFF  # (uid_t)-1: the kernel has no credentials for the peer


@dataclass(frozen=True)
class Listener:
    """The user at the other end, or None with the reason it cannot be told."""

    uid: int | None
    how: str  # how it was told ("SO_PEERCRED"), or why it cannot be
    pid: int | None = None  # the process that listens, where the system says

    def describe(self) -> str:
        if self.uid is None:
            return self.how
        return (f"uid {self.uid} ({_user_name(self.uid)})"
                + (f", pid {self.pid}" if self.pid else ""))


def listener_of(sock: ConnectedSocket) -> Listener:
    """The user listening at the other end of `sock`, a connected stream socket."""
    if sock.family == socket.AF_UNIX:
        return _unix_peer(sock)
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        return _tcp_server_end(sock)
    return Listener(None, f"a socket of family {sock.family!r} has no known owner")


# ----------------------------------------------------------------------- Unix sockets

def _unix_peer(sock: ConnectedSocket) -> Listener:
    if _peercred is not None:
        size = struct.calcsize("iII")  # struct ucred: pid_t pid; uid_t uid; gid_t gid
        pid, uid, _gid = struct.unpack("iII", sock.getsockopt(socket.SOL_SOCKET, _peercred,
                                                               size))
        if uid == _NO_UID:
            return Listener(None, "the socket's peer has no credentials (SO_PEERCRED)")
        return Listener(uid, "SO_PEERCRED", pid or None)
    getpeereid = _libc_getpeereid()
    if getpeereid is None:
        return Listener(None, f"{sys.platform} tells no Unix socket's peer "
                              "(neither SO_PEERCRED nor getpeereid)")
    import ctypes  # only here (macOS, the BSDs): the client's import on Linux needs none

    uid, gid = ctypes.c_uint32(), ctypes.c_uint32()
    if getpeereid(sock.fileno(), ctypes.byref(uid), ctypes.byref(gid)) != 0:
        return Listener(None, f"getpeereid failed: {os.strerror(ctypes.get_errno())}")
    return Listener(uid.value, "getpeereid")


@cache
def _libc_getpeereid() -> Callable[..., int] | None:
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        function: Callable[..., int] = libc.getpeereid
    except (OSError, AttributeError):  # no libc by that name, or one without getpeereid
        return None
    return function


# -------------------------------------------------------------------------------- TCP

def _tcp_server_end(sock: ConnectedSocket) -> Listener:
    ours = _endpoint(sock.getsockname())
    peer_address = sock.getpeername()
    theirs = _endpoint(peer_address)
    if not sys.platform.startswith("linux"):
        return Listener(None, f"{sys.platform} tells no TCP port's owner here (clankie "
                              "reads it from Linux's /proc/net/tcp)")
    uids: set[int] = set()
    for path in PROC_NET_TCP:
        try:
            text = path.read_text(encoding="ascii")
        except OSError as exc:
            return Listener(None, f"{path} cannot be read ({exc.strerror})")
        uids |= _row_uids(text, local=theirs, remote=ours)
    if not uids:
        if not _own_address(sock.family, peer_address):
            return Listener(None, f"{_shown(theirs[0])} is not one of this host's addresses: "
                                  "its listener is on another machine")
        return Listener(None, f"the connection's server end ({_shown(theirs[0])}, one of "
                              "this host's addresses) is not in /proc/net/tcp{,6}: another "
                              "network namespace's, or gone")
    # Two rows for one connection are not expected; if they disagree, another user's row
    # is the answer, so the owner's own row can never outvote it.
    others = uids - {os.geteuid()}
    return Listener(min(others) if others else uids.pop(), "/proc/net/tcp")


Endpoint = tuple[bytes, int]  # a 16-byte IPv6 address (IPv4 as ::ffff:a.b.c.d), a port


def _endpoint(address: tuple[object, ...]) -> Endpoint:
    host = str(address[0]).partition("%")[0]  # no IPv6 scope
    ip = ipaddress.ip_address(host)
    if isinstance(ip, ipaddress.IPv4Address):
        ip = ipaddress.IPv6Address(f"::ffff:{ip}")
    return ip.packed, int(str(address[1]))


def _shown(packed: bytes) -> str:
    ip = ipaddress.IPv6Address(packed)
    return str(ip.ipv4_mapped or ip)


def _own_address(family: int, address: tuple[object, ...]) -> bool:
    """Whether the peer's address is one of this host's: only such an address can be bound
    (its IPv6 scope kept); used to say where a listener with no row is, nothing more."""
    host = str(address[0])
    ip = ipaddress.ip_address(host.partition("%")[0])
    if ip.is_loopback or (isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped
                          and ip.ipv4_mapped.is_loopback):
        return True
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0, *address[2:]))
    except OSError:
        return False
    return True


def _proc_endpoint(field: str) -> Endpoint:
    """`0100007F:1F90` (tcp) or 32 hex digits and a port (tcp6): the kernel prints each
    32-bit word of the address in the host's byte order."""
    hex_address, _, hex_port = field.partition(":")
    words = b"".join(struct.pack("=I", int(hex_address[i:i + 8], 16))
                     for i in range(0, len(hex_address), 8))
    if len(words) == 4:
        words = b"\0" * 10 + b"\xff\xff" + words
    return words, int(hex_port, 16)


def _row_uids(table: str, *, local: Endpoint, remote: Endpoint) -> set[int]:
    """The uid of every socket in a /proc/net/tcp{,6} table whose local end is `local`
    and remote end `remote`, time-wait mini-sockets left out."""
    port = f":{local[1]:04X} "
    uids: set[int] = set()
    for line in table.splitlines()[1:]:
        if port not in line:
            continue
        fields = line.split()
        # sl local rem st tx:rx tr:when retrnsmt uid timeout inode ...
        if len(fields) < 10 or fields[5].partition(":")[0] == _TIME_WAIT_TIMER:
            continue
        if _proc_endpoint(fields[1]) == local and _proc_endpoint(fields[2]) == remote:
            uids.add(int(fields[7]))
    return uids


def _user_name(uid: int | None) -> str:
    if uid is None:
        return "unknown"
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return "no such user here"
