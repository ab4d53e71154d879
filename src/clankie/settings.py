"""Settings, declared once (one pydantic-settings class); read from settings.toml and variables.

Owns `Settings` (each field: its default, bounds, unit and help), the table `SETTINGS`
derived from it, and `load_settings`. `$CLANKIE_HOME/settings.toml` sets values, and
`CLANKIE_<NAME>` environment variables override it. Bad values, and unknown names in the
file, are refused with a clear message rather than ignored: a TOML value must have its own
type (a number, not "86400"), a variable's text is read as the setting's type. An unknown
`CLANKIE_` variable (a typo, or another program's own) changes nothing: `unknown_variables`
says it, with the nearest name, for the command to warn about (issue 31).
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, get_args, get_origin

import annotated_types
from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from clankie.home import NOT_SETTINGS
from clankie.workspace.deny import DEFAULT_DENY

YEAR_S = 31_536_000
_TEXT_CHARS = 2_000  # any string setting
Seconds: Final[dict[str, Any]] = {"unit": "seconds"}
_ORIGIN: Final = re.compile(r"https?://[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})(?::[0-9]{1,5})?")


class Settings(BaseSettings):
    """Every setting, with its default, bounds and help: the one place a setting is declared.
    `Settings()` is the defaults (it reads no file and no variable); `load_settings` reads."""

    model_config = SettingsConfigDict(frozen=True, extra="forbid", env_prefix="CLANKIE_")

    question_ttl: int = Field(86_400, ge=1, le=YEAR_S, json_schema_extra=Seconds,
                              description="Seconds a question stays pending before it expires.")
    receipt_limit: int = Field(16, ge=1, le=10_000,
                               description="Receipts of ended questions kept per conversation.")
    event_retention: int = Field(2_000, ge=1, le=1_000_000,
                                 description="Newest events kept per conversation.")
    take_control_ttl: int = Field(3_600, ge=1, le=YEAR_S, json_schema_extra=Seconds,
                                  description="Default seconds of a Take Control lease.")
    git_timeout: float = Field(2.0, ge=0.1, le=60, json_schema_extra=Seconds,
                               description="Seconds the project-membership fact may take to "
                                           "read a project's Git worktrees (SPEC M3).")
    max_steps: int = Field(24, ge=1, le=1_000, description="Model calls a run may make.")
    run_tool_budget: int = Field(262_144, ge=1_024, le=64 * 1024 * 1024,
                                 json_schema_extra={"unit": "bytes"},
                                 description="Bytes of tool results a run may receive in all.")
    workspace_deny: tuple[str, ...] = Field(
        DEFAULT_DENY, max_length=1_000,
        description="Glob patterns of secret paths the tools never read (a list; in the "
                    "environment a JSON array).")
    notify_command: tuple[str, ...] = Field(
        (), max_length=256,
        description="A command (a list: program and arguments, no shell) run on each new "
                    "question, with the question as JSON on standard input.")
    notify_on_resolved: bool = Field(False,
                                     description="Also run notify_command when a question ends.")
    model: Literal["scripted", "openai", "anthropic"] = Field(
        "scripted", description="The model provider: scripted, openai or anthropic.")
    openai_base_url: str = Field(
        "", description="OpenAI-compatible endpoint (empty: the SDK's default).")
    openai_model: str = Field("gpt-4o-mini", description="Model name for the openai provider.")
    anthropic_base_url: str = Field(
        "", description="Anthropic endpoint (empty: the SDK's default).")
    anthropic_model: str = Field("claude-sonnet-4-5",
                                 description="Model name for the anthropic provider.")
    model_timeout: int = Field(120, ge=1, le=3_600, json_schema_extra=Seconds,
                               description="Seconds one model call may wait for its reply.")
    model_retries: int = Field(4, ge=0, le=20,
                               description="Times a model call that failed transiently (429, "
                                           "5xx, a dropped connection, a timeout) is tried again.")
    model_retry_wait: int = Field(90, ge=1, le=3_600, json_schema_extra=Seconds,
                                  description="Seconds a model call may wait between its tries, "
                                              "in all.")
    context_budget: int = Field(100_000, ge=4_000, le=10_000_000,
                                json_schema_extra={"unit": "tokens"},
                                description="Tokens a model request may hold (estimated on the "
                                            "safe side); the oldest history is left out first, "
                                            "and the model is told.")
    web_origin: str = Field(
        "", max_length=300,
        description="The one origin the phone page (serve --web) is used from, scheme and "
                    "host only, for example https://laptop.tailnet-name.ts.net; empty: the "
                    "--web listener's own address.")
    # A ceiling for a local service. Each connection is a file descriptor, and the process's
    # own limit (often 1,024 soft) still applies; the default fits it with both listeners.
    max_connections: int = Field(256, ge=1, le=4_096,
                                 description="Connections served at once on each listener (the "
                                             "Unix socket, the TCP port); past it a new "
                                             "connection is closed at once.")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # the file and the variables only through `load_settings`

    @field_validator("*", mode="before")
    @classmethod
    def _as_declared(cls, value: Any, info: ValidationInfo) -> Any:
        assert info.field_name is not None
        coerced = _coerce(_BY_NAME[info.field_name], value)
        return _origin(value, coerced) if info.field_name == "web_origin" else coerced


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of `Settings` as the checks and `--help-settings` read it."""

    name: str
    default: Any
    help: str
    bounds: tuple[float, float] | None = None  # numbers: inclusive, and always finite
    choices: tuple[str, ...] | None = None  # strings: one of these
    items: int | None = None  # lists: at most this many strings
    unit: str = ""  # what a number counts, said with its bounds


def _declared(name: str, field: FieldInfo) -> Setting:
    low = next((m.ge for m in field.metadata if isinstance(m, annotated_types.Ge)), None)
    high = next((m.le for m in field.metadata if isinstance(m, annotated_types.Le)), None)
    assert isinstance(low, int | float | None) and isinstance(high, int | float | None)
    items = next((m.max_length for m in field.metadata  # of a list; a text's is its own
                  if isinstance(m, annotated_types.MaxLen)), None) if field.annotation is not str \
        else None
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    literal = get_origin(field.annotation) is Literal
    return Setting(name, field.default, field.description or "",
                   bounds=None if low is None or high is None else (float(low), float(high)),
                   choices=get_args(field.annotation) if literal else None, items=items,
                   unit=str(extra.get("unit", "")))


SETTINGS: Final[tuple[Setting, ...]] = tuple(
    _declared(name, field) for name, field in Settings.model_fields.items())
_BY_NAME: Final = {s.name: s for s in SETTINGS}


class SettingsError(Exception):
    """A settings file or variable that cannot be used; `fix` says what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


class _Refused(ValueError):
    """What `_coerce` says a value must be; `load_settings` adds the setting and its place."""

    def __init__(self, value: Any, wanted: str) -> None:
        super().__init__(wanted)
        self.value, self.wanted = value, wanted


class _Text(str):
    """A variable's text: read as the setting's type, where a file's value must have it."""


def _unknown(environ: dict[str, str]) -> list[str]:
    return [v for v in environ if v.startswith("CLANKIE_") and v not in NOT_SETTINGS
            and v.removeprefix("CLANKIE_").lower() not in _BY_NAME]


def unknown_variables(environ: dict[str, str] | None = None) -> list[str]:
    """One sentence for each `CLANKIE_` variable of `environ` that is neither a setting nor
    one clankie reads otherwise, with the nearest name it could be; such a variable changes
    nothing (`load_settings` leaves it out), so the command warns and goes on."""
    names = [s.name.upper() for s in SETTINGS] + [v.removeprefix("CLANKIE_")
                                                   for v in sorted(NOT_SETTINGS)]
    said = []
    for variable in sorted(_unknown(dict(os.environ) if environ is None else environ)):
        close = difflib.get_close_matches(variable.removeprefix("CLANKIE_"), names, n=1)
        hint = f" (did you mean CLANKIE_{close[0]}?)" if close else ""
        said.append(f"{variable} is not a setting{hint}; ignored")
    return said


class _Variables(PydanticBaseSettingsSource):
    """`CLANKIE_<NAME>` variables of `environ` that name a setting, each value as `_Text`
    (the others are `unknown_variables`')."""

    def __init__(self, environ: dict[str, str]) -> None:
        super().__init__(Settings)
        self._values: dict[str, Any] = {
            name: _Text(text) for variable, text in environ.items()
            if variable.startswith("CLANKIE_") and variable not in NOT_SETTINGS
            and (name := variable.removeprefix("CLANKIE_").lower()) in _BY_NAME}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


def load_settings(home: Path | None, environ: dict[str, str] | None = None) -> Settings:
    """The settings: `settings.toml` in the home, then `CLANKIE_<NAME>` variables over it.
    A value of the wrong type, out of bounds or of an unknown name in the file is a
    `SettingsError` that says where it came from, what it may be, and how to fix it; an
    unknown variable is left out (see `unknown_variables`)."""
    variables = _Variables(dict(os.environ) if environ is None else environ)
    path = home / "settings.toml" if home is not None else None
    sources: list[PydanticBaseSettingsSource] = []
    if path is not None and path.exists():
        try:
            sources.append(TomlConfigSettingsSource(Settings, toml_file=path))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"{path}: {exc}", f"correct {path}") from None
        _built(sources, path)  # the file is checked whole, even where a variable overrides it
    return _built([variables, *sources], path)


def _built(sources: list[PydanticBaseSettingsSource], path: Path | None) -> Settings:
    try:
        return Settings(_build_sources=(tuple(sources), {}))
    except ValidationError as exc:
        error = exc.errors()[0]
        name = str(error["loc"][0])
        if error["type"] == "extra_forbidden":
            raise SettingsError(f"{path}: unknown setting {name!r}{_near(name)}",
                                f"correct or remove it in {path}; "
                                "`clankie serve --help-settings` lists them") from None
        where = (f"in CLANKIE_{name.upper()}" if isinstance(error["input"], _Text)
                 else f"in {path}")
        cause = error.get("ctx", {}).get("error")
        if isinstance(cause, _StringsRefused):
            raise SettingsError(f"setting {name} {where}: give {cause.example(where)}",
                                f"correct {name} {where}") from None
        if not isinstance(cause, _Refused):  # past `_coerce`, pydantic refuses nothing
            raise
        raise _said(name, cause.value, where, cause.wanted) from None


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


def _near(name: str) -> str:
    close = difflib.get_close_matches(name, [s.name for s in SETTINGS], n=1)
    return f" (did you mean {close[0]}?)" if close else ""


def _coerce(setting: Setting, value: Any) -> Any:
    """The value as the setting's type, within its bounds; else `_Refused` saying what it
    may be. A file's value has its TOML type (a number, not "86400"); a variable's text
    (`_Text`) is read as that type."""
    kind, from_text = type(setting.default), isinstance(value, _Text)
    if kind is tuple:
        return _strings(setting, value, from_text)
    if kind is bool:
        truth = {"true": True, "1": True, "false": False, "0": False}
        if isinstance(value, bool):
            return value
        if from_text and value.lower() in truth:
            return truth[value.lower()]
        raise _Refused(value, "true or false")
    if kind is str:
        if not isinstance(value, str) or len(value) > _TEXT_CHARS or "\x00" in value:
            raise _Refused(value, f"text of at most {_TEXT_CHARS:,} characters")
        if setting.choices is not None and value not in setting.choices:
            raise _Refused(value, f"one of {', '.join(setting.choices)}")
        return str(value)
    number = _number(value, integer=kind is int, from_text=from_text)
    low, high = setting.bounds or (-math.inf, math.inf)
    if number is None or not low <= number <= high:
        what = "a whole number" if kind is int else "a number"
        raise _Refused(value, f"{what} from {_plain(low)} to {_plain(high)}"
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


def _origin(given: Any, text: str) -> str:
    """`web_origin`: an origin, in lower case; one slash after it (as an address bar shows
    it) is dropped, any other path refused."""
    origin = text.lower().removesuffix("/") if text.count("/") == 3 else text.lower()
    if origin and not _ORIGIN.fullmatch(origin):
        raise _Refused(given, "an origin: http:// or https://, a host name and an optional "
                              "port, with no path (for example "
                              "https://laptop.tailnet-name.ts.net)")
    return origin


def _said(name: str, value: Any, where: str, wanted: str) -> SettingsError:
    shown = repr(str(value) if isinstance(value, _Text) else value)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    if isinstance(value, bool):
        shown = str(value).lower()
    return SettingsError(f"setting {name} {where}: {shown} is not allowed; it must be "
                         f"{wanted}", f"correct {name} {where}")


class _StringsRefused(ValueError):
    """Not a list of strings."""

    @staticmethod
    def example(where: str) -> str:
        return ('a JSON array, e.g. ["sh", "-c", "..."]' if where.startswith("in CLANKIE_")
                else 'a TOML array of strings, e.g. ["sh", "-c", "..."]')


def _strings(setting: Setting, value: Any, from_text: bool) -> tuple[str, ...]:
    """A list of strings: a TOML array, or in a variable a JSON array."""
    if from_text:
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, list | tuple) or not all(
            isinstance(v, str) and "\x00" not in v and len(v) <= _TEXT_CHARS for v in value):
        raise _StringsRefused(setting.name)
    if setting.items is not None and len(value) > setting.items:
        raise _Refused(f"a list of {len(value)}", f"at most {setting.items:,} strings")
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
