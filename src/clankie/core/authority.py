"""Who may call which dispatcher operation (SPEC A1, S4 and the op table of section 10).

Owns the table `WHO_MAY` and the one check `authorize`. Authentication (is this token a
live credential?) is the service's job; this module decides, for a principal the service
has already found, whether it may perform an operation. Reading never grants answering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from .errors import ClankieError
from .model import CredentialKind, DeviceMode, Principal
from .vocabulary import Code

Rule = Callable[[Principal], bool]


def operator(p: Principal) -> bool:
    return p.kind is CredentialKind.OPERATOR


def active_controller(p: Principal) -> bool:
    """The currently active Take Control device: control mode and the unexpired lease."""
    return p.kind is CredentialKind.DEVICE and p.mode is DeviceMode.CONTROL and p.holds_lease


def reader(p: Principal) -> bool:
    """Anyone who reads the owner's conversations: every credential but an agent, which
    reads only its own questions, through its own operations (P2)."""
    return p.kind is not CredentialKind.AGENT


def agent(p: Principal) -> bool:
    return p.kind is CredentialKind.AGENT


def anyone(p: Principal) -> bool:
    return True


def captain(p: Principal) -> bool:
    return p.kind is CredentialKind.CAPTAIN


def control_device(p: Principal) -> bool:
    return p.kind is CredentialKind.DEVICE and p.mode is DeviceMode.CONTROL


def device(p: Principal) -> bool:
    return p.kind is CredentialKind.DEVICE


def nobody(p: Principal) -> bool:
    """No token grants it: the op's input is its own credential (a pairing code, H2)."""
    return False


def any_of(*rules: Rule) -> Rule:
    return lambda p: any(rule(p) for rule in rules)


ANSWERER: Final = any_of(operator, active_controller)

# op -> who may call it. `credential_rotate` on another credential than one's own is
# checked again by the service (only an operator may rotate someone else).
WHO_MAY: Final[dict[str, Rule]] = {
    "conversation_create": operator,
    "conversation_get": reader,
    "conversation_list": reader,
    "conversation_send": ANSWERER,
    "conversation_reset": operator,
    "conversation_archive": operator,
    "conversation_set_workspace": operator,
    "events_tail": reader,
    "run_get": reader,
    "run_cancel": ANSWERER,
    "device_pair": operator,
    "device_take_control": control_device,
    "device_release": device,
    "credential_issue": operator,
    "credential_rotate": reader,
    "credential_list": operator,
    "credential_revoke": operator,
    "device_pair_start": operator,
    "device_pair_finish": nobody,
    "owner_revoke": operator,
    "native_takeover": operator,
    "room_post": any_of(operator, captain),
    "pane_metadata_set": any_of(operator, captain),
    "project_register": operator,
    "input_get": reader,
    "input_answer": ANSWERER,
    "input_cancel": ANSWERER,
    "service_info": reader,
    # SPEC section 13: an agent asks, reads, waits on and cancels its own questions only.
    "agent_ask": agent,
    "agent_wait": agent,
    "agent_list": agent,
    "agent_cancel": agent,
    "whoami": anyone,
}


def authorize(op: str, principal: Principal) -> None:
    """Raise `forbidden` unless `principal` may call `op`."""
    try:
        rule = WHO_MAY[op]
    except KeyError:
        raise ClankieError(Code.NOT_FOUND, f"there is no operation {op!r}") from None
    if not rule(principal):
        raise ClankieError(Code.FORBIDDEN, _why_forbidden(op, principal))


def _why_forbidden(op: str, p: Principal) -> str:
    if p.kind is CredentialKind.DEVICE and p.mode is DeviceMode.CONTROL and not p.holds_lease:
        return f"{op} needs the active Take Control lease; this device does not hold it"
    if p.kind is CredentialKind.DEVICE and p.mode is DeviceMode.READ_ONLY:
        return f"a read-only device cannot call {op}"
    if p.kind is CredentialKind.AGENT:  # its token in CLANKIE_TOKEN, say, for the CLI
        return (f"an agent credential cannot call {op}: it only asks, through `clankie "
                "mcp`; the owner's commands take the owner's token")
    return f"a {p.kind.value} credential cannot call {op}"
