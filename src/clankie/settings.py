"""Settings, declared once as (name, default, help); read from settings.toml and the environment.

Owns the table `SETTINGS` and `load_settings`. `$CLANKIE_HOME/settings.toml` sets values,
and `CLANKIE_<NAME>` environment variables override it. Unknown names and bad values are
refused with a clear message rather than ignored.
"""

from __future__ import annotations

import difflib
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
    unit: str = ""  # what a number counts, said with its bounds


YEAR_S = 31_536_000
SETTINGS: Final[tuple[Setting, ...]] = (
    Setting("question_ttl", 86_400, "Seconds a question stays pending before it expires.",
            (1, YEAR_S), unit="seconds"),
    Setting("receipt_limit", 16, "Receipts of ended questions kept per conversation.",
            (1, 10_000)),
    Setting("event_retention", 2_000, "Newest events kept per conversation.",
            (1, 1_000_000)),
    Setting("take_control_ttl", 3_600, "Default seconds of a Take Control lease.",
            (1, YEAR_S), unit="seconds"),
    Setting("git_timeout", 2.0, "Seconds a read-only git command may take.", (0.1, 60),
            unit="seconds"),
    Setting("max_steps", 24, "Model calls a run may make.", (1, 1_000)),
    Setting("run_tool_budget", 262_144, "Bytes of tool results a run may receive in all.",
            (1_024, 64 * 1024 * 1024), unit="bytes"),
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
    Setting("model_timeout", 120, "Seconds one model call may wait for its reply.", (1, 3_600),
            unit="seconds"),
    Setting("model_retries", 4, "Times a model call that failed transiently (429, 5xx, a "
            "dropped connection, a timeout) is tried again.", (0, 20)),
    Setting("model_retry_wait", 90, "Seconds a model call may wait between its tries, in "
            "all.", (1, 3_600), unit="seconds"),
    # A ceiling for a local service. Each connection is a file descriptor, and the process's
    # own limit (often 1,024 soft) still applies; the default fits it with both listeners.
    Setting("max_connections", 256, "Connections served at once on each listener (the Unix "
            "socket, the TCP port); past it a new connection is closed at once.", (1, 4_096)),
)
_TEXT_CHARS = 2_000  # any string setting


class SettingsError(Exception):
    """A settings file or variable that cannot be used; `fix` says what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


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
    model_timeout: int = 120
    model_retries: int = 4
    model_retry_wait: int = 90
    max_connections: int = 256


assert [f.name for f in fields(Settings)] == [s.name for s in SETTINGS]
assert all(getattr(Settings(), s.name) == s.default for s in SETTINGS)


# CLANKIE_ variables that are not settings: where to find the home and the service.
NOT_SETTINGS: Final = frozenset({"CLANKIE_HOME", "CLANKIE_URL", "CLANKIE_TOKEN",
                                 "CLANKIE_URL_TRUSTED", "CLANKIE_CAMPAIGN_EXAMPLES"})


def load_settings(home: Path | None, environ: dict[str, str] | None = None) -> Settings:
    """The settings: `settings.toml` in the home, then `CLANKIE_<NAME>` variables over it.
    A value of the wrong type, out of bounds or of an unknown name is a `SettingsError`
    that says where it came from, what it may be, and how to fix it."""
    environ = dict(os.environ) if environ is None else environ
    known = {s.name: s for s in SETTINGS}
    values: dict[str, Any] = {}
    path = home / "settings.toml" if home is not None else None
    if path is not None and path.exists():
        try:
            from_file = tomllib.loads(path.read_text("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{path}: {exc}", f"correct {path}") from None
        for name, value in from_file.items():
            if name not in known:
                raise SettingsError(f"{path}: unknown setting {name!r}{_near(name)}",
                                    f"correct or remove it in {path}; "
                                    "`clankie serve --help-settings` lists them")
            values[name] = _coerce(known[name], value, f"in {path}", from_text=False)
    for variable, text in environ.items():
        if not variable.startswith("CLANKIE_") or variable in NOT_SETTINGS:
            continue
        name = variable.removeprefix("CLANKIE_").lower()
        if name not in known:
            raise SettingsError(f"{variable} is not a setting{_near(name, variable=True)}",
                                f"unset {variable}, or correct its name")
        values[name] = _coerce(known[name], text, f"in {variable}", from_text=True)
    return Settings(**values)


# What `service_info` never shows: the base URLs (a user, a path or a query may hold a key;
# the endpoint is said as host[:port] instead) and `notify_command`'s arguments (a webhook
# URL or a header with a token): the program is shown, each argument as "***".
NOT_SHOWN: Final = frozenset({"openai_base_url", "anthropic_base_url"})
HIDDEN_ARGUMENT: Final = "***"


def shown(settings: Settings) -> dict[str, Any]:
    """The settings as `service_info` reports them: every declared setting but those that
    could carry a secret, as JSON values (lists for lists)."""
    values: dict[str, Any] = {}
    for setting in SETTINGS:
        if setting.name in NOT_SHOWN:
            continue
        value = getattr(settings, setting.name)
        if setting.name == "notify_command":
            value = value[:1] + (HIDDEN_ARGUMENT,) * len(value[1:])
        values[setting.name] = list(value) if isinstance(value, tuple) else value
    return values


def _near(name: str, variable: bool = False) -> str:
    close = difflib.get_close_matches(name, [s.name for s in SETTINGS], n=1)
    if not close:
        return ""
    return f" (did you mean {'CLANKIE_' + close[0].upper() if variable else close[0]}?)"


def _coerce(setting: Setting, value: Any, where: str, from_text: bool) -> Any:
    """The value as the setting's type, within its bounds; else `SettingsError` naming the
    setting, the value, where it came from and what it may be. In `settings.toml` a value
    has its TOML type (a number, not "86400"); a variable's text is read as that type."""
    kind = type(setting.default)
    if kind is tuple:
        return _strings(setting, value, where, from_text)
    if kind is bool:
        truth = {"true": True, "1": True, "false": False, "0": False}
        if isinstance(value, bool):
            return value
        if from_text and value.lower() in truth:
            return truth[value.lower()]
        raise _refused(setting, value, where, "true or false")
    if kind is str:
        if not isinstance(value, str) or len(value) > _TEXT_CHARS or "\x00" in value:
            raise _refused(setting, value, where,
                           f"text of at most {_TEXT_CHARS:,} characters")
        if setting.choices is not None and value not in setting.choices:
            raise _refused(setting, value, where, f"one of {', '.join(setting.choices)}")
        return value
    number = _number(value, integer=kind is int, from_text=from_text)
    low, high = setting.bounds or (-math.inf, math.inf)
    if number is None or not low <= number <= high:
        what = "a whole number" if kind is int else "a number"
        raise _refused(setting, value, where, f"{what} from {_plain(low)} to {_plain(high)}"
                       f"{' ' + setting.unit if setting.unit else ''}")
    return number


def _number(value: Any, integer: bool, from_text: bool) -> int | float | None:
    """A finite int or float: a TOML number, or a variable's text in ASCII digits; None
    for anything else (a TOML string, a bool, NaN, infinity, a number no float holds)."""
    if from_text:
        if not isinstance(value, str) or not value.strip().isascii():
            return None
        try:
            value = float(value) if not value.strip().lstrip("+-").isdigit() else int(value)
        except ValueError:
            return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or (integer and not value.is_integer()):
            return None
        return int(value) if integer else value
    if abs(value) > 2 ** 63:  # no setting's range comes near: refused before any float
        return None
    return value if integer else float(value)


def _plain(number: float) -> str:
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


def _refused(setting: Setting, value: Any, where: str, wanted: str) -> SettingsError:
    shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
    if isinstance(value, bool):
        shown = str(value).lower()
    return SettingsError(f"setting {setting.name} {where}: {shown} is not allowed; it must be "
                         f"{wanted}", f"correct {setting.name} {where}")


def _strings(setting: Setting, value: Any, where: str, from_text: bool) -> tuple[str, ...]:
    """A list of strings: a TOML array, or in a variable a JSON array."""
    if from_text:
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    example = ('a JSON array, e.g. ["sh", "-c", "..."]' if from_text else
               'a TOML array of strings, e.g. ["sh", "-c", "..."]')
    if not isinstance(value, list) or not all(isinstance(v, str) and "\x00" not in v
                                              and len(v) <= _TEXT_CHARS for v in value):
        raise SettingsError(f"setting {setting.name} {where}: give {example}",
                            f"correct {setting.name} {where}")
    if setting.items is not None and len(value) > setting.items:
        raise _refused(setting, f"a list of {len(value)}", where,
                       f"at most {setting.items:,} strings")
    return tuple(value)


def _shown(value: Any) -> str:
    return json.dumps(list(value)) if isinstance(value, tuple) else str(value)


def _allowed(setting: Setting) -> str:
    if setting.bounds is not None:
        low, high = setting.bounds
        return f"{_plain(low)}..{_plain(high)}{' ' + setting.unit if setting.unit else ''}"
    if setting.choices is not None:
        return " | ".join(setting.choices)
    if setting.items is not None:
        return f"at most {setting.items:,} strings"
    if isinstance(setting.default, bool):
        return "true | false"
    return f"text, at most {_TEXT_CHARS:,} characters"


def settings_table() -> str:
    """The table `clankie serve --help-settings` prints: name, default, what is allowed,
    and what the setting does."""
    rows = [(s.name, "(list)" if isinstance(s.default, tuple) else _shown(s.default),
             _allowed(s), s.help) for s in SETTINGS]
    widths = [max(len(row[i]) for row in [("name", "default", "allowed", ""), *rows])
              for i in range(3)]
    lines = [f"{'name'.ljust(widths[0])}  {'default'.rjust(widths[1])}  "
             f"{'allowed'.ljust(widths[2])}  help"]
    for s, (name, default, allowed, helped) in zip(SETTINGS, rows, strict=True):
        lines.append(f"{name.ljust(widths[0])}  {default.rjust(widths[1])}  "
                     f"{allowed.ljust(widths[2])}  {helped}")
        if isinstance(s.default, tuple):  # a list is too long for the column: its own line
            lines.append(f"{''.ljust(sum(widths) + 6)}default: {_shown(s.default)}")
    return "\n".join(lines)
