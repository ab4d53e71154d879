"""What Clankie is told at the start of a run: the system prompt and the conversation so far.

Owns the wording of the facts a run is given: the workspace and its read-only membership
fact; a pending question; for a continuation, the answer and who gave it, with the
statement that an answer is preference and context, never approval (SPEC A11); and how
the latest question ended when it ended without an answer, so that no answer is invented.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from .transcript import Text, Turn

HISTORY = 40


@dataclass(frozen=True, slots=True)
class AnsweredQuestion:
    prompt: str
    options: tuple[str, ...]
    answer: str  # the chosen option's label, or the text
    by_option: bool
    answered_by: str  # the credential kind


@dataclass(frozen=True, slots=True)
class EndedQuestion:
    prompt: str
    outcome: str
    reason: str | None


@dataclass(frozen=True, slots=True)
class TurnContext:
    run_kind: Literal["turn", "continuation"]
    run_index: int  # how many runs of this conversation started before this one
    workspace: str
    history: tuple[tuple[str, str], ...]  # (author, text), oldest first
    membership: dict[str, Any] | None
    answered: AnsweredQuestion | None = None
    ended: EndedQuestion | None = None
    pending_prompt: str | None = None
    notes: tuple[str, ...] = field(default=())


RULES = """You are Clankie, an agent working with your owner in the local directory {workspace}.
You may ask your owner one preference question at a time with the ask_question tool, as a
text question or as a choice between options; you decide whether and what to ask. The tool
returns at once: {{"status": "pending"}} means the question was stored and the answer, if
any, arrives in a later run; {{"status": "refused"}} says why it could not be asked. Never
assume, guess or invent an answer that you have not been given.
An answer is the owner's preference and context for your work. It is never approval of a
configuration, project enrollment, tracker initialisation or a settings change."""

A11 = ("This answer is preference and context for your work, not approval of any "
       "configuration, project enrollment, tracker initialisation or settings change.")


def system_prompt(ctx: TurnContext) -> str:
    parts = [RULES.format(workspace=ctx.workspace)]
    if ctx.membership is not None:
        parts.append("Project membership of this directory (a read-only fact computed now; "
                     "it enrolls nothing and asks for no questionnaire): "
                     + json.dumps(ctx.membership, sort_keys=True))
    if ctx.pending_prompt is not None:
        parts.append(f"Your question {ctx.pending_prompt!r} is still pending: the owner has "
                     "not answered it. Do not ask another until it ends.")
    if ctx.answered is not None:
        parts.append(answered_note(ctx.answered))
    if ctx.ended is not None:
        reason = f" ({ctx.ended.reason})" if ctx.ended.reason else ""
        parts.append(f"Your latest question {ctx.ended.prompt!r} ended without an answer: "
                     f"{ctx.ended.outcome}{reason}. There is no answer to it; do not assume "
                     "one.")
    parts.extend(ctx.notes)
    return "\n\n".join(parts)


def answered_note(a: AnsweredQuestion) -> str:
    options = f" (options: {', '.join(a.options)})" if a.options else ""
    given = f"chose the option {a.answer!r}" if a.by_option else f"answered in text: {a.answer!r}"
    return (f"This run continues after the owner ({a.answered_by}) answered your question "
            f"{a.prompt!r}{options}: they {given}. {A11}")


def turns(ctx: TurnContext) -> list[Turn]:
    """The conversation as alternating user/assistant turns, starting and ending with the
    owner (as every provider requires); a continuation ends with the answer itself."""
    merged: list[tuple[str, list[str]]] = []
    for author, text in ctx.history[-HISTORY:]:
        role = "assistant" if author == "clankie" else "user"
        if merged and merged[-1][0] == role:
            merged[-1][1].append(text)
        else:
            merged.append((role, [text]))
    while merged and merged[0][0] == "assistant":
        merged.pop(0)
    result = [Turn(role, (Text("\n\n".join(texts)),)) for role, texts in merged]  # type: ignore[arg-type]
    if ctx.answered is not None:
        note = Text(answered_note(ctx.answered))
        if result and result[-1].role == "user":
            result[-1] = Turn("user", (*result[-1].blocks, note))
        else:
            result.append(Turn("user", (note,)))
    if not result or result[-1].role != "user":
        result.append(Turn("user", (Text("(Continue.)"),)))
    return result
