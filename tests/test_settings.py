"""Settings (SPEC section 10, T3): `max_connections`, declared once, with its bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from clankie.settings import (
    NOT_SETTINGS,
    SETTINGS,
    Settings,
    SettingsError,
    load_settings,
    settings_table,
    unknown_variables,
)


def test_v5_max_connections_defaults_to_256_and_is_read_from_file_and_environment(
        tmp_path: Path):
    assert Settings().max_connections == 256
    assert load_settings(tmp_path, {}).max_connections == 256
    (tmp_path / "settings.toml").write_text("max_connections = 64\n")
    assert load_settings(tmp_path, {}).max_connections == 64
    assert load_settings(tmp_path, {"CLANKIE_MAX_CONNECTIONS": "8"}).max_connections == 8
    assert "max_connections" in settings_table()


@pytest.mark.parametrize("value", ["0", "-1", "100000", "1.5", "many"])
def test_v5_max_connections_out_of_bounds_is_refused_naming_the_setting(
        tmp_path: Path, value: str):
    with pytest.raises(SettingsError) as err:
        load_settings(tmp_path, {"CLANKIE_MAX_CONNECTIONS": value})
    assert "max_connections" in str(err.value) and value in str(err.value)


HOSTILE = [
    ("question_ttl", "1e20"), ("question_ttl", "0"), ("question_ttl", "-5"),
    ("question_ttl", "inf"), ("question_ttl", "nan"), ("question_ttl", "1.5"),
    ("question_ttl", "true"), ("git_timeout", "inf"), ("git_timeout", "nan"),
    ("git_timeout", "0.01"), ("git_timeout", "61"), ("git_timeout", "-inf"),
    ("receipt_limit", "1e300"), ("event_retention", "99999999999999999999"),
    ("take_control_ttl", "[]"), ("max_steps", "0"), ("run_tool_budget", "12"),
    ("model", "gpt-5"), ("openai_base_url", "x" * 3_000),
    ("notify_command", '"touch /tmp/x"'), ("notify_command", "[1, 2]"),
    ("workspace_deny", "[" + ", ".join('".env"' for _ in range(2_000)) + "]"),
    ("notify_on_resolved", "maybe"),
]


@pytest.mark.parametrize("name,value", HOSTILE, ids=[f"{n}={v[:24]}" for n, v in HOSTILE])
def test_t3_a_hostile_setting_is_refused_naming_the_setting(tmp_path: Path, name: str,
                                                             value: str):
    with pytest.raises(SettingsError) as env_err:
        load_settings(tmp_path, {f"CLANKIE_{name.upper()}": value})
    said = str(env_err.value)
    assert said.startswith(f"setting {name} in CLANKIE_{name.upper()}:"), said
    assert value[:20] in said or "a list of" in said or "give a JSON array" in said
    assert env_err.value.fix.startswith(f"correct {name} in CLANKIE_{name.upper()}")


@pytest.mark.parametrize("text", ["question_ttl = 1e20", "git_timeout = inf",
                                  "git_timeout = nan", "receipt_limit = 1e300",
                                  "event_retention = 99999999999999999999999",
                                  "max_steps = true", "max_steps = 2.5",
                                  "take_control_ttl = -inf", "unknown_thing = 1"])
def test_t3_a_hostile_settings_file_is_refused_naming_the_setting(tmp_path: Path, text: str):
    (tmp_path / "settings.toml").write_text(text + "\n")
    with pytest.raises(SettingsError) as err:
        load_settings(tmp_path, {})
    assert text.split(" ")[0] in str(err.value)


def test_t3_every_number_setting_declares_its_bounds_and_the_defaults_lie_within():
    for setting in SETTINGS:
        if isinstance(setting.default, int | float) and not isinstance(setting.default, bool):
            assert setting.bounds is not None, setting.name
            low, high = setting.bounds
            assert low <= setting.default <= high, setting.name
    assert load_settings(None, {"CLANKIE_GIT_TIMEOUT": "60", "CLANKIE_QUESTION_TTL": "1000"}
                         ) == Settings(git_timeout=60.0, question_ttl=1000)


@pytest.mark.parametrize("text,said", [
    ("question_ttl = " + "1" * 400, "question_ttl"),
    ('question_ttl = "86400"', "must be a whole number from 1 to 31,536,000 seconds"),
    ('notify_command = "[\\"id\\"]"', "give a TOML array of strings"),
    ("question_ttl = true", "true is not allowed"),
    ("question_tll = 3600", "unknown setting 'question_tll' (did you mean question_ttl?)"),
])
def test_t3_a_settings_file_value_must_have_its_own_type_and_says_where_it_is(
        tmp_path: Path, text: str, said: str):
    (tmp_path / "settings.toml").write_text(text + "\n")
    with pytest.raises(SettingsError) as err:
        load_settings(tmp_path, {})
    assert said in str(err.value) and str(tmp_path / "settings.toml") in str(err.value)
    assert err.value.fix


@pytest.mark.parametrize("variable,value,said", [
    ("CLANKIE_QUESTION_TTL", "١٠", "question_ttl in CLANKIE_QUESTION_TTL"),
    ("CLANKIE_QUESTION_TTL", "1" * 400, "question_ttl in CLANKIE_QUESTION_TTL"),
])
def test_t3_a_variable_is_read_as_its_settings_type_and_a_malformed_one_is_refused(
        variable: str, value: str, said: str):
    with pytest.raises(SettingsError) as err:
        load_settings(None, {variable: value})
    assert said in str(err.value)
    assert load_settings(None, {"CLANKIE_URL": "unix:///x", "CLANKIE_HOME": "/h",
                                "CLANKIE_QUESTION_TTL": "1000"}).question_ttl == 1000


def test_issue20_settings_are_declared_once_the_table_is_read_from_the_class():
    """Issue 20: one pydantic-settings class declares each setting; `SETTINGS` (checks,
    `--help-settings`, `service_info`) is derived from its fields, not restated."""
    assert [s.name for s in SETTINGS] == list(Settings.model_fields)
    for setting in SETTINGS:
        field = Settings.model_fields[setting.name]
        assert setting.default == field.default and setting.help == field.description
        assert setting.help and setting.help in settings_table()
    assert {s.name: s.choices for s in SETTINGS}["model"] == ("scripted", "openai", "anthropic")


def test_issue20_defaults_read_no_variable_and_a_file_value_is_checked_even_when_overridden(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLANKIE_MAX_STEPS", "5")
    assert Settings().max_steps == 24  # only `load_settings` reads the environment
    assert load_settings(None).max_steps == 5
    (tmp_path / "settings.toml").write_text("max_steps = 0\n")
    with pytest.raises(SettingsError) as err:
        load_settings(tmp_path, {"CLANKIE_MAX_STEPS": "3"})
    assert str(tmp_path / "settings.toml") in str(err.value)


@pytest.mark.parametrize("origin", ["https://laptop.tailnet-name.ts.net/",
                                    "HTTPS://Laptop.Tailnet-Name.ts.net"])
def test_h1_web_origin_as_copied_from_an_address_bar_is_the_origin(tmp_path: Path,
                                                                  origin: str):
    """Issue 21's trial: a trailing slash (as an address bar shows it) was `internal error:
    ValidationError` from serve and doctor."""
    (tmp_path / "settings.toml").write_text(f'web_origin = "{origin}"\n')
    assert load_settings(tmp_path, {}).web_origin == "https://laptop.tailnet-name.ts.net"


@pytest.mark.parametrize("origin", ["https://host/path", "ftp://host", "https://", "host"])
def test_h1_a_web_origin_that_is_no_origin_is_refused_naming_the_setting(tmp_path: Path,
                                                                         origin: str):
    with pytest.raises(SettingsError, match=r"setting web_origin in CLANKIE_WEB_ORIGIN: .* "
                                            r"must be an origin"):
        load_settings(tmp_path, {"CLANKIE_WEB_ORIGIN": origin})


def test_h1_web_origin_is_said_as_text_not_as_a_list_in_the_settings_help():
    line = next(line for line in settings_table().splitlines() if "web_origin" in line)
    assert "strings" not in line, line


def test_p2_clankie_agent_token_is_a_variable_clankie_reads_not_a_setting(tmp_path: Path):
    """The bridge's token is never warned about as an unknown name (P2); a misspelt one is,
    with the name it is near."""
    environ = {"CLANKIE_AGENT_TOKEN": "clk_" + "A" * 43}
    assert load_settings(tmp_path, environ) == Settings()
    assert unknown_variables(environ) == []
    assert unknown_variables({"CLANKIE_AGENT_TOKN": "x"}) == [
        "CLANKIE_AGENT_TOKN is not a setting (did you mean CLANKIE_AGENT_TOKEN?); ignored"]


@pytest.mark.parametrize("variable,near", [
    ("CLANKIE_QUESTION_TLL", "CLANKIE_QUESTION_TTL"),
    ("CLANKIE_OPENAI_MODLE", "CLANKIE_OPENAI_MODEL"),
    ("CLANKIE_URL_TRUSTD", "CLANKIE_URL_TRUSTED"),
    ("CLANKIE_BIN", None),
])
def test_t3_issue31_an_unknown_variable_is_warned_about_with_the_nearest_name_and_ignored(
        tmp_path: Path, variable: str, near: str | None):
    """Issue 31: an unknown `CLANKIE_` variable (a typo, or a harness's own `CLANKIE_BIN`)
    no longer stops a command: it is named once, with the nearest name clankie reads, and
    the settings are as if it were not there. A malformed value of a real setting still
    stops (T3, above)."""
    environ = {variable: "5", "CLANKIE_QUESTION_TTL": "60"}
    assert load_settings(tmp_path, environ) == Settings(question_ttl=60)
    hint = f" (did you mean {near}?)" if near else ""
    assert unknown_variables(environ) == [f"{variable} is not a setting{hint}; ignored"]


def test_t3_issue31_the_variables_clankie_reads_that_are_not_settings_are_never_warned_about():
    """CLANKIE_HOME, CLANKIE_URL, CLANKIE_TOKEN, CLANKIE_URL_TRUSTED, CLANKIE_AGENT_TOKEN:
    read by clankie, not settings; nor is a setting's own variable ever unknown."""
    assert {"CLANKIE_HOME", "CLANKIE_URL", "CLANKIE_TOKEN", "CLANKIE_URL_TRUSTED",
            "CLANKIE_AGENT_TOKEN"} <= NOT_SETTINGS
    environ = dict.fromkeys(NOT_SETTINGS, "x") | {
        f"CLANKIE_{s.name.upper()}": "x" for s in SETTINGS} | {"PATH": "/bin", "HOME": "/h"}
    assert unknown_variables(environ) == []


def test_t3_issue31_every_clankie_variable_the_code_reads_is_known():
    """Each `CLANKIE_NAME` the package's source names is a setting or in `NOT_SETTINGS`, so
    a variable clankie reads is never called unknown (grep-like, over src/clankie)."""
    import re

    import clankie

    source = Path(clankie.__file__).parent
    named = {m for f in source.rglob("*.py")
             for m in re.findall(r"(?<![_A-Z])CLANKIE_[A-Z][A-Z_]*[A-Z]", f.read_text())}
    assert named, "no CLANKIE_ names found"
    assert unknown_variables(dict.fromkeys(named, "x")) == []


D19 = {"model_stream": ("auto", ["auto", "on", "off"], ["yes", "true", ""]),
       "stream_interval": (0.1, ["0.02", "1"], ["0.01", "1.5", "nan"]),
       "model_stall_timeout": (60, ["5", "600"], ["4", "601", "inf"]),
       "model_stream_limit": (1_200, ["60", "7200"], ["59", "7201", "-1"]),
       "stream_checkpoint": (2, ["0.5", "60"], ["0.4", "61", "1e9"])}


@pytest.mark.parametrize("name", sorted(D19))
def test_d19_streaming_settings_have_their_defaults_and_bounds_and_are_listed(
        tmp_path: Path, name: str):
    """D19: each setting of replies that stream, its default, its bounds at both ends (and
    a value past each refused naming it), listed by `serve --help-settings`."""
    default, allowed, refused = D19[name]
    assert getattr(Settings(), name) == default
    for value in allowed:
        got = getattr(load_settings(tmp_path, {f"CLANKIE_{name.upper()}": value}), name)
        assert str(got) == value or float(got) == float(value)
    for value in refused:
        with pytest.raises(SettingsError, match=name):
            load_settings(tmp_path, {f"CLANKIE_{name.upper()}": value})
    assert any(line.startswith(name + " ") for line in settings_table().splitlines())
