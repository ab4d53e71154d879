"""`clankie doctor`: what is wrong with this setup, one line a check, each with its fix.

Owns the checks, which only look: the folders above the home, the home and its mode, the
files in it (T1: one line for each that is a link, someone else's or writable by others;
then nothing in the home is read), the store's schema (opened read-only, never migrated),
the token file, the service and the token (sent only to a service that is the owner's,
T2), the model provider, Git, the settings. Exit 0 when every check passes, 1 otherwise;
`--json` for scripts.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
from dataclasses import asdict, dataclass
from typing import Annotated

import typer

from clankie.client import (
    ApiError,
    Client,
    ClientError,
    NotClankie,
    NotYours,
    ServiceUnreachable,
    trusted_url,
)
from clankie.home import Home, Unsafe, UnsafeHome, problems
from clankie.settings import Settings, SettingsError, load_settings
from clankie.store.schema import MIGRATIONS

from .common import say

PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Check:
    check: str
    ok: bool
    detail: str
    fix: str | None = None


def _mode(path: os.PathLike[str] | str) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def check_trust(home: Home, found: list[Unsafe]) -> list[Check]:
    """T1, one line a problem: the folders above the home, the home, the files in it."""
    def failed(where: str) -> list[Check]:
        return [Check(u.where, False, f"{u.path} {u.problem}", u.fix) for u in found
                if u.where == where]

    parents = failed("parents") or [Check(
        "parents", True, f"the folders above {home.path} are yours or root's, and no one "
        "else can write them")]
    own = failed("home") or [check_home(home)]
    if failed("home"):
        files = [Check("files", False, "not checked: fix the home first", "fix the home first")]
    else:
        files = failed("files") or [Check(
            "files", True, "each one clankie uses is yours, not a link, and no one else can "
            "write it" if home.path.is_dir() else "none yet")]
    return [*parents, *own, *files]


def check_home(home: Home) -> Check:
    """The T1 rule, the one every command applies; a home others may look into passes,
    with a word on it (init makes it 700)."""
    if not home.path.is_dir():
        return Check("home", False, f"{home.path} does not exist", "run `clankie init`")
    mode = _mode(home.path)
    seen = "" if mode & 0o077 == 0 else (f"; others can see the names in it: `chmod 700 "
                                         f"{home.path}` keeps them out")
    return Check("home", True, f"{home.path} (yours, mode {mode:o}{seen})")


def not_read(check: str) -> Check:
    return Check(check, False, "not read: the home is not safe (see above)",
                 "fix what the lines above say")


def check_store(home: Home) -> Check:
    if not home.store.exists():
        return Check("store", False, f"no store at {home.store}", "run `clankie init`")
    try:
        conn = sqlite3.connect(f"file:{home.store}?mode=ro", uri=True)
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return Check("store", False, f"{home.store} cannot be read: {exc}",
                     "check its owner and mode (0600)")
    if version > len(MIGRATIONS):
        return Check("store", False, f"schema {version} is newer than this clankie knows "
                     f"({len(MIGRATIONS)})", "upgrade clankie")
    if version < len(MIGRATIONS):
        return Check("store", True, f"schema {version}; `clankie serve` will migrate it to "
                     f"{len(MIGRATIONS)}")
    return Check("store", True, f"schema {version} (current)")


def check_token(home: Home) -> Check:
    if os.environ.get("CLANKIE_TOKEN"):
        return Check("token", True, "CLANKIE_TOKEN is set")
    if not home.token_file.exists():
        return Check("token", False, f"no token file at {home.token_file}",
                     "run `clankie init` (it issues one when the file is missing)")
    return Check("token", True, f"{home.token_file} (mode {_mode(home.token_file):o})")


def check_service() -> Check:
    try:
        with Client(timeout=PROBE_TIMEOUT_S) as client:
            client.call("conversation_list", {"limit": 1})
            where = client.url
    except ServiceUnreachable as exc:
        return Check("service", False, f"not reachable: {exc}", exc.fix)
    except (NotYours, NotClankie) as exc:
        return Check("service", False, str(exc), exc.fix)
    except ApiError as exc:
        fix = ("the token was rotated or revoked: use the new one (CLANKIE_TOKEN or "
               "operator.token), or `clankie init` after a revocation"
               if exc.code == "unauthenticated" else None)
        return Check("service", False, f"refused the token: {exc.code}", fix)
    except (ClientError, ValueError) as exc:  # BadServiceUrl: CLANKIE_URL is not one
        return Check("service", False, str(exc), getattr(exc, "fix", None) or "check CLANKIE_URL")
    except UnsafeHome as exc:  # the token file and the socket are not read from it
        return Check("service", False, f"not contacted: {exc}", exc.unsafe.fix)
    trust = (" (CLANKIE_URL_TRUSTED: its owner is not checked where it cannot be told)"
             if trusted_url(where) else "")
    return Check("service", True, f"{where} answers and accepts the token{trust}")


def check_model(settings: Settings) -> Check:
    if settings.model == "scripted":
        return Check("model", True, "scripted (offline)")
    if settings.model == "anthropic":
        if not os.environ.get("ANTHROPIC_API_KEY"):
            return Check("model", False, "anthropic: ANTHROPIC_API_KEY is not set",
                         "export ANTHROPIC_API_KEY in the service's environment")
        return Check("model", True, f"anthropic ({settings.anthropic_model}), key present")
    if settings.model == "openai":
        if settings.openai_base_url:
            url = settings.openai_base_url.rstrip("/") + "/models"
            from clankie.agent import endpoint  # the SDKs' stack: only with the extras

            try:  # the key goes only where the runs would send it, checked the same way
                with endpoint.http_client(settings.openai_base_url, PROBE_TIMEOUT_S) as http:
                    http.get(url, headers={"Authorization": "Bearer "
                                           + os.environ.get("OPENAI_API_KEY", "not-needed")})
            except endpoint.EndpointNotYours as exc:
                return Check("model", False, f"openai: {exc}", "stop whoever holds that port "
                             "(only they or root can), or serve your model on another port "
                             "and set openai_base_url to it")
            except endpoint.HTTPError as exc:
                return Check("model", False, f"openai: {settings.openai_base_url} does not "
                             f"answer ({type(exc).__name__})", "start the local model server "
                             "or fix openai_base_url")
            return Check("model", True, f"openai ({settings.openai_model}) at "
                         f"{settings.openai_base_url} answers")
        if not os.environ.get("OPENAI_API_KEY"):
            return Check("model", False, "openai: OPENAI_API_KEY is not set",
                         "export OPENAI_API_KEY, or set openai_base_url to a local server")
        return Check("model", True, f"openai ({settings.openai_model}), key present")
    return Check("model", False, f"unknown model {settings.model!r}",
                 "set model to scripted, openai or anthropic")


def check_git() -> Check:
    git = shutil.which("git")
    if git is None:
        return Check("git", False, "git is not on PATH (the Git tools and the project "
                     "membership fact need it)", "install git (e.g. apt-get install git)")
    try:
        done = subprocess.run([git, "--version"], capture_output=True, text=True,
                              timeout=PROBE_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError) as exc:
        return Check("git", False, f"git does not run: {exc}", "reinstall git")
    return Check("git", True, done.stdout.strip())


def run_checks(home: Home) -> list[Check]:
    found = problems(home)
    checks = check_trust(home, found)
    if found:  # nothing in such a home is read: not the store, the token, the settings
        checks += [not_read("store"), not_read("token"), check_service()]
    else:
        checks += [check_store(home), check_token(home), check_service()]
    try:
        settings = load_settings(home.path if home.path.is_dir() and not found else None)
    except SettingsError as exc:
        checks.append(Check("settings", False, str(exc), exc.fix))
        settings = Settings()
    else:
        checks.append(not_read("settings") if found else Check("settings", True, "valid"))
    checks += [check_model(settings), check_git()]
    return checks


def doctor(as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON."
                                                 )] = False) -> None:
    """Check this setup: home and its folders and files, store, token, service, model, Git,
    settings."""
    checks = run_checks(Home.from_env())
    if as_json:
        typer.echo(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        for c in checks:
            say(f"{'ok  ' if c.ok else 'FAIL'} {c.check}: {c.detail}"
                + (f"\n     fix: {c.fix}" if c.fix and not c.ok else ""))
    raise typer.Exit(0 if all(c.ok for c in checks) else 1)

