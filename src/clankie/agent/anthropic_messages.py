"""An Anthropic Messages model with tool use, via the official SDK.

Owns the mapping between our transcript and the Messages wire format (`tool_use` and
`tool_result` content blocks). The base URL and model come from settings; the key only
from the environment (`ANTHROPIC_API_KEY`). A call is tried again on a transient failure
(`retry.py`, SPEC R6); every failure that ends it becomes a `ModelError`.
"""

from __future__ import annotations

import json
import os
from typing import Any

from . import endpoint, retry
from .transcript import Text, ToolCall, ToolResult, ToolSpec, Turn

DEFAULT_URL = "https://api.anthropic.com"
MAX_TOKENS = 2_048


class AnthropicModel:
    name = "anthropic"

    def __init__(self, model: str, base_url: str | None,
                 policy: retry.Policy = retry.DEFAULT_POLICY) -> None:
        import anthropic

        self._sdk = retry.Sdk("anthropic", anthropic, "ANTHROPIC_API_KEY", "anthropic_model",
                              "anthropic_base_url")
        self._policy = policy
        self.model = model
        timeout = policy.timeout
        url = base_url or DEFAULT_URL
        self._client = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY"),
                                           base_url=url, timeout=timeout, max_retries=0,
                                           http_client=endpoint.http_client(url, timeout))

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: retry.Waits = retry.NO_WAITS) -> list[Text | ToolCall]:
        messages = _messages(turns)
        specs = [{"name": t.name, "description": t.description, "input_schema": t.parameters}
                 for t in tools]
        response = retry.call(self._sdk, self._policy, waits, lambda: (
            self._client.messages.create(
                model=self.model, max_tokens=MAX_TOKENS, system=system,
                messages=messages, tools=specs)))  # type: ignore[arg-type]
        blocks: list[Text | ToolCall] = []
        for block in response.content:
            if block.type == "text":
                blocks.append(Text(block.text))
            elif block.type == "tool_use":  # a malformed input is refused as a tool result
                blocks.append(ToolCall(block.id, block.name, json.dumps(block.input)))
        return blocks


def _messages(turns: list[Turn]) -> list[dict[str, Any]]:
    messages = []
    for turn in turns:
        content: list[dict[str, Any]] = []
        for b in turn.blocks:
            if isinstance(b, Text):
                content.append({"type": "text", "text": b.text})
            elif isinstance(b, ToolCall):
                content.append({"type": "tool_use", "id": b.call_id, "name": b.name,
                                "input": _input(b.arguments)})
            elif isinstance(b, ToolResult):
                content.append({"type": "tool_result", "tool_use_id": b.call_id,
                                "content": b.content})
        messages.append({"role": turn.role, "content": content})
    return messages



def _input(arguments: str) -> dict[str, Any]:
    """A tool call's input as Anthropic requires it (an object), even when the model sent
    something else: the refusal it was given already says what was wrong."""
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}
