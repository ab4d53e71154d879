"""Issue 19: `import clankie.client` (what every CLI command that talks to the service
loads) brings no HTTP library: httpx, httpcore, anyio and h11 are not imported, nor asyncio,
which only the async client needs. Names are asserted, never a time."""

from __future__ import annotations

from tests.test_entry import imported, loaded

NOT_FOR_THE_CLIENT = ("httpx", "httpcore", "anyio", "h11", "httpx2", "httpcore2", "asyncio",
                      "ssl", "pydantic", "clankie.dto")


def test_importing_the_client_loads_no_http_library():
    _, names = imported("-c", "import clankie.client")
    assert loaded(names, "clankie.client") and loaded(names, "clankie.http1")
    assert [p for p in NOT_FOR_THE_CLIENT if loaded(names, p)] == []
