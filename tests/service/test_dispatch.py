"""SPEC A1 and the op table of section 10: each op named once. The dispatcher table
(`service/base.py` `OPS_SERVED`, filled by `@op`) gives every op of `dto.OPS` exactly one
method, on one part of the service, and `core/authority.py` exactly one rule, and a method
is authorized under the rule of the op it serves, never under a name it writes itself."""

from __future__ import annotations

from typing import Any

import pytest

from clankie import dto
from clankie.core.authority import WHO_MAY
from clankie.core.errors import ClankieError
from clankie.core.model import Principal
from clankie.core.vocabulary import Code
from clankie.service import base
from clankie.service.base import OPS_SERVED, op
from clankie.service.questions import Questions
from tests.api.test_authority import setup
from tests.world import World


def test_every_op_has_exactly_one_method_and_one_rule():
    assert OPS_SERVED.keys() == dto.OPS.keys() == WHO_MAY.keys()
    assert len({id(method) for method in OPS_SERVED.values()}) == len(OPS_SERVED)
    for name, method in OPS_SERVED.items():
        assert method.__name__ == name


def test_the_service_calls_each_op_on_the_part_whose_method_serves_it(world: World):
    parts = [world.service, world.service.conversations, world.service.questions,
             world.service.devices, world.service.agents]
    for name, method in OPS_SERVED.items():
        [part] = [p for p in parts if getattr(type(p), name, None) is method]
        assert world.service._table[name] == getattr(part, name)


def test_a_second_method_for_an_op_or_a_method_for_no_op_is_refused():
    def input_answer(self: Any, caller: Any, r: Any) -> Any: ...

    def input_answered(self: Any, caller: Any, r: Any) -> Any: ...

    with pytest.raises(TypeError, match="served twice"):
        op(input_answer)
    with pytest.raises(TypeError, match="not a dispatcher op"):
        op(input_answered)
    assert OPS_SERVED["input_answer"] is Questions.input_answer


@pytest.mark.parametrize("name", sorted(dto.OPS))
def test_each_method_is_authorized_under_its_own_ops_rule(world: World, monkeypatch,
                                                          name: str):
    token, payloads = setup(world, "operator")
    payloads["device_pair_finish"] = {"code": "x" * 40}
    asked: list[str] = []

    def refuse(op_name: str, principal: Principal) -> None:
        asked.append(op_name)
        raise ClankieError(Code.FORBIDDEN, "refused by the test")

    before = world.dump()
    monkeypatch.setattr(base, "authorize", refuse)
    with pytest.raises(ClankieError) as refused:
        world.service.call(name, token, payloads[name])
    if name == "device_pair_finish":  # no token grants it (H2): its code is its credential
        assert (asked, refused.value.code) == ([], Code.UNAUTHENTICATED)
    else:
        assert (asked, refused.value.code) == ([name], Code.FORBIDDEN)
        assert world.dump() == before  # refused, so nothing changed
