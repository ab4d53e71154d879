"""What a line typed in the TUI means: a chat message, or one of the `/question` commands.

Owns the parsing only (pure, no I/O). Exactly `/question`, `/question answer N`,
`/question text ...`, `/question cancel`, `/stop` (SPEC R7), `/continue` (R9: the owner's
message "Carry on where you left off.") and `/help` are commands; a malformed
`/question ...` is a usage hint; any other line that starts with `/` is refused on the spot
with the commands, the nearest first, and sent nowhere (SPEC section 10 "Operator TUI");
`//text` is the chat message `/text`; every other line, `yes` and `1` included, is a chat
message and never an answer (SPEC A2).
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

from clankie import wording

USAGE = ("/question                 show the current question\n"
         "/question answer N        answer with the N-th option shown\n"
         "/question text WORDS      answer in words (where the question allows text)\n"
         "/question cancel          cancel the question shown\n"
         "/stop                     stop Clankie's running run (and those queued behind it)\n"
         f"/continue                 send \"{wording.CONTINUE_MESSAGE}\" (after a restart)\n"
         "/help                     this help; Ctrl+Q quits\n"
         "Anything else is a chat message to Clankie; it never answers a question\n"
         "(to send one that starts with /, begin it with //).")
# In an agent's conversation (SPEC P3): no run of Clankie to stop, and no chat message.
AGENT_USAGE = ("/question                 show the agent's question\n"
               "/question answer N        answer with the N-th option shown\n"
               "/question text WORDS      answer in words (where the question allows text)\n"
               "/question cancel          cancel the question shown\n"
               "/help                     this help; Ctrl+Q quits\n"
               "The agent reads only your answer: nothing else typed here is sent.")
COMMANDS = ("/question", "/stop", "/continue", "/help")


@dataclass(frozen=True)
class Chat:
    text: str


@dataclass(frozen=True)
class ShowQuestion:
    pass


@dataclass(frozen=True)
class AnswerOption:
    number: int  # 1-based, as displayed


@dataclass(frozen=True)
class AnswerText:
    text: str


@dataclass(frozen=True)
class CancelQuestion:
    pass


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Stop:
    pass


@dataclass(frozen=True)
class Continue:
    """R9: carry on after a restart or a stop, as an ordinary owner message."""


@dataclass(frozen=True)
class Usage:
    message: str


Command = (Chat | ShowQuestion | AnswerOption | AnswerText | CancelQuestion | Help | Stop
           | Continue | Usage)


def parse(line: str) -> Command | None:
    """The command a submitted line means; None for an empty line."""
    text = line.strip()
    if not text:
        return None
    if text == "/help":
        return Help()
    if text == "/stop":
        return Stop()
    if text == "/continue":
        return Continue()
    if text.startswith("//"):
        return Chat(text[1:])
    words = text.split(maxsplit=2)
    if words[0] in ("/stop", "/continue", "/help"):
        return Usage(f"usage: {words[0]} (with nothing after it); nothing was sent")
    if text.startswith("/") and words[0] != "/question":
        return Usage(_not_a_command(words[0]))
    if words[0] != "/question":
        return Chat(line.rstrip("\n"))
    if len(words) == 1:
        return ShowQuestion()
    if words[1] == "answer":
        if len(words) == 3 and words[2].isdigit() and int(words[2]) >= 1:
            return AnswerOption(int(words[2]))
        return Usage("usage: /question answer N  (N: the number of a displayed option)")
    if words[1] == "text":
        rest = text.split(maxsplit=2)
        if len(rest) == 3:
            return AnswerText(line.strip().split(maxsplit=2)[2])
        return Usage("usage: /question text WORDS")
    if words[1] == "cancel" and len(words) == 2:
        return CancelQuestion()
    return Usage("usage: /question, /question answer N, /question text WORDS, "
                 "/question cancel")


QUIT_WORDS = frozenset({"/quit", "/exit", "/q", "/bye", "/close"})


def _not_a_command(word: str) -> str:
    nearest = sorted(COMMANDS, key=lambda c: -SequenceMatcher(None, word, c).ratio())
    meant = (" Ctrl+Q quits." if word.lower() in QUIT_WORDS else
             f" Did you mean {nearest[0]}?"
             if SequenceMatcher(None, word, nearest[0]).ratio() >= 0.6 else "")
    return (f"{word} is not a command; nothing was sent.{meant} Commands: "
            f"{', '.join(nearest)} (/help says more). To send a message that starts with /, "
            "begin it with //.")
