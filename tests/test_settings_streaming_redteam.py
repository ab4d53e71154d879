"""Red team of SPEC D19's settings: every value outside a streaming setting's bounds or
type, from the environment or `settings.toml`, is refused; the bounds themselves load."""

from __future__ import annotations

from pathlib import Path

import pytest

from clankie.settings import Settings, SettingsError

BAD = {
    "model_stream": ["ON", "On", "true", "1", "", " auto", "auto ", "stream", "none"],
    "stream_interval": ["0.019", "1.01", "0", "-0.1", "nan", "inf", "-inf", "1e9", "0,1",
                        "", "0.1s", "1/10"],
    "model_stall_timeout": ["4", "601", "4.99", "nan", "inf", "-5", "", "60s", "1e3"],
    "model_stream_limit": ["59", "7201", "nan", "inf", "", "0", "1e4"],
    "stream_checkpoint": ["0.49", "60.01", "0", "nan", "inf", "", "-1"],
}
GOOD = {"model_stream": ["auto", "on", "off"], "stream_interval": ["0.02", "1", "1.0"],
        "model_stall_timeout": ["5", "600"], "model_stream_limit": ["60", "7200"],
        "stream_checkpoint": ["0.5", "60"]}


@pytest.mark.parametrize("name, value", [(n, v) for n, vs in BAD.items() for v in vs])
def test_d19_a_streaming_setting_out_of_bounds_is_refused_from_the_environment(
        name: str, value: str):
    with pytest.raises(SettingsError):
        Settings.load(None, {f"CLANKIE_{name.upper()}": value})


@pytest.mark.parametrize("name, value", [(n, v) for n, vs in BAD.items() for v in vs
                                         if v not in ("", "nan", "inf", "-inf")])
def test_d19_a_streaming_setting_out_of_bounds_is_refused_from_the_file(
        tmp_path: Path, name: str, value: str):
    numeric = name != "model_stream" and value.lstrip("-").replace(".", "", 1).replace(
        "e", "", 1).isdigit()
    line = f"{name} = {value}" if numeric else f'{name} = "{value}"'
    (tmp_path / "settings.toml").write_text(line + "\n")
    with pytest.raises(SettingsError):
        Settings.load(tmp_path, {})


@pytest.mark.parametrize("name, value", [(n, v) for n, vs in GOOD.items() for v in vs])
def test_d19_a_streaming_setting_at_its_bounds_loads(name: str, value: str):
    loaded = Settings.load(None, {f"CLANKIE_{name.upper()}": value})
    assert getattr(loaded, name) == (value if name == "model_stream" else float(value))
