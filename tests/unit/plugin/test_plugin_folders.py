"""An operator's plugin folder (MNEMO_PLUGINS_DIR) adds to the built-in plugins rather than
replacing them, unless MNEMO_BUILTIN_PLUGINS=false says so; what loaded from where is told in
one line (the start banner, `mnemo doctor`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.settings import environment_variables, load_settings
from bot.plugin.loading import PluginError, discover
from tests.helpers.shipped_plugins import shipped_plugins
from tests.paths import REPO

WEATHER = """\
from bot import Command, Plugin


async def weather(ctx):
    return "sunny"


plugin = Plugin("weather", commands=[Command("weather", "today's weather", weather)])
"""


@pytest.fixture
def own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean environment started in tmp_path, with the operator's folder `mine/` in it."""
    for name in environment_variables():
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "weather.py").write_text(WEATHER, encoding="utf-8")
    return folder


def test_an_operators_folder_adds_to_the_built_in_plugins(
    own_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_PLUGINS_DIR", "mine")
    folders = load_settings(env_file=None).runtime.plugin_folders
    assert folders == [REPO / "plugins", own_folder]
    registry = discover(folders, use_entry_points=False)
    assert [p.name for p in registry.plugins] == [*shipped_plugins().split(", "), "weather"]
    assert registry.loaded_from() == f"{shipped_plugins()} (built-in); weather (mine)"


def test_the_built_in_plugins_can_be_left_out(
    own_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_PLUGINS_DIR", str(own_folder))
    monkeypatch.setenv("MNEMO_BUILTIN_PLUGINS", "false")
    folders = load_settings(env_file=None).runtime.plugin_folders
    registry = discover(folders, use_entry_points=False)
    assert registry.loaded_from() == "weather (mine)"


def test_the_built_in_folder_named_as_the_operators_loads_once(
    own_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MNEMO_PLUGINS_DIR", str(REPO / "plugins"))
    folders = load_settings(env_file=None).runtime.plugin_folders
    assert folders == [REPO / "plugins"]
    assert discover(folders, use_entry_points=False).loaded_from() == (
        f"{shipped_plugins()} (built-in)"
    )


def test_a_plugin_taking_a_built_in_name_is_refused_with_both_places(
    own_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own_goals = WEATHER.replace('Plugin("weather"', 'Plugin("goals"')
    (own_folder / "goals.py").write_text(own_goals, encoding="utf-8")
    monkeypatch.setenv("MNEMO_PLUGINS_DIR", "mine")
    folders = load_settings(env_file=None).runtime.plugin_folders
    with pytest.raises(PluginError) as refused:
        discover(folders, use_entry_points=False)
    message = str(refused.value)
    assert str(own_folder / "goals.py") in message
    assert str(REPO / "plugins" / "goals") in message
    # Replacing a built-in is said in so many words: the operator's folder alone.
    monkeypatch.setenv("MNEMO_BUILTIN_PLUGINS", "false")
    folders = load_settings(env_file=None).runtime.plugin_folders
    with pytest.raises(PluginError, match="command 'weather' repeats"):  # mine, twice
        discover(folders, use_entry_points=False)
    (own_folder / "weather.py").unlink()
    assert discover(folders, use_entry_points=False).loaded_from() == "goals (mine)"
