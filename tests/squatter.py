"""A listener of another local user (`nobody`) at an address a surface may send a token to
(SPEC T2): a Unix socket or a TCP port (loopback, or one of this host's own addresses). It
records every byte each connection sends it and answers a whole request the way a
credential harvester would, with a 200 that looks like clankie's, so a client that did send
its token carries on as if nothing happened.

It runs as its own process under `nobody`, which needs root; `needs_root` skips otherwise.
`close` stops it (through its standard input) and returns what it heard.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

SYSTEM_PYTHON = "/usr/bin/python3"  # one that user `nobody` may run
NOBODY = 65534
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not os.access(SYSTEM_PYTHON, os.X_OK),
    reason="a listener of another user needs root to run it as `nobody` (and "
           "/usr/bin/python3)")

LISTENER = r"""
import json, os, select, socket, sys
kind, where = sys.argv[1], sys.argv[2]
if kind == "unix":
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(where)
    address = "unix://" + where
else:
    host, port = where.rsplit(":", 1)
    host = host.strip("[]")
    server = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET,
                           socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((host, int(port)))
    bound = server.getsockname()
    address = "http://%s:%d" % ("[%s]" % bound[0] if ":" in bound[0] else bound[0], bound[1])
server.listen(16)
print(json.dumps({"address": address, "uid": os.geteuid()}), flush=True)
body = json.dumps({"conversations": [], "next_after": None, "events": [],
                   "trimmed": False}).encode()
reply = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n"
         b"content-length: %d\r\n\r\n" % len(body)) + body
heard = []
open_ = {}
def read(conn):
    try:
        data = conn.recv(65536)
    except ConnectionError:
        data = b""
    if not data:
        del open_[conn]
        conn.close()
        return
    heard[open_[conn]] += data
    if b"\r\n\r\n" in heard[open_[conn]]:
        try:
            conn.sendall(reply)
        except OSError:
            pass  # the client went away; what it sent is recorded
stopping = False
while not stopping:
    ready, _, _ = select.select([server, sys.stdin, *open_], [], [], 30)
    if not ready:
        break  # nobody told it to stop: end anyway rather than outlive the test
    for r in ready:
        if r is server:
            conn, _ = server.accept()
            open_[conn] = len(heard)
            heard.append(b"")
        elif r is sys.stdin:
            stopping = not sys.stdin.readline()
        else:
            read(r)
server.setblocking(False)
while True:  # connections made before the stop, still in the backlog
    try:
        conn, _ = server.accept()
    except BlockingIOError:
        break
    open_[conn] = len(heard)
    heard.append(b"")
for conn in list(open_):  # what was sent but not yet read
    conn.setblocking(False)
    try:
        while conn in open_:
            read(conn)
    except BlockingIOError:
        conn.close()
server.close()
print(json.dumps({"connections": len(heard), "heard": [h.hex() for h in heard]}), flush=True)
"""


def as_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)


@dataclass(frozen=True)
class Heard:
    connections: int
    received: list[bytes]

    @property
    def everything(self) -> bytes:
        return b"".join(self.received)


class Squatter:
    """Another user's listener; `url` is what CLANKIE_URL would say to reach it."""

    def __init__(self, kind: str, where: str, folder: Path | None) -> None:
        self._folder = folder
        self.proc = subprocess.Popen([SYSTEM_PYTHON, "-c", LISTENER, kind, where],
                                     preexec_fn=as_nobody, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd="/", env={"PATH": "/usr/bin:/bin"})
        assert self.proc.stdout is not None and self.proc.stderr is not None
        try:
            ready = self.proc.stdout.readline()  # printed once listening; "" if it died
            assert ready, f"the listener did not start: {self.proc.stderr.read()}"
            started = json.loads(ready)
            assert started["uid"] == NOBODY
        except BaseException:
            self.proc.kill()
            self.proc.communicate(timeout=10)
            raise
        self.url: str = started["address"]
        self.heard: Heard | None = None

    @classmethod
    def unix(cls) -> Squatter:
        """A socket in a folder of its own, owned by `nobody`, anyone may pass through."""
        folder = Path(tempfile.mkdtemp(prefix="clankie-squat-"))
        try:
            os.chown(folder, NOBODY, NOBODY)
            folder.chmod(0o755)
            return cls("unix", str(folder / "clankie.sock"), folder)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise

    @classmethod
    def tcp(cls, port: int = 0, host: str = "127.0.0.1") -> Squatter:
        """On loopback, or on `host` (one of this host's own addresses, IPv4 or IPv6)."""
        return cls("tcp", f"[{host}]:{port}" if ":" in host else f"{host}:{port}", None)

    def __enter__(self) -> Squatter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def socket_path(self) -> Path:
        assert self.url.startswith("unix://")
        return Path(self.url.removeprefix("unix://"))

    def close(self) -> Heard:
        """Stop it; every byte every connection sent it."""
        if self.heard is None:
            out, err = self.proc.communicate(timeout=20)  # closes its stdin: stop
            assert self.proc.returncode == 0, err
            done = json.loads(out.strip().splitlines()[-1])
            self.heard = Heard(done["connections"], [bytes.fromhex(h) for h in done["heard"]])
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
        return self.heard
