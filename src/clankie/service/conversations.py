"""The conversations part: conversations, their events and runs, projects.

Owns creating, listing (with what waits in each: SPEC section 10) and archiving
conversations, reading them, sending a message (which queues a turn run, started in the
same transaction when no run is before it, and executed after the commit), reset, binding
a workspace, native takeover, room posts, pane metadata, projects, the event tail (V1,
with its long-poll), and reading and stopping runs.
"""

from __future__ import annotations

from functools import partial
from pathlib import PurePath

from clankie import dto
from clankie.core import lifecycle
from clankie.core.errors import ClankieError
from clankie.core.model import Author, Conversation, ConversationKind, RunStatus, WorkspaceIdentity
from clankie.core.vocabulary import Code, Partial
from clankie.store.tx import ProjectRow
from clankie.workspace.identity import identify

from . import views
from .base import Caller, Context, serves
from .longpoll import Poll, Wake, waited
from .runs import Runs


class Conversations:
    def __init__(self, ctx: Context, runs: Runs) -> None:
        self.ctx = ctx
        self.runs = runs

    @serves(dto.CONVERSATION_CREATE, writes=True)
    def conversation_create(self, caller: Caller,
                            r: dto.ConversationCreate) -> dto.ConversationOut:
        kind = ConversationKind(r.kind)
        with self.ctx.write(caller) as c:
            workspace = existing_dir(r.workspace, "workspace") if r.workspace else None
            if kind is ConversationKind.OWNER and workspace is None:
                raise ClankieError(Code.INVALID_REQUEST, "an owner conversation needs a workspace")
            conversation = Conversation(self.ctx.new_id(), kind, c.principal.owner_id, workspace,
                                        self.ctx.new_id(), 1, None, c.now)
            c.tx.insert_conversation(conversation)
            return views.conversation(conversation)

    @serves(dto.CONVERSATION_GET)
    def conversation_get(self, caller: Caller, r: dto.ConversationRef) -> dto.ConversationOut:
        """The conversation, with the membership fact (section 9) of an owner conversation."""
        with self.ctx.read(caller) as c:
            conversation = self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
            projects = c.tx.projects()
            unfinished = c.tx.unfinished_runs(r.conversation_id)
        fact = self.ctx.membership(conversation, projects)  # Git runs outside any transaction
        return views.conversation(conversation, fact, unfinished)

    @serves(dto.CONVERSATION_LIST)
    def conversation_list(self, caller: Caller, r: dto.ConversationList
                          ) -> dto.ConversationsOut:
        """A page of the caller's conversations, latest activity first, each with what waits
        in it (SPEC section 10); one statement, whose cost grows with the page, not with
        history. With `workspace`: those bound to it or a parent, nearest first, one page."""
        within = None if r.workspace is None else _ancestors(r.workspace)
        with self.ctx.read(caller) as c:
            page = c.tx.conversation_page(c.principal.owner_id, r.limit + 1,
                                          int(r.after) if r.after else None, r.prefix,
                                          now=c.now, archived=r.archived, within=within,
                                          waiting=r.waiting)
        more = len(page) > r.limit and within is None
        page = page[:r.limit]
        return dto.ConversationsOut(
            conversations=[views.listed(x) for x in page],
            next_after=str(page[-1].activity) if more else None)

    @serves(dto.CONVERSATION_ARCHIVE, writes=True)
    def conversation_archive(self, caller: Caller, r: dto.ConversationRef) -> dto.Empty:
        """Hide a conversation from lists and the page until anything new happens in it;
        refused `question_pending` while its question waits (it would wait unseen)."""
        with self.ctx.write(caller) as c:
            conversation = self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
            pending = c.tx.pending_question(r.conversation_id)
            if pending is not None:
                expired = lifecycle.expire_if_due(conversation, pending, c.now,
                                                  self.ctx.new_id)
                if expired is None:
                    raise ClankieError(Code.QUESTION_PENDING, "a question waits in this "
                                       "conversation: answer or cancel it before archiving")
                self.ctx.save(c.tx, expired)
            c.tx.archive(r.conversation_id)
            return dto.Empty()

    @serves(dto.CONVERSATION_SEND, writes=True)
    def conversation_send(self, caller: Caller, r: dto.ConversationSend) -> dto.SendOut:
        with self.ctx.write(caller) as c:
            conversation = self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change, message, turn = lifecycle.post_message(
                conversation, Author.OWNER, r.text, c.now, self.ctx.new_id, start_turn=True)
            self.ctx.save(c.tx, change)
            if turn is not None:
                self.runs.start_next(c.tx, r.conversation_id)
        return dto.SendOut(message_id=message.message_id, run_id=turn.run_id if turn else None)

    @serves(dto.CONVERSATION_RESET, writes=True)
    def conversation_reset(self, caller: Caller, r: dto.ConversationRef) -> dto.ResetOut:
        with self.ctx.write(caller) as c:
            conversation = self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change = lifecycle.reset(conversation, c.tx.pending_question(r.conversation_id),
                                     c.tx.unfinished_runs(r.conversation_id), c.now,
                                     self.ctx.new_id)
            self.ctx.save(c.tx, change)
            return dto.ResetOut(incarnation=change.conversation.incarnation,
                                revision=change.conversation.revision)

    @serves(dto.CONVERSATION_SET_WORKSPACE, writes=True)
    def conversation_set_workspace(self, caller: Caller,
                                   r: dto.ConversationSetWorkspace) -> dto.ConversationOut:
        with self.ctx.write(caller) as c:
            conversation = self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
            workspace = existing_dir(r.workspace, "workspace")
            change = lifecycle.set_workspace(conversation,
                                             c.tx.pending_question(r.conversation_id),
                                             workspace, c.now, self.ctx.new_id)
            self.ctx.save(c.tx, change)
            return views.conversation(change.conversation if change else conversation)

    @serves(dto.NATIVE_TAKEOVER, writes=True)
    def native_takeover(self, caller: Caller, r: dto.NativeTakeover) -> dto.ConversationOut:
        with self.ctx.write(caller) as c:
            conversation = self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
            change = lifecycle.native_takeover(
                conversation, c.tx.pending_question(r.conversation_id),
                c.tx.unfinished_runs(r.conversation_id), r.seat, c.now, self.ctx.new_id)
            self.ctx.save(c.tx, change)
            return views.conversation(change.conversation)

    @serves(dto.ROOM_POST, writes=True)
    def room_post(self, caller: Caller, r: dto.RoomPost) -> dto.MessageOut:
        with self.ctx.write(caller) as c:
            conversation = self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
            if conversation.kind is not ConversationKind.ROOM:
                raise ClankieError(Code.NOT_ELIGIBLE, "room_post takes a room conversation")
            change, message, _ = lifecycle.post_message(
                conversation, Author.ROOM, r.text, c.now, self.ctx.new_id, start_turn=False)
            self.ctx.save(c.tx, change)
            return dto.MessageOut(message_id=message.message_id)

    @serves(dto.PANE_METADATA_SET, writes=True)
    def pane_metadata_set(self, caller: Caller, r: dto.PaneMetadataSet) -> dto.Empty:
        with self.ctx.write(caller) as c:
            self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
            c.tx.set_pane_metadata(r.conversation_id, r.key, r.value, c.now)
            return dto.Empty()

    @serves(dto.PROJECT_REGISTER, writes=True)
    def project_register(self, caller: Caller, r: dto.ProjectRegister) -> dto.ProjectOut:
        with self.ctx.write(caller) as c:
            root = existing_dir(r.root, "root")
            project = ProjectRow(self.ctx.new_id(), r.name, root, c.now)
            c.tx.insert_project(project)
            return dto.ProjectOut(project_id=project.project_id)

    @serves(dto.EVENTS_TAIL)
    def events_tail(self, caller: Caller, r: dto.EventsTail) -> dto.EventsOut:
        """SPEC V1: events after `after`; waits up to `wait_ms` for one when there are none,
        on this thread, if its credential has a long-poll slot free (V5)."""
        page = waited(lambda wake: self.tail(caller, r, wake))
        assert isinstance(page, dto.EventsOut)
        return page

    def tail(self, caller: Caller, r: dto.EventsTail, wake: Wake) -> Poll:
        """With `live` (D4), the live reply too: read before the events (D5, so a reply
        never leaves memory unexplained), on a page not cut short by `limit`."""
        def read() -> tuple[str, dto.EventsOut, bool]:
            # before the transaction's first read, which fixes what it sees of the events
            live = None if r.live is None else self.ctx.live.read(r.conversation_id, r.live)
            with self.ctx.read(caller) as c:
                self.ctx.conversation(c.tx, r.conversation_id, c.principal.owner_id)
                page = c.tx.events_after(r.conversation_id, r.after, r.limit)
            next_after = page.events[-1]["seq"] if page.events else r.after
            oldest[0] = page.trimmed_through + 1
            out = dto.EventsOut(
                events=page.events, next_after=next_after,
                oldest_seq=page.trimmed_through + 1,
                trimmed=r.after < page.trimmed_through,
                **({} if r.live is None or next_after < page.last_seq else {"live": live}))
            ready = bool(out.events or out.trimmed) or (
                r.live is not None and live is not None
                and (live.reply_id != r.live.reply_id or live.length > r.live.offset))
            return c.principal.credential_id, out, ready

        def quick() -> dto.EventsOut | None:
            """Woken by a publish alone, after a read that found no events: the same page
            with the live reply, its caller checked in memory as at the edge (a credential
            written since falls back to a whole read, which says why)."""
            if r.live is None or caller.token is None or not self.ctx.tokens.known(
                    caller.token):
                return None
            live = self.ctx.live.read(r.conversation_id, r.live)
            if live is None:
                return None  # settled: its commit's events are for a whole read
            return dto.EventsOut(events=[], next_after=r.after, oldest_seq=oldest[0],
                                 trimmed=False, live=live)

        oldest = [1]
        return Poll(self.ctx.long_polls, r.conversation_id, r.wait_ms / 1000, read, wake,
                    live=r.live is not None, quick=quick,
                    cut_short=lambda page: page.model_copy(update={"service_stopping": True}))

    @serves(dto.RUN_GET)
    def run_get(self, caller: Caller, r: dto.RunRef) -> dto.RunOut:
        with self.ctx.read(caller) as c:
            run = self.ctx.load_run(c.tx, r.run_id)
            self.ctx.conversation(c.tx, run.conversation_id, c.principal.owner_id)
            return views.run(run)

    @serves(dto.RUN_CANCEL, writes=True)
    def run_cancel(self, caller: Caller, r: dto.RunRef) -> dto.RunOut:
        """SPEC R7: stop a queued or running run (`cancelled`, `stopped_by_owner`, one
        `run_status` event), committed before the executor hears of it: from that commit
        on the store refuses every later write of the run, so nothing it says or calls
        after the stop is kept; the executor then abandons its model call (`_stop`). The
        reply it was writing is kept as readers last saw it, `stopped` (D7). An ended run
        is returned unchanged."""
        with self.ctx.write(caller) as c:
            run = self.ctx.load_run(c.tx, r.run_id)
            self.ctx.conversation(c.tx, run.conversation_id, c.principal.owner_id)
            if run.status is RunStatus.RUNNING:
                self.runs.keep_partial(c.tx, run, Partial.STOPPED)
            conversation = self.ctx.conversation(c.tx, run.conversation_id)
            change = lifecycle.stop_run(conversation, run, c.now)
            self.ctx.save(c.tx, change)
            if change is not None and run.status is RunStatus.RUNNING:
                c.tx.on_commit.append(partial(self.runs.stopped, run.run_id))
        return views.run(run if change is None else change.runs[0])


def existing_dir(path: str, what: str) -> WorkspaceIdentity:
    """An absolute path's directory identity, or `invalid_request` naming `what`."""
    if not path.startswith("/"):
        raise ClankieError(Code.INVALID_REQUEST, f"{what} must be an absolute path")
    identity = identify(path)
    if identity is None:
        raise ClankieError(Code.INVALID_REQUEST, f"{what} {path!r} is not an existing directory")
    return identity


def _ancestors(path: str) -> list[str]:
    """`path` and each of its parents: the workspaces a directory's conversation may have."""
    here = PurePath(path)
    return [str(p) for p in (here, *here.parents)]
