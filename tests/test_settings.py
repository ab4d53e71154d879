"""Settings (SPEC section 10, T3): `max_connections`, declared once, with its bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from clankie.settings import SETTINGS, Settings, SettingsError, load_settings, settings_table


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
    assert load_settings(None, {"CLANKIE_GIT_TIMEOUT": "60", "CLANKIE_QUESTION_TTL": "1e3"}
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
    ("CLANKIE_QUESTION_TLL", "5", "did you mean CLANKIE_QUESTION_TTL?"),
])
def test_t3_a_variable_is_read_as_its_settings_type_and_a_misspelt_one_is_refused(
        variable: str, value: str, said: str):
    with pytest.raises(SettingsError) as err:
        load_settings(None, {variable: value})
    assert said in str(err.value)
    assert load_settings(None, {"CLANKIE_URL": "unix:///x", "CLANKIE_HOME": "/h",
                                "CLANKIE_QUESTION_TTL": "1_000"}).question_ttl == 1000


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
    """The bridge's token never stops a command as an unknown setting would (P2)."""
    got = load_settings(tmp_path, {"CLANKIE_AGENT_TOKEN": "clk_" + "A" * 43})
    assert got == Settings()
    with pytest.raises(SettingsError):  # a misspelt one is still refused
        load_settings(tmp_path, {"CLANKIE_AGENT_TOKN": "x"})
