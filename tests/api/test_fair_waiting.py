"""Fair waiting at the HTTP edge (SPEC V5), on the real server in this process.

The server runs on a thread over a real Unix socket, with the protocol `clankie serve`
uses, so that the service's waiting count can be watched and the whole-request deadline
lowered (`REQUEST_TIMEOUT_S`) instead of waited out.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from clankie.api import connections
from clankie.api.app import http_server
from clankie.client import AsyncClient, Client
from clankie.serve import unix_socket
from clankie.service.longpoll import LONG_POLL_SLOTS
from tests.e2e.connections import closed_within, connect, first_answer, request
from tests.polling import eventually, eventually_async
from tests.world import World

DEADLINE_S = 20.0
CREDENTIALS = 9  # 9 x 8 waiting long-polls: more than any worker-thread pool we had (64)



@contextmanager
def serving(world: World, tmp_path: Path) -> Iterator[Path]:
    """The app served on a Unix socket on a thread; stopped (long-polls woken) at the end."""
    path = tmp_path / "s.sock"
    sock = unix_socket(path)
    server = http_server(world.service)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        eventually(lambda: server.started, "the server to start", timeout=DEADLINE_S)
        yield path
    finally:
        server.handle_exit(signal.SIGTERM, None)
        thread.join(timeout=DEADLINE_S)
        sock.close()
    assert not thread.is_alive()


def test_v5_every_credential_gets_its_eight_long_polls_and_a_ninth_returns_at_once(
        world: World, tmp_path: Path):
    c = world.conversation()
    after = world.call("events_tail", {"conversation_id": c})["next_after"]
    tokens = [world.operator] + [
        world.call("device_pair", {"name": f"d{i}", "mode": "read_only"})["token"]
        for i in range(CREDENTIALS - 1)]
    tail = {"conversation_id": c, "after": after, "wait_ms": 30_000}

    async def scenario(url: str) -> list[dict[str, Any]]:
        async with AsyncClient(url, world.operator) as operator:
            clients = [AsyncClient(url, t) for t in tokens]
            polls = [asyncio.create_task(client.call("events_tail", tail))
                     for client in clients for _ in range(LONG_POLL_SLOTS)]
            try:
                def waiting() -> int:
                    assert not any(p.done() for p in polls), "a long-poll within its slots ended"
                    return world.service.waiting

                await eventually_async(waiting, "every long-poll to wait", timeout=DEADLINE_S,
                                       every=0.01,
                                       until=lambda n: n >= CREDENTIALS * LONG_POLL_SLOTS)
                async with asyncio.timeout(DEADLINE_S / 4):  # it would wait 30 s
                    ninth = await operator.call("events_tail", tail)
                assert ninth == {"events": [], "next_after": after, "oldest_seq": 1,
                                 "trimmed": False}
                async with asyncio.timeout(DEADLINE_S / 4):  # and reads never wait at all
                    assert (await operator.call("events_tail", {"conversation_id": c})
                            )["events"] == []
                    assert (await operator.call("input_get", {"conversation_id": c})
                            )["pending"] is None
                    await operator.call("conversation_send", {"conversation_id": c,
                                                              "text": "wake"})
                async with asyncio.timeout(DEADLINE_S):
                    return [await p for p in polls]
            finally:
                for p in polls:
                    p.cancel()
                await asyncio.gather(*polls, return_exceptions=True)
                for client in clients:
                    await client.aclose()

    with serving(world, tmp_path) as path:
        woken = asyncio.run(scenario(f"unix://{path}"))
    assert len(woken) == CREDENTIALS * LONG_POLL_SLOTS
    assert all(page["events"][0]["text"] == "wake" for page in woken)
    assert world.service.waiting == 0


@pytest.fixture
def quick_deadline(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(connections, "REQUEST_TIMEOUT_S", 0.5)
    return 0.5


def test_v5_a_connection_without_a_whole_request_in_time_is_closed(
        world: World, tmp_path: Path, quick_deadline: float,
        caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO)
    half_head = b"POST /v1/ops/conversation_list HTTP/1.1\r\nHost: clankie\r\nAuthor"
    half_body = (b"POST /v1/ops/conversation_list HTTP/1.1\r\nHost: clankie\r\n"
                 b"Authorization: Bearer " + world.operator.encode() + b"\r\n"
                 b"Content-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"lim")
    with serving(world, tmp_path) as path, ExitStack() as stack:
        silent = connect(path, stack)
        head = connect(path, stack)
        head.sendall(half_head)
        body = connect(path, stack)
        body.sendall(half_body)
        kept_alive = connect(path, stack)  # a whole request; then half of the next one
        kept_alive.sendall(request())
        assert first_answer(kept_alive, DEADLINE_S).startswith(b"HTTP/1.1 200")
        kept_alive.sendall(half_head)
        for sock in (silent, head, body, kept_alive):
            closed, sent = closed_within(sock, DEADLINE_S / 4)
            assert closed, "a connection without a whole request was kept open"
            assert sent == b"" or sock is kept_alive
    assert "Traceback" not in caplog.text and "unexpected error" not in caplog.text


def test_v5_a_whole_request_is_never_cut_by_the_deadline(
        world: World, tmp_path: Path, quick_deadline: float):
    c = world.conversation()
    with serving(world, tmp_path) as path, Client(f"unix://{path}", world.operator) as client:
        started = time.monotonic()
        page = client.call("events_tail", {"conversation_id": c, "after": 1_000,
                                           "wait_ms": int(quick_deadline * 3_000)})
        assert page["events"] == [] and time.monotonic() - started >= quick_deadline * 3
        assert client.call("conversation_list")["conversations"]


def test_v5_a_long_poll_whose_client_hung_up_gives_its_slot_back_at_once(
        world: World, tmp_path: Path):
    c = world.conversation()
    body = b'{"conversation_id": "%s", "after": 1000, "wait_ms": 30000}' % c.encode()
    tail = (b"POST /v1/ops/events_tail HTTP/1.1\r\nHost: clankie\r\n"
            b"Authorization: Bearer " + world.operator.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    with serving(world, tmp_path) as path, ExitStack() as stack:
        socks = [connect(path, stack) for _ in range(LONG_POLL_SLOTS)]
        for sock in socks:
            sock.sendall(tail)
        eventually(lambda: world.service.waiting, "the long-polls to wait", timeout=DEADLINE_S,
                   until=lambda n: n == LONG_POLL_SLOTS)
        socks[0].close()  # long before its 30 s are up
        eventually(lambda: world.service.waiting, "the hung-up long-poll to give its slot back",
                   timeout=DEADLINE_S, until=lambda n: n == LONG_POLL_SLOTS - 1)
