"""`clankie chat`: open the operator TUI on a conversation.

Owns choosing the conversation: the one named (ID or unique prefix), else the most
recently active owner conversation bound to the directory (default: the current one) or
its nearest parent that no native seat owns (SPEC section 10 "Finding what waits"), else a
new one for it; the TUI is told which, in words. A coding agent's question waiting in that
directory is in a conversation of its own (SPEC P3): the TUI is told to say so, with the
command that opens it. The TUI itself is `clankie.tui`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from clankie import wording
from clankie.core.vocabulary import Code

from .common import (
    USAGE,
    UUID,
    Arg,
    Command,
    call,
    complete_conversation,
    connect,
    current_directory,
    directory_conversation,
    exit_with,
    request_of,
    resolve_conversation,
    warn,
    workspace_conversations,
)

if TYPE_CHECKING:
    from clankie import dto
    from clankie.client import ApiError, Client


@click.command("chat", cls=Command)
@click.argument("conversation", cls=Arg, required=False,
                help="A conversation ID or unique prefix (default: this directory's latest).",
                shell_complete=complete_conversation)
@click.option("--workspace", metavar="DIR", type=click.Path(path_type=Path),
              help="Open (or start) this directory's conversation.")
def chat(conversation: str | None, workspace: Path | None) -> None:
    """Talk with Clankie and answer its questions (/question) in the terminal."""
    from clankie import dto
    from clankie.client import AsyncClient
    from clankie.tui.app import ChatApp

    notes: list[str] = []
    with connect() as client:
        if conversation is not None:
            chosen = _existing(client, conversation)
        else:
            target = str(workspace.resolve() if workspace else current_directory())
            mine, agents = _latest_in(client, target)
            where = "this directory" if workspace is None else wording.one_line(target)
            if mine is not None:
                chosen = mine.conversation_id
                path = mine.workspace.path if mine.workspace else ""  # an owner's has one
                notes.append(f"Opened conversation {chosen[:8]}, bound to "
                             f"{wording.one_line(path)}" + (
                                 ", a parent of this directory." if path != target else "."))
            else:
                chosen = call(client, dto.CONVERSATION_CREATE, request_of(
                    dto.CONVERSATION_CREATE, workspace=target), as_json=False).conversation_id
                notes.append(f"No conversation is bound to {wording.one_line(target)} or a "
                             f"parent of it: started a new one, {chosen[:8]}.")
            notes += _agents_waiting(client, agents, where)
        url, token = client.url, client.token
    app = ChatApp(AsyncClient(url, token), chosen, url, notes=notes)
    app.run()
    if app.return_code:  # 5 after a refusal under T2 (the listener is not yours)
        exit_with(app.return_code)


def _existing(client: Client, given: str) -> str:
    """The whole ID of the conversation named, read once so that an unknown one is a usage
    error (exit 2) said before any screen opens, not an empty chat."""
    chosen = resolve_conversation(client, given, as_json=False)
    if not UUID.match(given.strip().lower()):
        return chosen  # a prefix is resolved from the listing: it exists

    def unknown(err: ApiError) -> None:
        if err.code == Code.NOT_FOUND:
            warn(f"clankie: no conversation {chosen}; list them with "
                 "`clankie conversations list`, or run `clankie chat` to start one here")
        else:
            warn(f"clankie: {err.code}: {err.detail}")

    from clankie import dto

    call(client, dto.CONVERSATION_GET, dto.ConversationRef(conversation_id=chosen),
         as_json=False, explain=unknown, exit_of={"not_found": USAGE})
    return chosen


def _latest_in(client: Client, workspace: str
               ) -> tuple[dto.ListedConversationOut | None, list[dto.ListedConversationOut]]:
    """The conversation for `workspace` that chat can talk in (`directory_conversation`,
    one no native seat owns), and the agents' conversations of `workspace` itself whose
    question waits."""
    listed = workspace_conversations(client, workspace, as_json=False)
    agents = [c for c in listed if c.kind == "agent" and c.pending
              and c.workspace is not None and c.workspace.path == workspace]
    return directory_conversation(listed, free=True), agents


def _agents_waiting(client: Client, agents: list[dto.ListedConversationOut], where: str,
                    most: int = 10) -> list[str]:
    """A line for each of (at most `most` of) `agents`' conversations whose question waits:
    who asks and the command that opens it."""
    from clankie import dto

    notes = []
    for c in agents[:most]:
        pending = call(client, dto.INPUT_GET, dto.InputGet(conversation_id=c.conversation_id),
                       as_json=False).pending
        if pending is not None:
            asker = pending.asker or c.asker
            notes.append(f"{wording.asks(asker, None)}, in {where} too: open it with "
                         f"clankie chat {c.conversation_id[:8]}")
    return notes
