"""The plugins this checkout ships, as the console banner and `mnemo doctor` list them.

Tests derive the list from the `plugins/` folder instead of hard-coding it: a plugin file
dropped into that folder (an operator's own, or one being written) is then shipped and listed,
and the tests still hold.
"""

from __future__ import annotations

from bot.plugin.loading import discover
from tests.paths import REPO

PLUGINS_FOLDER = REPO / "plugins"


def shipped_plugins() -> str:
    """ "facts, goals, recall, sentiment" for the plugins in `plugins/` today: the folder's
    plugins in the order they are loaded (installed packages' plugins would follow them)."""
    registry = discover(PLUGINS_FOLDER, use_entry_points=False)
    return ", ".join(plugin.name for plugin in registry.plugins)
