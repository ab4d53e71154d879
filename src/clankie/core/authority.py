"""Who may call which dispatcher operation (SPEC A1, S4 and the op table of section 10).

Owns the rules (`operator`, `reader`, `ANSWERER`, ...: who a principal must be) and the one
check `authorize`, with the words of every refusal; which rule guards which op is the op
table's (`clankie.dto`, each op's `who_may`). Authentication (is this token a
live credential?) is the service's job; this module decides, for a principal the service
has already found, whether it may perform an operation. Reading never grants answering.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

from .errors import ClankieError
from .vocabulary import Code, CredentialKind, DeviceMode

if TYPE_CHECKING:  # for the types only: `dto`, which holds the rules, loads no `core.model`
    from .model import Principal

Rule = Callable[["Principal"], bool]


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


class Guarded(Protocol):
    """An op as this module sees it: its name (for the refusal's words) and its rule. The
    op table (`clankie.dto`: each op a constant `Op`, which carries one of the rules above)
    is the one place that says which rule guards which op; `credential_rotate` on another
    credential than one's own is checked again by the service (only an operator may rotate
    someone else)."""

    @property
    def name(self) -> str: ...

    @property
    def who_may(self) -> Rule: ...


def authorize(op: Guarded, principal: Principal) -> None:
    """Raise `forbidden` unless `principal` may call `op` (its rule says so)."""
    if not op.who_may(principal):
        raise ClankieError(Code.FORBIDDEN, _why_forbidden(op.name, principal))


def _why_forbidden(op: str, p: Principal) -> str:
    if p.kind is CredentialKind.DEVICE and p.mode is DeviceMode.CONTROL and not p.holds_lease:
        return f"{op} needs the active Take Control lease; this device does not hold it"
    if p.kind is CredentialKind.DEVICE and p.mode is DeviceMode.READ_ONLY:
        return f"a read-only device cannot call {op}"
    if p.kind is CredentialKind.AGENT:  # its token in CLANKIE_TOKEN, say, for the CLI
        return (f"an agent credential cannot call {op}: it only asks, through `clankie "
                "mcp`; the owner's commands take the owner's token")
    return f"a {p.kind.value} credential cannot call {op}"
