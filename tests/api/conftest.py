"""In-process HTTP fixtures: the real app over a `World`'s service, through starlette's client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from starlette.testclient import TestClient

from clankie.api.app import create_app
from tests.world import World


@dataclass
class Http:
    world: World
    client: TestClient

    def post(self, op: str, payload: Any = None, token: str | None = "operator", *,
             raw: bytes | None = None, headers: dict[str, str] | None = None) -> Any:
        headers = dict(headers or {})
        if token == "operator":
            token = self.world.operator
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if raw is not None:
            return self.client.post(f"/v1/ops/{op}", content=raw, headers=headers)
        return self.client.post(f"/v1/ops/{op}", json={} if payload is None else payload,
                                headers=headers)


@pytest.fixture
def http(world: World) -> Iterator[Http]:
    with TestClient(create_app(world.service)) as client:
        yield Http(world, client)
