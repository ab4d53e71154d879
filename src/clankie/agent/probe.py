"""Asking a model endpoint for its models list, as `clankie doctor` does before the owner's
first run would.

Owns one question, asked the way a run asks: the provider's official SDK (`models.list()`)
with the same base URL, the same key from the same variable and the same checked HTTP
client (`endpoint.http_client`: a listener of another local user gets nothing, T4), once,
within a short timeout. It answers with what happened, in words a person can act on; it
decides nothing about the run and never says the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from . import endpoint, stop
from .sdk import KEY_VARIABLES, public_url, sdk_client
from .transcript import short_error

Outcome = Literal["ok", "not_found", "unreachable", "timeout", "bad_key", "not_yours",
                  "no_key", "error"]


@dataclass(frozen=True, slots=True)
class Probe:
    outcome: Outcome
    detail: str  # what the endpoint said, never the key
    models: tuple[str, ...] = ()  # on "ok": the IDs of the first page of its models list
    asked: str = ""  # the URL that was asked, when the SDK got as far as asking


def models_list(provider: str, url: str, timeout: float, keyless: bool = False) -> Probe:
    """Ask the `provider` endpoint at `url` (the SDK's base URL) for its models; with
    `keyless`, without the key variable, as a service started without it would. An error
    text that repeats the key (some servers do) has it replaced by `***`."""
    probe = _models_list(provider, url, timeout, keyless)
    secret = os.environ.get(KEY_VARIABLES[provider])
    detail = masked(probe.detail, secret) if secret and len(secret) >= 4 else probe.detail
    if detail != probe.detail:
        return Probe(probe.outcome, detail, probe.models, probe.asked)
    return probe


PIECE = 8  # characters of the key that are never said, wherever they appear


def masked(text: str, secret: str) -> str:
    """`text` with the key, and every piece of it of `PIECE` characters or more (a server
    that echoes the key cut short, `sk-abc...` but one character), replaced by `***`."""
    text = text.replace(secret, "***")
    for size in range(len(secret) - 1, PIECE - 1, -1):
        for start in range(len(secret) - size + 1):
            piece = secret[start:start + size]
            if piece in text:
                text = text.replace(piece, "***")
    return text


def _models_list(provider: str, url: str, timeout: float, keyless: bool) -> Probe:
    try:
        sdk, client = sdk_client(provider, url, timeout, keyless)
    except Exception as exc:  # the SDK refuses its arguments (e.g. no key at all)
        return Probe("no_key", short_error(exc))
    with client:
        try:
            with stop.bounded(timeout):  # the whole call, not each read: a trickle ends
                page = client.models.list()
            return Probe("ok", "", tuple(str(m.id) for m in page.data))
        except endpoint.EndpointNotYours as exc:
            return Probe("not_yours", str(exc))
        except sdk.APIStatusError as exc:
            asked = _asked(exc)
            said = f"HTTP {exc.status_code}{_message(exc.body)}"
            if exc.status_code in (401, 403):
                return Probe("bad_key", said, asked=asked)
            if exc.status_code in (404, 405):
                return Probe("not_found", said, asked=asked)
            return Probe("error", said, asked=asked)
        except sdk.APITimeoutError as exc:
            return Probe("timeout", f"no answer within {timeout:g} s", asked=_asked(exc))
        except sdk.APIConnectionError as exc:
            refused = endpoint.refusal(exc)  # the same, wrapped by the SDK
            if refused is not None:
                return Probe("not_yours", str(refused))
            return Probe("unreachable", _cause(exc), asked=_asked(exc))
        except TypeError as exc:  # the Anthropic SDK with no key it can use
            return Probe("no_key", short_error(exc))
        except Exception as exc:  # the endpoint is outside our control: any reply is its
            return Probe("error", f"not a models list ({type(exc).__name__})")


def _message(body: Any) -> str:
    """`: MESSAGE` from an error body of either API (`{"error": {"message"}}`), bounded."""
    error = body.get("error", body) if isinstance(body, dict) else body
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str) or not message.strip():
        return ""
    return ": " + message.strip().splitlines()[0][:200]


def _asked(exc: Any) -> str:
    request = getattr(exc, "request", None)
    return public_url(str(request.url)) if request is not None else ""


def _cause(exc: BaseException) -> str:
    """The innermost reason of a connection failure (`Connection refused`), in one line."""
    seen: BaseException = exc
    for _ in range(8):
        inner = seen.__cause__ or seen.__context__
        if inner is None:
            break
        seen = inner
    text = str(seen).strip().splitlines()
    return text[-1][:200] if text else type(seen).__name__
