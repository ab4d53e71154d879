"""An Anthropic Messages model with tool use, via the official SDK.

Owns the call of the Messages API and the reading of its reply; the request itself, valid
and within `context_budget`, is made by `wire.anthropic_request` (SPEC R8). The base URL
and model come from settings; the key only from the environment (`ANTHROPIC_API_KEY`).
Every failure becomes a `ModelError`.
"""

from __future__ import annotations

import json
import os

from . import endpoint, wire
from .transcript import ModelError, Text, ToolCall, ToolSpec, Turn, short_error

TIMEOUT_S = 120.0
DEFAULT_URL = "https://api.anthropic.com"
MAX_TOKENS = 2_048


class AnthropicModel:
    name = "anthropic"

    def __init__(self, model: str, base_url: str | None, timeout: float = TIMEOUT_S,
                 context_budget: int = wire.DEFAULT_BUDGET) -> None:
        import anthropic

        self._anthropic = anthropic
        self.model = model
        self.context_budget = context_budget
        url = base_url or DEFAULT_URL
        self._client = anthropic.Anthropic(api_key=os.environ.get("ANTHROPIC_API_KEY"),
                                           base_url=url, timeout=timeout, max_retries=0,
                                           http_client=endpoint.http_client(url, timeout))

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec]) -> list[Text | ToolCall]:
        request = wire.anthropic_request(self.model, system, turns, tools,
                                         self.context_budget, MAX_TOKENS)
        try:
            response = self._client.messages.create(**request)
        except endpoint.EndpointNotYours as exc:
            raise ModelError(f"anthropic: {exc}") from None
        except self._anthropic.APIError as exc:
            refused = endpoint.refusal(exc)  # the same, wrapped by the SDK
            if refused is not None:
                raise ModelError(f"anthropic: {refused}") from None
            raise ModelError(f"anthropic: {type(exc).__name__}: {short_error(exc)}") from None
        except TypeError as exc:  # e.g. no API key in the environment
            raise ModelError(f"anthropic: {exc}") from None
        except Exception as exc:  # the endpoint is outside our control: any failure is its
            raise ModelError(f"anthropic: unusable response: {type(exc).__name__}") from None
        blocks: list[Text | ToolCall] = []
        for block in response.content:
            if block.type == "text":
                blocks.append(Text(block.text))
            elif block.type == "tool_use":  # a malformed input is refused as a tool result
                blocks.append(ToolCall(block.id, block.name, json.dumps(block.input)))
        return blocks

