"""The MCP server of `clankie mcp` (SPEC P1, P4-P7): five tools over stdio, on the `mcp`
SDK's `MCPServer`, each one or two dispatcher ops.

Owns the tools (their input and output schemas, their annotations, what each sends) and
the bridge's life: it holds no state but the token's kind once the service has said it,
so killing it loses nothing. Each call is its op (`agent_ask`, `agent_wait`, `agent_list`,
`agent_cancel`), preceded by `whoami` only while the token's kind is not known yet (the
service was unreachable at start). A call's arguments are checked against the contract's
shapes (`clankie.dto`) before anything is sent; a bad one is `invalid_request`.

What the bridge never does: elicitation, sampling, roots, tasks or progress (P6, P7); it
asks the client nothing, and a call's result never depends on a notification. A
`notifications/cancelled` abandons only that call: the SDK cancels its handler, whose
request to the service is dropped with its connection; no question is ever cancelled but
by `cancel_question` (P5). No call is held longer than its `wait_s` plus the service's
reply time (`SERVICE_TIMEOUT_S` at most).

A line that is no JSON-RPC 2.0 message, which the SDK drops unanswered, gets JSON-RPC's
own answer (`invalid`: -32700 "Parse error" or -32600 "Invalid Request", `id` null), and
the bridge goes on serving.

Standard output carries only JSON-RPC (the SDK's stdio transport points file descriptor 1
at standard error while it serves, so a stray print cannot reach the wire); the log goes
to standard error, one line an event, without tracebacks, and never holds a token or an
answer's text (T5): only what happened and the service's reasons.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Annotated, Any, Final, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    TextContent,
    ToolAnnotations,
)
from pydantic import BaseModel, ValidationError

from clankie import __version__, dto
from clankie.client import (
    ApiError,
    AsyncClient,
    NotClankie,
    NotYours,
    ServiceUnreachable,
    Uncertain,
)
from clankie.text import visible

from . import results
from .results import AskResult, CancelResult, ListResult, QuestionResult, ToolResult
from .start import Identity

SERVICE_TIMEOUT_S: Final = 10.0  # a reply of the service, beyond a wait's own wait_s
MAX_ERRORS_SAID: Final = 5
NAME_MAX: Final = 200  # dto.Name: a client's name is cut to this, never refused for it
INSTRUCTIONS: Final = (
    "clankie lets you ask the owner (the person you work for) one preference question at a "
    "time, durably: ask_owner returns at once with a request_id; go on working and collect "
    "the answer later with wait_answer (it waits at most 30 s a call) or get_question. "
    "Until a result says answered, the owner has not answered: do not assume an answer. "
    "An answer is the owner's preference, not an approval; no answer is not consent.")
READ: Final = ToolAnnotations(read_only_hint=True, open_world_hint=False)
DESCRIPTIONS: Final[dict[str, str]] = {
    "ask_owner": (
        "Ask the owner one preference question through clankie. It never waits: it returns "
        "status pending and a request_id at once; collect the answer later with "
        "wait_answer or get_question. Until then the owner has not answered: do not assume "
        "an answer. One question at a time in this workspace: the same question again "
        "returns the same request (duplicate: true); a different one is refused while one "
        "is pending. kind text takes a free answer; kind choice takes 2 to 10 options "
        "(allow_text lets the owner answer in words instead)."),
    "wait_answer": (
        "Wait up to wait_s seconds (0 to 30, default 25) for the owner's answer to your "
        "question request_id. Returns as soon as the question has ended, else status "
        "pending: call it again to wait longer. An answer is the owner's preference, not "
        "an approval; cancelled, expired or invalidated is no answer, and no answer is not "
        "consent."),
    "get_question": (
        "How your question request_id stands now, without waiting (wait_answer with "
        "wait_s 0)."),
    "list_questions": (
        "Your questions in this workspace: the pending one, then the ended ones clankie "
        "keeps, newest first. Use it to find a request_id again, after a restart say."),
    "cancel_question": (
        "Cancel your own pending question request_id, when it no longer matters. A repeat "
        "returns the same receipt; a question the owner has already answered is not "
        "cancelled (reason already_answered)."),
}
PROPERTIES: Final[dict[str, str]] = {
    "kind": "text (a free answer) or choice (one of the options)",
    "prompt": "the question, 1 to 2,000 characters, in the owner's words where you can",
    "options": "for choice: 2 to 10 options, each a label (1 to 200 characters) and an "
               "optional description",
    "allow_text": "for choice: the owner may answer in words instead of an option",
    "expires_in_s": "seconds until the question expires unanswered (at most the service's "
                    "question_ttl, 24 h by default)",
    "request_id": "the request_id ask_owner returned",
    "wait_s": "seconds to wait for the answer: 0 to 30, default 25",
}

log = logging.getLogger("clankie.bridge")
M = TypeVar("M", bound=BaseModel)


class Bridge:
    """The tools, over one client of the service, for one token and one workspace."""

    def __init__(self, client: AsyncClient, workspace: str, identity: Identity | None) -> None:
        self.client = client
        self.workspace = workspace
        self.kind: str | None = identity.kind if identity else None
        self.reachable = True
        self._asking_kind = asyncio.Lock()

    # The tools. Each takes the call's arguments as they came and returns its result.

    async def ask_owner(self, arguments: Mapping[str, object] | None,
                        ctx: Context) -> Annotated[CallToolResult, AskResult]:
        args = checked(dto.AskOwner, arguments)
        if isinstance(args, ToolResult):
            return wire(args)
        payload = {"workspace": self.workspace, **args.model_dump(mode="json",
                                                                  exclude_none=True)}
        name = client_name(ctx)
        if name is not None:
            payload["client"] = name
        return wire(await self._op("agent_ask", payload, results.asked))

    async def wait_answer(self, arguments: Mapping[str, object] | None,
                          ctx: Context) -> Annotated[CallToolResult, QuestionResult]:
        args = checked(dto.AgentWait, arguments)
        if isinstance(args, ToolResult):
            return wire(args)
        return wire(await self._op("agent_wait", args.model_dump(), results.question,
                                   args.request_id))

    async def get_question(self, arguments: Mapping[str, object] | None,
                           ctx: Context) -> Annotated[CallToolResult, QuestionResult]:
        args = checked(dto.AgentRequest, arguments)
        if isinstance(args, ToolResult):
            return wire(args)
        return wire(await self._op("agent_wait", {"request_id": args.request_id, "wait_s": 0},
                                   results.question, args.request_id))

    async def list_questions(self, arguments: Mapping[str, object] | None,
                             ctx: Context) -> Annotated[CallToolResult, ListResult]:
        args = checked(dto.Nothing, arguments)
        if isinstance(args, ToolResult):
            return wire(args)
        return wire(await self._op("agent_list", {"workspace": self.workspace},
                                   results.listed))

    async def cancel_question(self, arguments: Mapping[str, object] | None,
                              ctx: Context) -> Annotated[CallToolResult, CancelResult]:
        args = checked(dto.AgentRequest, arguments)
        if isinstance(args, ToolResult):
            return wire(args)
        return wire(await self._op("agent_cancel", args.model_dump(), results.cancelled,
                                   args.request_id))

    # One or two ops.

    async def _op(self, op: str, payload: Mapping[str, object],
                  result: Callable[[Mapping[str, Any]], ToolResult],
                  request_id: str | None = None) -> ToolResult:
        sending = False  # only `whoami` was sent yet: the op was not (issue 42)
        try:
            wrong = await self._agent_or_why_not()
            if wrong is not None:
                return wrong
            sending = True
            made = result(await self.client.call(op, payload))
        except NotClankie as exc:
            return self._unavailable("not_clankie", exc, "unknown" if sending else "no")
        except ApiError as exc:
            if exc.code == "storage_unavailable" and not sending:
                return self._unavailable(exc.code, exc.detail, "no")
            return results.refused(exc.code, exc.detail, request_id=request_id)
        except Uncertain as exc:
            return self._unavailable("uncertain", exc, "unknown" if sending else "no")
        except ServiceUnreachable as exc:
            return self._unavailable("service_unreachable", exc, "no")
        except NotYours as exc:
            return self._unavailable("not_yours", exc, "no")
        except Exception as exc:  # never a traceback to the client or the log
            log.error("internal error in %s: %s", op, type(exc).__name__)
            return results.refused("internal_error", f"the bridge failed: {type(exc).__name__}",
                                   request_id=request_id)
        if not self.reachable:
            self.reachable = True
            log.info("the service answers again")
        return made

    async def _agent_or_why_not(self) -> ToolResult | None:
        """None once the service has said the token is an agent's; the result every call
        gets when it said another kind (P2). Asked once, on the first call that finds it
        unknown (the service was unreachable at start)."""
        async with self._asking_kind:
            if self.kind is None:
                who = await self.client.call("whoami", {})
                self.kind = str(who.get("kind"))
                if self.kind == "agent":
                    log.info("the service is reachable; serving as agent %r",
                                visible(str(who.get("name"))))
                else:
                    log.error("CLANKIE_AGENT_TOKEN holds a token of kind %s, not an agent's: every "
                              "call is refused", visible(self.kind))
        return None if self.kind == "agent" else results.not_an_agent(self.kind)

    def _unavailable(self, reason: str, detail: object, sent: results.Sent) -> ToolResult:
        if self.reachable:
            self.reachable = False
            log.warning("the service does not answer: %s", visible(str(detail)))
        return results.unavailable(reason, str(detail), sent=sent)


def checked(model: type[M], arguments: Mapping[str, object] | None) -> M | ToolResult:
    """The arguments as the contract's shape, or `invalid_request` saying what is wrong
    (field and message; the values are the agent's own, never echoed in full)."""
    try:
        return model.model_validate(arguments or {})
    except ValidationError as exc:
        said = [f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: "
                f"{e['msg'].removeprefix('Value error, ')}"  # our own words, as they are
                for e in exc.errors()[:MAX_ERRORS_SAID]]
        more = exc.error_count() - len(said)
        return results.refused("invalid_request", "; ".join(said)
                               + (f"; and {more} more" if more > 0 else ""))


def client_name(ctx: Context) -> str | None:
    """The MCP client's `clientInfo.name` (P3: shown to the owner with the question), cut
    to what the service takes; None when the client gave none."""
    params = ctx.request_context.session.client_params
    name = params.client_info.name if params is not None else None
    if not name:
        return None
    name = name.replace("\x00", "")[:NAME_MAX]
    name = name.encode("utf-8", "replace").decode("utf-8")  # lone surrogates are no text
    return name if name.strip() else None


def wire(result: ToolResult) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=result.text)],
                          structured_content=result.structured, is_error=result.is_error)


class ArgumentsAsTheyCame(Tool):
    """A tool whose function takes the call's arguments as they came, so that they are
    checked against the contract's shapes (strict, bounded, unknown fields refused) and a
    bad one is a result with a SPEC code, not the SDK's own validation text; its
    `inputSchema` is that shape's JSON Schema."""

    async def run(self, arguments: Mapping[str, object], context: Context[Any, Any],
                  convert_result: bool = False) -> Any:
        return await self.fn(arguments, context)


def input_schema(model: type[BaseModel]) -> dict[str, object]:
    """`model`'s JSON Schema as a tool's `inputSchema`: references inlined (not every host
    follows `$defs`), no titles, a description on each property for the model."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node: object) -> object:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            return inline({**definitions[ref.removeprefix("#/$defs/")], **siblings})
        return {k: inline(v) for k, v in node.items()
                if not (k == "title" and isinstance(v, str))}

    shaped = inline(schema)
    assert isinstance(shaped, dict)  # the schema of a model is an object
    shaped.pop("description", None)  # the tool's description says it, for the model
    for name, prop in shaped.get("properties", {}).items():
        if name in PROPERTIES:
            prop["description"] = PROPERTIES[name]
    return shaped


def tools(bridge: Bridge) -> list[Tool]:
    made: list[Tool] = []
    table: list[tuple[Callable[..., Awaitable[CallToolResult]], type[BaseModel],
                      ToolAnnotations]] = [
        (bridge.ask_owner, dto.AskOwner,
         ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                         open_world_hint=False)),
        (bridge.wait_answer, dto.AgentWait, READ),
        (bridge.get_question, dto.AgentRequest, READ),
        (bridge.list_questions, dto.Nothing, READ),
        (bridge.cancel_question, dto.AgentRequest,
         ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                         open_world_hint=False)),
    ]
    for fn, shape, hints in table:
        tool = ArgumentsAsTheyCame.from_function(
            fn, name=fn.__name__, description=DESCRIPTIONS[fn.__name__],
            annotations=hints, structured_output=True)
        made.append(tool.model_copy(update={"parameters": input_schema(shape)}))
    return made


class _Line(logging.Formatter):
    """One line an event: no traceback, no stack, control characters made visible."""

    def format(self, record: logging.LogRecord) -> str:
        return visible(f"clankie mcp: {record.getMessage()}").replace("\n", " ")


def quiet_logging() -> None:
    """The log on standard error, warnings and errors only (the SDK logs each call's
    details at INFO), in clankie's words, before the SDK sets up its own."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Line())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    log.setLevel(logging.INFO)  # the bridge's own events: start, the service gone and back


_LONE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def mended(line: bytes) -> bytes:
    """A line of JSON-RPC with each lone surrogate (`"\\ud83d"`: half an emoji, as Node
    hosts write it) made U+FFFD, as invalid UTF-8 already is; any other line as it came.
    The SDK's reader drops a message it cannot validate, unanswered, and such a string
    is no text (red team)."""
    if not _LONE_ESCAPE.search(line):
        return line
    try:
        message = json.loads(line.decode("utf-8", "replace"))
        return json.dumps(_whole(message), ensure_ascii=False).encode("utf-8") + b"\n"
    except (ValueError, RecursionError):
        return line


def _whole(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)  # a whole pair is one character by now
    if isinstance(value, list):
        return [_whole(item) for item in value]
    if isinstance(value, dict):
        return {_whole(key): _whole(item) for key, item in value.items()}
    return value


def _mend_stdin() -> None:
    """Standard input becomes a pipe that a thread fills with the real one's lines,
    `mended`; its end is the real one's end."""
    source = os.dup(0)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)

    def pump() -> None:
        with contextlib.suppress(OSError), os.fdopen(source, "rb") as lines, \
                os.fdopen(write_end, "wb") as out:
            for line in lines:
                out.write(mended(line))
                out.flush()

    threading.Thread(target=pump, name="stdin", daemon=True).start()


def invalid(refused: Exception) -> JSONRPCError | None:
    """JSON-RPC 2.0's answer (section 5.1) to a line the SDK's reader could not take as a
    message (`refused`, what its validation raised): not JSON, -32700 "Parse error"; JSON
    that is no JSON-RPC 2.0 message (a batch too: MCP has none), -32600 "Invalid Request";
    `id` null, as it cannot be told. None for a blank line: no message was sent."""
    errors = refused.errors() if isinstance(refused, ValidationError) else []
    if errors and errors[0]["type"] == "json_invalid":
        if not str(errors[0].get("input", "x")).strip():
            return None
        return JSONRPCError(jsonrpc="2.0", id=None,
                            error=ErrorData(code=PARSE_ERROR, message="Parse error"))
    return JSONRPCError(jsonrpc="2.0", id=None,
                        error=ErrorData(code=INVALID_REQUEST, message="Invalid Request"))


async def run_stdio(server: MCPServer[Any]) -> None:
    """`MCPServer.run_stdio_async`, with each line that is no message answered (`invalid`)
    on the same write stream as every reply, so lines never interleave."""
    lowlevel = server._lowlevel_server  # the SDK's own run_stdio_async reads it so too
    async with stdio_server() as (read_stream, write_stream):
        sifted_in, sifted = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def sift() -> None:
            async with sifted_in:
                async for item in read_stream:
                    if not isinstance(item, Exception):
                        await sifted_in.send(item)
                    elif (answer := invalid(item)) is not None:
                        with contextlib.suppress(anyio.ClosedResourceError,
                                                 anyio.BrokenResourceError):
                            await write_stream.send(SessionMessage(answer))

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(sift)
            await lowlevel.run(sifted, write_stream, lowlevel.create_initialization_options())
            tasks.cancel_scope.cancel()


def serve(workspace: str, token: str, identity: Identity | None) -> None:
    """Serve on stdin and stdout until the client closes stdin."""
    quiet_logging()
    _mend_stdin()

    async def main() -> None:
        async with AsyncClient(token=token, timeout=SERVICE_TIMEOUT_S) as client:
            bridge = Bridge(client, workspace, identity)
            server: MCPServer[Any] = MCPServer(
                "clankie", version=__version__, instructions=INSTRUCTIONS,
                tools=tools(bridge), log_level="WARNING")
            who = (f"as agent {identity.name!r}" if identity is not None else
                   "(the service is not reachable now: the first call asks who the token is)")
            log.info("serving workspace %s %s through %s", visible(workspace),
                        visible(who), client.url)
            await run_stdio(server)

    anyio.run(main)
