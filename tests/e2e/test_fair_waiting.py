"""Fair waiting against a real `clankie serve` (SPEC V5): long-poll slots per credential,
the whole-request deadline, and the connection bound of each listener."""

from __future__ import annotations

import asyncio
import signal
import socket
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from clankie import dto
from clankie.client import AsyncClient, Client
from tests.e2e.connections import closed_within, connect, fresh_answer
from tests.e2e.served import Served
from tests.polling import eventually

SLOTS = 8  # SPEC V5: waiting long-polls per credential
DEVICE_POLLS = 64
ANSWER_DEADLINE_S = 1.0  # the operator's reads are answered within this, whatever waits
REQUEST_DEADLINE_S = 10.0  # SPEC V5: a whole request within 10 s, or the connection closes
AT_ONCE_S = 2.0  # "refused at once": well within any of the deadlines above
MAX_CONNECTIONS = 4


def test_v5_sixty_four_read_only_long_polls_never_delay_the_operators_reads(
        served: Served, workspace: Path):
    with served.client() as operator:
        c = operator.op(dto.CONVERSATION_CREATE,
                        dto.ConversationCreate(workspace=str(workspace))).conversation_id
        after = operator.call("events_tail", {"conversation_id": c})["next_after"]
        device = operator.op(dto.DEVICE_PAIR, dto.DevicePair(name="tv", mode="read_only")).token

    async def scenario() -> list[dict[str, Any]]:
        async with AsyncClient(f"unix://{served.home.socket}", device) as tv:
            polls = [asyncio.create_task(tv.call("events_tail", {
                "conversation_id": c, "after": after, "wait_ms": 30_000}))
                for _ in range(DEVICE_POLLS)]
            try:
                # all but the device's eight slots return at once, with what is there
                returned: set[asyncio.Task[dict[str, Any]]] = set()
                pending = set(polls)
                loop = asyncio.get_running_loop()
                deadline = loop.time() + 20
                while len(returned) < DEVICE_POLLS - SLOTS:
                    assert loop.time() < deadline, (
                        f"only {len(returned)} long-polls past the slots returned at once")
                    done, pending = await asyncio.wait(pending, timeout=deadline - loop.time(),
                                                       return_when=asyncio.FIRST_COMPLETED)
                    returned |= done
                for task in returned:
                    assert task.result()["events"] == []
                # with eight waiting, the operator reads at once
                await asyncio.to_thread(operator_reads, served, c, after)
                await asyncio.to_thread(wake, served, c)
                async with asyncio.timeout(20):
                    return [await task for task in pending]
            finally:
                for task in polls:
                    task.cancel()
                await asyncio.gather(*polls, return_exceptions=True)

    woken = asyncio.run(scenario())
    assert len(woken) == SLOTS
    assert all(page["events"][0]["text"] == "wake" for page in woken)


def operator_reads(served: Served, c: str, after: int) -> None:
    """`events_tail` with `wait_ms` 0 and `input_get`, each answered within the deadline
    (the client gives up, raising `Uncertain`, when it is not)."""
    token = served.home.token_file.read_text().strip()
    with Client(f"unix://{served.home.socket}", token, timeout=ANSWER_DEADLINE_S) as operator:
        page = operator.call("events_tail", {"conversation_id": c, "after": after})
        assert page["events"] == []
        assert operator.op(dto.INPUT_GET, dto.InputGet(conversation_id=c)).pending is None


def wake(served: Served, c: str) -> None:
    with served.client() as operator:
        operator.call("conversation_send", {"conversation_id": c, "text": "wake"})


def test_v5_a_half_sent_request_is_closed_within_ten_seconds(served: Served):
    half_head = b"POST /v1/ops/conversation_list HTTP/1.1\r\nHost: clankie\r\nAuthor"
    token = served.home.token_file.read_text().strip().encode()
    half_body = (b"POST /v1/ops/conversation_list HTTP/1.1\r\nHost: clankie\r\n"
                 b"Authorization: Bearer " + token + b"\r\n"  # T6: without, a 401 at once
                 b"Content-Type: application/json\r\nContent-Length: 20\r\n\r\n{\"lim")
    with ExitStack() as stack:
        silent = connect(served.home.socket, stack)
        head = connect(served.home.socket, stack)
        head.sendall(half_head)
        body = connect(served.tcp_url, stack)
        body.sendall(half_body)
        for sock in (silent, head, body):
            closed, sent = closed_within(sock, REQUEST_DEADLINE_S + 5)
            assert closed, "a connection without a whole request was kept open"
            assert sent == b""
    with served.client() as client:  # the service itself is unharmed
        assert client.call("conversation_list")["conversations"] == []
    assert served.stop(signal.SIGTERM) == 0
    assert not any("Traceback" in line for line in served.log), "".join(served.log)


def test_v5_a_full_tcp_listener_never_uses_up_the_unix_socket(tmp_path: Path):
    served = Served.start(tmp_path / "home",
                          env={"CLANKIE_MAX_CONNECTIONS": str(MAX_CONNECTIONS)})
    try:
        with ExitStack() as stack:
            for _ in range(MAX_CONNECTIONS):
                connect(served.tcp_url, stack)  # strangers on loopback, sending nothing
            stranger = connect(served.tcp_url, stack)
            closed, _ = closed_within(stranger, AT_ONCE_S)
            assert closed, "the TCP listener took one connection past max_connections"
            owners = [stack.enter_context(served.client())
                      for _ in range(MAX_CONNECTIONS)]
            for owner in owners:  # the owner's own socket is still answered, fully
                assert owner.call("conversation_list")["conversations"] == []
    finally:
        served.stop()


def test_v5_past_max_connections_a_new_connection_is_refused_at_once(tmp_path: Path):
    served = Served.start(tmp_path / "home",
                          env={"CLANKIE_MAX_CONNECTIONS": str(MAX_CONNECTIONS)})
    try:
        with ExitStack() as stack:
            idle = [connect(served.home.socket, stack) for _ in range(MAX_CONNECTIONS)]
            refused = connect(served.home.socket, stack)
            closed, sent = closed_within(refused, AT_ONCE_S)
            assert closed and sent == b"", "a connection past the bound was not refused"
            idle[0].close()  # a seat frees: a new connection is served again, once the
            answered = eventually(  # server has seen the close (polled, with a deadline)
                lambda: fresh_answer(served.home.socket), "a freed seat to serve a connection",
                timeout=20, every=0.05)
            assert answered.startswith(b"HTTP/1.1 200"), answered[:100]
    finally:
        served.stop()


def _room_of_large_messages(served: Served, workspace: Path) -> tuple[str, str, str]:
    """A room whose tail is a large page (200 messages of 8,000 characters), an owner
    conversation, and a read-only device's token."""
    with served.client() as operator:
        room = operator.op(dto.CONVERSATION_CREATE,
                           dto.ConversationCreate(workspace=str(workspace),
                                                  kind="room")).conversation_id
        c = operator.op(dto.CONVERSATION_CREATE,
                        dto.ConversationCreate(workspace=str(workspace))).conversation_id
        for _ in range(200):
            operator.call("room_post", {"conversation_id": room, "text": "é☃" * 4_000})
        device = operator.op(dto.DEVICE_PAIR, dto.DevicePair(name="tv", mode="read_only")).token
    return room, c, device


def test_v5_a_devices_flood_of_large_reads_never_delays_the_operators_reads(
        served: Served, workspace: Path):
    room, c, device = _room_of_large_messages(served, workspace)
    stop = asyncio.Event()

    async def flood(tv: AsyncClient) -> int:
        reads = 0
        while not stop.is_set():
            await tv.call("events_tail", {"conversation_id": room, "limit": 500})
            reads += 1
        return reads

    async def scenario() -> int:
        async with AsyncClient(served.tcp_url, device, timeout=60) as tv:
            floods = [asyncio.create_task(flood(tv)) for _ in range(100)]
            try:
                await asyncio.sleep(0)  # the flood is under way before the operator reads
                for _ in range(10):  # every read within the deadline, however many wait
                    await asyncio.to_thread(operator_reads, served, c, 0)
            finally:
                stop.set()
            return sum(await asyncio.gather(*floods))

    assert asyncio.run(scenario()) > 0


def test_v5_a_response_the_client_never_reads_is_dropped_within_ten_seconds(
        tmp_path: Path, workspace: Path):
    served = Served.start(tmp_path / "home", env={"CLANKIE_MAX_CONNECTIONS": "1"})
    try:
        room, _, device = _room_of_large_messages(served, workspace)
        body = f'{{"conversation_id": "{room}", "limit": 500}}'.encode()
        with ExitStack() as stack:
            reader = connect(served.tcp_url, stack)  # it asks for 1.6 MB and reads none
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            reader.sendall(b"POST /v1/ops/events_tail HTTP/1.1\r\nHost: clankie\r\n"
                           b"Authorization: Bearer " + device.encode() + b"\r\n"
                           b"Content-Type: application/json\r\n"
                           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            started = time.monotonic()
            answered = eventually(  # the listener's one seat frees once the server drops it
                lambda: fresh_answer(served.tcp_url), "the unread response to be dropped",
                timeout=REQUEST_DEADLINE_S + 10, every=0.2)
            assert answered.startswith(b"HTTP/1.1 200"), "a response nobody reads was kept"
            assert time.monotonic() - started > REQUEST_DEADLINE_S / 2  # not before its time
        assert served.stop(signal.SIGTERM) == 0
        assert not any("Traceback" in line for line in served.log), "".join(served.log)
    finally:
        served.stop()
