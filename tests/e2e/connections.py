"""Raw connections to a served listener, for the connection rules of SPEC V5.

Each helper says what a peer sees: `closed_within` reads until the server closes the
connection or a deadline passes; `first_answer` waits for the first bytes or the close;
`fresh_answer` is the first answer to a new connection sending `request()`.
"""

from __future__ import annotations

import socket
import time
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit


def connect(where: Path | str, stack: ExitStack) -> socket.socket:
    """A connection to a Unix socket path or an `http://HOST:PORT` URL, closed by `stack`."""
    if isinstance(where, Path):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        stack.callback(sock.close)
        sock.settimeout(5)
        sock.connect(str(where))
    else:
        parts = urlsplit(where)
        assert parts.hostname is not None and parts.port is not None
        sock = socket.create_connection((parts.hostname, parts.port), timeout=5)
        stack.callback(sock.close)
    return sock


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed the connection within `seconds`, and what it sent first."""
    received = b""
    deadline = time.monotonic() + seconds
    while (remaining := deadline - time.monotonic()) > 0:
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return False, received
        except ConnectionResetError:
            return True, received
        if not chunk:
            return True, received
        received += chunk
    return False, received


def first_answer(sock: socket.socket, seconds: float) -> bytes:
    """The first bytes the server sends, or b"" when it closes the connection first."""
    sock.settimeout(seconds)
    try:
        return sock.recv(65536)
    except ConnectionResetError:
        return b""


def request(path: str = "/v1/openapi.json") -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: clankie\r\n\r\n".encode()


def fresh_answer(where: Path | str, seconds: float = 10) -> bytes:
    """The first bytes a new connection sending `request()` gets (b"" when closed first)."""
    with ExitStack() as stack:
        sock = connect(where, stack)
        sock.sendall(request())
        return first_answer(sock, seconds)
