"""Whose model endpoint receives the API key and the conversation (SPEC T4, with T2's check).

Owns one decision: may this connection to the model endpoint the settings name carry the
key and the owner's words? A local server is usually the owner's own or a system
service's (Ollama runs as its own system user, a container port as root); another human
user who took its port while it was down is neither. So a listener on this machine must
be the owner, root, or a system account (a uid below `UID_MIN` of `/etc/login.defs`);
anything else is refused before a byte is written, with the reason in the run's error.
An endpoint elsewhere (no row on this machine says who listens) is the network's and
TLS's business, not another local user's, and is not refused here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import cache
from typing import Any, Protocol

import httpcore2
import httpx2

from clankie.peer import ConnectedSocket, Listener, listener_of

from .stop import ReplyTooLarge, StoppableBackend, cause

HTTPError = httpx2.HTTPError  # what a call through `http_client` raises on the way


class EndpointNotYours(Exception):
    """The model endpoint's listener is another user's: nothing was sent to it."""


@cache
def uid_min(login_defs: str = "/etc/login.defs") -> int:
    """The lowest uid of a person's account on this system (1000 where not said)."""
    try:
        with open(login_defs, encoding="utf-8", errors="replace") as defs:
            for line in defs:
                words = line.split()
                if len(words) == 2 and words[0] == "UID_MIN" and words[1].isdigit():
                    return int(words[1])
    except OSError:
        pass
    return 1000


class EndpointCheck:
    def __init__(self, url: str) -> None:
        self.url = url

    def admit(self, sock: ConnectedSocket | None) -> None:
        listener = listener_of(sock) if sock is not None else Listener(None, "no socket")
        uid = listener.uid
        if uid is None or uid in (os.geteuid(), 0) or uid < uid_min():
            return
        raise EndpointNotYours(f"the model endpoint {self.url} is served by "
                               f"{listener.describe()}, another user of this machine; the "
                               "key and the conversation were not sent")


class Admit(Protocol):
    """Who may be at the other end of a new connection: raises to refuse it."""

    def admit(self, sock: ConnectedSocket | None) -> None: ...


SocketOptions = Iterable[httpcore2.SOCKET_OPTION] | None


class CheckedBackend(httpcore2.NetworkBackend):
    """A network backend of httpcore2 (`inner`, here the stoppable one) whose streams are
    handed on only once their peer is admitted: no byte, not even a TLS hello, is written to
    a connection before the check, and every new connection of the pool gets it."""

    def __init__(self, check: Admit, inner: Any) -> None:
        self._inner = inner
        self._check = check

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None,
                    socket_options: SocketOptions = None) -> httpcore2.NetworkStream:
        return self._admitted(self._inner.connect_tcp(host, port, timeout, local_address,
                                                      socket_options))

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: SocketOptions = None) -> httpcore2.NetworkStream:
        return self._admitted(self._inner.connect_unix_socket(path, timeout, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)

    def _admitted(self, stream: httpcore2.NetworkStream) -> httpcore2.NetworkStream:
        try:
            self._check.admit(stream.get_extra_info("socket"))
        except BaseException:
            stream.close()
            raise
        return stream


def http_client(url: str, timeout: float) -> httpx2.Client:
    """The SDKs' HTTP client for the model endpoint at `url`, checked on every new
    connection and stopped with the run it serves (`stop.py`, SPEC R7: a stop shuts the
    socket of a call in flight down). httpx offers no public way to choose the network
    backend (encode/httpx#3749), so the transport's pool is replaced; an httpx2 that keeps
    it elsewhere is refused, rather than sending unchecked."""
    transport = httpx2.HTTPTransport(retries=0)
    if not isinstance(getattr(transport, "_pool", None), httpcore2.ConnectionPool):
        raise RuntimeError("this httpx2 keeps its connection pool where clankie cannot check "
                           "whose model endpoint it connects to; install the versions in "
                           "constraints.txt")
    transport._pool = httpcore2.ConnectionPool(
        network_backend=CheckedBackend(EndpointCheck(url), StoppableBackend()),
        retries=0, http1=True, http2=False,
        ssl_context=httpx2.create_ssl_context() if url.startswith("https://") else None,
        max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)
    return httpx2.Client(transport=transport, timeout=timeout, trust_env=False,
                         headers={"Accept-Encoding": "identity"},
                         event_hooks={"response": [_not_compressed]})


def _not_compressed(response: httpx2.Response) -> None:
    """Refuse a compressed reply before its body is read (it was not asked for: the
    requests say `Accept-Encoding: identity`). The bound on a reply's bytes counts what
    the socket gives (`stop.bounded`); a gzip bomb of 1 MB would decode to gigabytes."""
    encoding = response.headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise ReplyTooLarge(f"a compressed reply ({encoding[:20]}), which was not asked for "
                            "and whose size cannot be bounded")


def refusal(exc: BaseException) -> EndpointNotYours | None:
    """The endpoint refusal behind an SDK's connection error, if that is what it was."""
    return cause(exc, EndpointNotYours)
