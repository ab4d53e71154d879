"""An OpenAI-compatible chat-completions model with tool calling, via the official SDK.

Owns the call of the chat-completions API and the reading of its reply; the request itself,
valid and within `context_budget`, is made by `wire.openai_request` (SPEC R8). Any
OpenAI-compatible server works (OpenAI, Ollama, vLLM, llama.cpp): the base URL and model
come from settings; the key only from the environment (`OPENAI_API_KEY`), never from the
store or logs. A call is tried again on a transient
failure (`retry.py`, SPEC R6); every failure that ends it becomes a `ModelError`.
"""

from __future__ import annotations

import json

from . import retry, wire
from .sdk import BASE_URL_SETTINGS, DEFAULT_URLS, KEY_VARIABLES, sdk_client
from .transcript import NO_WAITS, ModelError, Text, ToolCall, ToolSpec, Turn, Waits, reply_text


class OpenAIChatModel:
    name = "openai"

    def __init__(self, model: str, base_url: str | None,
                 policy: retry.Policy = retry.DEFAULT_POLICY,
                 context_budget: int = wire.DEFAULT_BUDGET) -> None:
        openai, self._client = sdk_client("openai", base_url or DEFAULT_URLS["openai"],
                                          policy.timeout)
        self._sdk = retry.Sdk("openai", openai, KEY_VARIABLES["openai"], "openai_model",
                              BASE_URL_SETTINGS["openai"])
        self._policy = policy
        self.model = model
        self.context_budget = context_budget

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: Waits = NO_WAITS) -> list[Text | ToolCall]:
        request = wire.openai_request(self.model, system, turns, tools, self.context_budget)
        response = retry.call(self._sdk, self._policy, waits, lambda: (
            self._client.chat.completions.create(**request)))
        try:
            message = response.choices[0].message
            blocks: list[Text | ToolCall] = []
            if message.content:
                blocks.append(Text(reply_text("openai", message.content, "its content")))
            for call in message.tool_calls or []:
                function = call.function
                arguments = function.arguments or ""
                if isinstance(arguments, dict):  # some compatible servers send the object
                    arguments = json.dumps(arguments)
                blocks.append(ToolCall(reply_text("openai", call.id, "a tool call's id"),
                                       reply_text("openai", function.name,
                                                  "a tool call's name"),
                                       reply_text("openai", arguments,
                                                  "a tool call's arguments")))
        except (AttributeError, IndexError, KeyError, TypeError, ValueError,
                RecursionError) as exc:
            raise ModelError(f"openai: unusable reply: {type(exc).__name__}: "
                             f"{str(exc)[:200]}") from None
        return blocks

