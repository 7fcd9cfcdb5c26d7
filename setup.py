"""Packaging that pyproject.toml cannot express: the default character and the built-in
plugins ship inside the `bot` package, as `bot/_builtin/characters` and
`bot/_builtin/plugins`, so an installed Mnemo (`pip install mnemo-bot`) finds them from any
folder without a checkout. Their sources stay where people edit them, at the top of the
repository (`characters/`, `plugins/`): `package_dir` maps them in; `packages.find` cannot.
Everything else (name, version, dependencies, the `mnemo` command) is in pyproject.toml.
"""

from setuptools import find_namespace_packages, setup

BUILTIN = "bot._builtin"
NOT_PACKAGES = ["*.__pycache__", "*.__pycache__.*"]

# The message catalogs' folders (bot/i18n/locales/<code>/LC_MESSAGES) hold data, not code;
# setuptools ships a folder's files as the data of the (namespace) package it is, so each is
# listed as one: excluding them made every install print a "Package would be ignored" block.
bot_packages = find_namespace_packages(include=["bot", "bot.*"], exclude=NOT_PACKAGES)
catalogs = {name: ["*.po", "*.mo"] for name in bot_packages if name.endswith(".LC_MESSAGES")}
plugin_packages = [
    name.replace("plugins", f"{BUILTIN}.plugins", 1)
    for name in find_namespace_packages(include=["plugins", "plugins.*"], exclude=NOT_PACKAGES)
]

setup(
    packages=[*bot_packages, *plugin_packages, f"{BUILTIN}.characters"],
    package_dir={f"{BUILTIN}.plugins": "plugins", f"{BUILTIN}.characters": "characters"},
    # The message catalogs (bot/i18n): their sources for translators, compiled for gettext.
    package_data={
        f"{BUILTIN}.characters": ["*.json"],
        "bot.i18n.locales": ["*.pot"],
        **catalogs,
    },
)
