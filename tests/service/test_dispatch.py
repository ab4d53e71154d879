"""SPEC A1 and the op table of section 10: each op named once (issue 32). Each op is one
constant of `dto` (`dto.INPUT_GET`: its name, shapes, rule and flags); the dispatcher table
(`service/base.py` `dispatch_table`, over the methods marked `@serves(dto.X)`) gives every op
of `dto.OPS` exactly one method, on one part of the service, and a method is authorized
under the rule of the op it serves, never under a name it writes itself."""

from __future__ import annotations

from typing import Any

import pytest

from clankie import dto
from clankie.core import authority
from clankie.core.errors import ClankieError
from clankie.core.model import Principal
from clankie.core.vocabulary import Code
from clankie.service import base
from clankie.service.agents import Agents
from clankie.service.base import Caller, dispatch_table, serves
from clankie.service.conversations import Conversations
from clankie.service.devices import Devices
from clankie.service.questions import Questions
from clankie.service.service import Service
from tests.api.test_authority import setup
from tests.world import World


def parts(world: World) -> list[object]:
    service = world.service
    return [service, service.conversations, service.questions, service.devices,
            service.agents]


def test_every_op_has_exactly_one_method_and_the_rule_its_constant_carries(world: World):
    table = world.service._table
    assert set(table) == set(dto.OPS)
    assert len({id(served.method) for served in table.values()}) == len(table)
    for name, served in table.items():
        assert served.op is dto.OPS[name]
        assert served.method.__name__ == name
        assert callable(served.op.who_may)


def test_the_service_calls_each_op_on_the_part_whose_method_serves_it(world: World):
    for name, served in world.service._table.items():
        [part] = [p for p in parts(world) if hasattr(type(p), name)]
        assert served.method == getattr(part, name)


def test_a_second_method_for_an_op_or_a_method_for_no_op_is_refused(world: World):
    class Twice:
        @serves(dto.INPUT_ANSWER)
        def input_answer(self, caller: Caller, r: dto.InputAnswer) -> dto.AnswerReply: ...

    stray = dto.Op("input_answered", dto.InputAnswer, dto.AnswerReply, authority.operator)

    class Stray:
        @serves(stray)
        def input_answered(self, caller: Caller, r: dto.InputAnswer) -> dto.AnswerReply: ...

    with pytest.raises(TypeError, match="served twice"):
        dispatch_table(dto.OPS, [*parts(world), Twice()])
    with pytest.raises(TypeError, match="not a dispatcher op"):
        dispatch_table(dto.OPS, [*parts(world), Stray()])
    with pytest.raises(TypeError, match="no method serves input_answer, input_cancel"):
        dispatch_table(dto.OPS, [p for p in parts(world) if p is not world.service.questions])
    served = world.service._table[dto.INPUT_ANSWER.name]
    assert served.method == world.service.questions.input_answer


def test_a_method_is_named_like_the_op_it_serves():
    with pytest.raises(TypeError, match="must be named input_get"):
        @serves(dto.INPUT_GET)
        def snapshot(self: Any, caller: Caller, r: dto.InputGet) -> dto.Snapshot: ...


def test_the_table_is_checked_at_import_against_every_part_class():
    """The service module checks `dto.OPS` against the part classes when it is imported;
    the same check passes here, and the service serves exactly that table."""
    table = dispatch_table(dto.OPS, [Service, Conversations, Questions, Devices, Agents])
    assert set(table) == set(dto.OPS)
    assert Service.ops is dto.OPS


@pytest.mark.parametrize("name", sorted(dto.OPS))
def test_each_method_is_authorized_under_its_own_ops_rule(world: World, monkeypatch,
                                                          name: str):
    token, payloads = setup(world, "operator")
    payload = payloads.get(dto.OPS[name], {"code": "x" * 40})  # device_pair_finish's
    asked: list[dto.Op[Any, Any]] = []

    def refuse(op: dto.Op[Any, Any], principal: Principal) -> None:
        asked.append(op)
        raise ClankieError(Code.FORBIDDEN, "refused by the test")

    before = world.dump()
    monkeypatch.setattr(base, "authorize", refuse)
    with pytest.raises(ClankieError) as refused:
        world.service.call(name, token, payload)
    if name == dto.DEVICE_PAIR_FINISH.name:  # no token grants it (H2): its code is its credential
        assert (asked, refused.value.code) == ([], Code.UNAUTHENTICATED)
    else:
        assert (asked, refused.value.code) == ([dto.OPS[name]], Code.FORBIDDEN)
        assert world.dump() == before  # refused, so nothing changed


def test_unknown_op_is_not_found(world: World):
    """The dispatcher, which owns the table, answers an op it does not have (the core's
    `authorize` is given the op, no longer a name to look up)."""
    with pytest.raises(ClankieError) as err:
        world.service.call("input_approve", world.operator, {})
    assert (err.value.code, err.value.detail) == (
        Code.NOT_FOUND, "there is no operation 'input_approve'")
