"""Where a clankie home keeps its files, and how surfaces find the service and the token.

Owns the names inside `$CLANKIE_HOME` and the rules of SPEC section 10 "Setting up and
running": `CLANKIE_HOME` (default: the platform's user data folder), `CLANKIE_URL`
(`http://HOST:PORT` or `unix:///path`, default the home's socket) and `CLANKIE_TOKEN`
(default the home's `operator.token`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import platformdirs


@dataclass(frozen=True)
class Home:
    path: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Home:
        env = os.environ if environ is None else environ
        configured = env.get("CLANKIE_HOME")
        return cls(Path(configured) if configured else platformdirs.user_data_path("clankie"))

    @property
    def store(self) -> Path:
        return self.path / "clankie.db"

    @property
    def socket(self) -> Path:
        return self.path / "clankie.sock"

    @property
    def token_file(self) -> Path:
        return self.path / "operator.token"

    @property
    def lock(self) -> Path:
        return self.path / "serve.lock"


def service_url(home: Home, environ: Mapping[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    return env.get("CLANKIE_URL") or f"unix://{home.socket}"


def operator_token(home: Home, environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    if env.get("CLANKIE_TOKEN"):
        return env["CLANKIE_TOKEN"]
    try:
        return home.token_file.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
