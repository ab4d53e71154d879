"""Choosing Clankie's model from settings: `scripted`, `openai` or `anthropic`.

Owns the one place where a provider is made. It returns a function giving the model for
a run (the scripted model plays one script entry a run; the SDK models are shared).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from clankie.settings import Settings

from .context import TurnContext
from .retry import Policy
from .scripted import ScriptedModel, load_script
from .transcript import Model

PROVIDERS = ("scripted", "openai", "anthropic")


class ProviderError(Exception):
    """A model that cannot be set up; said to the user as it is."""


def model_for_runs(settings: Settings, script: Path | None = None
                   ) -> Callable[[TurnContext], Model]:
    if settings.model not in PROVIDERS:
        raise ProviderError(f"unknown model {settings.model!r}; choose one of "
                            f"{', '.join(PROVIDERS)}")
    if script is not None and settings.model != "scripted":
        raise ProviderError("--script goes with the scripted model")
    if settings.model == "scripted":
        scripted = ScriptedModel(load_script(script) if script else None)
        return scripted.for_run
    policy = Policy(retries=settings.model_retries, total_wait=settings.model_retry_wait,
                    timeout=settings.model_timeout)
    if settings.model == "openai":
        from .openai_chat import OpenAIChatModel

        shared: Model = OpenAIChatModel(settings.openai_model, settings.openai_base_url,
                                            policy)
    else:
        from .anthropic_messages import AnthropicModel

        shared = AnthropicModel(settings.anthropic_model, settings.anthropic_base_url, policy)
    return lambda _context: shared
