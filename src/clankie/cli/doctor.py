"""`clankie doctor`: what is wrong with this setup, one line a check, each with its fix.

Owns the checks, which only look: the folders above the home, the home and its mode, the
files in it (T1: one line for each that is a link, someone else's or writable by others;
then nothing in the home is read), the store's schema (opened read-only, never migrated),
the token file, the service and the token (sent only to a service that is the owner's,
T2), the model provider, Git, the settings; and one line that always passes, the stated
limit of an agent's credential (SPEC P2). Exit 0 when every check passes, 1 otherwise;
`--json` for scripts.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

from clankie import dto, when
from clankie.agent.providers import (
    ModelInUse,
    model_in_use,
)
from clankie.agent.sdk import (
    BASE_URL_SETTINGS,
    DEFAULT_URLS,
    KEY_VARIABLES,
    base_url,
    endpoint_digest,
    endpoint_host,
    public_url,
)
from clankie.client import (
    ApiError,
    Client,
    ClientError,
    NotClankie,
    NotYours,
    ServiceUnreachable,
    trusted_url,
)
from clankie.core.vocabulary import Code
from clankie.home import Home, Unsafe, UnsafeHome, problems
from clankie.settings import Settings, SettingsError, load_settings
from clankie.store.schema import MIGRATIONS

from .common import exit_with, say

if TYPE_CHECKING:
    from clankie.agent.probe import Probe

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
            "write it")]
    return [*parents, *own, *files]


def check_home(home: Home) -> Check:
    """The T1 rule, the one every command applies; a home others may look into passes,
    with a word on it (init makes it 700)."""
    mode = _mode(home.path)
    seen = "" if mode & 0o077 == 0 else (f"; others can see the names in it: `chmod 700 "
                                         f"{home.path}` keeps them out")
    return Check("home", True, f"{home.path} (yours, mode {mode:o}{seen})")


def not_read(check: str) -> Check:
    return Check(check, False, "not read: the home is not safe or not usable (see above)",
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


@dataclass(frozen=True)
class Running:
    """The service that answered: where, and what it said of itself (`service_info`;
    None from a service older than that op)."""

    url: str
    info: dto.ServiceInfoOut | None


def check_service(home_usable: bool = True) -> tuple[Check, Running | None]:
    """The service at CLANKIE_URL (else the home's socket); where nothing listens in a home
    that is not usable, the fix is the home's: `clankie serve` would refuse it too."""
    try:
        with Client(timeout=PROBE_TIMEOUT_S) as client:
            where = client.url
            try:
                info: dto.ServiceInfoOut | None = client.op(dto.SERVICE_INFO)
            except ApiError as exc:
                if exc.code != Code.NOT_FOUND:
                    raise
                client.call("conversation_list", {"limit": 1})  # an older service
                info = None
    except ServiceUnreachable as exc:
        return Check("service", False, f"not reachable: {exc}",
                     exc.fix if home_usable else "fix the home first (see above): `clankie "
                     "serve` cannot start in it either"), None
    except (NotYours, NotClankie) as exc:
        return Check("service", False, str(exc), exc.fix), None
    except ApiError as exc:
        fix = ("the token was rotated or revoked: use the new one (CLANKIE_TOKEN or "
               "operator.token), or `clankie init` after a revocation"
               if exc.code == Code.UNAUTHENTICATED else None)
        return Check("service", False, f"refused the token: {exc.code}", fix), None
    except (ClientError, ValueError) as exc:  # BadServiceUrl: CLANKIE_URL is not one
        return Check("service", False, str(exc),
                     getattr(exc, "fix", None) or "check CLANKIE_URL"), None
    except UnsafeHome as exc:  # the token file and the socket are not read from it
        return Check("service", False, f"not contacted: {exc}", exc.unsafe.fix), None
    trust = (" (CLANKIE_URL_TRUSTED: its owner is not checked where it cannot be told)"
             if trusted_url(where) else "")
    version = (f"; clankie {info.version}, up since {when.shown_now(info.started_at)}"
               if info else "")
    return Check("service", True, f"{where} answers and accepts the token{trust}{version}"), \
        Running(where, info)


def check_model(settings: Settings | None, running: Running | None) -> Check:
    """The model the running service uses (`service_info`), else the one `serve` would use
    with the settings here; its endpoint asked for its models list (`agent.probe`). With
    settings that cannot be read (None) only a service's scripted model passes; any other is
    not checked, since its endpoint is known only from them: the cause is said once, on the
    settings line, and never as a second one here (issue 31)."""
    here = replace(model_in_use(settings or Settings()), key_set=None)  # a service's compared
    model, who = _model_checked(here, running)
    said = running is not None and running.info is not None  # the service said its model
    if settings is None and not (said and model.provider == "scripted"):
        shown = (f"{who} {model.provider} ({model.model}) at {model.endpoint_host}; "
                 if said else "")
        return Check("model", False, f"{shown}not checked: the settings here cannot be read "
                     "(see the settings line)", "fix the settings first")
    if model.provider == "scripted":
        other = (f" (the settings here choose {here.provider}: `clankie serve` uses them "
                 "from its next start)" if here.provider != "scripted" else "")
        return Check("model", True, f"{who} scripted (offline){other}")
    assert settings is not None  # without them, only a scripted model is checked (above)
    if model.provider not in KEY_VARIABLES:
        return Check("model", False, f"{who} an unknown model {model.provider!r}",
                     "set model to scripted, openai or anthropic")
    provider, setting = model.provider, BASE_URL_SETTINGS[model.provider]
    url = base_url(settings, provider)
    who = f"{who} {provider} ({model.model}) at {model.endpoint_host}"
    ignored = _ignored_variable(provider, settings)
    if endpoint_host(url) != model.endpoint_host or (
            model.endpoint_digest is not None and endpoint_digest(url) != model.endpoint_digest):
        named = (f"another base URL at {endpoint_host(url)} (here {public_url(url)}; the "
                 "service's differs in its path or query, which it never says)"
                 if endpoint_host(url) == model.endpoint_host else endpoint_host(url))
        return Check("model", False, f"{who}, but the settings here name {named}: not "
                     f"probed{ignored}",
                     f"give doctor the same {setting} as `clankie serve` (set it in "
                     f"settings.toml, which both read, rather than in CLANKIE_"
                     f"{setting.upper()} of one shell)")
    variable = KEY_VARIABLES[provider]
    here_key = bool(os.environ.get(variable))
    # The service says whether it has the key variable (never the key): without it, the
    # endpoint is asked without one too, as the service's runs ask it.
    keyless = model.key_set is False
    # Without a key the Anthropic SDK sends nothing (and would read the variable here).
    if keyless and (url == DEFAULT_URLS[provider] or provider == "anthropic"):
        return Check("model", False, f"{who}, but the service has no {variable} in its "
                     f"environment: every run fails{ignored}",
                     f"export {variable} in the shell of `clankie serve` and restart it")
    if url == DEFAULT_URLS[provider] and not here_key:
        return Check("model", False, f"{who}: {variable} is not set here, so its models "
                     f"list was not asked{ignored}",
                     f"export {variable} (in the environment of `clankie serve` too), or "
                     f"set {setting} to a local server")
    from clankie.agent import probe  # the SDKs: only with the extras

    found = probe.models_list(provider, url, MODEL_PROBE_TIMEOUT_S, keyless=keyless)
    asked_as = (f" (asked without a key, as the service has no {variable}; this shell's "
                "was not used)" if keyless and here_key else "")
    if found.outcome == "ok":
        listed = _listed(model.model, found.models)
        return Check("model", True, f"{who}: its models list answers{listed}{asked_as}"
                                    f"{ignored}")
    detail, fix = _failed(found, provider, public_url(url))
    if found.outcome in ("bad_key", "no_key") and keyless:
        return Check("model", False, f"{who}: the endpoint refused a request without a key "
                     f"({found.detail}), and the service has no {variable} in its "
                     f"environment{ignored}",
                     f"export {variable} in the shell of `clankie serve` and restart it")
    if found.outcome in ("bad_key", "no_key") and model.key_set and not here_key:
        fix = (f"run doctor with the same {variable} as `clankie serve` (the service has "
               "one; this shell does not, so doctor asked without it)")
    return Check("model", False, f"{who}: {detail}{asked_as}{ignored}", fix)


def _model_checked(here: ModelInUse, running: Running | None) -> tuple[ModelInUse, str]:
    """The model to check and whose it is: the running service's, as it says, else the one
    the settings here choose (no service, or one too old to say)."""
    if running is not None and running.info is not None:
        used = running.info.model
        return ModelInUse(used.provider, used.model, used.endpoint_host, used.endpoint_digest,
                          used.key_set), \
            f"the service at {running.url} runs"
    if running is None:
        return here, "no service answered; with the settings here `clankie serve` would run"
    return here, (f"the service at {running.url} does not say its model (an older clankie); "
                  "with the settings here `clankie serve` would run")


def _failed(found: Probe, provider: str, url: str) -> tuple[str, str]:
    """A failed models-list question, as the line's detail and its fix."""
    setting, variable = BASE_URL_SETTINGS[provider], KEY_VARIABLES[provider]
    restart = " and restart `clankie serve`"
    asked = found.asked or url
    if found.outcome == "not_yours":
        return found.detail, ("stop whoever holds that port (only they or root can), or serve "
                              f"your model on another port and set {setting} to it")
    if found.outcome == "not_found":
        return (f"{asked} answered {found.detail}: the base URL is wrong",
                ROOT_FIX[provider] + restart)
    if found.outcome in ("unreachable", "timeout"):
        return (f"nothing answers at {asked} ({found.detail})",
                f"start the model server, or correct {setting}{restart}")
    key_fix = (f"set a valid {variable} in the environment of `clankie serve` (and of "
               f"doctor){restart}")
    if found.outcome == "bad_key":
        unset = "" if os.environ.get(variable) else f"; {variable} is not set here"
        return f"the endpoint refused the key ({found.detail}){unset}", key_fix
    if found.outcome == "no_key":
        return f"no key: {variable} is not set here", key_fix
    return (f"{asked} answered {found.detail}",
            f"check the model server's log, or correct {setting}")


MODEL_PROBE_TIMEOUT_S = 5.0
ROOT_FIX = {
    "openai": "set openai_base_url to the server's OpenAI-compatible root, ending in /v1 "
              "(OpenAI: https://api.openai.com/v1; Ollama: http://localhost:11434/v1; "
              "vLLM: http://localhost:8000/v1; llama.cpp: http://localhost:8080/v1)",
    "anthropic": "set anthropic_base_url to the endpoint's root, without /v1 (the SDK adds "
                 "/v1/messages; Anthropic: https://api.anthropic.com)",
}


def _listed(model: str | None, models: tuple[str, ...]) -> str:
    """How many models the endpoint lists, and a word when the configured one is not among
    them (a local server may still take it: Ollama adds `:latest`, llama.cpp any name)."""
    count = f" ({len(models)} model{'s' if len(models) != 1 else ''})"
    if not models or model is None or model in models or f"{model}:latest" in models:
        return count
    shown = ", ".join(models[:5]) + (", ..." if len(models) > 5 else "")
    return f"{count}, but not {model}: it lists {shown}"


def _ignored_variable(provider: str, settings: Settings) -> str:
    """A word on the SDK's own base-URL variable, which clankie does not read."""
    variable = f"{provider.upper()}_BASE_URL"
    setting = BASE_URL_SETTINGS[provider]
    if not os.environ.get(variable) or getattr(settings, setting):
        return ""
    return (f" (note: {variable} is set here, but clankie does not read it: set {setting}, "
            f"or CLANKIE_{setting.upper()})")


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


def check_agents(home: Home) -> Check:
    """SPEC P2's stated limit, said where the owner looks: always a pass, never a fix."""
    return Check("agents", True, "a coding agent's credential (`clankie mcp`) asks and never "
                 "answers through MCP, but a program running as your own Unix user can read "
                 f"the operator token in {home.token_file}: keep the agent's file access away "
                 f"from {home.path} (its client's sandbox or deny rules) or run the agent as "
                 "another user")


def run_checks(home: Home) -> list[Check]:
    """Every check, in order. Those that wait on another process (the service's reply, Git)
    run at once on threads, and the model's SDK is imported meanwhile when the settings
    choose one (issue 31: doctor within 1 s); nothing is cached from one doctor to the next."""
    found = problems(home, write=True)  # the words `init` and `serve` would refuse it with
    with ThreadPoolExecutor(3, thread_name_prefix="clankie-doctor") as pool:
        asked = pool.submit(check_service, not found)
        git = pool.submit(check_git)
        checks = check_trust(home, found)
        if found:  # nothing in such a home is read: not the store, the token, the settings
            checks += [not_read("store"), not_read("token")]
        else:
            checks += [check_store(home), check_token(home)]
        settings: Settings | None = None
        try:
            settings = load_settings(home.path if home.path.is_dir() and not found else None)
        except SettingsError as exc:
            read = Check("settings", False, str(exc), exc.fix)
        else:
            read = not_read("settings") if found else Check("settings", True, "valid")
            if settings.model in KEY_VARIABLES:
                pool.submit(_sdk_loaded, settings.model)
        service, running = asked.result()
        checks += [service, read, check_model(settings, running), git.result(),
                   check_agents(home)]
    return checks


def _sdk_loaded(provider: str) -> None:
    """Import the provider's SDK (the probe's), while the service is asked: a failure is
    left for the probe to say, on its own line."""
    with contextlib.suppress(Exception):
        importlib.import_module(provider)


def doctor(as_json: bool) -> None:
    """Run the checks and print them (`clankie doctor`, declared in `cli.main`); exit 1 if
    any failed."""
    checks = run_checks(Home.from_env())
    if as_json:
        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        for c in checks:
            say(f"{'ok  ' if c.ok else 'FAIL'} {c.check}: {c.detail}"
                + (f"\n     fix: {c.fix}" if c.fix and not c.ok else ""))
    exit_with(0 if all(c.ok for c in checks) else 1)

