"""Issue 32: the CLI reads the service's results as the `dto` output models.

`--json` prints the model as the service sent it (SPEC section 10: scripts read the
service's object), byte for byte; a request built from what the person typed that does not
fit its input model is sent as typed, so the service refuses it in its own words
(`invalid_request`, exit 2), as it did before the CLI had typed requests; a reply that does
not fit its model is "not clankie" (exit 1, issue 19's F2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

import click
import pytest

from clankie import dto
from clankie.cli.common import USAGE, Unfit, call, print_json, request_of, typed
from clankie.client import ApiError, Client
from clankie.core.errors import ClankieError
from clankie.core.model import RunStatus
from tests.world import TEXT, World

C = "abcd1234-0000-4000-8000-000000000001"


class Wire:
    """A client whose `call` answers with what the world's service says, as JSON on the
    wire; records what it was sent."""

    url, via_env = "unix:///fake", False

    def __init__(self, world: World) -> None:
        self.world, self.sent = world, []  # type: World, list[tuple[str, dict[str, Any]]]

    def call(self, op: str, payload: dict[str, Any]) -> dict[str, Any]:
        self.sent.append((op, payload))
        try:
            result = self.world.call(op, payload)
        except ClankieError as exc:  # as the edge sends it: a problem document
            raise ApiError({"code": exc.code.value, "status": exc.status,
                            "detail": exc.detail}) from None
        return cast(dict[str, Any], json.loads(json.dumps(result)))


def test_json_prints_every_result_as_the_service_sent_it(world: World,
                                                         capsys: pytest.CaptureFixture[str]):
    """Section 10 `--json`: the same bytes as the service's object, for the results the CLI
    prints: lists, a conversation with its runs, snapshots pending and ended, a receipt, an
    events page with each kind of event, credentials, the service's info."""
    c = world.conversation()
    asked = world.ask(c)
    world.answer(c, asked, option=1)
    world.ask(c, TEXT)
    run_id = world.running_turn(c)
    world.service.runs.finish_run(run_id, RunStatus.FAILED, "model_error")
    wire = Wire(world)
    client = cast(Client, wire)
    request_id = asked["pending"]["request_id"]
    reads: list[tuple[dto.Op[Any, Any], dict[str, Any]]] = [
        (dto.CONVERSATION_LIST, {"archived": True}),
        (dto.CONVERSATION_GET, {"conversation_id": c}),
        (dto.INPUT_GET, {"conversation_id": c}),
        (dto.INPUT_GET, {"conversation_id": c, "request_id": request_id}),
        (dto.EVENTS_TAIL, {"conversation_id": c, "limit": 500}),
        (dto.RUN_GET, {"run_id": run_id}),
        (dto.CREDENTIAL_LIST, {}),
        (dto.SERVICE_INFO, {}),
    ]
    for spec, fields in reads:
        raw = wire.call(spec.name, fields)
        print_json(raw)
        before = capsys.readouterr().out
        print_json(call(client, spec, request_of(spec, **fields), as_json=True))
        assert capsys.readouterr().out == before, spec.name
    kinds = {e["type"] for e in wire.call("events_tail", {"conversation_id": c,
                                                          "limit": 500})["events"]}
    assert {"message", "run_status", "input_requested", "input_resolved"} <= kinds


def test_input_that_does_not_fit_is_sent_as_typed_and_the_service_words_the_refusal(
        world: World, capsys: pytest.CaptureFixture[str]):
    """R8 (never only whitespace) and the bounds are the service's to say: the CLI sends
    what was typed, and says the service's `invalid_request` (exit 2) as before."""
    c = world.conversation()
    blank = request_of(dto.CONVERSATION_SEND, conversation_id=c, text="   ")
    assert blank == Unfit({"conversation_id": c, "text": "   "})
    wire = Wire(world)
    with pytest.raises(click.exceptions.Exit) as exited:
        call(cast(Client, wire), dto.CONVERSATION_SEND, blank, as_json=False)
    assert exited.value.exit_code == USAGE
    assert wire.sent == [("conversation_send", {"conversation_id": c, "text": "   "})]
    assert capsys.readouterr().err.startswith("clankie: invalid_request: ")
    fits = request_of(dto.CONVERSATION_SEND, conversation_id=c, text="hello")
    assert isinstance(fits, dto.ConversationSend)


def test_a_reply_that_does_not_fit_its_model_is_not_clankie():
    """Issue 19 F2: a `{}` (some other JSON service) is not a clankie result."""
    from clankie.client import NotClankie

    with pytest.raises(NotClankie) as raised:
        typed(cast(Client, Wire.__new__(Wire)), dto.CONVERSATION_LIST, {})
    assert "did not answer like clankie" in str(raised.value)
    assert not isinstance(raised.value, ApiError)  # issue 32: siblings, never caught as one


def test_the_cli_modules_read_no_json_object_by_key():
    """Issue 32's count: no `dict[str, Any]` annotation is left in the CLI's modules."""
    src = Path(__file__).resolve().parents[1] / "src" / "clankie" / "cli"
    assert [p.name for p in src.glob("*.py") if "dict[str, Any]" in p.read_text()] == []
