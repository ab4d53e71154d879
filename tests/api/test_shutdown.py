"""A clean stop wakes long-polls at once instead of waiting out their `wait_ms` (section 10)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import uvicorn

from clankie.api.app import HttpServer, create_app
from clankie.client import Client
from clankie.serve import unix_socket
from tests.polling import eventually
from tests.world import World


def test_stopping_wakes_a_waiting_long_poll(world: World, tmp_path: Path):
    c = world.conversation()
    sock = unix_socket(tmp_path / "s.sock")
    assert (tmp_path / "s.sock").stat().st_mode & 0o777 == 0o600
    server = HttpServer(uvicorn.Config(create_app(world.service), lifespan="off",
                                    log_level="warning"), world.service)
    serving = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    serving.start()
    outcome: list[dict] = []
    try:
        eventually(lambda: server.started, "the server to start")

        def long_poll() -> None:
            with Client(f"unix://{tmp_path / 's.sock'}", world.operator) as client:
                outcome.append(client.call("events_tail", {"conversation_id": c, "after": 0,
                                                           "wait_ms": 30_000}))

        poller = threading.Thread(target=long_poll)
        poller.start()
        eventually(lambda: world.service.waiting, "the long-poll to wait",
                   until=lambda waiting: waiting == 1)
        server.handle_exit(signal.SIGTERM, None)
        poller.join(timeout=10)
        assert not poller.is_alive(), "the long-poll was not woken by the stop"
        # marked (issue 42): a follower reads the service again once it is back
        assert outcome == [{"events": [], "next_after": 0, "oldest_seq": 1, "trimmed": False,
                            "service_stopping": True}]
    finally:
        server.should_exit = True
        serving.join(timeout=15)
    assert not serving.is_alive()


def test_p4_a_stop_ends_an_agents_wait_saying_so_and_a_plain_read_is_not_marked(
        world: World, tmp_path: Path):
    """Issue 42: an agent's wait (`agent_wait`) woken by the stop returned its question
    `pending`, unmarked, before `wait_s`; it now says `service_stopping` (P4), which a
    plain read (`wait_s` 0) never does."""
    token = world.call("credential_issue", {"kind": "agent", "name": "coder"})["token"]
    asked = world.call("agent_ask", {"workspace": str(world.workspace), "kind": "text",
                                     "prompt": "May I?"}, token)
    sock = unix_socket(tmp_path / "s.sock")
    server = HttpServer(uvicorn.Config(create_app(world.service), lifespan="off",
                                       log_level="warning"), world.service)
    serving = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    serving.start()
    outcome: list[dict] = []
    try:
        eventually(lambda: server.started, "the server to start")
        with Client(f"unix://{tmp_path / 's.sock'}", token) as client:
            read = client.call("agent_wait", {"request_id": asked["request_id"], "wait_s": 0})
        assert (read["status"], read["service_stopping"]) == ("pending", False)

        def wait() -> None:
            with Client(f"unix://{tmp_path / 's.sock'}", token) as client:
                outcome.append(client.call("agent_wait", {"request_id": asked["request_id"],
                                                          "wait_s": 30}))

        waiter = threading.Thread(target=wait)
        waiter.start()
        eventually(lambda: world.service.waiting, "the wait to wait",
                   until=lambda waiting: waiting == 1)
        server.handle_exit(signal.SIGTERM, None)
        waiter.join(timeout=10)
        assert not waiter.is_alive(), "the wait was not woken by the stop"
        assert [(o["status"], o["service_stopping"]) for o in outcome] == [("pending", True)]
    finally:
        server.should_exit = True
        serving.join(timeout=15)
    assert not serving.is_alive()
