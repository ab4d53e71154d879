"""Choosing Clankie's model from settings: `scripted`, `openai` or `anthropic`.

Owns the one place where a provider is made, and the one place that says which model and
endpoint the settings choose (`model_in_use`, with `sdk.base_url`: what `service_info`
reports and what `clankie doctor` probes). It returns a function giving the model for a run (the
scripted model plays one script entry a run; the SDK models are shared). An SDK model is
made, and its SDK imported (a third of a second), at the first run that asks for it, not
while `clankie serve` starts (issue 31); a missing SDK still stops `serve` at once. Nothing
here imports the turn loop, the tools or an SDK until a model is made: `clankie doctor` and
`service_info` read only the names and URLs.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clankie.settings import Settings

from .sdk import DEFAULT_URLS, KEY_VARIABLES, base_url, endpoint_digest, endpoint_host

if TYPE_CHECKING:
    from .context import TurnContext
    from .scripted import Script
    from .transcript import Model

PROVIDERS = ("scripted", "openai", "anthropic")


class ProviderError(Exception):
    """A model that cannot be set up; said to the user as it is."""


@dataclass(frozen=True, slots=True)
class ModelInUse:
    """The model the settings choose: its provider, its name and the host[:port] of its
    endpoint (never a path, a query or a user: those may carry a secret). The scripted
    model has neither name nor endpoint."""

    provider: str
    model: str | None
    endpoint_host: str | None
    endpoint_digest: str | None = None  # of the whole base URL: compared, never read
    key_set: bool | None = None  # whether the key variable is set here (never the key)


def model_in_use(settings: Settings) -> ModelInUse:
    """What `model_for_runs(settings)` runs with, said without a secret."""
    if settings.model not in DEFAULT_URLS:
        return ModelInUse(settings.model, None, None)
    name = settings.openai_model if settings.model == "openai" else settings.anthropic_model
    url = base_url(settings, settings.model)
    return ModelInUse(settings.model, name, endpoint_host(url), endpoint_digest(url),
                      bool(os.environ.get(KEY_VARIABLES[settings.model])))


def sdk_installed(provider: str) -> bool:
    """Whether the provider's SDK (the extra `clankie[PROVIDER]`) is installed, found
    without importing it."""
    try:
        return importlib.util.find_spec(provider) is not None
    except (ImportError, ValueError):
        return False


def model_for_runs(settings: Settings, script: Script | None = None
                   ) -> Callable[[TurnContext], Model]:
    """The model for each run; `script` (`scripted.load_script`'s) for the scripted one."""
    if settings.model not in PROVIDERS:
        raise ProviderError(f"unknown model {settings.model!r}; choose one of "
                            f"{', '.join(PROVIDERS)}")
    if script is not None and settings.model != "scripted":
        raise ProviderError("--script goes with the scripted model")
    if settings.model == "scripted":
        from .scripted import ScriptedModel

        return ScriptedModel(script).for_run
    provider = settings.model
    if not sdk_installed(provider):
        raise ProviderError(f"the {provider} model needs its SDK, which is not installed "
                            f"here: pip install 'clankie[{provider}]'")
    return OnFirstRun(provider, lambda: _sdk_model(settings))


def _sdk_model(settings: Settings) -> Model:
    from .retry import Policy

    policy = Policy(retries=settings.model_retries, total_wait=settings.model_retry_wait,
                    timeout=settings.model_timeout, stall_timeout=settings.model_stall_timeout,
                    stream_limit=settings.model_stream_limit, stream=settings.model_stream)
    if settings.model == "openai":
        from .openai_chat import OpenAIChatModel

        return OpenAIChatModel(settings.openai_model, base_url(settings, "openai"), policy,
                               settings.context_budget)
    from .anthropic_messages import AnthropicModel

    return AnthropicModel(settings.anthropic_model, base_url(settings, "anthropic"), policy,
                          settings.context_budget)


class OnFirstRun:
    """The one model every run shares, made when the first run asks for it: once, however
    many run threads ask at the same moment. An SDK that cannot be imported (broken, or
    removed since `serve` started) fails the run that asked, saying so, and the next run
    tries again."""

    def __init__(self, provider: str, make: Callable[[], Model]) -> None:
        self._provider, self._make = provider, make
        self._lock = threading.Lock()
        self._made: Model | None = None

    def __call__(self, _context: TurnContext) -> Model:
        with self._lock:
            if self._made is None:
                try:
                    self._made = self._make()
                except ImportError as exc:
                    from .transcript import ModelError

                    raise ModelError(f"{self._provider}: its SDK cannot be imported "
                                     f"({type(exc).__name__}: {exc}); reinstall it: pip "
                                     f"install 'clankie[{self._provider}]'") from None
            return self._made
