"""What both surfaces, the CLI and the TUI, say about a question or a run, said once.

Owns the words they share: which refusals mean "the state moved on, read it again" and
which "that question has ended" (the problem codes are `core.vocabulary.Code`), how an
ended question's outcome reads, a numbered option, that no question is pending, why a run
ended that no model ended, what a restart did and how to carry on (R9, the phone page
says it too; an agent's question is carried on by the agent asking again, P5), who asks
(Clankie, or an agent by its credential's name, its MCP client and the workspace: SPEC P3)
and what an answer to an agent means. Each surface puts these in
its own frame: the CLI names the command to run next, the TUI what its panel shows now.

Pure and standard library only (with `clankie.text`): the CLI imports it on its light
paths (`--help`, `--version`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

from clankie.core.vocabulary import Code, Reason, RunError
from clankie.text import continued

# The answer was bound to a state that moved on: read the question again and decide again.
READ_AGAIN: Final = frozenset({Code.STALE_REVISION, Code.STALE_INCARNATION})
# The question cannot take an answer any more; the problem carries its receipt.
ENDED: Final = frozenset({Code.ALREADY_ANSWERED, Code.REQUEST_CLOSED, Code.REQUEST_EXPIRED})

NO_QUESTION: Final = "No question is pending"  # each surface ends the sentence its way

# R9: what a restart did and how to carry on, said alike by every surface (the CLI, the
# TUI, the phone page, each in its own frame): a question R3 cancelled, and a run it failed
# (also why that run will not run again, R3).
CARRY_ON: Final = "send a message to carry on"
RESTARTED_QUESTION: Final = ("cancelled because clankie restarted: nothing was answered or "
                             f"run; {CARRY_ON}")
# P5: an agent's question R3 cancelled is carried on by the agent asking again (its wait
# reads `cancelled`, `restart`); a message cannot (its conversation takes none:
# `not_eligible`).
RESTARTED_AGENT_QUESTION: Final = ("cancelled because clankie restarted: nothing was answered; "
                                   "the agent reads that when it next looks, and may ask "
                                   "again")
RUN_INTERRUPTED: Final = ("interrupted by a restart and will not run again (clankie restarted "
                          "before it was done; anything it said before is not a finished "
                          f"run); {CARRY_ON}")
# An answer that did not reach the service (it is down, perhaps restarting): a restart
# would end the question (R3), so the owner is told before it happens, not only after.
ANSWER_NOT_SENT: Final = ("If clankie is restarting, this question will end and you will be "
                          "told how to carry on.")
# Issue 42: revoking an agent ends its waiting question at once (`invalidated`,
# `asker_revoked`), said by every surface in these words beside the reason's name.
ASKER_REVOKED: Final = "the agent that asked it was revoked, so no answer can reach it"
BECAUSE: Final[Mapping[str, str]] = {Reason.ASKER_REVOKED: ASKER_REVOKED}
# What the TUI's `/continue` sends: an ordinary owner message, never a replay (R9).
CONTINUE_MESSAGE: Final = "Carry on where you left off."
RUN_STOPPED: Final = "stopped by its owner and will not run again"  # R7

# An agent's question (SPEC P4, A11): what the agent is told of an answer, said to the owner
# beside the question, so that no prompt ("May I push?") reads as a request for approval.
AGENT_ANSWER: Final = "The agent is told your answer is your preference, not an approval."
CLANKIE: Final = "Clankie"


# The shapes these words read, as `clankie.dto`'s models have them (this module imports no
# pydantic); a surface that still reads the service's JSON passes the object as a mapping
# (issue 32: the TUI, until it reads typed snapshots), read by `_field`.


class Receipt(Protocol):
    @property
    def outcome(self) -> str: ...
    @property
    def answered_by(self) -> Any: ...
    @property
    def reason(self) -> str | None: ...
    @property
    def run_id(self) -> str | None: ...


class Option(Protocol):
    @property
    def label(self) -> str: ...
    @property
    def description(self) -> str: ...


class Asker(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def client(self) -> str | None: ...


def _field(shape: Receipt | Option | Asker | Mapping[str, Any], name: str) -> Any:
    """A field of a model (its attribute), or of the JSON object it came as (its key; a
    missing one is None)."""
    return shape.get(name) if isinstance(shape, Mapping) else getattr(shape, name)


BY_AGENT: Final = "by the agent that asked it"


def outcome(receipt: Receipt | Mapping[str, Any], unknown: str) -> str:
    """How a question ended, from its receipt: `answered`, `cancelled (explicit)`,
    `expired` (a reason that only repeats the outcome is not said twice); `unknown` when
    there is no receipt to read. Ended by an agent (`answered_by.kind`), it says so: only
    the agent that asked may cancel a question (P2), and the owner must not look for
    another of their own devices that did (H5)."""
    said = str(_field(receipt, "outcome") or unknown)
    reason = _field(receipt, "reason")
    because = f": {BECAUSE[reason]}" if reason in BECAUSE else ""
    said = f"{said} ({reason}{because})" if reason and reason != said else said
    return f"{said} {BY_AGENT}" if by_agent(receipt) else said


def by_agent(receipt: Receipt | Mapping[str, Any]) -> bool:
    """Whether an agent ended the question (its receipt's `answered_by.kind`)."""
    by = _field(receipt, "answered_by")
    return by is not None and _field(by, "kind") == "agent"


def option_line(number: int, option: Option | Mapping[str, Any]) -> str:
    """One option of a question, numbered as `--choice N` and `/question answer N` take
    it: `  2. spaces - four of them`, a label over several lines continued under itself."""
    description = f" - {_field(option, 'description')}" if _field(option, "description") \
        else ""
    return f"  {number}. {continued(str(_field(option, 'label')) + description, '     ')}"


def restarted(receipt: Receipt | Mapping[str, Any] | None) -> bool:
    """Whether a question ended because clankie restarted (R3: cancelled, reason
    `restart`)."""
    return receipt is not None and _field(receipt, "outcome") == "cancelled" \
        and _field(receipt, "reason") == Reason.RESTART


def restarted_question(agent: bool) -> str:
    """What a restart did to a question and how to go on (R9): Clankie's is carried on by a
    message; an agent's (`agent`) by the agent asking again (P5)."""
    return RESTARTED_AGENT_QUESTION if agent else RESTARTED_QUESTION


def problem(code: str, detail: str) -> str:
    """A refusal neither surface words itself: its code and the service's detail."""
    return f"{code}: {detail}"


_RUN_ENDED: Final[Mapping[str, str]] = {RunError.ORPHANED_BY_RESTART: RUN_INTERRUPTED,
                                        RunError.STOPPED_BY_OWNER: RUN_STOPPED}


def run_ended(error: str | None) -> str | None:
    """Why a run will not run again, when no model ended it (restart, owner's stop);
    else None (a model's error is said as it came)."""
    return _RUN_ENDED.get(error or "")


def quoted(text: str) -> str:
    """A name someone else chose (an MCP client names itself) in double quotes, its quotes
    and backslashes escaped with a backslash and its line breaks and tabs as escapes: it can
    never end its quotes, pose as more of the sentence or start a line of its own. Other
    control characters are the surface's to make visible (`clankie.text.visible`, as for
    any text from others, in the same notation)."""
    return '"' + one_line(text.replace("\\", "\\\\").replace('"', '\\"')) + '"'


def who(asker: Asker | Mapping[str, Any] | None) -> str:
    """Who asks a question (SPEC P3): `Clankie`, or `agent "coder" through "claude-code"`
    (the agent credential's name and the MCP client it asked through, when it said one)."""
    if asker is None:
        return CLANKIE
    client = _field(asker, "client")
    through = f" through {quoted(str(client))}" if client else ""
    return f"agent {quoted(str(_field(asker, 'name')))}{through}"


def asks(asker: Asker | Mapping[str, Any] | None, workspace: str | None) -> str:
    """Who asks, as a sentence's start: `Clankie asks`, or `Agent "coder" asks, through
    "claude-code", in /home/o/shop` (an agent's workspace is the agent's choice, so its
    line breaks are escaped too)."""
    if asker is None:
        return f"{CLANKIE} asks"
    said = f"Agent {quoted(str(_field(asker, 'name')))} asks"
    if _field(asker, "client"):
        said += f", through {quoted(str(_field(asker, 'client')))}"
    if workspace:
        said += f", in {one_line(workspace)}"
    return said


def short(text: str, most: int = 60) -> str:
    """Text from others shortened to its first `most` characters on one line, quoted: a
    prompt in a list of conversations."""
    return quoted(text if len(text) <= most else text[:most - 1] + "…")


def one_line(text: str) -> str:
    """Text shown within one line: its line feeds and tabs as escapes (`\\n`, `\\t`);
    every other control character, a carriage return included, is the surface's to make
    visible (`clankie.text.visible`), which keeps only these two as they are."""
    return text.replace("\n", "\\n").replace("\t", "\\t")


def answer_like(labels: Sequence[str], text: str) -> int | None:
    """Whether a chat line looks like an answer to a question with these option labels
    (A2: a message never answers): a number, `yes`, `no` or an option's label, case and
    spaces aside. The option's number (from 1) when it names one, 0 when it names none,
    None when it does not look like an answer. The TUI and the CLI say so after it."""
    said = text.strip().casefold()
    named = [label.strip().casefold() for label in labels]
    if said in named:
        return named.index(said) + 1
    number = said.isdecimal()  # what `int` reads (`isdigit` takes `²` too, which it does not)
    if number and named and len(said) <= 3 and 1 <= int(said) <= len(named):
        return int(said)
    return 0 if number or said in ("yes", "no") else None


def chat_not_answer(command: str) -> str:
    """What a surface says after a chat line that looks like an answer (`answer_like`)."""
    return (f"That was a chat message, not an answer: Clankie reads it, and the question is "
            f"still open. To answer it: {command}")


def accepted(receipt: Receipt | Mapping[str, Any]) -> str:
    """What an accepted answer means, after "Accepted": stored, and no more (A9). An
    agent's question has no run behind it (P3: `run_id` null), so its answer is the
    agent's to read; Clankie's starts a continuation that may not have run yet."""
    if _field(receipt, "run_id") is None:
        return "The agent reads it when it next looks; no run of Clankie starts."
    return "Clankie has not necessarily run yet."
