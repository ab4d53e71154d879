"""Settings, declared once as (name, default, help); read from settings.toml and the environment.

Owns the table `SETTINGS` and `load_settings`. `$CLANKIE_HOME/settings.toml` sets values,
and `CLANKIE_<NAME>` environment variables override it. Unknown names and bad values are
refused with a clear message rather than ignored.
"""

from __future__ import annotations

import json
import math
import os
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from clankie.workspace.deny import DEFAULT_DENY


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any
    help: str
    bounds: tuple[float, float] | None = None  # numbers: inclusive, and always finite
    choices: tuple[str, ...] | None = None  # strings: one of these
    items: int | None = None  # lists: at most this many strings


YEAR_S = 31_536_000
SETTINGS: Final[tuple[Setting, ...]] = (
    Setting("question_ttl", 86_400, "Seconds a question stays pending before it expires.",
            (1, YEAR_S)),
    Setting("receipt_limit", 16, "Receipts of ended questions kept per conversation.",
            (1, 10_000)),
    Setting("event_retention", 2_000, "Newest events kept per conversation.",
            (1, 1_000_000)),
    Setting("take_control_ttl", 3_600, "Default seconds of a Take Control lease.",
            (1, YEAR_S)),
    Setting("git_timeout", 2.0, "Seconds a read-only git command may take.", (0.1, 60)),
    Setting("max_steps", 24, "Model calls a run may make.", (1, 1_000)),
    Setting("run_tool_budget", 262_144, "Bytes of tool results a run may receive in all.",
            (1_024, 64 * 1024 * 1024)),
    Setting("workspace_deny", DEFAULT_DENY,
            "Glob patterns of secret paths the tools never read (a list; in the environment "
            "a JSON array).", items=1_000),
    Setting("notify_command", (), "A command (a list: program and arguments, no shell) run "
            "on each new question, with the question as JSON on standard input.", items=256),
    Setting("notify_on_resolved", False, "Also run notify_command when a question ends."),
    Setting("model", "scripted", "The model provider: scripted, openai or anthropic.",
            choices=("scripted", "openai", "anthropic")),
    Setting("openai_base_url", "", "OpenAI-compatible endpoint (empty: the SDK's default)."),
    Setting("openai_model", "gpt-4o-mini", "Model name for the openai provider."),
    Setting("anthropic_base_url", "", "Anthropic endpoint (empty: the SDK's default)."),
    Setting("anthropic_model", "claude-sonnet-4-5", "Model name for the anthropic provider."),
    # A ceiling for a local service. Each connection is a file descriptor, and the process's
    # own limit (often 1,024 soft) still applies; the default fits it with both listeners.
    Setting("max_connections", 256, "Connections served at once on each listener (the Unix "
            "socket, the TCP port); past it a new connection is closed at once.", (1, 4_096)),
)
_TEXT_CHARS = 2_000  # any string setting


class SettingsError(Exception):
    """A settings file or variable that cannot be used."""


@dataclass(frozen=True, slots=True)
class Settings:
    question_ttl: int = 86_400
    receipt_limit: int = 16
    event_retention: int = 2_000
    take_control_ttl: int = 3_600
    git_timeout: float = 2.0
    max_steps: int = 24
    run_tool_budget: int = 262_144
    workspace_deny: tuple[str, ...] = DEFAULT_DENY
    notify_command: tuple[str, ...] = ()
    notify_on_resolved: bool = False
    model: str = "scripted"
    openai_base_url: str = ""
    openai_model: str = "gpt-4o-mini"
    anthropic_base_url: str = ""
    anthropic_model: str = "claude-sonnet-4-5"
    max_connections: int = 256


assert [f.name for f in fields(Settings)] == [s.name for s in SETTINGS]
assert all(getattr(Settings(), s.name) == s.default for s in SETTINGS)


def load_settings(home: Path | None, environ: dict[str, str] | None = None) -> Settings:
    environ = dict(os.environ) if environ is None else environ
    values: dict[str, Any] = {}
    if home is not None and (home / "settings.toml").exists():
        try:
            values.update(tomllib.loads((home / "settings.toml").read_text("utf-8")))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{home / 'settings.toml'}: {exc}") from None
    known = {s.name: s for s in SETTINGS}
    for name in values:
        if name not in known:
            raise SettingsError(f"settings.toml: unknown setting {name!r}")
    for name in known:
        env = environ.get(f"CLANKIE_{name.upper()}")
        if env is not None:
            values[name] = env
    return Settings(**{name: _coerce(known[name], value) for name, value in values.items()})


def _coerce(setting: Setting, value: Any) -> Any:
    """The value as the setting's type, within its bounds; else `SettingsError` naming the
    setting, the value and what it may be."""
    kind = type(setting.default)
    if kind is tuple:
        return _strings(setting, value)
    if kind is bool:
        truth = {"true": True, "1": True, "false": False, "0": False}
        if isinstance(value, bool) or str(value).lower() in truth:
            return value if isinstance(value, bool) else truth[str(value).lower()]
        raise _refused(setting, value, "true or false")
    if kind is str:
        if not isinstance(value, str) or len(value) > _TEXT_CHARS or "\x00" in value:
            raise _refused(setting, value, f"text of at most {_TEXT_CHARS} characters")
        if setting.choices is not None and value not in setting.choices:
            raise _refused(setting, value, f"one of {', '.join(setting.choices)}")
        return value
    number = _number(value, integer=kind is int)
    low, high = setting.bounds or (-math.inf, math.inf)
    if number is None or not math.isfinite(number) or not low <= number <= high:
        what = "a whole number" if kind is int else "a number"
        raise _refused(setting, value, f"{what} from {low:g} to {high:g}")
    return number


def _number(value: Any, integer: bool) -> int | float | None:
    """A finite int or float from TOML or the environment's text, or None."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value) if isinstance(value, str) else value
    except ValueError:
        return None
    if not isinstance(number, int | float) or not math.isfinite(number):
        return None
    if integer:
        return int(number) if float(number).is_integer() else None
    return float(number)


def _refused(setting: Setting, value: Any, wanted: str) -> SettingsError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    return SettingsError(f"setting {setting.name}: {shown} is not allowed; it must be {wanted}")


def _strings(setting: Setting, value: Any) -> tuple[str, ...]:
    """A list of strings: a TOML array, or in the environment a JSON array."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, list) or not all(isinstance(v, str) and "\x00" not in v
                                              and len(v) <= _TEXT_CHARS for v in value):
        raise SettingsError(f"setting {setting.name}: give a list of strings (in the "
                            'environment a JSON array, e.g. [".env", "*.pem"])')
    if setting.items is not None and len(value) > setting.items:
        raise _refused(setting, f"a list of {len(value)}", f"at most {setting.items} strings")
    return tuple(value)


def _shown(value: Any) -> str:
    return json.dumps(list(value)) if isinstance(value, tuple) else str(value)


def settings_table() -> str:
    """The table `clankie serve --help-settings` prints."""
    width = max(len(s.name) for s in SETTINGS)
    shown = max(len(_shown(s.default)) for s in SETTINGS if not isinstance(s.default, tuple))
    lines = [f"{'name'.ljust(width)}  {'default'.rjust(shown)}  help"]
    for s in SETTINGS:
        if isinstance(s.default, tuple):  # a list is too long for the column: its own line
            lines.append(f"{s.name.ljust(width)}  {'(list)'.rjust(shown)}  {s.help}")
            lines.append(f"{''.ljust(width)}  {''.rjust(shown)}  default: {_shown(s.default)}")
        else:
            lines.append(f"{s.name.ljust(width)}  {_shown(s.default).rjust(shown)}  {s.help}")
    return "\n".join(lines)
