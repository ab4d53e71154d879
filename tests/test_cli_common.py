"""`clankie.cli.common.resolve_conversation` alone, against a fake client (SPEC section 10
"CLI": a conversation prefix of at least 4 hex characters; an ambiguous or unmatched one is
exit 2 and lists the candidates; the service always receives whole IDs).

The e2e tests (tests/e2e/test_cli.py) cover the real service; an ambiguous 4-character
prefix needs IDs chosen on purpose, which only a fake can give.
"""

from __future__ import annotations

from typing import Any, cast

import click
import pytest

from clankie.cli.common import USAGE, resolve_conversation
from clankie.client import Client

A = "abcd1234-0000-4000-8000-000000000001"
B = "abcd5678-0000-4000-8000-000000000002"


class Listing:
    """Answers `conversation_list` with the IDs that start with the prefix, as the service
    does; records what it was asked."""

    url, via_env = "unix:///run/clankie.sock", False

    def __init__(self, ids: list[str]) -> None:
        self.ids, self.asked = ids, []  # type: list[str], list[dict[str, Any]]

    def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        assert op == "conversation_list"
        self.asked.append(payload)
        found = [i for i in self.ids if i.startswith(payload["prefix"])][:payload["limit"]]
        return {"conversations": [listed(i) for i in found], "next_after": None}


def listed(conversation_id: str) -> dict[str, Any]:
    """A `conversation_list` item, whole: the CLI reads it into its model (issue 32)."""
    return {"conversation_id": conversation_id, "kind": "owner", "workspace": None,
            "incarnation": conversation_id, "revision": 1, "native_owner": None,
            "created_at": "2026-12-01T00:00:00.000000Z"}


def resolve(ids: list[str], given: str) -> tuple[str, Listing]:
    client = Listing(ids)
    return resolve_conversation(cast(Client, client), given, as_json=False), client


def test_a_unique_prefix_of_4_or_more_is_the_whole_id():
    assert resolve([A, B], "abcd1")[0] == A
    assert resolve([A, B], "ABCD5")[0] == B  # pasted in upper case
    whole, client = resolve([A, B], A)
    assert whole == A and client.asked == []  # a whole ID is sent as given, without a read


def test_an_ambiguous_prefix_is_exit_2_and_lists_the_candidates():
    with pytest.raises(click.BadParameter) as raised:
        resolve([A, B], "abcd")
    assert raised.value.exit_code == USAGE
    message = raised.value.format_message()
    assert "ambiguous" in message and A in message and B in message


def test_an_unmatched_prefix_is_exit_2_and_says_how_to_list_them():
    with pytest.raises(click.BadParameter) as raised:
        resolve([A, B], "ffff")
    assert raised.value.exit_code == USAGE
    message = raised.value.format_message()
    assert "no conversation starts with 'ffff'" in message
    assert "clankie conversations list" in message


@pytest.mark.parametrize("given", ["abc", "a", "ab-c", "", "zzzz", "abcd!"])
def test_fewer_than_4_hex_characters_or_not_hex_is_exit_2_before_any_read(given: str):
    client = Listing([A, B])
    with pytest.raises(click.BadParameter) as raised:
        resolve_conversation(cast(Client, client), given, as_json=False)
    assert raised.value.exit_code == USAGE and client.asked == []


@pytest.mark.parametrize("key", ["request_id", "incarnation", "option_id"])
@pytest.mark.parametrize("given", ["abc-", "ab-c", "abc", "zzzz"])
def test_a_request_incarnation_or_option_prefix_follows_the_same_rule(key: str, given: str):
    """Section 10 "CLI": every ID the CLI takes, not only the conversation's, is a whole ID or
    a prefix of at least 4 hex characters; anything else is exit 2 before any read."""
    from clankie.cli.conversations import Ids, _whole_ids

    client = Listing([A])
    ids = Ids(**{"request_id": A, "incarnation": A, "option_id": None, key: given})
    with pytest.raises(click.BadParameter) as raised:
        _whole_ids(cast(Client, client), A, ids, None, as_json=False)
    assert raised.value.exit_code == USAGE and client.asked == []
