"""What both surfaces, the CLI and the TUI, say about a question or a run, said once.

Owns the words they share: which refusals mean "the state moved on, read it again" and
which "that question has ended" (the problem codes are `core.vocabulary.Code`), how an
ended question's outcome reads, a numbered option, that no question is pending, and why
a run ended that no model ended. Each surface puts these in its own frame: the CLI names
the command to run next, the TUI what its panel shows now.

Pure and standard library only (with `clankie.text`): the CLI imports it on its light
paths (`--help`, `--version`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from clankie.core.vocabulary import Code, RunError
from clankie.text import continued

# The answer was bound to a state that moved on: read the question again and decide again.
READ_AGAIN: Final = frozenset({Code.STALE_REVISION, Code.STALE_INCARNATION})
# The question cannot take an answer any more; the problem carries its receipt.
ENDED: Final = frozenset({Code.ALREADY_ANSWERED, Code.REQUEST_CLOSED, Code.REQUEST_EXPIRED})

NO_QUESTION: Final = "No question is pending"  # each surface ends the sentence its way

# A run that ended without a model's error, and why it will not run again (R3).
RUN_INTERRUPTED: Final = ("interrupted by a restart and will not run again; anything it "
                          "said before is not a finished run")
RUN_STOPPED: Final = "stopped by its owner and will not run again"  # R7


def outcome(receipt: Mapping[str, Any], unknown: str) -> str:
    """How a question ended, from its receipt: `answered`, `cancelled (explicit)`,
    `expired` (a reason that only repeats the outcome is not said twice); `unknown` when
    there is no receipt to read."""
    said = str(receipt.get("outcome") or unknown)
    reason = receipt.get("reason")
    return f"{said} ({reason})" if reason and reason != said else said


def option_line(number: int, option: Mapping[str, Any]) -> str:
    """One option of a question, numbered as `--choice N` and `/question answer N` take
    it: `  2. spaces - four of them`, a label over several lines continued under itself."""
    description = f" - {option['description']}" if option["description"] else ""
    return f"  {number}. {continued(str(option['label']) + description, '     ')}"


def problem(code: str, detail: str) -> str:
    """A refusal neither surface words itself: its code and the service's detail."""
    return f"{code}: {detail}"


_RUN_ENDED: Final[Mapping[str, str]] = {RunError.ORPHANED_BY_RESTART: RUN_INTERRUPTED,
                                        RunError.STOPPED_BY_OWNER: RUN_STOPPED}


def run_ended(error: str | None) -> str | None:
    """Why a run will not run again, when no model ended it (restart, owner's stop);
    else None (a model's error is said as it came)."""
    return _RUN_ENDED.get(error or "")
