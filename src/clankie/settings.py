"""Settings, declared once (one pydantic-settings class); read from settings.toml and variables.

Owns `Settings` (each field: its type, default, bounds, unit and help), the types a setting
is declared with (`Whole`, `Number`, `Flag`, `Text`, `Strings`, `Argv`, `Origin`,
`Endpoint`, a `Literal` of strings; `Unit` and `Shown` are their metadata), the table
`SETTINGS` derived from the fields, and `load_settings`. `$CLANKIE_HOME/settings.toml` sets
values, and `CLANKIE_<NAME>` environment variables override it. Every value is checked by
pydantic itself, strictly (T3): its strict types and their bounds, never a conversion by
hand. A TOML value must have its own type (a number, not "86400"); a variable's text is
read as its setting's type by the variable source (`_Variables`), once, by the type: a
whole number is ASCII digits (not "5_0", "1e3" or " 5"), a number a decimal, a flag
true/false/1/0, a list a JSON array. A refusal (`SettingsError`) says the source (the file
or the variable), the setting, the value, what it may be (bounds and unit) and the fix; an
unknown name in the file is refused with the nearest one. An unknown `CLANKIE_` variable (a
typo, or another program's own) changes nothing: `unknown_variables` says it, with the
nearest name, for the command to warn about (issue 31).
"""

from __future__ import annotations

import difflib
import functools
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Final, Literal, Self, TypeVar, get_args, get_origin

from annotated_types import Ge, Le, MaxLen
from pydantic import AfterValidator, AllowInfNan, Field, Strict, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from clankie.home import NOT_SETTINGS
from clankie.workspace.deny import DEFAULT_DENY

YEAR_S = 31_536_000
PREFIX: Final = "CLANKIE_"
HIDDEN_ARGUMENT: Final = "***"

# A setting's value, and the value `service_info` shows for it (JSON: lists for lists).
Value = int | float | bool | str | tuple[str, ...]
ShownValue = int | float | bool | str | list[str]


class Unit:
    """Metadata of a number type: what it counts, said with its bounds. (Plain classes,
    these two: a dataclass's generated methods would cost `serve`'s start-up more.)"""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class Shown:
    """Metadata of a type: how `service_info` shows its value; `how=None`, never (a value
    that could carry a secret)."""

    __slots__ = ("how",)

    def __init__(self, how: Callable[[Value], ShownValue] | None) -> None:
        self.how = how


SECONDS: Final = Unit("seconds")
BYTES: Final = Unit("bytes")
TOKENS: Final = Unit("tokens")
_TEXT_CHARS: Final = 2_000  # any text
_TEXT_SAID: Final = f"text of at most {_TEXT_CHARS:,} characters"
_ORIGIN: Final = re.compile(r"https?://[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252})(?::[0-9]{1,5})?")


def _no_nul(text: str) -> str:
    if "\x00" in text:
        raise ValueError(_TEXT_SAID)
    return text


def _origin(text: str) -> str:
    """An origin, in lower case; one slash after it (as an address bar shows it) is
    dropped, any other path refused."""
    origin = text.lower().removesuffix("/") if text.count("/") == 3 else text.lower()
    if origin and not _ORIGIN.fullmatch(origin):
        raise ValueError("an origin: http:// or https://, a host name and an optional port, "
                         "with no path (for example https://laptop.tailnet-name.ts.net)")
    return origin


def _program_only(argv: Value) -> ShownValue:
    """A command as shown: the program, each argument (a webhook URL, a header with a token
    in it) as "***"."""
    assert isinstance(argv, tuple)
    return [*argv[:1], *[HIDDEN_ARGUMENT] * len(argv[1:])]


# The types a setting is declared with: pydantic's strict types (no int from "5" or 5.0, no
# bool from 1, no float from nan or inf), with the bounds each field adds.
Whole = Annotated[int, Strict()]
Number = Annotated[float, Strict(), AllowInfNan(False)]  # an int is a number too
Flag = Annotated[bool, Strict()]
Seconds = Annotated[Whole, SECONDS]
Bytes = Annotated[Whole, BYTES]
Tokens = Annotated[Whole, TOKENS]
Text = Annotated[str, Strict(), MaxLen(_TEXT_CHARS), AfterValidator(_no_nul)]
# A list of texts: a TOML array, or in a variable a JSON array (a tuple once read).
Strings = Annotated[tuple[Text, ...], Strict(False)]
# A command: program and arguments, no shell; `service_info` shows the program only.
Argv = Annotated[Strings, Shown(_program_only)]
# An address that may hold a key (a user, a path, a query): `service_info` never shows it.
Endpoint = Annotated[Text, Shown(None)]
# The scheme and host (and port) a browser sends as `Origin`; empty: none given. Text, so
# at most 2,000 characters; the origin's own pattern keeps it under 270.
Origin = Annotated[Text, AfterValidator(_origin)]


class Settings(BaseSettings):
    """Every setting, with its type, default, bounds and help: the one place a setting is
    declared. `Settings()` is the defaults (it reads no file and no variable);
    `Settings.load` (`load_settings`) reads."""

    # strict: a field of a bare type is strict too.
    model_config = SettingsConfigDict(frozen=True, extra="forbid", strict=True,
                                      env_prefix=PREFIX)

    question_ttl: Seconds = Field(
        86_400, ge=1, le=YEAR_S, description="Seconds a question stays pending before it expires.")
    receipt_limit: Whole = Field(16, ge=1, le=10_000,
                                 description="Receipts of ended questions kept per conversation.")
    event_retention: Whole = Field(2_000, ge=1, le=1_000_000,
                                   description="Newest events kept per conversation.")
    take_control_ttl: Seconds = Field(
        3_600, ge=1, le=YEAR_S, description="Default seconds of a Take Control lease.")
    git_timeout: Annotated[Number, SECONDS] = Field(
        2.0, ge=0.1, le=60, description="Seconds the project-membership fact may take to read "
                                        "a project's Git worktrees (SPEC M3).")
    max_steps: Whole = Field(24, ge=1, le=1_000, description="Model calls a run may make.")
    run_tool_budget: Bytes = Field(
        262_144, ge=1_024, le=64 * 1024 * 1024,
        description="Bytes of tool results a run may receive in all.")
    workspace_deny: Strings = Field(
        DEFAULT_DENY, max_length=1_000,
        description="Glob patterns of secret paths the tools never read (a list; in the "
                    "environment a JSON array).")
    notify_command: Argv = Field(
        (), max_length=256,
        description="A command (a list: program and arguments, no shell) run on each new "
                    "question, with the question as JSON on standard input.")
    notify_on_resolved: Flag = Field(False,
                                     description="Also run notify_command when a question ends.")
    model: Literal["scripted", "openai", "anthropic"] = Field(
        "scripted", description="The model provider: scripted, openai or anthropic.")
    openai_base_url: Endpoint = Field(
        "", description="OpenAI-compatible endpoint (empty: the SDK's default).")
    openai_model: Text = Field("gpt-4o-mini", description="Model name for the openai provider.")
    anthropic_base_url: Endpoint = Field(
        "", description="Anthropic endpoint (empty: the SDK's default).")
    anthropic_model: Text = Field("claude-sonnet-4-5",
                                  description="Model name for the anthropic provider.")
    model_timeout: Seconds = Field(
        120, ge=1, le=3_600, description="Seconds one model call may wait for its reply.")
    model_retries: Whole = Field(4, ge=0, le=20,
                                 description="Times a model call that failed transiently (429, "
                                             "5xx, a dropped connection, a timeout) is tried "
                                             "again.")
    model_retry_wait: Seconds = Field(
        90, ge=1, le=3_600,
        description="Seconds a model call may wait between its tries, in all.")
    model_stream: Literal["auto", "on", "off"] = Field(
        "auto", description="Whether model calls stream (SPEC D18): auto (stream, and fall "
                            "back for good if the endpoint refuses), on or off.")
    stream_interval: Annotated[Number, SECONDS] = Field(
        0.1, ge=0.02, le=1.0,
        description="Seconds between two publishes of a reply being written (SPEC D3).")
    model_stall_timeout: Seconds = Field(
        60, ge=5, le=600,
        description="Seconds a streamed reply may be silent after its first content.")
    model_stream_limit: Seconds = Field(
        1_200, ge=60, le=7_200,
        description="Seconds a streamed model call may take from request to end, in all.")
    stream_checkpoint: Annotated[Number, SECONDS] = Field(
        2.0, ge=0.5, le=60.0,
        description="Seconds between two checkpoints of a reply being written, kept "
                    "across a kill (SPEC D9).")
    context_budget: Tokens = Field(
        100_000, ge=4_000, le=10_000_000,
        description="Tokens a model request may hold (estimated on the safe side); the oldest "
                    "history is left out first, and the model is told.")
    web_origin: Origin = Field(
        "", description="The one origin the phone page (serve --web) is used from, scheme and "
                        "host only, for example https://laptop.tailnet-name.ts.net; empty: the "
                        "--web listener's own address.")
    # A ceiling for a local service. Each connection is a file descriptor, and the process's
    # own limit (often 1,024 soft) still applies; the default fits it with both listeners.
    max_connections: Whole = Field(256, ge=1, le=4_096,
                                   description="Connections served at once on each listener "
                                               "(the Unix socket, the TCP port); past it a new "
                                               "connection is closed at once.")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)  # the file and the variables only through `load`

    @classmethod
    def load(cls, home: Path | None, environ: Mapping[str, str] | None = None,
             flags: Mapping[str, str] | None = None) -> Self:
        """The settings: `settings.toml` in the home, then `CLANKIE_<NAME>` variables over
        it, then `flags` (a command's options, `--NAME`, by setting name) over those. A
        value of the wrong type, out of bounds or of an unknown name in the file is a
        `SettingsError` that says where it came from (the file, the variable or the flag),
        what it may be, and how to fix it; an unknown variable is left out (see
        `unknown_variables`)."""
        variables = _Variables(cls, os.environ if environ is None else environ, flags or {})
        path = home / "settings.toml" if home is not None else None
        sources: list[PydanticBaseSettingsSource] = []
        if path is not None and path.exists():
            try:
                sources.append(TomlConfigSettingsSource(cls, toml_file=path))
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise SettingsError(f"{path}: {exc}", f"correct {path}") from None
            _built(cls, sources, path, None)  # the file is checked whole, even where a
            # variable overrides it; so what the variables' build refuses is a variable's
        return _built(cls, [variables, *sources], path, variables)


load_settings: Final = Settings.load


@dataclass(frozen=True, slots=True)
class Setting:
    """One field of `Settings` as the refusals, `--help-settings` and `service_info` read it
    (`declared`): all of it from the field's type and `Field`."""

    name: str
    default: Value
    help: str
    kind: type  # int, float, bool, str or tuple (of strings); a Literal is a str
    bounds: tuple[float, float] | None = None  # numbers: inclusive, and always finite
    choices: tuple[str, ...] | None = None  # a Literal: one of these
    items: int | None = None  # lists: at most this many strings
    chars: int | None = None  # texts: at most this many characters
    unit: str = ""  # what a number counts, said with its bounds
    show: Callable[[Value], ShownValue] | None = None  # None: never shown


_KINDS: Final[dict[object, type]] = {k: k for k in (int, float, bool, str, tuple)}


def _as_json(value: Value) -> ShownValue:
    return list(value) if isinstance(value, tuple) else value


def _setting(name: str, field: FieldInfo) -> Setting:
    annotation = field.annotation
    origin = get_origin(annotation) or annotation
    choices = get_args(annotation) if origin is Literal else None
    kind = str if choices is not None else _KINDS.get(origin)
    if kind is None:  # a type no source reads, nor the table or a refusal says
        raise TypeError(f"setting {name}: declare it with a type of clankie.settings")
    meta = field.metadata
    low = next((m.ge for m in meta if isinstance(m, Ge)), None)
    high = next((m.le for m in meta if isinstance(m, Le)), None)
    assert isinstance(low, int | float | None) and isinstance(high, int | float | None)
    length = next((m.max_length for m in meta if isinstance(m, MaxLen)), None)
    if (kind in (int, float) and (low is None or high is None)) or (
            kind is tuple and length is None):  # T3: every setting has bounds
        raise TypeError(f"setting {name}: declare its bounds (ge and le for a number, "
                        "max_length for a list)")
    show = next((m.how for m in meta if isinstance(m, Shown)), _as_json)
    return Setting(name, field.default, field.description or "", kind,
                   bounds=None if low is None or high is None else (float(low), float(high)),
                   choices=choices, items=length if kind is tuple else None,
                   chars=length if kind is str and choices is None else None,
                   unit=next((m.name for m in meta if isinstance(m, Unit)), ""), show=show)


@functools.cache
def declared(settings_cls: type[Settings] = Settings) -> tuple[Setting, ...]:
    """Each field of `settings_cls` (`Settings`, or a subclass that adds some) as a
    `Setting`, in declaration order."""
    return tuple(_setting(name, field) for name, field in settings_cls.model_fields.items())


SETTINGS: Final[tuple[Setting, ...]] = declared(Settings)


class SettingsError(Exception):
    """A settings file or variable that cannot be used; `fix` says what to do."""

    def __init__(self, message: str, fix: str) -> None:
        super().__init__(message)
        self.fix = fix


def _unknown(environ: Mapping[str, str], names: set[str]) -> list[str]:
    return [v for v in environ if v.startswith(PREFIX) and v not in NOT_SETTINGS
            and v.removeprefix(PREFIX).lower() not in names]


def unknown_variables(environ: Mapping[str, str] | None = None,
                      settings_cls: type[Settings] = Settings) -> list[str]:
    """One sentence for each `CLANKIE_` variable of `environ` that is neither a setting nor
    one clankie reads otherwise, with the nearest name it could be; such a variable changes
    nothing (`load_settings` leaves it out), so the command warns and goes on."""
    settings = [s.name for s in declared(settings_cls)]
    names = [s.upper() for s in settings] + [v.removeprefix(PREFIX) for v in sorted(NOT_SETTINGS)]
    said = []
    for variable in sorted(_unknown(os.environ if environ is None else environ, set(settings))):
        close = difflib.get_close_matches(variable.removeprefix(PREFIX), names, n=1)
        hint = f" (did you mean {PREFIX}{close[0]}?)" if close else ""
        said.append(f"{variable} is not a setting{hint}; ignored")
    return said


# A variable's text as its setting's type, by the type (`Setting.kind`); text that is no
# such value is passed on as it is, for the strict type to refuse it, said as it was given.
_DECIMAL: Final = frozenset("0123456789+-.eE")
_FLAGS: Final = {"true": True, "1": True, "false": False, "0": False}


def _whole(text: str) -> int | str:
    """ASCII digits, after an optional sign."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if digits.isascii() and digits.isdigit():
        try:
            return int(text)
        except ValueError:  # past Python's 4,300 digits: no setting's bounds come near
            pass
    return text


def _decimal(text: str) -> float | str:
    """A decimal, with an optional exponent: what `float` reads of ASCII digits, sign, point
    and exponent (no "_", no space, no "inf" or "nan"); 1e999 is read as inf, and refused."""
    if text and set(text) <= _DECIMAL:
        try:
            return float(text)
        except ValueError:
            pass
    return text


def _flag(text: str) -> bool | str:
    return _FLAGS.get(text.lower(), text)


def _json_array(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


_FROM_TEXT: Final[dict[type, Callable[[str], object]]] = {
    int: _whole, float: _decimal, bool: _flag, tuple: _json_array}


class _Variables(PydanticBaseSettingsSource):
    """The `CLANKIE_<NAME>` variables of `environ` that name a setting (the others are
    `unknown_variables`'), and over them a command's `flags`, each one's text read as its
    setting's type; `texts` keeps what was given, and `flags` which came from a flag, to
    say it in a refusal."""

    def __init__(self, settings_cls: type[Settings], environ: Mapping[str, str],
                 flags: Mapping[str, str]) -> None:
        super().__init__(settings_cls)
        kinds = {s.name: s.kind for s in declared(settings_cls)}
        self.flags = {name for name in flags if name in kinds}
        self.texts: dict[str, str] = {
            name: text for variable, text in environ.items()
            if variable.startswith(PREFIX) and variable not in NOT_SETTINGS
            and (name := variable.removeprefix(PREFIX).lower()) in kinds} | {
            name: flags[name] for name in self.flags}
        self._values: dict[str, object] = {
            name: _FROM_TEXT.get(kinds[name], str)(text) for name, text in self.texts.items()}

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[object, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, object]:
        return dict(self._values)


_S = TypeVar("_S", bound=Settings)


def _built(settings_cls: type[_S], sources: list[PydanticBaseSettingsSource],
           path: Path | None, variables: _Variables | None) -> _S:
    try:
        return settings_cls(_build_sources=(tuple(sources), {}))
    except ValidationError as exc:
        raise _refusal(settings_cls, exc.errors()[0], path, variables) from None


def _refusal(settings_cls: type[Settings], error: ErrorDetails, path: Path | None,
             variables: _Variables | None) -> SettingsError:
    """The first thing pydantic refused, as the owner reads it: where, which setting, the
    value, what it may be; and the fix."""
    name = str(error["loc"][0])
    if error["type"] == "extra_forbidden":
        near = difflib.get_close_matches(name, [s.name for s in declared(settings_cls)], n=1)
        return SettingsError(f"{path}: unknown setting {name!r}"
                             f"{f' (did you mean {near[0]}?)' if near else ''}",
                             f"correct or remove it in {path}; "
                             "`clankie serve --help-settings` lists them")
    setting = next(s for s in declared(settings_cls) if s.name == name)
    text = variables.texts.get(name) if variables is not None else None
    flag = f"--{name.replace('_', '-')}"
    where = (f"given by {flag}" if variables is not None and name in variables.flags
             else f"in {PREFIX}{name.upper()}" if text is not None else f"in {path}")
    fix = f"correct {flag}" if where.startswith("given") else f"correct {name} {where}"
    given: object = text if text is not None else error["input"]
    if setting.kind is tuple:
        if error["type"] != "too_long" or len(error["loc"]) > 1:
            example = ("a JSON array" if text is not None
                       else "a TOML array of strings") + ', e.g. ["sh", "-c", "..."]'
            return SettingsError(f"setting {name} {where}: give {example}", fix)
        given = f"a list of {error.get('ctx', {}).get('actual_length')}"
    said = repr(given) if len(repr(given)) <= 80 else repr(given)[:77] + "..."
    said = str(given).lower() if isinstance(given, bool) else said
    return SettingsError(f"setting {name} {where}: {said} is not allowed; it must be "
                         f"{_wanted(setting, error)}", fix)


def _wanted(setting: Setting, error: ErrorDetails) -> str:
    """What a value of the setting must be: a type's own sentence (its validator's), else
    said from the declaration."""
    if error["type"] == "value_error":
        return str(error.get("ctx", {}).get("error"))
    if setting.kind is tuple:
        return f"at most {setting.items:,} strings"
    if setting.kind is bool:
        return "true or false"
    if setting.choices is not None:
        return f"one of {', '.join(setting.choices)}"
    if setting.kind is str:
        return f"text of at most {setting.chars:,} characters"
    assert setting.bounds is not None  # a number without bounds is refused where declared
    low, high = setting.bounds
    what = "a whole number" if setting.kind is int else "a number"
    return f"{what} from {_plain(low)} to {_plain(high)}{_unit(setting)}"


def shown(settings: Settings) -> dict[str, ShownValue]:
    """The settings as `service_info` reports them: every declared setting (of the instance's
    class) as its type shows it (`Shown`), but those that could carry a secret."""
    return {s.name: s.show(getattr(settings, s.name))
            for s in declared(type(settings)) if s.show is not None}


def _plain(number: float) -> str:
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


def _unit(setting: Setting) -> str:
    return f" {setting.unit}" if setting.unit else ""


def _shown(value: Value) -> str:
    return json.dumps(list(value)) if isinstance(value, tuple) else str(value)


def _allowed(setting: Setting) -> str:
    if setting.bounds is not None:
        low, high = setting.bounds
        return f"{_plain(low)}..{_plain(high)}{_unit(setting)}"
    if setting.choices is not None:
        return " | ".join(setting.choices)
    if setting.items is not None:
        return f"at most {setting.items:,} strings"
    if setting.kind is bool:
        return "true | false"
    return f"text, at most {setting.chars:,} characters"


def settings_table(settings_cls: type[Settings] = Settings) -> str:
    """The table `clankie serve --help-settings` prints: name, default, what is allowed,
    and what the setting does."""
    table = declared(settings_cls)
    rows = [(s.name, "(list)" if s.kind is tuple else _shown(s.default), _allowed(s), s.help)
            for s in table]
    widths = [max(len(row[i]) for row in [("name", "default", "allowed", ""), *rows])
              for i in range(3)]
    lines = [f"{'name'.ljust(widths[0])}  {'default'.rjust(widths[1])}  "
             f"{'allowed'.ljust(widths[2])}  help"]
    for s, (name, default, allowed, helped) in zip(table, rows, strict=True):
        lines.append(f"{name.ljust(widths[0])}  {default.rjust(widths[1])}  "
                     f"{allowed.ljust(widths[2])}  {helped}")
        if s.kind is tuple:  # a list is too long for the column: its own line
            lines.append(f"{''.ljust(sum(widths) + 6)}default: {_shown(s.default)}")
    return "\n".join(lines)
