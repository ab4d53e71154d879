"""`clankie conversations ...`: conversations, their events, and the question commands.

Owns what a person sees for the question contract of SPEC section 10: the snapshot with
numbered options and their IDs, the incarnation and revision to bind an answer to, the
receipt, and one or two lines on each refusal saying what to do; and, for `send --wait`,
what Clankie said and asked in the run it waited for. It decides nothing the service
decides, and it never sends an answer (or a message) twice.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from clankie import when, wording
from clankie.core.vocabulary import Code, RunError
from clankie.text import continued

from .common import (
    UUID,
    Arg,
    Given,
    GivenInt,
    Group,
    Whole,
    call,
    complete_conversation,
    connect,
    current_directory,
    exit_with,
    fail_usage,
    id_or_prefix,
    json_lines,
    json_option,
    print_json,
    problem_document,
    request_of,
    resolve_conversation,
    say,
    shifted,
    stdin_text,
    typed,
    warn,
)

if TYPE_CHECKING:  # the shapes (pydantic) load with a command's first call, not for --help
    from clankie import dto
    from clankie.client import ApiError, Client

    from .follow import Follower
    from .live import Live

app = Group("conversations", help="Conversations, their events and questions.")


def _shown_by(ctx: click.Context | None) -> str:
    """Where a missing --incarnation or --revision is shown (issue 19: a new user who leaves
    them out learns the command that prints both)."""
    given = ctx.params.get("conversation") if ctx is not None else None
    if ctx is None or not isinstance(ctx.params.get("request"), str):  # `answer REQUEST`
        given = None  # shifted, or not read yet (click's sentinel while it reports a usage error)
    return ("The question's incarnation and revision, and the whole command to answer it, "
            f"are shown by `clankie conversations questions{' ' + given if given else ''}`.")


conversation_arg = click.argument(
    "conversation", cls=Arg, metavar="[CONVERSATION]", required=False,
    help="A conversation ID, or a unique prefix of one (default: this directory's, else the "
         "one whose question waits).", shell_complete=complete_conversation)
request_arg = click.argument("request", cls=Arg, metavar="REQUEST_UUID", required=False,
                             help="The question's ID, or a unique prefix of it.")
incarnation_option = click.option("--incarnation", metavar="UUID", required=True,
                                  type=Given(_shown_by),
                                  help="The incarnation shown with the question (or a unique "
                                       "prefix of it).")
revision_option = click.option("--revision", metavar="N", required=True,
                               type=GivenInt(_shown_by),
                               help="The revision shown with the question.")
WAIT_TIMEOUT_S = 600  # how long `send --wait` waits by default (docs/decisions.md, issue 31)
RUN_ENDED = frozenset({"succeeded", "failed", "cancelled"})


# ------------------------------------------------------------------------------ rendering


LIST_HEADING = (f"  {'CONVERSATION':<36}  {'KIND':<11} {'LAST ACTIVE':<13} {'RUN':<8} "
                "WORKSPACE")


def _conversation_lines(c: dto.ListedConversationOut, now: datetime) -> list[str]:
    """A listed conversation: `?` before one whose question waits, and the question's
    prompt, shortened, on the line below (SPEC section 10 "Finding what waits")."""
    where = wording.one_line(c.workspace.path) if c.workspace else "-"
    native = f"  (native owner {c.native_owner})" if c.native_owner else ""
    asker = f"  ({wording.who(c.asker)})" if c.asker else ""  # P3: who asks
    archived = "  (archived)" if c.archived else ""
    active = when.relative(c.last_activity_at, now) if c.last_activity_at else "-"
    pending = c.pending
    lines = [f"{'?' if pending else ' '} {c.conversation_id}  {c.kind:<11} "
             f"{active:<13} {c.run or '-':<8} {where}{native}{asker}{archived}"]
    if pending:
        lines.append(f"    question waits: {wording.short(pending.prompt)} (expires "
                     f"{when.relative(pending.expires_at, now)})")
    return lines


def _show_receipt(receipt: dto.ReceiptOut, options: list[dto.OptionOut],
                  agent: bool = False) -> None:
    """`agent`: an agent asked it (P3), so no run follows, and whether the agent has read
    how it ended (`collected_at`, information only) is said."""
    from clankie import dto

    say(f"  Receipt {receipt.receipt_id}: {wording.outcome(receipt, 'closed')}")
    answer = receipt.answer
    if isinstance(answer, dto.OptionAnswer):
        label = next((o.label for o in options if o.option_id == answer.option_id), "?")
        say(f"    answer: option {answer.option_id} ({label})")
    elif answer:
        say(f"    answer: text {answer.text!r}")
    if receipt.answered_by:
        by = receipt.answered_by
        say(f"    by: {by.kind} {by.credential_id}")
    say(f"    at: {when.shown_now(receipt.resolved_at)} (revision {receipt.revision})")
    if wording.restarted(receipt):  # R9: what the restart did, and how to go on (P5)
        say(f"    It was {wording.restarted_question(agent)}.")
    if agent:
        collected = receipt.collected_at
        say(f"    read by the agent: {when.shown_now(collected)}" if collected else
            "    not read by the agent yet")
    if receipt.run_id:
        error = f": {receipt.continuation_error}" if receipt.continuation_error else ""
        say(f"    continuation run {receipt.run_id}: {receipt.continuation}{error}")
        why = wording.run_ended(receipt.continuation_error)
        if why:
            say(f"    The answer is kept, but Clankie's run for it was {why}.")


STOPPED = RunError.STOPPED_BY_OWNER


def _show_question(q: dto.QuestionOut, workspace: str | None = None) -> None:
    """`workspace`: the conversation's, said with who asks when an agent asks (P3)."""
    say(f"Question {q.request_id}  [{q.kind}, {q.status}]")
    asker = q.asker
    if asker:
        say(f"  {wording.asks(asker, workspace)}:")
    say(f"  {continued(q.prompt)}")
    for number, option in enumerate(q.options, start=1):
        say(wording.option_line(number, option))
        say(f"     option {option.option_id}")
    say(f"  Text answer: {'allowed' if q.allow_text else 'not allowed'}")
    ended = q.receipt.resolved_at if q.status != "pending" and q.receipt else None
    say(f"  Asked {when.shown_now(q.asked_at)}; " + (  # an ended question expires no more
        f"ended {when.shown_now(ended)}" if ended else
        f"expires {when.shown_now(q.expires_at)}"))
    if asker and q.status == "pending":
        say(f"  {wording.AGENT_ANSWER}")
    if q.receipt:
        _show_receipt(q.receipt, q.options, agent=bool(asker))


def _show_snapshot(snapshot: dto.Snapshot, workspace: str | None = None) -> None:
    c = snapshot.conversation_id
    say(f"Conversation {c}: incarnation {snapshot.incarnation}, "
        f"revision {snapshot.revision}")
    shown = snapshot.request or snapshot.pending
    if shown is None:
        say(f"{wording.NO_QUESTION}.")
        return
    _show_question(shown, workspace)
    if shown.status == "pending":
        bind = (f"clankie conversations answer {c} {shown.request_id} "
                f"--incarnation {snapshot.incarnation} --revision {snapshot.revision}")
        say("Answer with:")
        if shown.options:
            say(f"  {bind} --choice N   (or --option OPTION_UUID)")
        if shown.allow_text:
            say(f"  {bind} --text TEXT   (or --stdin)")
        say(f"Cancel with:\n  clankie conversations cancel-question {c} {shown.request_id} "
            f"--incarnation {snapshot.incarnation} --revision {snapshot.revision}")


def _restarted(client: Client, c: str, events: list[dto.Event]) -> dict[str, bool]:
    """The questions among `events` that a restart cancelled (`eventtext.restarted`
    decides): each cancelled one is read (one whose receipt R1 evicted since is only said
    cancelled)."""
    from clankie import dto, eventtext
    from clankie.client import ApiError, NotClankie

    read: list[dto.QuestionOut | None] = []
    for request_id in eventtext.to_read(events):
        with contextlib.suppress(ApiError, NotClankie):
            read.append(typed(client, dto.INPUT_GET, client.call("input_get", {
                "conversation_id": c, "request_id": request_id})).request)
    return eventtext.restarted(read)


def _explain_refusal(conversation_id: str, request_id: str) -> Callable[[ApiError], None]:
    def explain(err: ApiError) -> None:
        p = err.problem
        receipt = p.get("receipt") or {}
        if err.code in wording.READ_AGAIN:
            warn(f"The conversation changed since this question was read (now incarnation "
                 f"{p.get('incarnation')}, revision {p.get('revision')}); the answer was not "
                 "accepted.")
            warn(f"Read it again and decide: clankie conversations questions {conversation_id}")
        elif err.code == Code.ALREADY_ANSWERED:
            warn(f"Already answered differently (receipt {receipt.get('receipt_id')}); a "
                 "question is never answered twice.")
        elif err.code in wording.ENDED:
            warn(f"This question has ended: {wording.outcome(receipt, 'closed')}; "
                 f"receipt {receipt.get('receipt_id')}.")
            warn(f"See it with: clankie conversations questions {conversation_id} "
                 f"--request {request_id}")
        elif err.code == Code.UNKNOWN_REQUEST:
            warn("No such question in this conversation (it never existed, or its receipt "
                 "was evicted); nothing was started.")
        else:
            warn(f"clankie: {wording.problem(err.code, err.detail)}")
    return explain


# ------------------------------------------------------------------------------- commands


@app.command()
@click.option("--workspace", metavar="DIR", type=click.Path(path_type=Path),
              help="The directory (default: the current one).")
@click.option("--kind", metavar="KIND", default="owner", show_default=True,
              help="owner, native_seat, room, global or side.")
@json_option
def new(workspace: Path | None, kind: str, as_json: bool) -> None:
    """Start a conversation bound to a directory."""
    from clankie import dto

    where = {"workspace": str(workspace.resolve() if workspace else current_directory())} \
        if kind == "owner" or workspace is not None else {}
    with connect() as client:
        created = call(client, dto.CONVERSATION_CREATE, request_of(
            dto.CONVERSATION_CREATE, kind=kind, **where), as_json=as_json)
    print_json(created) if as_json else say(created.conversation_id)


@app.command("list")
@click.option("--limit", "-L", metavar="N", type=Whole(1, 500), default=30,
              show_default=True, help="How many to show, latest activity first.")
@click.option("--all", "archived", is_flag=True, help="Archived conversations too.")
@json_option
def list_(limit: int, archived: bool, as_json: bool) -> None:
    """List the conversations, latest activity first; `?` marks a question waiting."""
    from clankie import dto

    with connect() as client:
        listed = call(client, dto.CONVERSATION_LIST, dto.ConversationList(
            limit=limit, archived=archived), as_json=as_json)
    if as_json:
        print_json(listed)
        return
    if not listed.conversations:
        say("No conversations yet: start one with `clankie chat` (or `clankie conversations "
            "new`) in a project's directory." if archived else
            "No conversations (archived ones are listed with --all): start one with "
            "`clankie chat` in a project's directory.")
        return
    say(LIST_HEADING)  # always: scripts read --json, whose output has none (docs/decisions.md)
    now = datetime.now(UTC)
    for c in listed.conversations:
        for line in _conversation_lines(c, now):
            say(line)
    if listed.next_after:
        say(f"(more: showing the latest {limit}; use --limit to see more)")


@app.command()
@conversation_arg
@json_option
def archive(conversation: str | None, as_json: bool) -> None:
    """Hide a conversation from lists and the phone page until something new happens in
    it (a message you send brings it back); refused while its question waits."""
    with connect() as client:
        from clankie import dto

        c = resolve_conversation(client, conversation, as_json=as_json)

        def explain(err: ApiError) -> None:
            if err.code == Code.QUESTION_PENDING:
                warn(f"clankie: a question waits in {c}; it was not archived. Answer or "
                     f"cancel it first: clankie conversations questions {c}")
            else:
                warn(f"clankie: {wording.problem(err.code, err.detail)}")

        done = call(client, dto.CONVERSATION_ARCHIVE, dto.ConversationRef(conversation_id=c),
                    as_json=as_json, explain=explain, inspect="clankie conversations list --all")
    print_json(done) if as_json else say(
        f"Archived {c}: `clankie conversations list` and the phone page leave it out (list "
        "it with --all) until something new happens in it.")


@app.command()
@conversation_arg
@json_option
def show(conversation: str | None, as_json: bool) -> None:
    """Show a conversation."""
    from clankie import dto

    with connect() as client:
        c = resolve_conversation(client, conversation, as_json=as_json)
        got = call(client, dto.CONVERSATION_GET, dto.ConversationRef(conversation_id=c),
                   as_json=as_json)
    if as_json:
        print_json(got)
        return
    for key, value in (("conversation_id", got.conversation_id), ("kind", got.kind),
                       ("incarnation", got.incarnation), ("revision", got.revision)):
        say(f"{key}: {value}")
    say(f"native_owner: {got.native_owner or 'none (no native app holds it)'}")
    say(f"created_at: {when.shown_now(got.created_at)}")
    say(f"workspace: {wording.one_line(got.workspace.path) if got.workspace else '-'}")
    if got.asker:
        say(f"asker: {wording.who(got.asker)}")
    fact = got.membership
    if fact:
        detail = fact.project_id or fact.reason or ""
        status = {"member": "a member", "not_member": "not a member"}.get(fact.status,
                                                                         fact.status)
        say(f"project membership: {status}" + (f" ({detail})" if detail else ""))
    runs = got.unfinished_runs
    if runs is not None:
        say("runs: none queued or running" if not runs else "runs:")
        for run in runs:
            state = (f"running since {when.shown_now(run.started_at)}" if run.started_at else
                     f"queued since {when.shown_now(run.created_at)}")
            say(f"  {run.run_id} ({run.kind}) {state}")
        if runs:
            say(f"  stop with: clankie conversations stop {c}")


@app.command()
@conversation_arg
@click.argument("text", cls=Arg, metavar="TEXT", required=False, help="The message.")
@click.option("--wait", is_flag=True,
              help="Wait for Clankie's run to end, and print its reply and any question it "
                   "asked (exit 0 when it succeeded, 1 when it failed or was stopped). On a "
                   "terminal the reply is printed as it is written; into a pipe or a file, "
                   "only once it is stored.")
@click.option("--timeout", metavar="S", type=Whole(1, 86_400),
              help=f"With --wait: stop waiting after S seconds (default {WAIT_TIMEOUT_S}); "
                   "the run goes on.")
@json_option
def send(conversation: str | None, text: str | None, wait: bool, timeout: int | None,
         as_json: bool) -> None:
    """Send a chat message to Clankie (a message never answers a question)."""
    conversation, text = shifted(conversation, text)
    if text is None:
        raise click.MissingParameter(param_hint="'TEXT'", param_type="argument")
    if timeout is not None and not wait:
        raise click.BadParameter("--timeout says how long --wait waits: give --wait too; "
                                 "nothing was sent", param_hint="--timeout")
    from clankie import dto

    with connect() as client:
        c = resolve_conversation(client, conversation, as_json=as_json)
        tail = None
        if wait:
            from .follow import Follower

            # D16: on a terminal the reply is printed as it arrives; a script (a pipe, or
            # --json) gets only stored messages, never text that may yet be withdrawn.
            tail = Follower(client, c, 0, as_json=as_json, note=warn,
                            live=not as_json and sys.stdout.isatty())
            tail.to_the_end()  # the run's events are the ones after the message
        waiting = None if as_json else _waiting_question(client, c)
        sent = call(client, dto.CONVERSATION_SEND, request_of(
            dto.CONVERSATION_SEND, conversation_id=c, text=text), as_json=as_json,
                    inspect=f"clankie conversations events {c}")
        if waiting is not None and wording.answer_like(
                [o.label for o in waiting.options], text) is not None:
            warn(wording.chat_not_answer(f"clankie conversations questions {c}"))
        if tail is not None and sent.run_id:
            _wait_for_run(client, tail, sent, timeout or WAIT_TIMEOUT_S, as_json)
    if as_json:
        print_json(sent)
    else:
        run = f"; turn run {sent.run_id}" if sent.run_id else "; no turn starts"
        say(f"message {sent.message_id} sent{run}")


def _waiting_question(client: Client, c: str) -> dto.QuestionOut | None:
    """The question that waits as a line is sent, read before it: after the send, the run
    the line started may already have asked one of its own. A line that looks like an
    answer to it is said to be chat (A2, as the TUI says it, on standard error); a read
    that fails says nothing (the send that follows says what is wrong)."""
    from clankie import dto
    from clankie.client import ClientError

    with contextlib.suppress(ClientError):
        return typed(client, dto.INPUT_GET, client.call(
            "input_get", {"conversation_id": c})).pending
    return None


def _wait_for_run(client: Client, tail: Follower, sent: dto.SendOut, timeout: int,
                  as_json: bool) -> NoReturn:
    """`send --wait` (SPEC section 10): follow the conversation until the run ends or
    `timeout` passes; print what Clankie said in it (its messages between the run's start
    and its end: runs of a conversation run one at a time, R4), each as it is stored, and
    the questions it asked; exit 0 when it succeeded, else 1, saying why or that it goes on.
    When the follower reads the live reply (a terminal, D16), the reply is printed as it
    arrives, a withdrawn try is said on standard error and the next starts on a new line,
    and a stored message prints only what was not printed yet; a partial message ends with
    its `[cut off ...]` line."""
    from clankie import dto, eventtext

    from .follow import FOLLOW_WAIT_MS, Gone
    from .live import Live, live_of, reason_after, withdrawal

    c, begun, run_id = tail.conversation_id, tail.after, sent.run_id
    assert run_id is not None  # waited for only when a run was queued
    goes_on = (f"Follow it with: clankie conversations events {c} --after {begun} --follow",
               f"Stop it with: clankie conversations stop {c}")

    def note(line: str) -> None:
        if live is not None:
            live.end_line()
        warn(line)

    live = Live(lambda _: f"{wording.CLANKIE}: ", run_id=run_id, note=warn,
                stall_s=lambda: tail.stall_s) if tail.live is not None else None
    tail.note = note  # "lost clankie ...": on a line of its own, not inside the reply's

    deadline = time.monotonic() + timeout
    started, ended = False, False
    said: list[dto.MessageEvent] = []
    asked: list[str] = []
    try:
        while not ended and (left := deadline - time.monotonic()) > 0:
            page = tail.page(min(FOLLOW_WAIT_MS, max(1, int(left * 1000))), deadline)
            for n, e in enumerate(page.events):
                if isinstance(e, dto.RunStatusEvent) and e.run_id == run_id:
                    started = started or e.status == "running"
                    ended = e.status in RUN_ENDED
                elif not started or ended:
                    continue
                elif isinstance(e, dto.MessageEvent) and e.author == "clankie":
                    said.append(e)
                    if not as_json:
                        _say_message(e, live, reason_after(page.events[n + 1:]))
                elif isinstance(e, dto.InputRequestedEvent):
                    asked.append(e.request_id)
                elif isinstance(e, dto.RunActivityEvent) and not as_json:
                    if e.withdrawn is not None and live is not None:
                        live.withdrawn(e.withdrawn.reply_id)
                    # a model retry: why the wait is long (R6), and what it withdrew (D8)
                    note(withdrawal(e) or eventtext.cli_line(e))
            if live is not None and not ended:
                live.show(live_of(page))
    except KeyboardInterrupt:  # the message was sent: only the waiting stops
        note(f"Stopped waiting; message {sent.message_id} was sent and the run goes on.")
        for line in goes_on:
            warn(line)
        exit_with(130)
    except Gone as exc:  # lost, and not back within --timeout: the run's end is unknown here
        if as_json:  # the message was sent (`sent`: it reached the service); the wait ended
            print_json(problem_document(
                "service_unreachable", f"the service did not come back within --timeout "
                f"{timeout} s: {exc}; message {sent.message_id} was sent", fix=exc.fix,
                sent="yes", message_id=sent.message_id, run_id=run_id))
            exit_with(1)
        note(f"clankie: the service did not come back within --timeout {timeout} s: {exc}")
        if exc.fix:
            warn(f"  fix: {exc.fix}")
        warn(f"Message {sent.message_id} was sent; once clankie is back:")
        for line in goes_on:
            warn(line)
        exit_with(1)
    if live is not None:
        live.end_line()
    run = call(client, dto.RUN_GET, dto.RunRef(run_id=run_id), as_json=as_json)
    snapshots = [call(client, dto.INPUT_GET, dto.InputGet(conversation_id=c, request_id=r),
                      as_json=as_json) for r in asked]
    questions = [s.request for s in snapshots]
    if as_json:  # with the binding an answer needs (the latest read's), as data (issue 42)
        bound = snapshots[-1] if snapshots else call(
            client, dto.INPUT_GET, dto.InputGet(conversation_id=c), as_json=True)
        print_json({"message_id": sent.message_id, "run": run, "messages": said,
                    "questions": questions, "incarnation": bound.incarnation,
                    "revision": bound.revision})
    else:
        for question in questions:
            if question is not None and question.status == "pending":
                _show_snapshot(call(client, dto.INPUT_GET, dto.InputGet(conversation_id=c),
                                    as_json=False))
            elif question is not None:
                _show_question(question)
        if run.status == "succeeded" and not said and not questions:
            say(f"Clankie's run {run_id} ended without a word.")
    if run.status == "succeeded":
        exit_with(0)
    if run.status in RUN_ENDED:
        why = wording.run_ended(run.error)
        warn(f"Clankie's run {run_id} was {why}." if why else
             f"Clankie's run {run_id} {run.status}: {run.error}")
        exit_with(1)
    warn(f"Still {run.status} after {timeout} s: the run goes on; this only stopped "
         "waiting for it.")
    for line in goes_on:
        warn(line)
    exit_with(1)


def _say_message(message: dto.MessageEvent, live: Live | None, reason: str | None) -> None:
    """A message of Clankie's, stored: whole, or only what was not printed live; a partial
    one ends with its `[cut off ...]` line (D16). `reason`: why its run failed, if known."""
    from .live import cut_off

    shown = live.stored(message) if live is not None else None
    if shown is None:
        say(continued(f"{wording.CLANKIE}: {message.text}"))
    line = cut_off(message, reason, shown or 0)
    if line is not None:
        say(line)


@app.command()
@conversation_arg
@json_option
def reset(conversation: str | None, as_json: bool) -> None:
    """Reset a conversation: a new incarnation; a pending question is invalidated."""
    from clankie import dto

    with connect() as client:
        c = resolve_conversation(client, conversation, as_json=as_json)
        done = call(client, dto.CONVERSATION_RESET, dto.ConversationRef(conversation_id=c),
                    as_json=as_json, inspect=f"clankie conversations show {c}")
    print_json(done) if as_json else say(
        f"reset: incarnation {done.incarnation}, revision {done.revision}")


@app.command()
@conversation_arg
@json_option
def stop(conversation: str | None, as_json: bool) -> None:
    """Stop Clankie's running run in a conversation, and the runs queued behind it."""
    from clankie import dto

    with connect() as client:
        c = resolve_conversation(client, conversation, as_json=as_json)
        got = call(client, dto.CONVERSATION_GET, dto.ConversationRef(conversation_id=c),
                   as_json=as_json)
        # The queued runs first, newest first, so that none starts as the running one stops.
        stopped = [call(client, dto.RUN_CANCEL, dto.RunRef(run_id=run.run_id), as_json=as_json,
                        inspect=f"clankie conversations events {c}")
                   for run in reversed(got.unfinished_runs or [])][::-1]
    if as_json:
        print_json(stopped)
        return
    if not stopped:
        say(f"Nothing to stop: no run of {c} is queued or running.")
    for run in stopped:
        if run.error == STOPPED:
            say(f"Stopped run {run.run_id} ({run.kind}, was "
                f"{'running' if run.started_at else 'queued'}).")
        else:
            say(f"Run {run.run_id} ({run.kind}) had already ended: {run.status}.")
    exit_with(0)


@app.command()
@conversation_arg
@click.option("--after", metavar="SEQ", type=Whole(0), default=0,
              help="Show events after this seq.")
@click.option("--follow", "-f", is_flag=True, help="Keep waiting for new ones.")
@click.option("--live/--no-live", default=None,
              help="Show the reply Clankie is writing as it arrives (default: with --follow "
                   "on a terminal; with --json, each page carries its `live` field).")
@click.option("--json", "as_json", is_flag=True,
              help="Print each page of events (or a problem) as JSON Lines: one object a "
                   "line, as it comes.")
def events(conversation: str | None, after: int, follow: bool, live: bool | None,
           as_json: bool) -> None:
    """Show a conversation's events; with --follow, keep showing new ones until Ctrl+C
    (across a restart of the service: it says so and goes on from the event it reached).
    On a terminal, --follow shows Clankie's reply as it is written, on a line that starts
    `#…` (it has no number until it is stored, and is not shown again then)."""
    from clankie import dto

    from .follow import Follower
    from .live import Live

    if live is None:
        live = follow and not as_json and sys.stdout.isatty()
    if as_json:
        json_lines()  # pages as they come, each alone parseable (issue 42)
    with connect() as client:
        c = resolve_conversation(client, conversation, as_json=as_json)
        writing: Live | None = None

        def note(text: str) -> None:  # on a line of its own, not inside the reply's
            if writing is not None:
                writing.end_line()
            (warn if as_json else say)(text)

        tail = Follower(client, c, after, as_json=as_json, note=note, live=live) \
            if follow else None
        if live and not as_json:
            writing = Live(lambda r: f"#\u2026 {when.local(r.started_at)} clankie: ", "    ",
                           note=say, stall_s=lambda: tail.stall_s if tail else None)
        while True:
            page = tail.page() if tail is not None else call(client, dto.EVENTS_TAIL, request_of(
                dto.EVENTS_TAIL, conversation_id=c, after=after, limit=500,
                **({"live": {"reply_id": None, "offset": 0}} if live else {})),
                as_json=as_json)
            if as_json:
                print_json(page)
            else:
                _show_events(client, c, page, writing)
            after = page.next_after
            if not follow and not (page.events and len(page.events) == 500):
                if writing is not None and writing.open:  # a one-time read: it goes on
                    writing.end_line()
                    say("    (still being written; see the rest with --follow)")
                return


def _show_events(client: Client, c: str, page: dto.EventsOut, writing: Live | None) -> None:
    """A page of events, a line each; with `writing`, then the live reply's new text (D16):
    a message whose text was printed live is not printed again, only its `[cut off ...]`
    line if it has one; a withdrawn try's line is followed by the event that withdrew it."""
    from clankie import dto, eventtext

    from .live import cut_off, live_of, reason_after

    def line(text: str) -> None:
        if writing is not None:
            writing.end_line()
        say(text)

    if page.trimmed:
        line(f"(events before #{page.oldest_seq} were trimmed; the question now:)")
        _show_snapshot(call(client, dto.INPUT_GET, dto.InputGet(conversation_id=c),
                            as_json=False))
    restarted = _restarted(client, c, page.events)
    for n, event in enumerate(page.events):
        shown = None
        if writing is not None and isinstance(event, dto.MessageEvent):
            shown = writing.stored(event)
        elif writing is not None and isinstance(event, dto.RunActivityEvent) and \
                event.withdrawn is not None:  # its line, next, says the text above is withdrawn
            writing.withdrawn(event.withdrawn.reply_id)
        if shown is None:
            line(eventtext.cli_line(event, restarted))
        if isinstance(event, dto.MessageEvent) and \
                (cut := cut_off(event, reason_after(page.events[n + 1:]), shown or 0)):
            line(f"    {cut}")
    if writing is not None:
        writing.show(live_of(page))


@app.command()
@conversation_arg
@click.option("--request", metavar="REQUEST_UUID",
              help="Also show this question and its receipt.")
@json_option
def questions(conversation: str | None, request: str | None, as_json: bool) -> None:
    """Show the pending question (and a named one, with its receipt)."""
    from clankie import dto

    with connect() as client:
        c = resolve_conversation(client, conversation, as_json=as_json)
        named = {} if request is None else {"request_id": _whole_ids(
            client, c, Ids(request_id=request), None, as_json).request_id}
        snapshot = call(client, dto.INPUT_GET, request_of(
            dto.INPUT_GET, conversation_id=c, **named), as_json=as_json)
        workspace = None
        if not as_json and any(q is not None and q.asker
                               for q in (snapshot.pending, snapshot.request)):
            got = call(client, dto.CONVERSATION_GET, dto.ConversationRef(conversation_id=c),
                       as_json=False)
            workspace = got.workspace.path if got.workspace else None
        restarted = (_last_restarted(client, c, snapshot) if not as_json
                     and snapshot.pending is None and snapshot.request is None else None)
    print_json(snapshot) if as_json else _show_snapshot(snapshot, workspace)
    if restarted is not None:  # R9: what the restart did, and how to carry on
        say("The latest question to end:")
        _show_question(restarted)


def _last_restarted(client: Client, c: str, snapshot: dto.Snapshot) -> dto.QuestionOut | None:
    """The question that ended last (the snapshot's `ended_requests` are newest first), when
    a restart cancelled it or failed the continuation its answer started (R9: the answer
    kept, the run interrupted), else None."""
    from clankie import dto
    from clankie.client import ApiError, NotClankie

    if not snapshot.ended_requests:
        return None
    with contextlib.suppress(ApiError, NotClankie):
        last = typed(client, dto.INPUT_GET, client.call("input_get", {
            "conversation_id": c, "request_id": snapshot.ended_requests[0]})).request
        receipt = last.receipt if last is not None else None
        if receipt is not None and (wording.restarted(receipt) or receipt.continuation_error
                                    == RunError.ORPHANED_BY_RESTART):
            return last
    return None


@app.command()
@conversation_arg
@request_arg
@incarnation_option
@revision_option
@click.option("--option", metavar="OPTION_UUID",
              help="The chosen option's ID (or a unique prefix of it).")
@click.option("--choice", metavar="N", type=Whole(1),
              help="The N-th option, numbered as `questions` prints them.")
@click.option("--text", metavar="TEXT", help="A text answer.")
@click.option("--stdin", is_flag=True, help="Read the text answer from standard input.")
@json_option
def answer(conversation: str | None, request: str | None, incarnation: str, revision: int,
           option: str | None, choice: int | None, text: str | None, stdin: bool,
           as_json: bool) -> None:
    """Answer a question, bound to the incarnation and revision it was shown with."""
    if sum((option is not None, choice is not None, text is not None, stdin)) != 1:
        fail_usage("give exactly one of --option, --choice, --text and --stdin")
    if stdin:
        from clankie.dto import ANSWER_TEXT_MAX

        text = stdin_text(ANSWER_TEXT_MAX)
    _resolve(conversation, Ids(request, incarnation, option), revision, as_json, text=text,
             choice=choice)


@app.command("cancel-question")
@conversation_arg
@request_arg
@incarnation_option
@revision_option
@json_option
def cancel_question(conversation: str | None, request: str | None, incarnation: str,
                    revision: int,
                    as_json: bool) -> None:
    """Cancel a question, bound to the incarnation and revision it was shown with."""
    _resolve(conversation, Ids(request, incarnation), revision, as_json, cancel=True)


@dataclass(frozen=True)
class Ids:
    """The IDs an answer or a cancel names, as given: each a whole ID or a unique prefix
    (`_whole_ids` makes them whole)."""

    request_id: str | None
    incarnation: str | None = None
    option_id: str | None = None


# Each ID's parameter, as a usage error names it.
_PARAMETERS = {"request_id": "REQUEST_UUID", "incarnation": "--incarnation",
               "option_id": "--option"}


def _whole_ids(client: Client, c: str, ids: Ids, choice: int | None, as_json: bool) -> Ids:
    """`ids` made whole (SPEC section 10 "CLI"): a request, incarnation or option given as
    a unique prefix (at least 4 hex characters), and `--choice N`, resolved against the
    snapshot read here: the pending question and the ended ones whose receipts R1 keeps (so
    the same answer given again with prefixes is a duplicate, as with whole IDs), an
    incarnation against the conversation's and the question's own. Whole IDs are sent as
    given, without a read."""
    from clankie import dto

    checked = Ids(*(None if value is None else id_or_prefix(value, "an", _PARAMETERS[key])
                    for key, value in vars(ids).items()))
    partial = [k for k, v in vars(checked).items() if v is not None and not UUID.match(v)]
    if not partial and choice is None:
        return checked
    request_id = checked.request_id
    assert request_id is not None  # `_resolve` and `questions` name one
    whole = UUID.match(request_id) is not None
    snapshot = call(client, dto.INPUT_GET, dto.InputGet(conversation_id=c, request_id=request_id)
                    if whole else dto.InputGet(conversation_id=c), as_json=as_json)
    shown = {q.request_id: q for q in (snapshot.request, snapshot.pending) if q}
    if "request_id" in partial:
        request_id = _one("request_id", request_id, [*shown, *snapshot.ended_requests])
    question = shown.get(request_id)
    if question is None and (choice is not None or len(partial) > 1):
        # An ended question named by a prefix: its options and incarnation, read whole.
        question = call(client, dto.INPUT_GET, dto.InputGet(
            conversation_id=c, request_id=request_id), as_json=as_json).request
    incarnation, option_id = checked.incarnation, checked.option_id
    if incarnation is not None and "incarnation" in partial:
        incarnation = _one("incarnation", incarnation, [
            snapshot.incarnation, *([question.incarnation] if question else [])])
    options = [o.option_id for o in question.options] if question else []
    if option_id is not None and "option_id" in partial:
        option_id = _one("option_id", option_id, options)
    if choice is not None:
        if not 1 <= choice <= len(options):
            said = (f"the question has options 1 to {len(options)}" if len(options) > 1 else
                    "the question has only option 1" if options else
                    "the question shown has no options (read it with `clankie conversations "
                    f"questions {c}`)")
            raise click.BadParameter(f"there is no option {choice}: {said}",
                                     param_hint="--choice")
        option_id = options[choice - 1]
    return Ids(request_id, incarnation, option_id)


def _one(key: str, given: str, candidates: list[str]) -> str:
    """The one candidate that starts with `given`; else a usage error naming them."""
    found = sorted({x for x in candidates if x.startswith(given)})
    if len(found) == 1:
        return found[0]
    what = _PARAMETERS[key]
    noun = {"request_id": "question", "incarnation": "incarnation", "option_id": "option"}[key]
    known = ", ".join(sorted(set(candidates))) or "none"
    if not found:
        among = {"request_id": "the pending one and those whose receipts are kept",
                 "incarnation": "the conversation's and the question's",
                 "option_id": "the question's"}[key]
        raise click.BadParameter(f"no {noun} starts with {given!r} ({among}: {known})",
                                 param_hint=what)
    raise click.BadParameter(f"{given!r} is ambiguous: it is the start of " + ", ".join(found),
                             param_hint=what)


def _resolve(conversation: str | None, ids: Ids, revision: int, as_json: bool, *,
             text: str | None = None, choice: int | None = None, cancel: bool = False) -> None:
    """Answer (with `text`, an option or a `choice`) or `cancel` the question `ids` names,
    bound to its incarnation and `revision`; say the receipt."""
    from clankie import dto

    conversation, request = shifted(conversation, ids.request_id)
    if request is None:
        raise click.MissingParameter(param_hint="'REQUEST_UUID'", param_type="argument")
    with connect() as client:
        c = resolve_conversation(client, conversation, as_json=as_json)
        ids = _whole_ids(client, c, Ids(request, ids.incarnation, ids.option_id), choice,
                         as_json)
        request = str(ids.request_id)
        bound = {"conversation_id": c, "request_id": request, "incarnation": ids.incarnation,
                 "revision": revision}
        explain = _explain_refusal(c, request)
        inspect = f"clankie conversations questions {c} --request {request}"
        if cancel:
            reply = call(client, dto.INPUT_CANCEL, request_of(dto.INPUT_CANCEL, **bound),
                         as_json=as_json, explain=explain, inspect=inspect)
        else:
            answer = {"text": text} if text is not None else {"option_id": ids.option_id}
            reply = call(client, dto.INPUT_ANSWER, request_of(dto.INPUT_ANSWER, **bound,
                                                              **answer),
                         as_json=as_json, explain=explain, inspect=inspect)
    if as_json:
        print_json(reply)
        return
    receipt = reply.receipt
    run = (f"continuation run {receipt.run_id}" if receipt.run_id else None)
    if receipt.outcome == "answered":
        if reply.duplicate:
            said = f", {run} ({receipt.continuation})" if run else ""
            say(f"Already accepted (the same answer): receipt {receipt.receipt_id}{said}.")
        else:
            said = f"; {run} is {receipt.continuation}" if run else ""
            say(f"Accepted: receipt {receipt.receipt_id}{said}.")
            say(f"Accepted means stored. {wording.accepted(receipt)}")
    else:
        again = "Already cancelled" if reply.duplicate else "Cancelled"
        say(f"{again}: receipt {receipt.receipt_id}.")
    exit_with(0)
