"""What `clankie mcp` checks before it serves (SPEC P2, P3), on the standard library and the
sync client only: a refusal here costs no import of the MCP SDK.

Owns three answers, each a `StartRefused` (the message, the fix, the exit code) when it
is no:
- the token: `CLANKIE_AGENT_TOKEN` and nothing else (never `CLANKIE_TOKEN`, never the
  home's `operator.token`); set, and shaped like a clankie token (its value is never said);
- the workspace: `--workspace` or the working directory, an existing directory;
- who the token is: the service is asked (`whoami`) and a token of another kind than
  `agent`, or one it does not know, is refused. When the service cannot be reached (or
  does not reply), the answer is "not known yet" (`None`): the bridge starts anyway and
  asks on its first call. A listener that is not the owner's gets no token (T2).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from clankie.core.vocabulary import Exit

TOKEN_VARIABLE: Final = "CLANKIE_AGENT_TOKEN"
# What `clankie credentials issue` prints: clk_ and URL-safe base64 (43 characters today).
TOKEN_SHAPE: Final = re.compile(r"clk_[A-Za-z0-9_-]{16,200}")
WHOAMI_TIMEOUT_S: Final = 2.0
ISSUE: Final = "clankie credentials issue --kind agent NAME"


class StartRefused(Exception):
    """`clankie mcp` does not start: what is wrong, the fix, and the exit code."""

    def __init__(self, message: str, fix: str, code: int = Exit.USAGE) -> None:
        super().__init__(message)
        self.fix = fix
        self.code = code


@dataclass(frozen=True)
class Identity:
    """The credential the token is, as the service said (`whoami`)."""

    credential_id: str
    kind: str
    name: str


def agent_token(environ: Mapping[str, str] | None = None) -> str:
    """The token in CLANKIE_AGENT_TOKEN, else `StartRefused` (its value never said)."""
    env = os.environ if environ is None else environ
    token = env.get(TOKEN_VARIABLE)
    fix = (f"issue one with `{ISSUE}` and give it to the bridge as {TOKEN_VARIABLE} in the "
           "client's configuration (`clankie mcp config CLIENT` prints the lines)")
    if token is None:
        raise StartRefused(f"{TOKEN_VARIABLE} is not set: the bridge reads its token from "
                           "that variable only (never CLANKIE_TOKEN nor the home's "
                           "operator.token)", fix)
    if not token.strip():
        raise StartRefused(f"{TOKEN_VARIABLE} is empty", fix)
    if not TOKEN_SHAPE.fullmatch(token):
        raise StartRefused(f"{TOKEN_VARIABLE} does not hold a clankie token (one starts with "
                           "clk_, then 16 to 200 letters, digits, - or _; the value is not "
                           "shown)", fix)
    return token


def workspace_dir(given: str | None) -> str:
    """`--workspace` (else the working directory) as an absolute path, if it is an existing
    directory; else `StartRefused`."""
    try:
        path = os.path.abspath(given if given is not None else os.getcwd())
    except OSError as exc:  # the working directory was removed
        raise StartRefused(f"the working directory cannot be the workspace: {exc.strerror}",
                           "start the bridge in an existing directory, or give --workspace "
                           "DIR") from None
    if not os.path.isdir(path):
        what = "does not exist" if not os.path.lexists(path) else "is not a directory"
        raise StartRefused(f"the workspace {path} {what}",
                           "give --workspace an existing directory (or start the bridge in "
                           "one: its working directory is the default)")
    return path


def identify(token: str, timeout: float = WHOAMI_TIMEOUT_S) -> Identity | None:
    """Who the token is, asked of the service; None when that cannot be known now (no
    service, or no reply). An operator, captain or device token, or one the service does
    not know, is `StartRefused` (exit 2); a listener that is not the owner's is exit 5 and
    something that is not clankie exit 1, as in the CLI."""
    from clankie.client import (
        ApiError,
        Client,
        NotClankie,
        NotYours,
        ServiceUnreachable,
        Uncertain,
    )

    with Client(token=token, timeout=timeout) as client:
        try:
            who = client.call("whoami", {})
        except (ServiceUnreachable, Uncertain):
            return None
        except NotYours as exc:
            raise StartRefused(str(exc), exc.fix or "", Exit.DENIED) from None
        except NotClankie as exc:
            raise StartRefused(str(exc), exc.fix or "", Exit.OTHER) from None
        except ApiError as exc:
            if exc.code == "unauthenticated":
                raise StartRefused(
                    f"the service at {client.url} refused {TOKEN_VARIABLE}: it is unknown, "
                    "rotated or revoked", f"issue a new one with `{ISSUE}`") from None
            raise StartRefused(f"the service at {client.url} refused whoami: {exc}",
                               "upgrade the service (`clankie serve` of this version)",
                               Exit.OTHER) from None
    identity = Identity(str(who.get("credential_id")), str(who.get("kind")),
                        str(who.get("name")))
    if identity.kind != "agent":
        raise StartRefused(
            f"{TOKEN_VARIABLE} holds {kind_phrase(identity.kind)} token (credential "
            f"{identity.name!r}), not an agent's: the bridge takes only an agent credential, "
            "which can ask and never answer", f"issue an agent one with `{ISSUE}`")
    return identity


def kind_phrase(kind: str) -> str:
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"
