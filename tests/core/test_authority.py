"""SPEC A1, S4 and the op table of section 10: who may call what, for every principal kind.

`EXPECTED` is SPEC's statement of who may call each op, written here independently of the
rules the op table (`dto.OPS`, each op's `who_may`) gives, one row per op constant: a rule
changed in `dto` fails the matrix below.
"""

from __future__ import annotations

from typing import Any

import pytest

from clankie import dto
from clankie.core.authority import authorize
from clankie.core.errors import ClankieError
from clankie.core.model import DeviceMode
from tests.core.builders import AGENT, CAPTAIN, OPERATOR, device

PRINCIPALS = {
    "operator": OPERATOR,
    "control_with_lease": device(DeviceMode.CONTROL, lease=True),
    "control_without_lease": device(DeviceMode.CONTROL, lease=False),
    "read_only": device(DeviceMode.READ_ONLY),
    "captain": CAPTAIN,
    "agent": AGENT,
}
ALL = set(PRINCIPALS)
READERS = ALL - {"agent"}  # P2: an agent reads only its own questions, through its own ops
ANSWERERS = {"operator", "control_with_lease"}
EXPECTED: dict[dto.Op[Any, Any], set[str]] = {
    dto.CONVERSATION_CREATE: {"operator"},
    dto.CONVERSATION_GET: READERS,
    dto.CONVERSATION_LIST: READERS,
    dto.CONVERSATION_SEND: ANSWERERS,
    dto.CONVERSATION_RESET: {"operator"},
    dto.CONVERSATION_ARCHIVE: {"operator"},  # issue 31: SPEC section 10 "Finding what waits"
    dto.CONVERSATION_SET_WORKSPACE: {"operator"},
    dto.EVENTS_TAIL: READERS,
    dto.RUN_GET: READERS,
    dto.RUN_CANCEL: ANSWERERS,  # R7: who may send may stop
    dto.DEVICE_PAIR: {"operator"},
    dto.DEVICE_TAKE_CONTROL: {"control_with_lease", "control_without_lease"},
    dto.DEVICE_RELEASE: {"control_with_lease", "control_without_lease", "read_only"},
    dto.CREDENTIAL_ISSUE: {"operator"},
    dto.CREDENTIAL_ROTATE: READERS,  # P2: an agent may do nothing but ask, read, wait, cancel
    # oneself; another credential only as an operator (the service checks that)
    dto.CREDENTIAL_LIST: {"operator"},
    dto.CREDENTIAL_REVOKE: {"operator"},
    dto.DEVICE_PAIR_START: {"operator"},
    dto.DEVICE_PAIR_FINISH: set(),  # H2: no token grants it; the pairing code is the credential
    dto.OWNER_REVOKE: {"operator"},
    dto.NATIVE_TAKEOVER: {"operator"},
    dto.ROOM_POST: {"operator", "captain"},
    dto.PANE_METADATA_SET: {"operator", "captain"},
    dto.PROJECT_REGISTER: {"operator"},
    dto.INPUT_GET: READERS,
    dto.INPUT_ANSWER: ANSWERERS,
    dto.INPUT_CANCEL: ANSWERERS,
    dto.SERVICE_INFO: READERS,
    dto.AGENT_ASK: {"agent"},  # P2, P4
    dto.AGENT_WAIT: {"agent"},
    dto.AGENT_LIST: {"agent"},
    dto.AGENT_CANCEL: {"agent"},
    dto.WHOAMI: ALL,  # P2: the bridge asks the service which kind its token is
}


def test_the_table_names_every_op_of_spec_section_10():
    assert set(EXPECTED) == set(dto.OPS.values())


@pytest.mark.parametrize("op", sorted(EXPECTED, key=lambda op: op.name),
                         ids=lambda op: op.name)
@pytest.mark.parametrize("who", sorted(PRINCIPALS))
def test_a1_s4_authority_matrix(op: dto.Op[Any, Any], who: str):
    if who in EXPECTED[op]:
        authorize(op, PRINCIPALS[who])
    else:
        with pytest.raises(ClankieError) as err:
            authorize(op, PRINCIPALS[who])
        assert err.value.code == "forbidden"


def test_s4_reading_grants_nothing_a_captain_reads_but_never_answers():
    authorize(dto.INPUT_GET, CAPTAIN)
    with pytest.raises(ClankieError):
        authorize(dto.INPUT_ANSWER, CAPTAIN)


@pytest.mark.parametrize(("who", "words"), [
    ("control_without_lease",
     "input_answer needs the active Take Control lease; this device does not hold it"),
    ("read_only", "a read-only device cannot call input_answer"),
    ("captain", "a captain credential cannot call input_answer"),
    ("agent", "an agent credential cannot call input_answer: it only asks, through `clankie "
              "mcp`; the owner's commands take the owner's token"),
])
def test_a1_a_refusal_names_the_op_by_its_wire_name(who: str, words: str):
    """Issue 32: `authorize` takes the op (its rule and its name), not a name to look up;
    the words of each refusal are today's."""
    with pytest.raises(ClankieError) as err:
        authorize(dto.INPUT_ANSWER, PRINCIPALS[who])
    assert (err.value.code, err.value.detail) == ("forbidden", words)
