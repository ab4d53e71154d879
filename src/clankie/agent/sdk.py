"""Each SDK provider's endpoint and client, below both the providers and the models.

Owns the SDKs' default URLs, the key variables and URL settings (`DEFAULT_URLS`,
`KEY_VARIABLES`, `BASE_URL_SETTINGS`), the URL a provider's client is made with
(`base_url`), what of a URL may be shown or compared (`endpoint_host`, `public_url`,
`endpoint_digest`), and `sdk_client`, the one way a run's model and `clankie doctor`'s
probe make an SDK client. `providers.py` (which chooses the model) and the models
(`openai_chat.py`, `anthropic_messages.py`) both import it; it imports neither (issue 32:
imports in `agent/` run one way).
"""

from __future__ import annotations

import hashlib
import os
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from clankie.settings import Settings

# The SDKs' own defaults, as the providers pass them (an explicit base URL, so the SDKs'
# OPENAI_BASE_URL / ANTHROPIC_BASE_URL variables are never read: the setting decides).
DEFAULT_URLS = {"openai": "https://api.openai.com/v1",
                "anthropic": "https://api.anthropic.com"}
KEY_VARIABLES = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
BASE_URL_SETTINGS = {"openai": "openai_base_url", "anthropic": "anthropic_base_url"}


def sdk_client(provider: str, url: str, timeout: float, keyless: bool = False) -> tuple[Any, Any]:
    """`(sdk module, client)` for `provider` at `url`, made the one way runs and doctor's
    probe make it: the key only from its variable (none with `keyless`, as a service
    started without it has none; a keyless OpenAI-compatible server gets a placeholder, as
    the SDK insists on one), no retries of the SDK's own (R6 retries), and the checked HTTP
    client (`endpoint.http_client`: another local user's listener gets nothing, T4)."""
    from . import endpoint

    key = None if keyless else os.environ.get(KEY_VARIABLES[provider])
    if provider == "openai":
        import openai as sdk

        return sdk, sdk.OpenAI(api_key=key or "not-needed", base_url=url, timeout=timeout,
                               max_retries=0, http_client=endpoint.http_client(url, timeout))
    import anthropic as sdk_

    return sdk_, sdk_.Anthropic(api_key=key, base_url=url, timeout=timeout, max_retries=0,
                                http_client=endpoint.http_client(url, timeout))


def base_url(settings: Settings, provider: str) -> str:
    """The URL the `provider`'s SDK client is made with: the setting, else the default."""
    return str(getattr(settings, BASE_URL_SETTINGS[provider])) or DEFAULT_URLS[provider]


def endpoint_host(url: str) -> str:
    """`host[:port]` of `url` (an IPv6 host in brackets), without user, path or query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: the SDK will fail on it as well
        port = None
    return f"{host}:{port}" if port is not None else host


def public_url(url: str) -> str:
    """`url` without its user, query or fragment: what may be shown (a key may hide there;
    a path is shown to the owner who wrote it, never in `service_info`)."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def endpoint_digest(url: str) -> str:
    """A short digest of the base URL without its user, query and fragment (`public_url`):
    `clankie doctor` compares it with the one its own settings give, to probe what the
    service uses, without the service ever saying a path. Never of a password or a key: an
    unsalted hash of one is a test any reader could run offline against guesses."""
    return hashlib.sha256(public_url(url).encode()).hexdigest()[:12]
