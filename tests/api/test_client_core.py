"""Issue 32: the client's own logic, written once in `clankie.clientcore` and driven by both
`Client` and `AsyncClient`, tested through the transport seam against a peer in memory
(no socket, no thread): the sorting of outcomes (SPEC section 10's exit 7, "uncertain",
against nothing sent), keep-alive, T2's refusal, misfits (issue 19, F2) and the moving
cursor (V1). Every test runs under both drivers. What needs a real socket (T2's peer
credentials, asyncio's streams, partial writes) stays in test_client.py and
test_client_wire.py."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from clankie import clientcore, dto
from clankie.client import (
    ApiError,
    AsyncClient,
    BadServiceUrl,
    Client,
    ClientError,
    NotClankie,
    NotYours,
    ServiceUnreachable,
    Uncertain,
)
from clankie.clientcore import MAX_IDLE, Pool
from clankie.peer import Listener

URL = "unix:///memory/clankie.sock"
ID = "0b7e8c1a-2f3d-4e5f-8a9b-0c1d2e3f4a5b"


def reply(body: bytes | dict[str, Any], status: bytes = b"200 OK", *,
          close: bool = False) -> bytes:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (b"HTTP/1.1 " + status + b"\r\nContent-Length: " + str(len(data)).encode()
            + (b"\r\nConnection: close" if close else b"") + b"\r\n\r\n" + data)


OK = reply({"ok": [1]})


class Conn:
    """One connection to the memory peer: what the client wrote, request by request."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.outgoing = bytearray()
        self.answer = b""
        self.closed = False  # by the client
        self.hung_up = False  # by the peer


class Memory:
    """A peer in memory, as a `clientcore.Transport`: each request read is answered with
    the next item of its script (the last again once it is used up): bytes (the reply,
    given in one read; then the end of the stream), or an exception the read raises.
    `uid`: who listens (T2); `refuse`: what connecting raises."""

    def __init__(self, *script: bytes | BaseException, uid: int | None = None,
                 refuse: OSError | None = None) -> None:
        self.script = list(script)
        self.uid = os.geteuid() if uid is None else uid
        self.unknown = False  # who listens cannot be told
        self.refuse = refuse
        self.hang_up_after_reply = False
        self.write_error: OSError | None = None  # the first write raises it, nothing taken
        self.conns: list[Conn] = []
        self.checked = 0

    def connect(self, target: Any, timeout: float) -> Conn:
        if self.refuse is not None:
            raise self.refuse
        self.conns.append(Conn())
        return self.conns[-1]

    def listener(self, conn: Conn) -> Listener:
        self.checked += 1
        return Listener(None if self.unknown else self.uid, "memory")

    def tls(self, conn: Conn, target: Any, timeout: float) -> Conn:
        return conn

    def alive(self, conn: Conn) -> bool:
        return not conn.hung_up

    def write(self, conn: Conn, data: memoryview, deadline: float) -> int:
        if self.write_error is not None:
            raise self.write_error
        conn.outgoing += data
        return len(data)

    def flush(self, conn: Conn, deadline: float) -> None:
        return None

    def read(self, conn: Conn, deadline: float) -> bytes:
        if conn.outgoing:  # a whole request came: its answer is the next of the script
            conn.requests.append(bytes(conn.outgoing))
            conn.outgoing.clear()
            item = self.script.pop(0) if len(self.script) > 1 else self.script[0]
            if isinstance(item, BaseException):
                raise item
            conn.answer = item
            conn.hung_up = self.hang_up_after_reply
        answer, conn.answer = conn.answer, b""
        return answer

    def close(self, conn: Conn) -> None:
        conn.closed = True

    def written(self) -> list[list[bytes]]:
        """Each connection's requests, by their path."""
        return [[r.split(b" ")[1] for r in conn.requests] for conn in self.conns]


class AsyncMemory:
    """The same peer as a `clientcore.AsyncTransport`."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory

    def close(self, conn: Conn) -> None:
        self.memory.close(conn)

    async def wait_closed(self, conn: Conn) -> None:
        return None

    def __getattr__(self, verb: str) -> Callable[..., Any]:
        sync = getattr(self.memory, verb)

        async def step(*args: Any) -> Any:
            return sync(*args)
        return step


Do = tuple[Any, ...] | Callable[[], object]  # ("call", op, payload) / ("op", spec, request)


def run_sync(memory: Memory, *todo: Do, **kw: Any) -> list[Any]:
    """Each call's result, or the `ClientError` it raised, in one client."""
    out: list[Any] = []
    with Client(URL, "clk_x", transport=memory, **kw) as client:
        for do in todo:
            if callable(do):
                do()
                continue
            try:
                out.append(getattr(client, do[0])(*do[1:]))
            except ClientError as exc:
                out.append(exc)
    return out


def run_async(memory: Memory, *todo: Do, **kw: Any) -> list[Any]:
    async def run() -> list[Any]:
        out: list[Any] = []
        async with AsyncClient(URL, "clk_x", transport=AsyncMemory(memory), **kw) as client:
            for do in todo:
                if callable(do):
                    do()
                    continue
                try:
                    out.append(await getattr(client, do[0])(*do[1:]))
                except ClientError as exc:
                    out.append(exc)
        return out
    return asyncio.run(run())


DRIVERS = pytest.mark.parametrize("run", [run_sync, run_async], ids=["sync", "async"])
LIST = ("call", "conversation_list", {"limit": 1})


# ------------------------------------------------------------------- the error tree


def test_issue32_not_clankie_is_no_api_error_and_every_error_is_a_client_error():
    """Issue 32: `NotClankie` subclassed `ApiError`, so an `except ApiError` placed first
    swallowed it. Now the two are siblings under `ClientError`: each caught by name."""
    not_clankie = NotClankie(URL, 200, via_env=False)
    with pytest.raises(NotClankie):
        try:
            raise not_clankie
        except ApiError:  # must not catch it
            pytest.fail("an `except ApiError` caught NotClankie")
    assert not issubclass(NotClankie, ApiError) and not issubclass(ApiError, NotClankie)
    for kind in (ApiError, NotClankie, NotYours, ServiceUnreachable, Uncertain,
                 BadServiceUrl):
        assert issubclass(kind, ClientError), kind
    # it still carries clankie's own problem document, as `--json` prints it
    assert (not_clankie.code, not_clankie.status) == ("not_clankie", 200)
    assert not_clankie.problem["code"] == "not_clankie" and not_clankie.fix
    # issue 42: the request went out and what answered was not understood: a clankie of
    # another version may have carried it out
    assert not_clankie.problem["sent"] == "unknown"


# ------------------------------------------------------------------ sorting outcomes


@DRIVERS
def test_results_problems_and_what_is_not_clankie_are_told_apart(run: Any):
    """A 200 with a JSON object is the result; a problem document is `ApiError` with its
    code and status; anything else whole is `NotClankie` (issue 19)."""
    problem = {"code": "not_found", "status": 404, "detail": "none"}
    memory = Memory(OK, reply(problem, b"404 Not Found"), reply(b"<html>"),
                    reply(b'{"x": NaN}'), reply(b"[]"))
    got = run(memory, LIST, LIST, LIST, LIST, LIST)
    assert got[0] == {"ok": [1]}
    assert isinstance(got[1], ApiError) and (got[1].code, got[1].status) == ("not_found", 404)
    assert [type(g) for g in got[2:]] == [NotClankie] * 3
    assert memory.written() == [[b"/v1/ops/conversation_list"] * 5]  # one connection, kept


@DRIVERS
@pytest.mark.parametrize("broken", [b"", b"HTTP/1.1 200 OK\r\nContent-Le",
                                    b"SSH-2.0-OpenSSH_9.6\r\n", TimeoutError("timed out"),
                                    ConnectionResetError(104, "Connection reset by peer")],
                         ids=["hang-up", "mid-head", "not-http", "timeout", "reset"])
def test_sec10_exit7_no_whole_reply_once_written_is_uncertain_and_sent_once(
        run: Any, broken: Any):
    """SPEC section 10, exit 7: the request may have reached the service but no reply
    came. The client says so, never resends, and drops the connection."""
    memory = Memory(broken)
    [got] = run(memory, ("call", "input_answer", {"conversation_id": ID}))
    assert isinstance(got, Uncertain) and "may or may not have been carried out" in str(got)
    assert memory.written() == [[b"/v1/ops/input_answer"]] and memory.conns[0].closed


@DRIVERS
def test_nothing_sent_is_unreachable_whether_connecting_or_writing_failed(run: Any):
    """Refused, or the connection failed before a byte of the request was taken:
    `ServiceUnreachable`, said in the system's words."""
    refused = Memory(OK, refuse=ConnectionRefusedError(111, "Connection refused"))
    [got] = run(refused, LIST)
    assert isinstance(got, ServiceUnreachable) and "connection refused" in str(got)
    assert refused.conns == [] and got.fix
    broken = Memory(OK)
    broken.write_error = BrokenPipeError(32, "Broken pipe")
    [got] = run(broken, LIST)
    assert isinstance(got, ServiceUnreachable) and "broken pipe" in str(got)
    assert broken.written() == [[]] and broken.conns[0].closed


@DRIVERS
def test_a_token_no_header_can_carry_is_refused_before_connecting(run: Any,
                                                                  monkeypatch: Any):
    memory = Memory(OK)
    monkeypatch.setenv("CLANKIE_TOKEN", "clk_x\r\nX-Evil: 1")
    out: list[Any] = []
    if run is run_sync:
        with Client(URL, transport=memory) as client, pytest.raises(ApiError) as err:
            client.call("conversation_list")
        out.append(err.value)
    else:
        async def go() -> None:
            async with AsyncClient(URL, transport=AsyncMemory(memory)) as client:
                with pytest.raises(ApiError) as err:
                    await client.call("conversation_list")
                out.append(err.value)
        asyncio.run(go())
    assert out[0].code == "unauthenticated" and memory.conns == []


# ---------------------------------------------------------------------- keep-alive


@DRIVERS
def test_keep_alive_reuses_a_recent_connection_and_drops_an_expired_or_closed_one(
        run: Any, monkeypatch: pytest.MonkeyPatch):
    """A kept connection is reused while recent and open; one past `KEEP_IDLE_S`, one the
    peer hung up, and one whose reply said `Connection: close` are not written to again:
    a new connection is made (and checked, T2)."""
    memory = Memory(OK, OK, OK, reply({"ok": [1]}, close=True), OK, OK, OK)

    def expire() -> None:
        monkeypatch.setattr(clientcore, "KEEP_IDLE_S", -1.0)

    def unexpire() -> None:
        monkeypatch.setattr(clientcore, "KEEP_IDLE_S", 60.0)

    def hang_up() -> None:
        memory.conns[-1].hung_up = True

    got = run(memory, ("call", "one"), ("call", "two"), expire, ("call", "three"), unexpire,
              ("call", "four"), ("call", "five"), hang_up, ("call", "six"), ("call", "seven"))
    assert got == [{"ok": [1]}] * 7
    assert memory.written() == [[b"/v1/ops/one", b"/v1/ops/two"],
                                [b"/v1/ops/three", b"/v1/ops/four"],
                                [b"/v1/ops/five"], [b"/v1/ops/six", b"/v1/ops/seven"]]
    assert memory.checked == 4
    assert all(conn.closed for conn in memory.conns)  # the last one by `close`


def test_the_pool_keeps_at_most_max_idle_and_gives_the_latest_first():
    pool: Pool[int] = Pool()
    assert all(pool.keep(n, 100.0) for n in range(MAX_IDLE))
    assert not pool.keep(MAX_IDLE, 100.0)  # the caller closes it
    assert pool.pop(100.0) == (MAX_IDLE - 1, True)
    assert pool.pop(100.0 + clientcore.KEEP_IDLE_S + 1) == (MAX_IDLE - 2, False)
    assert sorted(pool.drain()) == list(range(MAX_IDLE - 2)) and pool.pop(0.0) is None


def test_ctrl_c_while_waiting_closes_the_connection_and_goes_on():
    """Ctrl+C in flight is the caller's (the CLI says the outcome is uncertain); the
    connection is neither kept nor left open."""
    memory = Memory(KeyboardInterrupt())
    with Client(URL, "clk_x", transport=memory) as client, pytest.raises(KeyboardInterrupt):
        client.call("conversation_list")
    assert memory.conns[0].closed


# ------------------------------------------------------------------------------ T2


@DRIVERS
def test_t2_another_users_listener_gets_nothing_and_every_new_connection_is_checked(
        run: Any):
    """SPEC T2: each new connection is checked before a byte is written; a kept one is
    not checked again; another user's listener is refused with nothing written."""
    memory = Memory(OK, reply({"ok": [1]}, close=True), OK)

    def foreign() -> None:
        memory.uid = 65534

    got = run(memory, LIST, LIST, foreign, LIST)
    assert got[:2] == [{"ok": [1]}] * 2
    assert isinstance(got[2], NotYours) and got[2].certain
    assert "the token was not sent" in str(got[2])
    assert memory.checked == 2 and memory.written() == [[b"/v1/ops/conversation_list"] * 2, []]
    assert memory.conns[1].closed


@DRIVERS
def test_t2_a_listener_that_cannot_be_told_is_used_only_when_the_url_is_marked_trusted(
        run: Any, monkeypatch: pytest.MonkeyPatch):
    memory = Memory(OK)
    memory.unknown = True
    monkeypatch.delenv("CLANKIE_URL_TRUSTED", raising=False)
    [got] = run(memory, LIST)
    assert isinstance(got, NotYours) and not got.certain and memory.written() == [[]]
    monkeypatch.setenv("CLANKIE_URL_TRUSTED", URL)
    assert run(memory, LIST) == [{"ok": [1]}]
    memory.unknown, memory.uid = False, 65534  # a mark never covers another user's
    [got] = run(memory, LIST)
    assert isinstance(got, NotYours) and got.certain and "CLANKIE_URL_TRUSTED" in got.fix


# ------------------------------------------------------------ misfits and the cursor


MISFIT = reply({"conversation_id": "c", "incarnation": "i", "revision": "1",
                "pending": None, "request": None})


@DRIVERS
def test_f2_a_result_that_does_not_fit_its_op_is_not_clankie_typed_or_with_fit(run: Any):
    """Issue 19 F2: a JSON object is not yet a clankie result: `op` always checks it
    against the op's output shape, `call` when the client was made with `fit`."""
    request = dto.InputGet(conversation_id=ID)
    [typed] = run(Memory(MISFIT), ("op", dto.INPUT_GET, request))
    [fitted] = run(Memory(MISFIT), ("call", "input_get", {"conversation_id": ID}), fit=True)
    [raw] = run(Memory(MISFIT), ("call", "input_get", {"conversation_id": ID}))
    for got in (typed, fitted):
        assert isinstance(got, NotClankie) and "input_get result has 1 misfit" in got.detail
    assert raw["revision"] == "1"  # without `fit`, `call` passes any object (no pydantic)


@DRIVERS
def test_an_op_typed_result_comes_back_as_its_output_model(run: Any):
    memory = Memory(reply({"conversations": []}))
    [got] = run(memory, ("op", dto.CONVERSATION_LIST, dto.ConversationList(limit=5)))
    assert isinstance(got, dto.ConversationsOut) and got.conversations == []
    _, _, body = memory.conns[0].requests[0].partition(b"\r\n\r\n")
    assert json.loads(body) == {"limit": 5}  # only what the caller set


EVENT = {"seq": 6, "at": "2026-01-01T00:00:00Z", "type": "x"}


@DRIVERS
def test_v1_a_page_whose_cursor_does_not_move_on_is_not_clankie_by_name_or_typed(run: Any):
    """SPEC V1: a page with events has a `next_after` past the `after` asked for; one that
    does not would keep a follower asking forever. Read from the long poll's `after`
    (by name: the payload's), not from the op's name."""
    stuck = reply({"events": [EVENT], "next_after": 5, "trimmed": False, "oldest_seq": 1})
    moves = reply({"events": [EVENT], "next_after": 6, "trimmed": False, "oldest_seq": 1})
    typed = ("op", dto.EVENTS_TAIL, dto.EventsTail(conversation_id=ID, after=5))
    by_name = ("call", "events_tail", {"conversation_id": ID, "after": 5})
    got = run(Memory(stuck, stuck, moves, moves), typed, by_name, typed, by_name)
    assert [type(g) for g in got[:2]] == [NotClankie, NotClankie]
    assert "cursor stayed at 5 after 1 events" in str(got[0])
    assert got[2].next_after == 6 and got[3]["next_after"] == 6


def read_deadlines(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The deadline each read of `memory` is given, in seconds from a clock that stands
    still at 1000."""
    monkeypatch.setattr(clientcore, "time", SimpleNamespace(monotonic=lambda: 1000.0))
    deadlines: list[float] = []
    read = memory.read

    def reading(conn: Conn, deadline: float) -> bytes:
        deadlines.append(deadline - 1000.0)
        return read(conn, deadline)

    monkeypatch.setattr(memory, "read", reading)
    return deadlines


@DRIVERS
def test_p5_a_long_polls_wait_is_given_from_its_op_not_its_name(
        run: Any, monkeypatch: pytest.MonkeyPatch):
    """SPEC P5 / V5: the exchange of a long poll is given its wait on top of the client's
    timeout: its input's wait field (its default included) when typed, the payload's when
    by name. The deadline each read is given says it, on a clock that stands still."""
    memory = Memory(reply({"events": [], "next_after": 0, "trimmed": False,
                           "oldest_seq": 1}))
    deadlines = read_deadlines(memory, monkeypatch)
    run(memory, ("op", dto.EVENTS_TAIL, dto.EventsTail(conversation_id=ID, wait_ms=20_000)),
        ("call", "events_tail", {"conversation_id": ID, "wait_ms": 20_000}),
        ("call", "conversation_list", {}), timeout=5.0)
    assert deadlines == [25.0, 25.0, 5.0]


@DRIVERS
def test_p5_a_long_poll_called_by_name_without_its_wait_gets_its_default(
        run: Any, monkeypatch: pytest.MonkeyPatch):
    """SPEC P5 (red team, issue 32): `call("agent_wait", {"request_id": ...})` leaves
    `wait_s` to the service, which then holds the reply its default 25 s; the client gives
    the exchange that much more than its own timeout, never giving up first."""
    memory = Memory(reply({"request_id": ID, "status": "pending"}))
    deadlines = read_deadlines(memory, monkeypatch)
    run(memory, ("call", "agent_wait", {"request_id": ID}), timeout=5.0)
    assert deadlines == [30.0]


def test_the_by_name_default_waits_are_the_op_tables():
    """The waits `call` assumes where a long poll's payload leaves its field out are the
    input defaults of exactly the table's long polls (`dto.Op.long_poll`)."""
    table = {spec.name: spec.input for spec in dto.OPS.values() if spec.long_poll}
    assert table.keys() == clientcore.DEFAULT_WAITS.keys()
    for name, (field, default) in clientcore.DEFAULT_WAITS.items():
        assert field in clientcore.WAIT_FIELDS
        assert table[name].model_fields[field].default == default
