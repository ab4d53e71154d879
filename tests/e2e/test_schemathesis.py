"""Fuzzing the dispatcher from its own OpenAPI document, on a real `clankie serve` over TCP.

Checks: no 5xx, every response conforms to the document (200 bodies to the op's output
schema, problems to the problem schema), documented status codes and content types.
Bounded: a fixed number of derandomized examples per operation.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from clankie.api.openapi import build_openapi
from tests.e2e.served import Served

CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance,
          content_type_conformance]
# These two would lock the fuzzer out of every later operation; they have their own tests.
LOCKOUTS = ["owner_revoke", "credential_rotate"]


@pytest.fixture(scope="module")
def fuzzed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    server = Served.start(tmp_path_factory.mktemp("fuzz") / "home")
    try:
        yield server
    finally:
        assert server.stop() == 0


# schemathesis' lazy fixture loader does not work with pytest 9, so the schema is loaded
# from the generator here, and the test below proves the server serves exactly this one.
schema = schemathesis.openapi.from_dict(build_openapi()).exclude(operation_id=LOCKOUTS)


def test_the_server_serves_the_fuzzed_document(fuzzed_server: Served):
    with fuzzed_server.client(url=fuzzed_server.tcp_url) as client:
        assert client.openapi() == build_openapi()


@schema.parametrize()
@settings(max_examples=30, derandomize=True, deadline=None,
          suppress_health_check=list(HealthCheck))
def test_no_5xx_and_every_response_matches_the_document(case, fuzzed_server: Served):
    token = Path(fuzzed_server.home.token_file).read_text().strip()
    case.call_and_validate(base_url=fuzzed_server.tcp_url, checks=CHECKS,
                           headers={"Authorization": f"Bearer {token}"})
