"""The recipe "Add a setting" (docs/architecture.md), followed once (issue 32, H7).

A throwaway setting is declared the recipe's way, as one field on a subclass of `Settings`,
and everything the recipe says follows without another edit does: its default, the file,
its variable, its bounds and the refusal that names them (SPEC T3), "did you mean" for a
misspelt name in the file, `--help-settings`' table, the unknown-variable warning (issue 31)
and `service_info`'s listing (SPEC section 10), with a command's arguments hidden."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import pytest
from pydantic import Field

from clankie.settings import (
    SECONDS,
    Argv,
    Settings,
    SettingsError,
    Whole,
    settings_table,
    unknown_variables,
)
from tests.world import World


class Trial(Settings):
    """`Settings` and one more setting, as step 1 of the recipe declares it."""

    trial_wait: Annotated[Whole, SECONDS] = Field(
        30, ge=1, le=600, description="Seconds the trial waits.")
    trial_hook: Argv = Field((), max_length=4, description="A command the trial runs.")


def test_issue32_recipe_the_default_the_file_and_the_variable(tmp_path: Path):
    assert Trial().trial_wait == 30 and Trial().trial_hook == ()
    (tmp_path / "settings.toml").write_text('trial_wait = 60\ntrial_hook = ["notify", "x"]\n')
    assert Trial.load(tmp_path, {}).trial_wait == 60
    assert Trial.load(tmp_path, {}).trial_hook == ("notify", "x")
    assert Trial.load(tmp_path, {"CLANKIE_TRIAL_WAIT": "90"}).trial_wait == 90
    assert Trial.load(tmp_path, {"CLANKIE_TRIAL_HOOK": '["a"]'}).trial_hook == ("a",)


def test_t3_issue32_recipe_the_bounds_refuse_naming_the_source_the_unit_and_the_fix(
        tmp_path: Path):
    with pytest.raises(SettingsError) as err:
        Trial.load(None, {"CLANKIE_TRIAL_WAIT": "601"})
    assert str(err.value) == ("setting trial_wait in CLANKIE_TRIAL_WAIT: '601' is not allowed; "
                              "it must be a whole number from 1 to 600 seconds")
    assert err.value.fix == "correct trial_wait in CLANKIE_TRIAL_WAIT"
    (tmp_path / "settings.toml").write_text('trial_wait = "60"\n')
    with pytest.raises(SettingsError, match=r"setting trial_wait in .*settings.toml: '60' is not "
                                            r"allowed; it must be a whole number from 1 to 600"):
        Trial.load(tmp_path, {})
    (tmp_path / "settings.toml").write_text('trial_hook = ["a", "b", "c", "d", "e"]\n')
    with pytest.raises(SettingsError, match="'a list of 5' is not allowed; it must be at most "
                                            "4 strings"):
        Trial.load(tmp_path, {})
    (tmp_path / "settings.toml").write_text("trial_wiat = 60\n")
    with pytest.raises(SettingsError, match=r"unknown setting 'trial_wiat' \(did you mean "
                                            r"trial_wait\?\)"):
        Trial.load(tmp_path, {})


def test_issue32_recipe_the_help_table_and_the_unknown_variable_warning():
    row = next(line for line in settings_table(Trial).splitlines()
               if line.startswith("trial_wait "))
    assert row.split() == ["trial_wait", "30", "1..600", "seconds", "Seconds", "the", "trial",
                           "waits."]
    assert "trial_wait" not in settings_table()  # `Settings` itself is unchanged
    environ = {"CLANKIE_TRIAL_WAIT": "5"}
    assert unknown_variables(environ, Trial) == []
    assert unknown_variables(environ) == ["CLANKIE_TRIAL_WAIT is not a setting; ignored"]


def test_issue32_recipe_service_info_lists_it_and_hides_a_commands_arguments(tmp_path: Path):
    world = World.create(tmp_path, Trial(trial_hook=("curl", "-H", "Authorization: secret")))
    try:
        listed = world.call("service_info")["settings"]
    finally:
        world.close()
    assert listed["trial_wait"] == 30
    assert listed["trial_hook"] == ["curl", "***", "***"]
