"""SPEC A1, S4 and the op table of section 10: who may call what, for every principal kind."""

from __future__ import annotations

import pytest

from clankie.core.authority import WHO_MAY, authorize
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
EXPECTED = {
    "conversation_create": {"operator"},
    "conversation_get": READERS,
    "conversation_list": READERS,
    "conversation_send": ANSWERERS,
    "conversation_reset": {"operator"},
    "conversation_archive": {"operator"},  # issue 31: SPEC section 10 "Finding what waits"
    "conversation_set_workspace": {"operator"},
    "events_tail": READERS,
    "run_get": READERS,
    "run_cancel": ANSWERERS,  # R7: who may send may stop
    "device_pair": {"operator"},
    "device_take_control": {"control_with_lease", "control_without_lease"},
    "device_release": {"control_with_lease", "control_without_lease", "read_only"},
    "credential_issue": {"operator"},
    "credential_rotate": READERS,  # P2: an agent may do nothing but ask, read, wait, cancel
    "credential_list": {"operator"},  # oneself; another credential only as an operator (service)
    "credential_revoke": {"operator"},
    "device_pair_start": {"operator"},
    "device_pair_finish": set(),  # H2: no token grants it; the pairing code is the credential
    "owner_revoke": {"operator"},
    "native_takeover": {"operator"},
    "room_post": {"operator", "captain"},
    "pane_metadata_set": {"operator", "captain"},
    "project_register": {"operator"},
    "input_get": READERS,
    "input_answer": ANSWERERS,
    "input_cancel": ANSWERERS,
    "service_info": READERS,
    "agent_ask": {"agent"},  # P2, P4
    "agent_wait": {"agent"},
    "agent_list": {"agent"},
    "agent_cancel": {"agent"},
    "whoami": ALL,  # P2: the bridge asks the service which kind its token is
}


def test_the_table_names_every_op_of_spec_section_10():
    assert set(WHO_MAY) == set(EXPECTED)


@pytest.mark.parametrize("op", sorted(EXPECTED))
@pytest.mark.parametrize("who", sorted(PRINCIPALS))
def test_a1_s4_authority_matrix(op, who):
    if who in EXPECTED[op]:
        authorize(op, PRINCIPALS[who])
    else:
        with pytest.raises(ClankieError) as err:
            authorize(op, PRINCIPALS[who])
        assert err.value.code == "forbidden"


def test_s4_reading_grants_nothing_a_captain_reads_but_never_answers():
    authorize("input_get", CAPTAIN)
    with pytest.raises(ClankieError):
        authorize("input_answer", CAPTAIN)


def test_unknown_op_is_not_found():
    with pytest.raises(ClankieError) as err:
        authorize("input_approve", OPERATOR)
    assert err.value.code == "not_found"
