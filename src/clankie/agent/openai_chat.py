"""An OpenAI-compatible chat-completions model with tool calling, via the official SDK.

Owns the mapping between our transcript and the chat-completions wire format (assistant
`tool_calls`, `tool` messages). Any OpenAI-compatible server works (OpenAI, Ollama, vLLM,
llama.cpp): the base URL and model come from settings; the key only from the environment
(`OPENAI_API_KEY`), never from the store or logs. A call is tried again on a transient
failure (`retry.py`, SPEC R6); every failure that ends it becomes a `ModelError`.
"""

from __future__ import annotations

import os
from typing import Any

from . import endpoint, retry
from .transcript import ModelError, Text, ToolCall, ToolResult, ToolSpec, Turn

DEFAULT_URL = "https://api.openai.com/v1"


class OpenAIChatModel:
    name = "openai"

    def __init__(self, model: str, base_url: str | None,
                 policy: retry.Policy = retry.DEFAULT_POLICY) -> None:
        import openai

        self._sdk = retry.Sdk("openai", openai, "OPENAI_API_KEY", "openai_model",
                              "openai_base_url")
        self._policy = policy
        self.model = model
        timeout = policy.timeout
        # Local servers need no key; the SDK insists on one, so a placeholder is given.
        url = base_url or DEFAULT_URL
        self._client = openai.OpenAI(api_key=os.environ.get("OPENAI_API_KEY") or "not-needed",
                                     base_url=url, timeout=timeout, max_retries=0,
                                     http_client=endpoint.http_client(url, timeout))

    def step(self, system: str, turns: list[Turn], tools: list[ToolSpec],
             waits: retry.Waits = retry.NO_WAITS) -> list[Text | ToolCall]:
        messages = _messages(system, turns)
        specs = [{"type": "function", "function": {
            "name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in tools]
        response = retry.call(self._sdk, self._policy, waits, lambda: (
            self._client.chat.completions.create(
                model=self.model, messages=messages, tools=specs)))  # type: ignore[arg-type]
        try:
            message = response.choices[0].message
            blocks: list[Text | ToolCall] = []
            if message.content:
                blocks.append(Text(message.content))
            for call in message.tool_calls or []:
                function = call.function  # type: ignore[union-attr]
                blocks.append(ToolCall(call.id, function.name, function.arguments or ""))
        except (AttributeError, IndexError, TypeError) as exc:
            raise ModelError(f"openai: unusable reply: {exc}") from None
        return blocks


def _messages(system: str, turns: list[Turn]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for turn in turns:
        texts = [b.text for b in turn.blocks if isinstance(b, Text)]
        calls = [b for b in turn.blocks if isinstance(b, ToolCall)]
        results = [b for b in turn.blocks if isinstance(b, ToolResult)]
        if turn.role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": "\n\n".join(texts) or None}
            if calls:
                message["tool_calls"] = [{"id": c.call_id, "type": "function", "function": {
                    "name": c.name, "arguments": c.arguments}} for c in calls]
            messages.append(message)
            continue
        messages += [{"role": "tool", "tool_call_id": r.call_id, "content": r.content}
                     for r in results]
        if texts:
            messages.append({"role": "user", "content": "\n\n".join(texts)})
    return messages

