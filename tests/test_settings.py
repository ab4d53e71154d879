"""Settings (SPEC section 10, T3): `max_connections`, declared once, with its bounds."""

from __future__ import annotations

from pathlib import Path

import pytest

from clankie.settings import Settings, SettingsError, load_settings, settings_table


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
