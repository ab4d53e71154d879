"""The agents part (SPEC section 13): a coding agent's questions, asked through `clankie mcp`.

Owns what an `agent` credential may do, and only that: ask in its own conversation of a
workspace (made by its first ask, one per agent credential and workspace identity, P3),
read and wait on how its own questions stand, list them, cancel its own pending one, and
say who it is (`whoami`, which any credential may ask). Another credential's question is
`unknown_request`, never `forbidden`: it tells nothing. Its questions are answered by the
owner as any other (`input_answer`: an operator or the active Take Control device, A1),
and an answer starts no run. When the agent first reads how a question ended is noted
(`collected_at`): information only, it never consumes, gates or hides anything.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from pydantic import BaseModel

from clankie import dto
from clankie.core import lifecycle
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import AskArgs, Submission
from clankie.core.model import (
    Asker,
    Conversation,
    ConversationKind,
    Question,
    QuestionStatus,
    WorkspaceIdentity,
    iso,
)
from clankie.core.vocabulary import AskRefusal, Code
from clankie.store import ReadTx, WriteTx

from . import views
from .base import Call, Caller, Context, serves
from .conversations import existing_dir
from .longpoll import Poll, Wake, waited

EXPIRY_MARGIN_S = 0.05  # a wait ends this long after the question's expiry, so it reads it


class Agents:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @serves(dto.WHOAMI)
    def whoami(self, caller: Caller, r: dto.Nothing) -> dto.WhoAmIOut:
        """Which credential a token is (the MCP bridge asks this of its token, P2)."""
        with self.ctx.read(caller) as c:
            row = c.tx.credential(c.principal.credential_id)
            assert row is not None
            return dto.WhoAmIOut(credential_id=row.credential_id, kind=row.kind, name=row.name)

    @serves(dto.AGENT_ASK, writes=True)
    def agent_ask(self, caller: Caller, r: dto.AgentAsk) -> dto.AgentAskOut:
        """SPEC P4 `ask_owner`: stored, or refused, at once; never waits."""
        ttl = self.ctx.settings.question_ttl
        if r.expires_in_s is not None and r.expires_in_s > ttl:
            raise ClankieError(Code.INVALID_REQUEST, f"expires_in_s: at most question_ttl, "
                               f"{ttl} s", errors=[{"loc": "expires_in_s",
                                                    "msg": f"at most {ttl}"}])
        workspace = existing_dir(r.workspace, "workspace")
        args = AskArgs(r.kind, r.prompt, tuple((o.label, o.description) for o in r.options),
                       r.allow_text)
        with self.ctx.write(caller) as c:
            row = c.tx.credential(c.principal.credential_id)
            asker = Asker(c.principal.credential_id, r.client, row.name if row else "")
            crowded = c.tx.agent_pending_count(asker.credential_id) >= \
                lifecycle.AGENT_PENDING_MAX
            if crowded and c.tx.agent_conversation(asker.credential_id, workspace) is None:
                return dto.AgentAskOut(status="refused",  # and no conversation made for it
                                       reason=AskRefusal.TOO_MANY_PENDING.value)
            conversation = self._conversation_for(c, workspace, asker)
            asked = lifecycle.agent_ask(
                conversation, c.tx.pending_question(conversation.conversation_id), asker,
                args, self.ctx.facts(c.tx, conversation, c.now), self.ctx.new_id,
                timedelta(seconds=r.expires_in_s or ttl), crowded=crowded)
            self.ctx.save(c.tx, asked.change)
            if asked.refused is not None:
                return dto.AgentAskOut(
                    status="refused", reason=asked.refused.value,
                    conversation_id=conversation.conversation_id,
                    pending_request_id=asked.request_id
                    if asked.refused is AskRefusal.QUESTION_PENDING else None)
            assert asked.request_id is not None
            question = c.tx.question(conversation.conversation_id, asked.request_id)
            assert question is not None
            return dto.AgentAskOut(
                status="pending", request_id=question.request_id,
                conversation_id=conversation.conversation_id,
                options=[dto.AgentOption(option_id=o.option_id, label=o.label)
                         for o in question.options],
                expires_at=iso(question.expires_at), duplicate=asked.duplicate)

    def _conversation_for(self, c: Call[WriteTx], workspace: WorkspaceIdentity,
                          asker: Asker) -> Conversation:
        """The agent's conversation of this workspace, made by its first ask (P3), with
        the client it is asked through now (who asks, shown to the owner)."""
        found = c.tx.agent_conversation(asker.credential_id, workspace)
        if found is not None:
            if asker.client is not None and found.agent != asker:
                c.tx.set_agent_client(found.conversation_id, asker.client)
                found = replace(found, agent=asker)
            return found
        made = Conversation(self.ctx.new_id(), ConversationKind.AGENT, c.principal.owner_id,
                            workspace, self.ctx.new_id(), 1, None, c.now, agent=asker)
        c.tx.insert_conversation(made)
        return made

    @serves(dto.AGENT_WAIT)
    def agent_wait(self, caller: Caller, r: dto.AgentWait) -> dto.AgentQuestionOut:
        """SPEC P4 `wait_answer` and `get_question`: how the agent's question stands, as
        soon as it has ended or after `wait_s` (0: at once)."""
        result = waited(lambda wake: self.poll(caller, r, wake))
        assert isinstance(result, dto.AgentQuestionOut)
        return result

    def poll(self, caller: Caller, r: dto.AgentWait, wake: Wake) -> Poll:
        """`agent_wait` for a caller that waits in its own way (the HTTP edge)."""
        with self.ctx.read(caller) as c:
            asked = self._own(c, r.request_id)
            conversation_id, wait_s = asked.conversation_id, float(r.wait_s)
            if asked.status is QuestionStatus.PENDING:  # its expiry ends it (S5): no later
                due = (asked.expires_at - c.now).total_seconds() + EXPIRY_MARGIN_S
                wait_s = min(wait_s, max(0.0, due))

        def read() -> tuple[str, dto.AgentQuestionOut, bool]:
            with self.ctx.read(caller) as c:
                question = self._own(c, r.request_id)
                stale = question.status is QuestionStatus.PENDING and \
                    question.expired_at(c.now)
                uncollected = question.status is not QuestionStatus.PENDING and \
                    c.tx.collected_at(question.request_id) is None
                if not stale and not uncollected:
                    return (c.principal.credential_id, views.agent_question(c.tx, question),
                            question.status is not QuestionStatus.PENDING)
            return self.ctx.on_store(settle)  # S5's expiry on read, or the first collection

        def settle() -> tuple[str, dto.AgentQuestionOut, bool]:
            with self.ctx.write(caller) as w:
                question = self._settled(w, r.request_id)
                return (w.principal.credential_id, views.agent_question(w.tx, question),
                        question.status is not QuestionStatus.PENDING)

        return Poll(self.ctx.long_polls, conversation_id, wait_s, read, wake,
                    cut_short=_cut_short)

    @serves(dto.AGENT_LIST, writes=True)
    def agent_list(self, caller: Caller, r: dto.AgentList) -> dto.AgentQuestionsOut:
        """SPEC P4 `list_questions`: the agent's pending question in this workspace and the
        receipts R1 keeps, newest first."""
        workspace = existing_dir(r.workspace, "workspace")
        with self.ctx.write(caller) as c:
            conversation = c.tx.agent_conversation(c.principal.credential_id, workspace)
            if conversation is None:
                return dto.AgentQuestionsOut(questions=[])
            pending = c.tx.pending_question(conversation.conversation_id)
            if pending is not None:
                pending = self._settled(c, pending.request_id)
            ended = c.tx.ended_questions(conversation.conversation_id)
            for question in ended:
                c.tx.collect(question.request_id, c.now)
            shown = ([pending] if pending and pending.status is QuestionStatus.PENDING
                     else []) + ended
            return dto.AgentQuestionsOut(questions=[views.agent_question(c.tx, q)
                                                    for q in shown])

    @serves(dto.AGENT_CANCEL, writes=True)
    def agent_cancel(self, caller: Caller, r: dto.AgentRequest) -> dto.AgentCancelOut:
        """SPEC P4 `cancel_question`: the agent's own pending question ends
        `cancelled`/`explicit`; a repeat returns the same receipt; an answered one is
        refused `already_answered`."""
        assert caller.op is not None  # the op the dispatcher called: A1 is under its rule
        with self.ctx.write(caller) as c:
            question = self._own(c, r.request_id)
            conversation = self.ctx.conversation(c.tx, question.conversation_id)
            decision = lifecycle.cancel(
                conversation, question, c.principal,
                Submission(question.request_id, conversation.incarnation,
                           conversation.revision),
                self.ctx.facts(c.tx, conversation, c.now), self.ctx.new_id, op=caller.op)
            self.ctx.save(c.tx, decision.change)
            if decision.error is not None:
                c.raise_after_commit = views.error(c.tx, decision.error)
            ended = c.tx.question(question.conversation_id, question.request_id)
            assert ended is not None
            c.tx.collect(ended.request_id, c.now)
            return dto.AgentCancelOut(question=views.agent_question(c.tx, ended),
                                      duplicate=decision.duplicate)

    @staticmethod
    def _own(c: Call[ReadTx] | Call[WriteTx], request_id: str) -> Question:
        """The caller's own question; anyone else's is as unknown as one that never was."""
        question = c.tx.question_by_id(request_id)
        if question is None or question.asker is None or \
                question.asker.credential_id != c.principal.credential_id:
            raise ClankieError(Code.UNKNOWN_REQUEST, "no such question of this agent (it never "
                               "existed, is another's, or its receipt was evicted)",
                               request_id=request_id)
        return question

    def _settled(self, c: Call[WriteTx], request_id: str) -> Question:
        """The agent's question with what a read commits: its expiry, if due (S5), and,
        once it has ended, the agent's first reading of it (`collected_at`)."""
        question = self._own(c, request_id)
        if question.status is QuestionStatus.PENDING:
            conversation = self.ctx.conversation(c.tx, question.conversation_id)
            expired = lifecycle.expire_if_due(conversation, question, c.now, self.ctx.new_id)
            if expired is None:
                return question
            self.ctx.save(c.tx, expired)
            question = self._own(c, request_id)
        c.tx.collect(question.request_id, c.now)
        return question


def _cut_short(read: BaseModel) -> BaseModel:
    """An agent's wait that the service's stop ended before `wait_s` and before its question
    ended: said so (P4), never passed off as a wait that ran its course."""
    assert isinstance(read, dto.AgentQuestionOut)
    return read.model_copy(update={"service_stopping": True})
