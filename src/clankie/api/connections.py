"""Connections (SPEC V5): a whole request in time, and a bound on each listener.

Owns the HTTP/1.1 protocol `clankie serve` runs: uvicorn's h11 protocol with two rules
uvicorn lacks. A connection that has not sent a whole request (headers and body) within
`REQUEST_TIMEOUT_S` of connecting, or of its previous response, is closed; uvicorn's own
`timeout_keep_alive` only closes a connection that sends nothing at all after a response,
and nothing closes one that sends a request slowly. A client that stops reading its
response is cut off the same way: once the write buffer is full, it has `REQUEST_TIMEOUT_S`
to read some of it, or the connection is aborted and the response dropped (a response
nobody reads would otherwise be held in memory for ever). And each listener (the Unix socket,
the TCP port) serves at most `max_connections` connections at once: a connection past
that is closed as soon as it is accepted, never queued. Listeners are counted apart, so
strangers filling the TCP port never use up the owner's own socket.

It decides nothing about requests themselves: that is `app.py`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar, Final

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

__all__ = ["REQUEST_TIMEOUT_S", "Seats", "bounded_protocol"]

log = logging.getLogger("clankie.api")

# Read each time a deadline is set, so that tests in this process can lower it.
REQUEST_TIMEOUT_S = 10.0

# Their side's states once a whole request has arrived.
_WHOLE: Final = frozenset({h11.DONE, h11.MUST_CLOSE})


class Seats:
    """The connections each listener is serving, at most `limit` each.

    Used on the server's event loop only, so it needs no lock. A listener that refuses
    says so once, and when it serves again, how many it refused meanwhile (T5).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._taken: dict[object, int] = {}
        self._refused: dict[object, int] = {}

    def take(self, listener: object) -> bool:
        taken = self._taken.get(listener, 0)
        if taken >= self.limit:
            refused = self._refused.get(listener, 0) + 1
            self._refused[listener] = refused
            if refused == 1:
                log.warning("%s serves %d connections (max_connections): new ones are "
                            "closed until one ends", _name(listener), self.limit)
            return False
        self._taken[listener] = taken + 1
        return True

    def give_back(self, listener: object) -> None:
        taken = self._taken[listener] - 1
        if taken:
            self._taken[listener] = taken
        else:
            del self._taken[listener]
        refused = self._refused.pop(listener, 0)
        if refused:
            log.warning("%s serves again; it closed %d connection(s) while full",
                        _name(listener), refused)


def _name(listener: object) -> str:
    if isinstance(listener, tuple):
        return f"tcp {listener[0]}:{listener[1]}"
    return f"socket {listener}"


class _Protocol(H11Protocol):
    seats: ClassVar[Seats]

    def __init__(self, config: Config, server_state: ServerState, app_state: dict[str, Any],
                 _loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self._listener: object = None  # set while this connection holds a seat
        self._deadline: asyncio.TimerHandle | None = None
        self._stalled: asyncio.TimerHandle | None = None  # while the client reads nothing

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        # An accepted connection's own address is its listener's: the socket path, or
        # the loopback address and port.
        listener = transport.get_extra_info("sockname")
        if not self.seats.take(listener):
            transport.close()
            return
        self._listener = listener
        super().connection_made(transport)
        self._start_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._listener is None:  # refused: it was never served
            return
        self._cancel_deadline()
        self._reading_again()
        self.seats.give_back(self._listener)
        self._listener = None
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state in _WHOLE:
            self._cancel_deadline()

    def on_response_complete(self) -> None:
        # Before uvicorn's own: it may go on to a pipelined request, whole already.
        if not self.transport.is_closing():
            self._start_deadline()
        super().on_response_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._stalled is None:
            self._stalled = self.loop.call_later(REQUEST_TIMEOUT_S, self._not_reading)

    def resume_writing(self) -> None:
        self._reading_again()
        super().resume_writing()

    def _reading_again(self) -> None:
        if self._stalled is not None:
            self._stalled.cancel()
            self._stalled = None

    def _not_reading(self) -> None:
        self._stalled = None
        self.transport.abort()

    def _start_deadline(self) -> None:
        self._cancel_deadline()
        self._deadline = self.loop.call_later(REQUEST_TIMEOUT_S, self._too_slow)

    def _cancel_deadline(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()


def bounded_protocol(max_connections: int) -> type[H11Protocol]:
    """The protocol class for one server: its listeners share these seats' bound."""

    class Protocol(_Protocol):
        seats = Seats(max_connections)

    return Protocol
