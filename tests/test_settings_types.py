"""Settings checked by pydantic's own strict types and bounds (SPEC T3; issue 32, H7).

Issue 32: a `"*"` before-validator converted every value by hand, so pydantic's bounds never
refused anything, `web_origin` and `notify_command` were special-cased by name, and a
variable's text went through Python's `int()`: `CLANKIE_QUESTION_TTL=5_0`, `1e3` or ` 5`
were accepted. Now each field's type is strict and bounded, the variable source reads the
text by the type, and a refusal still names the source, the setting, the value, the bounds
with their unit, and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field, ValidationError

from clankie.settings import (
    SETTINGS,
    Argv,
    Origin,
    Settings,
    SettingsError,
    Whole,
    declared,
    load_settings,
    shown,
)

WHOLE = "it must be a whole number from 1 to 31,536,000 seconds"


@pytest.mark.parametrize("text", ["5_0", "1e3", " 5", "5 ", "1.0", "0x10", "5\n", "٥",
                                  "1" * 5_000, "+", ""])
def test_t3_issue32_a_whole_number_variable_is_ascii_digits_only(text: str):
    """T3 "of the wrong type": Python's `int()` leniency (underscores, exponents, spaces,
    other scripts' digits) is refused, said as it was given, with the bounds and unit."""
    with pytest.raises(SettingsError) as err:
        load_settings(None, {"CLANKIE_QUESTION_TTL": text})
    shown_text = repr(text) if len(repr(text)) <= 80 else repr(text)[:77] + "..."
    assert str(err.value) == (f"setting question_ttl in CLANKIE_QUESTION_TTL: {shown_text} is "
                              f"not allowed; {WHOLE}")
    assert err.value.fix == "correct question_ttl in CLANKIE_QUESTION_TTL"


@pytest.mark.parametrize("text,value", [("50", 50), ("+5", 5), ("007", 7),
                                        ("31536000", 31_536_000)])
def test_t3_issue32_a_whole_number_variable_in_digits_is_read(text: str, value: int):
    assert load_settings(None, {"CLANKIE_QUESTION_TTL": text}).question_ttl == value


@pytest.mark.parametrize("text", ["1_0", " 1", "1 ", "inf", "-inf", "nan", "1e999", "0x1",
                                  "1,5", ""])
def test_t3_issue32_a_number_variable_is_a_finite_decimal(text: str):
    with pytest.raises(SettingsError) as err:
        load_settings(None, {"CLANKIE_GIT_TIMEOUT": text})
    assert str(err.value) == (f"setting git_timeout in CLANKIE_GIT_TIMEOUT: {text!r} is not "
                              "allowed; it must be a number from 0.1 to 60 seconds")


@pytest.mark.parametrize("text,value", [("60", 60.0), ("0.5", 0.5), (".5", 0.5), ("5.", 5.0),
                                        ("1e1", 10.0), ("1E-1", 0.1)])
def test_t3_issue32_a_number_variable_in_decimal_is_read(text: str, value: float):
    assert load_settings(None, {"CLANKIE_GIT_TIMEOUT": text}).git_timeout == value


@pytest.mark.parametrize("text,value", [("true", True), ("TRUE", True), ("1", True),
                                        ("false", False), ("False", False), ("0", False)])
def test_t3_issue32_a_flag_variable_is_true_false_1_or_0(text: str, value: bool):
    assert load_settings(None, {"CLANKIE_NOTIFY_ON_RESOLVED": text}).notify_on_resolved is value
    with pytest.raises(SettingsError, match="' true' is not allowed; it must be true or false"):
        load_settings(None, {"CLANKIE_NOTIFY_ON_RESOLVED": " true"})


def test_t3_issue32_a_list_variable_nested_past_pythons_depth_is_refused_not_a_traceback():
    with pytest.raises(SettingsError, match="give a JSON array"):
        load_settings(None, {"CLANKIE_NOTIFY_COMMAND": "[" * 100_000})


@pytest.mark.parametrize("text,said", [
    ("max_steps = 2.0", "2.0 is not allowed; it must be a whole number from 1 to 1,000"),
    ("notify_on_resolved = 1", "1 is not allowed; it must be true or false"),
    ("git_timeout = 1e400", "inf is not allowed; it must be a number from 0.1 to 60 seconds"),
    ("openai_model = 5", "5 is not allowed; it must be text of at most 2,000 characters"),
])
def test_t3_issue32_a_file_value_must_have_the_settings_own_type(tmp_path: Path, text: str,
                                                                   said: str):
    """A TOML value has its own type: a float is no whole number, even 2.0."""
    (tmp_path / "settings.toml").write_text(text + "\n")
    with pytest.raises(SettingsError) as err:
        load_settings(tmp_path, {})
    name = text.split(" ")[0]
    assert str(err.value) == f"setting {name} in {tmp_path / 'settings.toml'}: {said}"


def test_t3_issue32_a_file_value_in_tomls_own_syntax_is_read(tmp_path: Path):
    """TOML's integers may have underscores and a sign, and an integer is a number."""
    (tmp_path / "settings.toml").write_text("question_ttl = 86_400\nmax_steps = +5\n"
                                            "git_timeout = 2\n")
    settings = load_settings(tmp_path, {})
    assert (settings.question_ttl, settings.max_steps, settings.git_timeout) == (86_400, 5, 2.0)
    assert isinstance(settings.git_timeout, float)


@pytest.mark.parametrize("values", [
    {"question_ttl": 0}, {"question_ttl": 31_536_001},
    {"question_ttl": "60"}, {"question_ttl": 60.0}, {"max_steps": True},
    {"git_timeout": float("nan")}, {"git_timeout": float("inf")}, {"git_timeout": 0.01},
    {"notify_on_resolved": 1}, {"model": "gpt-5"}, {"notify_command": ("a", 1)},
    {"workspace_deny": ("x",) * 1_001}, {"openai_model": "a\x00b"},
    {"web_origin": "https://host/path"}, {"openai_base_url": "x" * 2_001},
])
def test_issue32_pydantics_own_types_and_bounds_refuse_a_bad_value_however_it_is_given(
        values: dict[str, object]):
    """Issue 32: the bounds are pydantic's own, so a `Settings` built in code is held to
    them as a file or a variable is (before, a hand conversion came first and pydantic
    refused nothing)."""
    with pytest.raises(ValidationError):
        Settings(**values)  # type: ignore[arg-type]


def test_issue32_every_setting_is_strict_and_bounded_by_its_declaration():
    """T3: a number has inclusive bounds, a list a length, a text a length; every field is
    of a type the variable source reads (a bare `dict` would be refused at import)."""
    for setting in SETTINGS:
        assert setting.kind in (int, float, bool, str, tuple), setting.name
        if setting.kind in (int, float):
            assert setting.bounds is not None, setting.name
        if setting.kind is tuple:
            assert setting.items is not None, setting.name
        if setting.kind is str and setting.choices is None:
            assert setting.chars is not None, setting.name
    assert Settings.model_config.get("strict") is True


def test_issue32_a_setting_of_a_type_no_source_reads_is_refused_where_it_is_declared():
    class Odd(Settings):
        odd: dict[str, int] = Field({}, description="A table.")

    with pytest.raises(TypeError, match="setting odd: declare it with a type of clankie"):
        declared(Odd)


def test_h1_issue32_an_origin_and_a_command_behave_by_their_type_not_by_their_name(
        tmp_path: Path):
    """Issue 32: no setting is special-cased by name. Another field of type `Origin` is
    normalised and refused like `web_origin`, another `Argv` shown with its arguments
    hidden like `notify_command` (`service_info`, SPEC section 10: no secrets)."""

    class Two(Settings):
        mirror_origin: Origin = Field("", description="Another origin.")
        on_start: Argv = Field((), max_length=8, description="Another command.")

    (tmp_path / "settings.toml").write_text('mirror_origin = "HTTPS://Laptop.ts.net/"\n'
                                            'on_start = ["curl", "-H", "token: x"]\n')
    two = Two.load(tmp_path, {})
    assert two.mirror_origin == "https://laptop.ts.net"
    assert shown(two)["on_start"] == ["curl", "***", "***"]
    with pytest.raises(SettingsError, match=r"setting mirror_origin in CLANKIE_MIRROR_ORIGIN: "
                                            r"'ftp://x' is not allowed; it must be an origin"):
        Two.load(None, {"CLANKIE_MIRROR_ORIGIN": "ftp://x"})


@pytest.mark.parametrize("annotation,field", [
    (Whole, Field(3, ge=1)), (float, Field(1.0, le=9)), (Argv, Field(()))])
def test_t3_issue32_a_setting_without_its_bounds_is_refused_where_it_is_declared(
        annotation: object, field: object):
    """T3: "every setting has bounds in its declaration", held when the class is read."""
    unbounded = type("Unbounded", (Settings,), {"__annotations__": {"loose": annotation},
                                                "loose": field, "__module__": __name__})
    with pytest.raises(TypeError, match="setting loose: declare its bounds"):
        declared(unbounded)


def test_issue32_a_later_field_of_a_bare_type_is_strict_too():
    class Bare(Settings):
        bare: Annotated[int, Field(ge=1, le=9)] = 3

    assert Bare.load(None, {"CLANKIE_BARE": "4"}).bare == 4
    with pytest.raises(SettingsError, match=r"'4\.0' is not allowed; it must be a whole "
                                            r"number from 1 to 9"):
        Bare.load(None, {"CLANKIE_BARE": "4.0"})
    with pytest.raises(ValidationError):
        Bare(bare="4")  # type: ignore[arg-type]

