"""Strict checks of model requests by each provider's published rules (SPEC R8), with the
provider's own 400 error shape and wording.

`openai_problem(body)` checks a chat-completions request (roles; an assistant message with
`tool_calls` followed by a `tool` message for every ID; `tool` messages only answering
those; tool names `^[a-zA-Z0-9_-]+$` of 1 to 64 characters; arguments text that is a JSON
object, as vLLM, llama.cpp and SGLang require; call IDs of at most 40 characters, unique in
the request).
`anthropic_problem(body)` checks a Messages request (roles alternate, the first is the
user's; no empty content and no text block that is empty or only whitespace; `tool_use`
IDs match `^[a-zA-Z0-9_-]+$` and are unique; names `^[a-zA-Z0-9_-]{1,64}$`; `input` an
object; every `tool_use` answered by a `tool_result` at the start of the next user
message, and every `tool_result` answering one in the message before).
Each returns None for a request the provider accepts, else the error text it would give.
`budget_problem` says whether a request exceeds a `context_budget`. `strict_endpoint`
starts the fake endpoint of `tests.fakes` with these checks in front of it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from clankie.agent.wire import estimate
from tests.fakes import Endpoint, Reply, model_endpoint

ID = re.compile(r"[a-zA-Z0-9_-]+")
NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")


def openai_error(message: str, param: str | None = None) -> Reply:
    return Reply(status=400, body={"error": {"message": message, "type":
                                             "invalid_request_error", "param": param,
                                             "code": None}})


def anthropic_error(message: str) -> Reply:
    return Reply(status=400, body={"type": "error", "error": {
        "type": "invalid_request_error", "message": message}})


def openai_problem(body: dict[str, Any]) -> str | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "'messages' must be a non-empty array"
    awaiting: list[str] = []
    seen: set[str] = set()
    for i, m in enumerate(messages):
        role = m.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            return f"Invalid value: '{role}'. Supported values are: 'system', 'assistant', " \
                   "'user', 'tool'."
        if role == "tool":
            if m.get("tool_call_id") not in awaiting:
                return ("Invalid parameter: messages with role 'tool' must be a response to "
                        "a preceeding message with 'tool_calls'.")
            awaiting.remove(m["tool_call_id"])
            if not isinstance(m.get("content"), str):
                return f"Invalid type for 'messages[{i}].content'"
            continue
        if awaiting:
            return ("An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not "
                    f"have response messages: {', '.join(awaiting)}")
        content = m.get("content")
        if role == "assistant":
            calls = m.get("tool_calls") or []
            if content is None and not calls:
                return f"Invalid value for 'messages[{i}].content': expected a string, got null."
            for j, call in enumerate(calls):
                where = f"messages[{i}].tool_calls[{j}]"
                name = call.get("function", {}).get("name", "")
                if not NAME.fullmatch(name):
                    return (f"Invalid '{where}.function.name': string does not match pattern. "
                            "Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'.")
                arguments = call.get("function", {}).get("arguments")
                if not isinstance(arguments, str) or not _is_object(arguments):
                    return f"Invalid '{where}.function.arguments': not a JSON object"
                call_id = call.get("id")
                if isinstance(call_id, str) and len(call_id) > 40:
                    return (f"Invalid '{where}.id': string too long. Expected a string with "
                            f"maximum length 40, but got a string with length {len(call_id)} "
                            "instead.")
                if not isinstance(call_id, str) or not call_id or call_id in seen:
                    return f"Invalid '{where}.id': duplicate or empty tool call id"
                seen.add(call_id)
                awaiting.append(call_id)
        elif not isinstance(content, str):
            return f"Invalid type for 'messages[{i}].content': expected a string"
    if awaiting:
        return ("An assistant message with 'tool_calls' must be followed by tool messages "
                "responding to each 'tool_call_id'. The following tool_call_ids did not have "
                f"response messages: {', '.join(awaiting)}")
    return _tools_problem([t.get("function", {}) for t in body.get("tools", [])])


def anthropic_problem(body: dict[str, Any]) -> str | None:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    if messages[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    seen: set[str] = set()
    awaiting: list[str] = []
    for i, m in enumerate(messages):
        role = m.get("role")
        if i and role == messages[i - 1].get("role"):
            return ('messages: roles must alternate between "user" and "assistant", but found '
                    f'multiple "{role}" roles in a row')
        content = m.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list) or not content:
            return (f"messages.{i}: all messages must have non-empty content except for the "
                    "optional final assistant message")
        results = [b for b in content if b.get("type") == "tool_result"]
        if awaiting:
            got = [b.get("tool_use_id") for b in results]
            missing = [x for x in awaiting if x not in got]
            if role != "user" or missing:
                return (f"messages.{i}: `tool_use` ids were found without `tool_result` "
                        f"blocks immediately after: {', '.join(missing or awaiting)}. Each "
                        "`tool_use` block must have a corresponding `tool_result` block in "
                        "the next message.")
            if content[:len(results)] != results:
                return (f"messages.{i}: tool_result blocks must come first in the content "
                        "of a user message")
        for b in results:
            if b.get("tool_use_id") not in awaiting:
                return (f"messages.{i}.content: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {b.get('tool_use_id')}. Each `tool_result` "
                        "block must have a corresponding `tool_use` block in the previous "
                        "message.")
        awaiting = []
        for j, b in enumerate(content):
            kind = b.get("type")
            if kind == "text":
                if not isinstance(b.get("text"), str) or not b["text"]:
                    return f"messages.{i}.content.{j}.text: text content blocks must be " \
                           "non-empty"
                if not b["text"].strip():
                    return "messages: text content blocks must contain non-whitespace text"
            elif kind == "tool_use":
                if role != "assistant":
                    return f"messages.{i}.content.{j}: tool_use is only for the assistant"
                if not isinstance(b.get("id"), str) or not ID.fullmatch(b["id"]):
                    return (f"messages.{i}.content.{j}.tool_use.id: String should match "
                            "pattern '^[a-zA-Z0-9_-]+$'")
                if b["id"] in seen:
                    return f"messages.{i}.content.{j}: `tool_use` ids must be unique"
                if not NAME.fullmatch(b.get("name") or ""):
                    return (f"messages.{i}.content.{j}.tool_use.name: String should match "
                            "pattern '^[a-zA-Z0-9_-]{1,64}$'")
                if not isinstance(b.get("input"), dict):
                    return (f"messages.{i}.content.{j}.tool_use.input: Input should be a "
                            "valid dictionary")
                seen.add(b["id"])
                awaiting.append(b["id"])
            elif kind == "tool_result":
                if role != "user":
                    return f"messages.{i}.content.{j}: tool_result is only for the user"
            else:
                return f"messages.{i}.content.{j}: unknown block type {kind!r}"
    if awaiting:
        return (f"messages: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(awaiting)}")
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    return _tools_problem(body.get("tools", []))


def _tools_problem(tools: list[dict[str, Any]]) -> str | None:
    for i, tool in enumerate(tools):
        if not NAME.fullmatch(tool.get("name") or ""):
            return f"tools.{i}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
    return None


def _is_object(text: str) -> bool:
    def no_constant(name: str) -> Any:
        raise ValueError(name)
    try:
        return isinstance(json.loads(text, parse_constant=no_constant), dict)
    except ValueError:
        return False


def budget_problem(body: dict[str, Any], budget: int | None) -> str | None:
    if budget is not None and (tokens := estimate(body)) > budget:
        return (f"prompt is too long: {tokens} tokens > {budget} maximum "
                "(context_budget)")
    return None


def problem(path: str, body: dict[str, Any], budget: int | None = None) -> str | None:
    """What the provider that serves `path` would reject in `body`, if anything."""
    check = anthropic_problem if path.endswith("/messages") else openai_problem
    return check(body) or budget_problem(body, budget)


def rejection(path: str, body: dict[str, Any], budget: int | None = None) -> Reply | None:
    """The provider's own 400 reply to `body`, or None if it accepts it."""
    found = problem(path, body, budget)
    if found is None:
        return None
    return anthropic_error(found) if path.endswith("/messages") else openai_error(found)


@contextmanager
def strict_endpoint(budget: int | None = None) -> Iterator[Endpoint]:
    """The fake model endpoint, answering any request its provider would reject with that
    provider's 400 (kept in `endpoint.rejected`) instead of the next planned reply."""
    def check(path: str, body: dict[str, Any]) -> Reply | None:
        return rejection(path, body, budget)

    with model_endpoint(check=check) as endpoint:
        yield endpoint
