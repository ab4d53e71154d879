"""An Anthropic Messages model with tool use, via the official SDK.

Owns the call of the Messages API and the reading of its reply; the request itself, valid
and within `context_budget`, is made by `wire.anthropic_request` (SPEC R8). The base URL
and model come from settings; the key only from the environment (`ANTHROPIC_API_KEY`). A
call is tried again on a transient failure (`retry.py`, SPEC R6); every failure that ends
it becomes a `ModelError`.
"""

from __future__ import annotations

import json

from . import retry, wire
from .sdk import BASE_URL_SETTINGS, DEFAULT_URLS, KEY_VARIABLES, sdk_client
from .transcript import NO_WAITS, ModelError, Text, ToolCall, ToolSpec, Turn, Waits, reply_text

MAX_TOKENS = 2_048


class AnthropicModel:
    name = "anthropic"

    def __init__(self, model: str, base_url: str | None,
                 policy: retry.Policy = retry.DEFAULT_POLICY,
                 context_budget: int = wire.DEFAULT_BUDGET) -> None:
        anthropic, self._client = sdk_client("anthropic", base_url or DEFAULT_URLS["anthropic"],
                                             policy.timeout)
        self._sdk = retry.Sdk("anthropic", anthropic, KEY_VARIABLES["anthropic"],
                              "anthropic_model", BASE_URL_SETTINGS["anthropic"])
        self._policy = policy
        self.model = model
        self.context_budget = context_budget

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits = NO_WAITS) -> list[Text | ToolCall]:
        request = wire.anthropic_request(self.model, system, turns, tools,
                                         self.context_budget, MAX_TOKENS)
        response = retry.call(self._sdk, self._policy, waits, lambda: (
            self._client.messages.create(**request)))
        blocks: list[Text | ToolCall] = []
        try:
            for block in response.content:
                kind = getattr(block, "type", None)
                if kind == "text":
                    blocks.append(Text(reply_text("anthropic", block.text, "a text block")))
                elif kind == "tool_use":  # a malformed input is refused as a tool result
                    blocks.append(ToolCall(
                        reply_text("anthropic", block.id, "a tool_use block's id"),
                        reply_text("anthropic", block.name, "a tool_use block's name"),
                        json.dumps(block.input)))
        except (AttributeError, TypeError, ValueError, RecursionError) as exc:
            raise ModelError(f"anthropic: unusable reply: {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from None
        return blocks

