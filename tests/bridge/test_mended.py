"""SPEC P1: the bridge answers every call a host sends. `mended` makes a lone surrogate in a
line of JSON-RPC U+FFFD (the SDK's reader dropped such a call, unanswered) and leaves every
other line, valid or not, as it came."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from clankie.bridge.server import mended

TEXT = st.text(st.characters(exclude_categories=()))  # surrogates too, alone and in pairs
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20)


def as_utf16_reads(value: Any) -> Any:
    """`value` as a UTF-16 decoder reads its strings: a pair is its character, a lone
    surrogate U+FFFD."""
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, list):
        return [as_utf16_reads(item) for item in value]
    if isinstance(value, dict):
        return {as_utf16_reads(k): as_utf16_reads(v) for k, v in value.items()}
    return value


def test_p1_a_lone_surrogate_becomes_the_replacement_character():
    line = b'{"jsonrpc":"2.0","id":1,"params":{"\\udc00k":["half \\ud83d"]}}\n'
    assert json.loads(mended(line)) == {"jsonrpc": "2.0", "id": 1,
                                        "params": {"\ufffdk": ["half \ufffd"]}}


def test_p1_lines_without_one_are_left_as_they_came():
    for line in [b'{"a":"\\ud83d\\ude00"}\n'.replace(b"\\ud83d\\ude00", b"x"),
                 b"not json \\ud83d\n", b'{"a": "\\\\ud83d"}\n', b"\xff\xfe\n", b"[" * 100_000]:
        assert mended(line) == line


@given(JSON)
def test_p1_any_message_reads_the_same_but_for_its_lone_surrogates(value: Any):
    line = json.dumps(value).encode() + b"\n"  # ASCII: every surrogate as an escape
    assert json.loads(mended(line)) == as_utf16_reads(value)
