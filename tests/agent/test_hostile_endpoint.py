"""Red team (issue 18): a model endpoint as attacker, on a raw socket, against both SDK
providers and doctor's probe. SPEC R6: one call times out after `model_timeout` seconds,
in all (httpx's timeout bounds each read only, so a reply trickled a byte at a time, or
headers that never end, kept a call alive for ever); and a reply too large to be a model's
is not read into memory (a 1 GB reply took 2 GB before)."""

from __future__ import annotations

import json
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from functools import cache

import pytest

from clankie.agent import retry, stop
from clankie.agent.anthropic_messages import AnthropicModel
from clankie.agent.openai_chat import OpenAIChatModel
from clankie.agent.probe import models_list
from clankie.agent.tools import TOOL_SPECS
from clankie.agent.transcript import ModelError, Text, Turn

Behaviour = Callable[[socket.socket], None]


@contextmanager
def hostile(behaviour: Behaviour) -> Iterator[str]:
    """A listener on loopback that reads a request's head and then does `behaviour`."""
    listener = socket.create_server(("127.0.0.1", 0))
    done = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                got = conn.recv(65536)
                if not got:
                    return
                data += got
            with suppress(OSError):  # the client went away
                behaviour(conn)

    def accept() -> None:
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        done.set()
        listener.close()


def trickle(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 400\r\n\r\n")
    for _ in range(400):
        conn.sendall(b" ")
        time.sleep(0.2)


def endless_headers(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\n")
    for _ in range(1000):
        conn.sendall(b"X-Slow: 1\r\n")
        time.sleep(0.2)


def a_gigabyte(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n{\"pad\": \"" % 2**30)
    chunk = b"a" * 2**20
    for _ in range(1024):
        conn.sendall(chunk)


@cache
def bomb() -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"a" * 2**20
    data = b"".join([packer.compress(b'{"pad": "'), *(packer.compress(chunk)
                                                     for _ in range(1024)),
                     packer.compress(b'"}'), packer.flush()])
    return data


def gzip_bomb(conn: socket.socket) -> None:
    """1 MB on the wire, a gigabyte once decoded: the byte bound counts the wire."""
    data = bomb()
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: "
                 b"gzip\r\nContent-Length: %d\r\n\r\n" % len(data) + data)
    time.sleep(5)


def model(provider: str, url: str, timeout: float) -> object:
    policy = retry.Policy(retries=0, total_wait=5, timeout=timeout)
    if provider == "openai":
        return OpenAIChatModel("m", url + "/v1", policy)
    return AnthropicModel("m", url, policy)


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("behaviour", [trickle, endless_headers])
def test_r6_one_call_ends_after_model_timeout_in_all_however_slowly_it_trickles(
        provider: str, behaviour: Behaviour):
    with hostile(behaviour) as url:
        made = model(provider, url, 2)  # the SDK imported before the clock starts
        began = time.monotonic()
        with pytest.raises(ModelError, match=r"no reply within 2 s \(model_timeout\)"):
            made.step("s", [Turn("user", (Text("hi"),))], TOOL_SPECS)  # type: ignore[attr-defined]
        assert time.monotonic() - began < 2 + 3  # model_timeout, and a busy machine


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_r6_a_reply_too_large_to_be_a_models_fails_at_once_unread(provider: str):
    with hostile(a_gigabyte) as url:
        made = model(provider, url, 30)
        began = time.monotonic()
        with pytest.raises(ModelError, match=f"unusable reply: larger than "
                                             f"{stop.MAX_REPLY_BYTES // 2**20} MiB$"):
            made.step("s", [Turn("user", (Text("hi"),))], TOOL_SPECS)  # type: ignore[attr-defined]
        assert time.monotonic() - began < 10  # not retried, not read to its end


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_r6_a_compressed_reply_is_refused_before_it_is_decoded(provider: str):
    """Red team (issue 18): a gzip bomb passed the byte bound (it counts the wire) and took
    the service's memory while decoding; the requests now say `Accept-Encoding: identity`
    and a compressed reply is refused unread."""
    bomb()  # made before the clock starts
    with hostile(gzip_bomb) as url:
        made = model(provider, url, 30)
        began = time.monotonic()
        with pytest.raises(ModelError, match="unusable reply: a compressed reply \\(gzip\\)"):
            made.step("s", [Turn("user", (Text("hi"),))], TOOL_SPECS)  # type: ignore[attr-defined]
        assert time.monotonic() - began < 3


def test_doctor_probe_a_trickling_endpoint_ends_within_its_timeout():
    with hostile(trickle) as url:
        began = time.monotonic()
        found = models_list("openai", url + "/v1", 1)
        assert found.outcome == "timeout"
        assert time.monotonic() - began < 3


def test_r6_the_whole_call_bound_is_per_call_and_not_left_behind():
    """Outside a model call nothing is bounded (the SDK's own client is reused)."""
    with stop.bounded(0.01):
        pass
    assert stop._bounds.get() is None
    json.dumps({})  # keep the import used
