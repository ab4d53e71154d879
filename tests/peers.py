"""Misbehaving peers on a Unix socket, for the outcomes a client cannot be sure of; and
this host's own non-loopback address, for the listeners that use one."""

from __future__ import annotations

import contextlib
import http.server
import ipaddress
import socket
import subprocess
import threading
from pathlib import Path

import httpx


def read_request(conn: socket.socket) -> bytes:
    """One HTTP/1.1 request with a Content-Length body, as raw bytes."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class DroppingPeer:
    """A Unix-socket peer that reads one request, then hangs up without a reply."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.requests: list[bytes] = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.answer(conn, read_request(conn))

    def answer(self, conn: socket.socket, request: bytes) -> None:
        """Handle the request, then hang up without a reply."""
        self.requests.append(self.handle(request))

    def handle(self, request: bytes) -> bytes:
        """What to do with the request before hanging up; here: nothing."""
        return request

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
        self.sock.close()
        self.thread.join(timeout=5)
        assert not self.thread.is_alive()


class CommittingDropper(DroppingPeer):
    """Forwards each request to the real service, lets it commit, then drops the reply."""

    def __init__(self, path: Path, upstream: Path) -> None:
        self.upstream = upstream
        self.statuses: list[int] = []
        self.replies: list[httpx.Response] = []
        super().__init__(path)

    def handle(self, request: bytes) -> bytes:
        head, _, body = request.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        method, target, _ = lines[0].split(" ")
        headers = {k: v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
                   if k.lower() in ("authorization", "content-type")}
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(self.upstream))) as client:
            response = client.request(method, f"http://clankie{target}", headers=headers,
                                      content=body)
        self.statuses.append(response.status_code)
        self.replies.append(response)
        return request


class DropsOneOp(CommittingDropper):
    """Forwards each request to the real service and passes its reply back, except the
    reply to the op `dropped`: the service commits it, and the client hears nothing."""

    def __init__(self, path: Path, upstream: Path, dropped: str) -> None:
        self.dropped = f" /v1/ops/{dropped} ".encode()
        super().__init__(path, upstream)

    def answer(self, conn: socket.socket, request: bytes) -> None:
        self.requests.append(self.handle(request))
        if self.dropped in request.split(b"\r\n", 1)[0]:
            return
        reply = self.replies[-1]
        conn.sendall(f"HTTP/1.1 {reply.status_code} -\r\nContent-Type: "
                     f"{reply.headers.get('content-type', 'application/json')}\r\n"
                     f"Content-Length: {len(reply.content)}\r\nConnection: close\r\n\r\n"
                     .encode() + reply.content)


def own_non_loopback_address() -> str | None:
    """One of this host's own addresses that is not loopback (eth0's, say), IPv4 first, or
    None when the host has none: from `getaddrinfo(gethostname())` and `ip -o addr`, each
    confirmed by binding a socket to it."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        found += [str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)]
    try:
        listed = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True,
                                timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    for line in listed.splitlines():
        fields = line.split()
        found += [fields[i + 1].partition("/")[0] for i, field in enumerate(fields[:-1])
                  if field in ("inet", "inet6")]
    usable = []
    for text in dict.fromkeys(found):
        try:
            ip = ipaddress.ip_address(text.partition("%")[0])
        except ValueError:
            continue
        if ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast:
            continue
        family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((str(ip), 0))
        except OSError:
            continue
        usable.append(ip)
    usable.sort(key=lambda ip: ip.version)
    return str(usable[0]) if usable else None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


class OtherProgram:
    """Some other program of the owner's on a loopback port (`python3 -m http.server`): it
    answers a POST with an HTML 501, nothing like clankie. `url` reaches it."""

    def __init__(self) -> None:
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Quiet)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever,  # shutdown() soon
                                       kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def __enter__(self) -> OtherProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)
