"""An OpenAI-compatible chat-completions model with tool calling, via the official SDK.

Owns the call of the chat-completions API and the reading of its reply; the request itself,
valid and within `context_budget`, is made by `wire.openai_request` (SPEC R8). Any
OpenAI-compatible server works (OpenAI, Ollama, vLLM, llama.cpp): the base URL and model
come from settings; the key only from the environment (`OPENAI_API_KEY`), never from the
store or logs. Every failure becomes a `ModelError`.
"""

from __future__ import annotations

import os

from . import endpoint, wire
from .transcript import ModelError, Text, ToolCall, ToolSpec, Turn, short_error

TIMEOUT_S = 120.0
DEFAULT_URL = "https://api.openai.com/v1"


class OpenAIChatModel:
    name = "openai"

    def __init__(self, model: str, base_url: str | None, timeout: float = TIMEOUT_S,
                 context_budget: int = wire.DEFAULT_BUDGET) -> None:
        import openai

        self._openai = openai
        self.model = model
        self.context_budget = context_budget
        # Local servers need no key; the SDK insists on one, so a placeholder is given.
        url = base_url or DEFAULT_URL
        self._client = openai.OpenAI(api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                                     base_url=url, timeout=timeout, max_retries=0,
                                     http_client=endpoint.http_client(url, timeout))

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec]) -> list[Text | ToolCall]:
        request = wire.openai_request(self.model, system, turns, tools, self.context_budget)
        try:
            response = self._client.chat.completions.create(**request)
        except endpoint.EndpointNotYours as exc:
            raise ModelError(f"openai: {exc}") from None
        except self._openai.APIError as exc:
            refused = endpoint.refusal(exc)  # the same, wrapped by the SDK
            if refused is not None:
                raise ModelError(f"openai: {refused}") from None
            raise ModelError(f"openai: {type(exc).__name__}: {short_error(exc)}") from None
        except Exception as exc:  # the endpoint is outside our control: any failure is its
            raise ModelError(f"openai: unusable response: {type(exc).__name__}") from None
        try:
            message = response.choices[0].message
            blocks: list[Text | ToolCall] = []
            if message.content:
                blocks.append(Text(message.content))
            for call in message.tool_calls or []:
                function = call.function  # type: ignore[union-attr]
                blocks.append(ToolCall(call.id, function.name, function.arguments or ""))
        except (AttributeError, IndexError, TypeError) as exc:
            raise ModelError(f"openai: unusable response: {exc}") from None
        return blocks

