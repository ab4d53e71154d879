"""The recipe "Add a dispatcher op" (docs/architecture.md), followed once in a test's scope
(issue 32: an op is named once, by its constant in the op table). A throwaway op, `ping`,
gets its shapes and its constant (step 1), a rule of `clankie.core.authority` (step 2) and
one method marked `@serves` (step 3), in a table and a service of this test only; the
dispatcher, the authority check (SPEC A1), the edge and the OpenAPI document (SPEC section
10, "Dispatcher") then serve it with no other edit."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

import pytest
from pydantic import Field
from starlette.testclient import TestClient

from clankie import dto
from clankie.api.app import create_app
from clankie.api.openapi import build_openapi
from clankie.core import authority as may
from clankie.core.errors import ClankieError
from clankie.service.base import Caller, serves
from clankie.service.service import Service
from tests.world import World


# Step 1 (`dto.py`): the input shape, the output shape, the op's constant with its rule
# (step 2: a rule of `clankie.core.authority`), and its row in the table.
class Ping(dto.Strict):
    text: Annotated[str, Field(max_length=8)]


class Pong(dto.Out):
    text: str
    kind: str


PING = dto.Op("ping", Ping, Pong, may.any_of(may.operator, may.captain))
OPS = {**dto.OPS, PING.name: PING}


# Step 3: one method named like the op, marked `@serves(PING)`, on a part of the service.
class PingService(Service):
    ops: ClassVar = OPS

    @serves(PING)
    def ping(self, caller: Caller, r: Ping) -> Pong:
        with self.ctx.read(caller) as c:
            return Pong(text=r.text, kind=c.principal.kind.value)


@pytest.fixture
def pinging(world: World) -> PingService:
    return PingService(world.store, world.service.settings, clock=world.clock)


def test_the_dispatcher_serves_the_new_op_and_validates_its_input(world: World,
                                                                  pinging: PingService):
    assert pinging.call("ping", world.operator, {"text": "hi"}) == Pong(text="hi",
                                                                         kind="operator")
    with pytest.raises(ClankieError) as err:
        pinging.call("ping", world.operator, {"text": "far too long"})
    assert err.value.code == "invalid_request"
    assert "ping" not in world.service.ops  # the real service's table is untouched


def test_a1_the_new_op_is_authorized_by_its_constants_rule(world: World, pinging: PingService):
    captain = world.call("credential_issue", {"kind": "captain", "name": "cap"})["token"]
    reader = world.call("device_pair", {"name": "tv", "mode": "read_only"})["token"]
    assert pinging.call("ping", captain, {"text": "hi"}) == Pong(text="hi", kind="captain")
    with pytest.raises(ClankieError) as err:
        pinging.call("ping", reader, {"text": "hi"})
    assert (err.value.code, err.value.detail) == ("forbidden",
                                                  "a read-only device cannot call ping")


def test_the_edge_and_the_openapi_document_pick_it_up(world: World, pinging: PingService):
    headers = {"Authorization": f"Bearer {world.operator}"}
    with TestClient(create_app(pinging)) as client:
        response = client.post("/v1/ops/ping", json={"text": "hi"}, headers=headers)
        document = client.get("/v1/openapi.json").json()
    assert (response.status_code, response.json()) == (200, {"text": "hi", "kind": "operator"})
    assert document == build_openapi(tuple(OPS.values()))
    post = document["paths"]["/v1/ops/ping"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Ping"}
    assert document["components"]["schemas"]["Ping"]["properties"]["text"]["maxLength"] == 8


def test_an_op_without_its_method_or_a_method_without_its_op_is_refused(world: World):
    class Unserved(Service):
        ops: ClassVar[Any] = OPS

    class Unlisted(Service):
        @serves(PING)
        def ping(self, caller: Caller, r: Ping) -> Pong: ...

    with pytest.raises(TypeError, match="no method serves ping"):
        Unserved(world.store)
    with pytest.raises(TypeError, match="ping serves ping, which is not a dispatcher op"):
        Unlisted(world.store)
