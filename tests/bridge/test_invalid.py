"""Issue 42, SPEC P1: a line that is no JSON-RPC 2.0 message gets JSON-RPC 2.0's own answer
(section 5.1: -32700 "Parse error" or -32600 "Invalid Request", `id` null), as `invalid`
words it from what the SDK's reader raised for the line (its own validation, run here)."""

from __future__ import annotations

import pytest
from mcp_types import jsonrpc_message_adapter

from clankie.bridge.server import invalid


def refused(line: str) -> Exception:
    try:
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # what the SDK's stdio reader hands on
        return exc
    raise AssertionError(f"{line!r} is a message")


@pytest.mark.parametrize(("line", "code", "message"), [
    ("not json", -32700, "Parse error"),
    ('{"jsonrpc": "2.0", "id": 1', -32700, "Parse error"),
    ('{"jsonrpc": "1.0", "id": 7, "method": "ping"}', -32600, "Invalid Request"),
    ('{"jsonrpc": "2.0", "method": 1}', -32600, "Invalid Request"),
    ("[]", -32600, "Invalid Request"),
    ('[{"jsonrpc": "2.0", "id": 8, "method": "ping"}]', -32600, "Invalid Request"),
    ("null", -32600, "Invalid Request"),
])
def test_p1_each_line_that_is_no_message_is_answered_with_id_null(line: str, code: int,
                                                                  message: str):
    answer = invalid(refused(line))
    assert answer is not None
    assert (answer.jsonrpc, answer.id, answer.error.code, answer.error.message) == (
        "2.0", None, code, message)


@pytest.mark.parametrize("line", ["", "   ", "\t"])
def test_p1_a_blank_line_is_no_message_and_gets_nothing(line: str):
    assert invalid(refused(line)) is None


def test_p1_anything_else_the_reader_raised_is_an_invalid_request():
    answer = invalid(UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"))
    assert answer is not None and answer.error.code == -32600 and answer.id is None
