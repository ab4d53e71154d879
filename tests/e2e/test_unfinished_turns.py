"""SPEC R9 end to end, in what the model reads: an owner message whose run was stopped
(R7), failed, or orphaned by a restart (R3) is replayed to the next run as its own turn
with a note saying so, never merged silently into the owner's next message (issue 31:
`"Take it slow and look around.\\n\\nNow set up tests please."`). A real `clankie serve`
with each provider's official SDK against the strict fake endpoint of
`tests/strict_endpoints.py`, which refuses any request its provider would (R8).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_providers import PROVIDERS, World, served_world
from tests.fakes import Reply, error_reply
from tests.strict_endpoints import strict_endpoint

EARLIER = "Take it slow and look around."
NEXT = "Now set up tests please."


@pytest.fixture(params=sorted(PROVIDERS))
def world(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[World]:
    yield from served_world(PROVIDERS[request.param], tmp_path, strict_endpoint)


def turns(provider: str, body: dict[str, Any]) -> list[tuple[str, str]]:
    """The request's messages as (role, text), tool messages and blocks left aside."""
    if provider == "openai":
        return [(m["role"], m["content"] or "") for m in body["messages"]
                if m["role"] in ("user", "assistant")]
    return [(m["role"], "\n\n".join(b["text"] for b in m["content"] if b["type"] == "text"))
            for m in body["messages"]]


def replayed(world: World, c: str, note: str) -> None:
    """The owner's next message, and the request it makes: the earlier message is its own
    user turn with `note`, an assistant turn comes between, and the next message is the
    last user turn, alone."""
    world.endpoint.plan.append(world.provider.text("Setting up tests."))
    assert world.run(world.send(c, NEXT))["status"] == "succeeded"
    assert world.endpoint.rejected == []
    said = turns(world.provider.name, world.endpoint.requests[-1]["body"])
    earlier = [i for i, (_, text) in enumerate(said) if EARLIER in text]
    assert len(earlier) == 1, said
    role, text = said[earlier[0]]
    assert role == "user" and note in text, said
    assert NEXT not in text, said  # never merged into the next message
    assert said[earlier[0] + 1][0] == "assistant", said
    assert said[-1] == ("user", NEXT), said


def test_r9_a_stopped_owner_message_is_replayed_as_its_own_turn_saying_so(world: World):
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("late").body, hold=release))
    c = world.conversation()
    run = world.send(c, EARLIER)
    world.endpoint.wait_for_requests(1)
    with world.served.client() as client:
        assert client.call("run_cancel", {"run_id": run})["error"] == "stopped_by_owner"
    release.set()
    replayed(world, c, "the owner stopped this before you finished")


def test_r9_a_failed_owner_message_is_replayed_as_its_own_turn_with_the_reason(world: World):
    world.endpoint.plan.append(error_reply(400, "this model does not exist"))
    c = world.conversation()
    failed = world.run(world.send(c, EARLIER))
    assert failed["status"] == "failed"
    replayed(world, c, f"this run failed: {failed['error']}")


def test_r9_an_owner_message_orphaned_by_a_restart_is_replayed_saying_so(world: World):
    release = threading.Event()
    world.endpoint.plan.append(Reply(body=world.provider.text("late").body, hold=release))
    c = world.conversation()
    run = world.send(c, EARLIER)
    world.endpoint.wait_for_requests(1)
    world.restart()
    release.set()
    assert world.run(run)["error"] == "orphaned_by_restart"
    replayed(world, c, "clankie restarted before this was done")
