"""The questions part: the snapshot of a conversation's question (S1-S5), answers and
cancellations (A1-A11), each answer's continuation run stored, and started when no run of
its conversation is before it, in the answer's own transaction, and handed to the executor
after its commit (A9, A10).
"""

from __future__ import annotations

from functools import partial

from clankie import dto
from clankie.core import lifecycle
from clankie.core.errors import ClankieError
from clankie.core.lifecycle import Submission
from clankie.core.model import Answer
from clankie.core.vocabulary import Code
from clankie.store import ReadTx, WriteTx

from . import views
from .base import Call, Caller, Context, serves
from .runs import Runs


class Questions:
    def __init__(self, ctx: Context, runs: Runs) -> None:
        self.ctx = ctx
        self.runs = runs

    @serves(dto.INPUT_GET)
    def input_get(self, caller: Caller, r: dto.InputGet) -> dto.Snapshot:
        """SPEC S1-S5: the snapshot, read from current state. A read transaction suffices
        unless the pending question is due to expire: then the expiry is committed on
        read (S5), in a write transaction that decides again."""
        with self.ctx.read(caller) as c:
            snapshot = self._snapshot(c, r)
        return snapshot if snapshot is not None else self.ctx.on_store(
            partial(self._expired_snapshot, caller, r))

    def _expired_snapshot(self, caller: Caller, r: dto.InputGet) -> dto.Snapshot:
        with self.ctx.write(caller) as c:
            snapshot = self._snapshot(c, r)
        assert snapshot is not None
        return snapshot

    def _snapshot(self, c: Call[ReadTx] | Call[WriteTx], r: dto.InputGet
                  ) -> dto.Snapshot | None:
        """None when an expiry is due and `c` can only read: it is committed in a write."""
        conversation = self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
        pending = c.tx.pending_question(r.conversation_id)
        expired = lifecycle.expire_if_due(conversation, pending, c.now, self.ctx.new_id)
        if expired is not None:
            if not isinstance(c.tx, WriteTx):
                return None
            self.ctx.save(c.tx, expired)
            conversation, pending = expired.conversation, None
        request = None
        if r.request_id is not None:
            request = c.tx.question(r.conversation_id, r.request_id)
            if request is None:
                raise ClankieError(Code.UNKNOWN_REQUEST, "no such question in this "
                                   "conversation, or its receipt was evicted",
                                   request_id=r.request_id)
        return dto.Snapshot(
            conversation_id=conversation.conversation_id,
            incarnation=conversation.incarnation,
            revision=conversation.revision,
            pending=views.question(c.tx, pending) if pending else None,
            request=views.question(c.tx, request) if request else None,
            ended_requests=c.tx.ended_request_ids(r.conversation_id))

    @serves(dto.INPUT_ANSWER, writes=True)
    def input_answer(self, caller: Caller, r: dto.InputAnswer) -> dto.AnswerReply:
        submission = Submission(r.request_id, r.incarnation, r.revision,
                                Answer(option_id=r.option_id, text=r.text))
        return self._resolve(caller, r.conversation_id, submission)

    @serves(dto.INPUT_CANCEL, writes=True)
    def input_cancel(self, caller: Caller, r: dto.InputCancel) -> dto.AnswerReply:
        submission = Submission(r.request_id, r.incarnation, r.revision)
        return self._resolve(caller, r.conversation_id, submission)

    def _resolve(self, caller: Caller, conversation_id: str,
                 submission: Submission) -> dto.AnswerReply:
        decide = lifecycle.answer if submission.answer is not None else lifecycle.cancel
        assert caller.op is not None  # the op the dispatcher called: A1 is under its rule
        with self.ctx.write(caller) as c:
            conversation = self.ctx.conversation(c.tx, conversation_id, c.principal.owner_id)
            question = c.tx.question(conversation_id, submission.request_id)
            decision = decide(conversation, question, c.principal, submission,
                              self.ctx.facts(c.tx, conversation, c.now), self.ctx.new_id,
                              op=caller.op)
            self.ctx.save(c.tx, decision.change)
            if decision.error is not None:
                c.raise_after_commit = views.error(c.tx, decision.error)
            assert decision.receipt is not None or decision.error is not None
            receipt = decision.receipt
            if decision.error is None and not decision.duplicate and receipt is not None \
                    and receipt.run_id is not None:
                self.runs.start_next(c.tx, conversation_id)  # executed after the commit (A10)
            reply = None if receipt is None else dto.AnswerReply(
                receipt=views.receipt(c.tx, receipt), duplicate=decision.duplicate)
        assert reply is not None
        return reply
