"""SPEC R7 at the model call: a run's stop scope ends a blocked read of the model endpoint
by shutting its socket down (the HTTP request is abandoned, no thread is left blocked),
ends a retry's wait, and refuses new connections once stopped."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpcore2
import pytest

from clankie.agent import stop
from clankie.agent.anthropic_messages import AnthropicModel
from clankie.agent.openai_chat import OpenAIChatModel
from clankie.agent.transcript import ModelError, Text, ToolCall, Turn, Waits
from clankie.agent.turn import run_turn
from tests.agent.test_turn import Recorder, Replay, context
from tests.fakes import Reply, anthropic_reply, model_endpoint, openai_reply
from tests.polling import eventually


def in_run(scope: stop.StopScope, body: Callable[[], Any]) -> dict[str, Any]:
    """Run `body` on a thread as part of the run whose scope is `scope`; what it did."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        with stop.within(scope):
            try:
                outcome["value"] = body()
            except BaseException as exc:  # the test reads it
                outcome["error"] = exc
            finally:
                outcome["ended"] = time.monotonic()

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    outcome["thread"] = thread
    return outcome


def stopped_after(scope: stop.StopScope, outcome: dict[str, Any], settle: Callable[[], bool]
                  ) -> float:
    """Stop once `settle()` says the body is blocked; how long the body took to end."""
    eventually(settle, "the body to block", timeout=10)
    asked = time.monotonic()
    scope.stop()
    outcome["thread"].join(5)
    assert not outcome["thread"].is_alive(), "the body is still blocked after the stop"
    return float(outcome["ended"] - asked)


@pytest.fixture
def silent_server() -> Iterator[tuple[str, int]]:
    """A TCP listener that accepts and never says a word."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    def accept() -> None:
        with contextlib.suppress(OSError):  # closed at the end without a connection
            accepted.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[:2]
    finally:
        for conn in accepted:
            conn.close()
        server.close()


def test_r7_a_stop_ends_a_blocked_read_at_once(silent_server: tuple[str, int]):
    host, port = silent_server
    stream = stop.StoppableBackend().connect_tcp(host, port, timeout=5)
    scope = stop.StopScope()
    outcome = in_run(scope, lambda: stream.read(1024, timeout=30))
    took = stopped_after(scope, outcome, lambda: bool(scope._sockets))
    assert isinstance(outcome.get("error"), httpcore2.ReadError), outcome
    assert took <= 1.0, f"the read ended {took:.3f} s after the stop"
    stream.close()


def test_r7_a_stopped_run_connects_nowhere_and_its_waits_end(silent_server: tuple[str, int]):
    host, port = silent_server
    scope = stop.StopScope()
    outcome = in_run(scope, lambda: stop.wait(30))
    took = stopped_after(scope, outcome, lambda: True)
    assert isinstance(outcome.get("error"), stop.Stopped) and took <= 1.0, (outcome, took)
    with stop.within(scope), pytest.raises(httpcore2.ConnectError):
        stop.StoppableBackend().connect_tcp(host, port, timeout=5)
    with pytest.raises(stop.Stopped):
        scope.check()


def test_r7_outside_a_run_nothing_stops():
    assert stop.current() is stop.NEVER
    stop.wait(0)
    with pytest.raises(RuntimeError):
        stop.NEVER.stop()


MODELS = {
    "openai": (lambda url: OpenAIChatModel("fake", f"{url}/v1"), openai_reply),
    "anthropic": (lambda url: AnthropicModel("fake", url), anthropic_reply),
}


@pytest.mark.parametrize("provider", sorted(MODELS))
def test_r7_a_stop_abandons_the_sdk_call_in_flight_and_the_client_goes_on(
        provider: str, monkeypatch: pytest.MonkeyPatch):
    """The SDK's own call, over the endpoint's httpx2 stack: it fails at once (a dropped
    connection is transient for R6, and the retry's wait ends with the stop), the endpoint
    sees the request abandoned, and the shared client serves the next run."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    make, reply = MODELS[provider]
    release = threading.Event()
    with model_endpoint() as endpoint:
        endpoint.plan += [Reply(body=reply("late").body, hold=release), reply("next")]
        model = make(endpoint.url)
        scope = stop.StopScope()
        turns = [Turn("user", (Text("hi"),))]
        waits = Waits(sleep=scope.wait)  # as the executor gives them (R6)
        outcome = in_run(scope, lambda: model.step("system", turns, [], waits))
        took = stopped_after(scope, outcome, lambda: bool(endpoint.requests))
        assert isinstance(outcome.get("error"), stop.Stopped | ModelError), outcome
        assert took <= 1.0, f"the SDK call ended {took:.3f} s after the stop"
        with endpoint.arrived:
            assert endpoint.arrived.wait_for(lambda: endpoint.hung_up, 5)
        release.set()
        assert model.step("system", turns, []) == [Text("next")]


def test_r7_a_stop_ends_a_connect_that_hangs():
    """A listener whose accept queue is full drops new SYNs: connecting hangs until the
    stop shuts the connecting socket down."""
    server = socket.create_server(("127.0.0.1", 0), backlog=0)
    host, port = server.getsockname()[:2]
    queued: list[socket.socket] = []
    try:
        for _ in range(8):  # fill the accept queue (its size varies by kernel)
            probe = socket.socket()
            probe.settimeout(0.3)
            try:
                probe.connect((host, port))
            except TimeoutError:
                probe.close()
                break
            queued.append(probe)
        else:
            pytest.skip("this kernel never leaves a connect hanging")
        scope = stop.StopScope()
        outcome = in_run(scope, lambda: stop.StoppableBackend().connect_tcp(host, port,
                                                                            timeout=30))
        took = stopped_after(scope, outcome, lambda: bool(scope._sockets))
        assert isinstance(outcome.get("error"), httpcore2.ConnectError), outcome
        assert took <= 1.0, f"the connect ended {took:.3f} s after the stop"
    finally:
        for probe in queued:
            probe.close()
        server.close()


def test_r7_the_turn_loop_takes_no_step_after_a_stop():
    """Stopped during a tool call: the next tool call of the same step is not made, and
    the model is not called again (no later step)."""
    scope = stop.StopScope()

    class StoppingTools(Recorder):
        def call(self, step: int, call: ToolCall) -> str:
            scope.stop()  # the owner stops the run while this tool runs
            return super().call(step, call)

    model = Replay([ToolCall("a", "list_files", "{}"), ToolCall("b", "list_files", "{}")],
                   [Text("never")])
    tools = StoppingTools()
    with pytest.raises(stop.Stopped):
        run_turn(model, context(), tools, stop=scope)
    assert [c.call_id for _, c in tools.calls] == ["a"]
    assert len(model.seen) == 1 and tools.said == []
