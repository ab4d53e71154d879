"""What every `clankie` command shares: calling the service once, exit codes, output.

Owns the one function `call` through which a command reaches the service; its exit codes
are SPEC section 10's, read from `core.vocabulary`. A command sends a request at most
once: `Uncertain` (no reply after sending) is exit 7 with the way to inspect the result,
never a second try; only a follower (`follow`) asks a read again, once the service is back.
A listener that is not the owner's (`NotYours`, T2) is exit 5 with the fix; nothing was
sent to it. With `--json`, every failure is a problem document on stdout with the same exit
code: the service's own, or one the CLI makes in its shape (`problem_document`: the service
unreachable, no reply, not the owner's, and any error that escapes a command, `failure`),
saying in `sent` whether the request reached the service.

Owns which conversation a command means (`resolve_conversation`): the one named by ID or
prefix, else the one from where the owner stands (`conversation_here`, SPEC section 10
"Finding what waits").

Everything a command prints goes through `say`, `warn` or `print_json`, which show text
from others (prompts, options, messages, summaries, paths, details) with its control and
invisible format characters made visible (`clankie.text`): nothing from the service
reaches the terminal raw. Nothing printed is ever interpreted as markup.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NoReturn

import click

from clankie import wording
from clankie.core.vocabulary import CODES, EXIT_OF_CODE, Code, Exit
from clankie.text import visible, visible_json

if TYPE_CHECKING:  # the client and the shapes (pydantic) load with the first call:
    # `--help`, `--version` and shell completion need none of them
    from clankie import dto
    from clankie.client import (
        ApiError,
        Client,
        NotClankie,
        NotYours,
        ServiceUnreachable,
        Uncertain,
    )
    from clankie.dto import InT, Op, OutT

DONE, OTHER, USAGE, CONFLICT = Exit.DONE, Exit.OTHER, Exit.USAGE, Exit.CONFLICT
REFUSED, DENIED, MISSING, UNCERTAIN = Exit.REFUSED, Exit.DENIED, Exit.MISSING, Exit.UNCERTAIN
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")



# ------------------------------------------------------------------ click, as clankie uses it


# click shows an argument's help itself from 8.5 on ("Positional arguments"); before, `Command`.
_ARGUMENT_HELP: Final = "help" in click.Argument.__init__.__code__.co_varnames


class Arg(click.Argument):
    """An argument with a line of help."""

    def __init__(self, param_decls: list[str], help: str | None = None, **kwargs: Any) -> None:
        if _ARGUMENT_HELP:
            kwargs["help"] = help
        super().__init__(param_decls, **kwargs)
        self.help = help


class Command(click.Command):
    """A command whose help lists its arguments, each once, before the options; given
    `--json`, an error that escapes it is a problem document on stdout (`failure`), with
    the exit code `main` gives it in words."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (click.exceptions.ClickException, click.exceptions.Exit,
                click.exceptions.Abort):
            raise
        except Exception as exc:
            if not ctx.params.get("as_json"):
                raise
            failed = failure(exc)
            print_json(failed.problem())
            exit_with(failed.exit)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(a.human_readable_name, a.help or "") for a in self.get_params(ctx)
                if isinstance(a, Arg)]
        if rows and not _ARGUMENT_HELP:
            with formatter.section("Positional arguments"):
                formatter.write_dl(rows)
        super().format_options(ctx, formatter)


class Group(click.Group):
    """A group of `Command`s (and of groups like itself); bare, it shows its help."""

    command_class = Command
    group_class = type  # its subgroups are `Group`s too


class Given(click.types.StringParamType):
    """A string option that, when missing, says where its value is shown."""

    def __init__(self, where: Callable[[click.Context | None], str]) -> None:
        self.where = where

    def get_missing_message(self, param: click.Parameter,
                            ctx: click.Context | None = None) -> str:
        return self.where(ctx)


if TYPE_CHECKING:  # click 8.5 types its parameter types; older clicks are not generic
    _IntParam = click.ParamType[int]
else:
    _IntParam = click.ParamType


class Whole(_IntParam):
    """A whole number in ASCII digits from `least` (to `most`), refused in plain words
    (click's `IntRange` says `x>=1`, and Python's `int` reads other scripts' digits)."""

    name = "integer"

    def __init__(self, least: int, most: int | None = None) -> None:
        self.least, self.most = least, most

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]{1,18}", value.strip()):
            number = int(value)
        else:
            self.fail(f"{visible(str(value))[:40]!r} is not a whole number", param, ctx)
        if number < self.least or (self.most is not None and number > self.most):
            wanted = (f"from {self.least} to {self.most}" if self.most is not None
                      else f"of {self.least} or more")
            self.fail(f"{number} is not allowed: give a whole number {wanted}", param, ctx)
        return number


class GivenInt(Whole):
    """A whole number (0 or more) that, when missing, says where its value is shown."""

    def __init__(self, where: Callable[[click.Context | None], str]) -> None:
        super().__init__(0)
        self.where = where

    def get_missing_message(self, param: click.Parameter,
                            ctx: click.Context | None = None) -> str:
        return self.where(ctx)


json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print the service's object (or problem) as JSON.")


def say(text: str = "") -> None:
    click.echo(visible(text))


def warn(text: str) -> None:
    click.echo(visible(text), err=True)


def json_lines() -> None:
    """From now on this command prints each JSON object on one line (JSON Lines): for a
    command that prints one object after another while it runs, a problem included. Kept
    in the command's click context, so it ends with the command."""
    click.get_current_context().meta["clankie.json_lines"] = True


def print_json(value: object) -> None:
    """The service's object as JSON (a result model as the service sent it: its fields in
    their order, `dto`'s models dumped as JSON; lists and objects of them too); hidden
    characters are JSON escapes, so it parses the same and nothing in it acts on a
    terminal. Indented, or on one line after `json_lines`."""
    ctx = click.get_current_context(silent=True)
    lines = ctx is not None and ctx.meta.get("clankie.json_lines", False)
    click.echo(visible_json(_as_json(value), indent=None if lines else 2))


def _as_json(value: object) -> object:
    dump = getattr(value, "model_dump", None)  # a `dto` model (pydantic is not imported here)
    if dump is not None:
        return dump(mode="json")
    if isinstance(value, list | tuple):
        return [_as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_json(v) for k, v in value.items()}
    return value


def exit_with(code: int) -> NoReturn:
    raise click.exceptions.Exit(code)


@dataclass(frozen=True)
class Unfit:
    """A request built from what the person typed that does not fit its op's input model
    (`request_of`): sent as typed all the same, so that the service refuses it in its own
    words (`invalid_request`, exit 2, its problem document with --json), as it always has:
    the CLI words no bound of its own, and an unreachable service is still said first."""

    fields: dict[str, object]


def request_of(spec: Op[InT, Any], **fields: object) -> InT | Unfit:
    """The op's input model of `fields` (only the fields given: the service applies its
    defaults), or `Unfit` when what the person typed does not fit it."""
    from pydantic import ValidationError

    try:
        return spec.input.model_validate(fields)
    except ValidationError:
        return Unfit(fields)


def call(client: Client, spec: Op[InT, OutT], given: InT | Unfit | None = None, *,
         as_json: bool,
         explain: Callable[[ApiError], None] | None = None,
         inspect: str | None = None,
         exit_of: dict[str, int] | None = None,
         reconnecting: bool = False) -> OutT:
    """Call the op `spec` once with `given` (its input model; none for an op that takes
    nothing), and return its result as the op's output model. On failure, say why (or print
    the problem with --json) and exit, with the code of SPEC section 10 or, for a problem
    code in `exit_of`, that one; a result that does not fit the output model is not
    clankie's (exit 1). A change (one with `inspect`) interrupted by Ctrl+C is uncertain
    too (exit 7), not 130. `reconnecting`: a read its caller tries again (`follow`): a
    service that cannot be reached, or that gave no reply, is raised to it
    (`ServiceUnreachable`, `Uncertain`)."""
    from clankie.client import ApiError, NotClankie, NotYours, ServiceUnreachable, Uncertain

    payload = (given.fields if isinstance(given, Unfit) else {} if given is None
               else given.model_dump(mode="json", exclude_unset=True))
    for name, value in payload.items():
        if isinstance(value, str) and not_utf8(value):
            fail_usage(f"the {name} {not_utf8(value)} is not UTF-8 text (the terminal or the "
                       "file system gave bytes that are no characters); clankie sends text "
                       f"as UTF-8 only; nothing was sent")
    try:
        return typed(client, spec, client.call(spec.name, payload))
    except NotClankie as err:  # some other program answered: not the service's problem
        not_clankie(err, as_json=as_json)
    except ApiError as err:
        if as_json:
            print_json(err.problem)
        elif explain is not None:
            explain(err)
        else:
            warn(f"clankie: {err.code}: {err.detail}")
        exit_with((exit_of or {}).get(err.code, EXIT_OF_CODE.get(err.code, OTHER)))
    except KeyboardInterrupt:  # Ctrl+C while the request was in flight
        if inspect is None:  # a read: nothing to be uncertain of (130, as ever)
            raise
        if as_json:
            print_json(problem_document(
                "uncertain", "interrupted before the reply came: the request may have "
                "reached the service; it was not sent again, and must not be",
                sent="unknown", inspect=inspect))
            exit_with(UNCERTAIN)
        warn("clankie: interrupted before the reply came: the outcome is uncertain; the "
             "request may have reached the service.")
        warn("It was not sent again, and must not be. Inspect it with:")
        warn(f"  {inspect}")
        exit_with(UNCERTAIN)
    except NotYours as exc:
        if as_json:
            print_json(not_yours_problem(exc))
        else:
            explain_not_yours(exc)
        exit_with(DENIED)
    except (Uncertain, ServiceUnreachable) as exc:
        if reconnecting:
            raise
        _unreached(exc, inspect, as_json=as_json)


def typed(client: Client, spec: Op[Any, OutT], result: Mapping[str, object]) -> OutT:
    """`result` as the op's output model (`clankie.client.typed`, as `client` reached it)."""
    from clankie.client import typed

    return typed(spec, result, client.url, via_env=client.via_env)


def _unreached(exc: Uncertain | ServiceUnreachable, inspect: str | None, *,
               as_json: bool) -> NoReturn:
    """No reply came (`Uncertain`, exit 7) or nothing was sent (`ServiceUnreachable`,
    exit 1); with --json, as a problem document (`unreached_problem`)."""
    from clankie.client import Uncertain

    if as_json:
        print_json(unreached_problem(exc, inspect))
        exit_with(UNCERTAIN if isinstance(exc, Uncertain) else OTHER)
    if isinstance(exc, Uncertain):
        warn(f"clankie: the outcome is uncertain: {exc}.")
        warn("It was not sent again" + (", and must not be. Inspect it with:" if inspect
                                        else "; read the current state before doing anything."))
        if inspect:
            warn(f"  {inspect}")
        exit_with(UNCERTAIN)
    warn(f"clankie: {exc}")
    warn(f"  fix: {exc.fix}")
    exit_with(OTHER)


def not_utf8(text: str) -> str:
    """'' if `text` is UTF-8; else it shown with its stray bytes as \\xNN (Python hands
    argv, environment and paths with such bytes as lone surrogates)."""
    try:
        text.encode("utf-8")
        return ""
    except UnicodeEncodeError:
        shown = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        return f"'{visible(shown)}'"


def not_clankie(err: NotClankie, *, as_json: bool) -> NoReturn:
    """What answered is not clankie: say so (or print clankie's problem for it with
    --json) and exit 1 (SPEC section 10: anything else)."""
    if as_json:
        print_json(err.problem)
    else:
        warn(f"clankie: {err}.")
        warn(f"  fix: {err.fix}")
    exit_with(OTHER)


def explain_not_yours(exc: NotYours) -> None:
    """T2: whose the listener is (or that it cannot be told), and the fix."""
    warn(f"clankie: {exc}.")
    warn(f"  fix: {exc.fix}")


def problem_document(code: str, detail: str, **more: object) -> dict[str, object]:
    """A problem document the CLI makes itself (nothing, or nothing known, came from the
    service), shaped like the service's (`api.problems`): `type`, `title`, `status`,
    `detail`, `code`, and `more` (None left out). `status` is a SPEC code's HTTP status;
    a code of the CLI's own (`service_unreachable`, `uncertain`, `not_yours`, ...) has none,
    as no HTTP exchange made it. `sent`, where given: "no", nothing reached the service;
    "unknown", the request was sent and no reply came; "yes", it reached the service."""
    status = CODES[Code(code)][0] if code in CODES else None
    return {"type": f"urn:clankie:problem:{code}", "title": code.replace("_", " "),
            **({"status": status} if status is not None else {}), "detail": detail,
            "code": str(code), **{k: v for k, v in more.items() if v is not None}}


def unreached_problem(exc: Uncertain | ServiceUnreachable,
                      inspect: str | None = None) -> dict[str, object]:
    """No reply came (`uncertain`, with the command that inspects the outcome), or the
    service could not be reached (`service_unreachable`, with how to start it)."""
    from clankie.client import Uncertain

    if isinstance(exc, Uncertain):
        return problem_document("uncertain", f"the outcome is uncertain: {exc}; it was not "
                                "sent again", sent="unknown", inspect=inspect)
    return problem_document("service_unreachable", str(exc), fix=exc.fix, sent="no")


def not_yours_problem(exc: NotYours) -> dict[str, object]:
    """A refusal under T2 for --json: shaped like the service's problem documents, though
    it comes from the client (nothing was sent)."""
    return problem_document("not_yours", str(exc), fix=exc.fix, sent="no")


@dataclass(frozen=True)
class Failure:
    """An error that escaped a command (`failure`): the line said (`said`, after
    "clankie: "), its fix, its exit code, and what a problem document says of it."""

    code: str
    said: str
    exit: int
    fix: str | None = None
    detail: str | None = None  # the problem's detail, where it is not `said`
    sent: str | None = None

    def problem(self) -> dict[str, object]:
        return problem_document(self.code, self.detail or self.said, fix=self.fix,
                                sent=self.sent)


def failure(exc: Exception) -> Failure:
    """An error that escaped a command, as `main` says it and as `--json` prints it. The
    client's, the store's, the settings' and the home's classes are looked up among the
    modules already imported, never imported here: an error of theirs means their module
    is loaded, and a command that used none pays nothing (nor can an import fail while an
    error is being said)."""
    client, store = sys.modules.get("clankie.client"), sys.modules.get("clankie.store.db")
    settings, home = sys.modules.get("clankie.settings"), sys.modules.get("clankie.home")
    errors = sys.modules.get("clankie.core.errors")
    if settings and isinstance(exc, settings.SettingsError):  # the owner's to fix (T3)
        return Failure(Code.INVALID_REQUEST, str(exc), USAGE, exc.fix, sent="no")
    if home and isinstance(exc, home.UnsafeHome):  # T1, or no usable home
        return Failure("unsafe_home" if exc.unsafe.trust else "home_unusable", exc.headline,
                       USAGE, exc.unsafe.fix, detail=str(exc), sent="no")
    if client and isinstance(exc, client.BadServiceUrl):  # the owner's to fix; it says how
        return Failure(Code.INVALID_REQUEST, str(exc), USAGE, sent="no")
    if client and isinstance(exc, client.NotYours):  # T2, outside `call`
        return Failure("not_yours", f"{exc}.", DENIED, exc.fix, detail=str(exc), sent="no")
    if errors and isinstance(exc, errors.ClankieError):
        return Failure(exc.code, str(exc), OTHER, detail=exc.detail)
    if store and isinstance(exc, store.StoreUnusable):
        return Failure(Code.STORAGE_UNAVAILABLE, str(exc), OTHER)
    return Failure(Code.INTERNAL_ERROR, f"internal error: {type(exc).__name__}: {exc}",
                   OTHER)  # never a traceback


def connect() -> Client:
    """The client of CLANKIE_URL (else the home's socket); a CLANKIE_URL that is not an
    address is `BadServiceUrl`, which `main` says as a usage error (exit 2)."""
    from clankie.client import Client

    return Client()  # each result is checked once, as `call` reads it into its model


COMPLETION_TIMEOUT_S = 0.2


def complete_conversation(ctx: click.Context, param: click.Parameter,
                          incomplete: str) -> list[str]:
    """Shell completion of a conversation ID from the running service: only what it
    answers within 200 ms; nothing (never an error) when it does not, or when it is not
    the owner's (T2: the client refuses before sending)."""
    if incomplete and not re.fullmatch(r"[0-9a-f-]{1,36}", incomplete):
        return []
    try:
        from clankie.client import Client

        with Client(timeout=COMPLETION_TIMEOUT_S) as client:
            listed = client.call("conversation_list", {"limit": 50, **(
                {"prefix": incomplete} if incomplete else {})})["conversations"]
        # Read as JSON, not as `dto` models: a shell waits on this (issue 19: pydantic's
        # import would be most of the 200 ms); only strings are offered.
        return [i for c in listed if isinstance(i := c.get("conversation_id"), str)]
    except Exception:  # completion must never print an error into the shell
        return []


def id_or_prefix(given: str, what: str, param_hint: str) -> str:
    """`given` as a whole ID or a prefix of one (SPEC section 10 "CLI": at least 4 hex
    characters; case and surrounding blanks ignored), else a usage error (exit 2)."""
    given = given.strip().lower()
    if not re.fullmatch(r"[0-9a-f-]{1,36}", given) or sum(ch != "-" for ch in given) < 4:
        raise click.BadParameter(f"{given!r} is not {what} ID or a prefix of one (at least 4 "
                                 "hex characters)", param_hint=param_hint)
    return given


def resolve_conversation(client: Client, given: str | None, *, as_json: bool) -> str:
    """The conversation a command names: none given, the one from where the owner stands
    (`conversation_here`); else a full conversation ID, or a unique prefix of one of at
    least 4 hex characters (like git's short hashes; SPEC section 10 "CLI"); the service
    filters by the prefix, so this costs one small page. A shorter, ambiguous or unmatched
    prefix is a usage error (exit 2) naming the candidates, or, when none matches, how to
    list the conversations."""
    if given is None:
        return conversation_here(client, as_json=as_json)
    given = id_or_prefix(given, "a conversation", "CONVERSATION")
    if UUID.match(given):
        return given
    from clankie import dto

    listed = call(client, dto.CONVERSATION_LIST, dto.ConversationList(
        prefix=given, limit=10, archived=True),  # named: found
                  as_json=as_json).conversations
    matches = [c.conversation_id for c in listed if c.conversation_id.startswith(given)]
    if not matches:
        said = (f"there is no conversation {given}" if len(given) == 36  # a whole ID
                else f"no conversation starts with {given!r}")
        raise click.BadParameter(f"{said}; list them with `clankie conversations list`",
                                 param_hint="CONVERSATION")
    if len(matches) > 1:
        raise click.BadParameter(f"{given!r} is ambiguous: it is the start of " +
                                 ", ".join(matches) + (" and more" if len(matches) == 10
                                                       else ""), param_hint="CONVERSATION")
    return str(matches[0])


def workspace_conversations(client: Client, directory: str, *, as_json: bool
                            ) -> list[dto.ListedConversationOut]:
    """The conversations bound to `directory` (resolved, as the service stores workspaces)
    or to a parent of it, nearest first, then latest activity first; archived ones too
    (archive only hides a conversation from lists: its directory still means it)."""
    from clankie import dto

    return call(client, dto.CONVERSATION_LIST, request_of(
        dto.CONVERSATION_LIST, workspace=directory, limit=100, archived=True),
                as_json=as_json).conversations


def directory_conversation(listed: list[dto.ListedConversationOut], *, free: bool = False
                           ) -> dto.ListedConversationOut | None:
    """The conversation for a directory (SPEC section 10 "Finding what waits"), of its
    `workspace_conversations`: the owner conversation bound to it or to its nearest parent,
    the most recently active there. `free`: only one no native seat owns (one `clankie
    chat` can talk in)."""
    return next((c for c in listed if c.kind == "owner"
                 and not (free and c.native_owner)), None)


def _chosen(conversation: dto.ListedConversationOut, why: str, as_json: bool) -> None:
    """Say on standard error which conversation a command that named none acts on, and
    why (a symlinked directory or an archived conversation is no surprise then)."""
    if not as_json:
        warn(f"(conversation {conversation.conversation_id}: {why})")


def conversation_here(client: Client, *, as_json: bool) -> str:
    """The conversation a `conversations` command means when it names none (SPEC section
    10 "Finding what waits"): the current directory's (`directory_conversation`); else,
    when exactly one conversation has a question waiting, that one; else a usage error
    (exit 2) listing the candidates (with --json, a problem document on stdout)."""
    from clankie import dto

    try:
        cwd = str(Path.cwd().resolve())
    except OSError:  # removed under the shell: a directory no conversation is bound to
        cwd = "the current directory (which no longer exists)"
        found = None
    else:
        found = directory_conversation(workspace_conversations(client, cwd, as_json=as_json))
    if found is not None:
        path = found.workspace.path if found.workspace else ""  # an owner's has one
        _chosen(found, f"bound to {wording.one_line(path)}", as_json)
        return found.conversation_id
    waiting = call(client, dto.CONVERSATION_LIST, dto.ConversationList(waiting=True, limit=10),
                   as_json=as_json).conversations
    if len(waiting) == 1:
        _chosen(waiting[0], "the one whose question waits", as_json)
        return waiting[0].conversation_id
    candidates = waiting or call(client, dto.CONVERSATION_LIST, dto.ConversationList(limit=10),
                                 as_json=as_json).conversations
    here = wording.one_line(cwd)
    if not candidates:
        said = (f"no conversation is bound to {here} or a parent of it, and there are no "
                "conversations: start one here with `clankie chat`")
    elif waiting:
        said = (f"no conversation is bound to {here} or a parent of it, and questions wait "
                "in several: name one")
    else:
        said = (f"no conversation is bound to {here} or a parent of it, and no question "
                "waits: name one")
    lines = [f"{c.conversation_id}  " + (
        wording.one_line(c.workspace.path) if c.workspace else c.kind) + (
        f"  waits: {wording.short(c.pending.prompt)}" if c.pending else "")
        for c in candidates]
    if as_json:
        print_json(usage_problem(said, candidates=[c.conversation_id for c in candidates]))
    else:
        warn(f"clankie: {said}" + (":" if lines else "."))
        for line in lines:
            warn(f"  {line}")
    exit_with(USAGE)


def usage_problem(detail: str, **more: object) -> dict[str, object]:
    """A usage error as the service's own `invalid_request` problem document (SPEC section
    10: with --json, on stdout too), with `more` fields (the candidates)."""
    return problem_document(Code.INVALID_REQUEST, detail, **more)


def shifted(first: str | None, second: str | None) -> tuple[str | None, str | None]:
    """A command's CONVERSATION and the argument after it, when CONVERSATION may be left
    out: one given is the second (`send TEXT`, `answer REQUEST`)."""
    return (None, first) if second is None else (first, second)


def fail_usage(message: str) -> NoReturn:
    raise click.BadParameter(message)


def current_directory() -> Path:
    """The current directory, resolved; one removed under the shell is a usage error
    saying so (exit 2), not an internal error."""
    try:
        return Path.cwd().resolve()
    except OSError:
        raise click.UsageError("the current directory no longer exists: change to a folder "
                               "(or name one with --workspace) and run it again") from None


def stdin_text(limit: int) -> str:
    """The whole of standard input as an answer text: one trailing newline is stripped."""
    most = limit * 4 + 2  # UTF-8 takes at most 4 bytes a character, plus a "\r\n"
    data = sys.stdin.buffer.read(most + 1)
    if len(data) > most:
        fail_usage(f"the answer is longer than {limit} characters; nothing was sent")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        fail_usage("standard input is not valid UTF-8; nothing was sent")
    if text.endswith("\r\n"):
        text = text[:-2]
    elif text.endswith("\n"):
        text = text[:-1]
    if not text:
        fail_usage("standard input is empty; nothing was sent")
    if len(text) > limit:
        fail_usage(f"the answer is longer than {limit} characters; nothing was sent")
    return text
