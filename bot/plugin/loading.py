"""Plugins: how they are found, checked and registered (their types are in bot.plugin.api).

A plugin is a module or package in `plugins/` (names starting with `_` or `.` are skipped) or an
installed package exposing the `mnemo.plugins` entry point; either way it exposes
`plugin = Plugin(...)`. A plugin that fails to import, lacks `plugin`, is malformed, repeats a
name, or has a bad setting stops start-up with its name and the reason (`PluginError`).

A folder's plugins are imported as submodules of one package per folder, so a plugin package
can import its own parts relatively (`from .prompts import X`) and a module can share a
`_helpers.py` (`from . import _helpers`). The package is the folder's own importable name when
it has one (`plugins` at the repository root: `plugins.weather` is then one module, however it is
imported); any other folder gets a private name derived from its path, so two folders never
clash in `sys.modules`. Absolute imports of a plugin's own modules only work in the first case.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import keyword
import logging
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

from pydantic import BaseModel

from bot.config.base import BUILTIN_PLUGINS
from bot.domain.characters import InstalledCharacter, character_key
from bot.plugin.api import (
    Action,
    Command,
    Evaluator,
    OfflineAnswer,
    Plugin,
    Provider,
    Task,
)
from bot.plugin.checks import PluginError, check_parts, kind_name, read_settings

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mnemo.plugins"


@dataclass
class Registry:
    """Every loaded plugin's parts, in registration order, with each plugin's settings."""

    plugins: list[Plugin] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)
    # Plugin name -> where it came from (file, folder or entry point), for messages.
    sources: dict[str, str] = field(default_factory=dict)
    # Plugin name -> the group it was loaded with, as a person is told it: `built-in`, the
    # operator's folder, `installed package` (the start banner, `mnemo doctor`).
    origins: dict[str, str] = field(default_factory=dict)

    def loaded_from(self) -> str:
        """ "facts, recall (built-in); weather (my-plugins)": which plugins loaded from where,
        in registration order; "none" when no plugin did."""
        groups: dict[str, list[str]] = {}
        for plugin in self.plugins:
            groups.setdefault(self.origins.get(plugin.name, "added in code"), []).append(
                plugin.name
            )
        return "; ".join(f"{', '.join(names)} ({origin})" for origin, names in groups.items()) or (
            "none"
        )

    @property
    def evaluators(self) -> list[Evaluator]:
        return [e for p in self.plugins for e in p.evaluators]

    @property
    def providers(self) -> list[Provider]:
        return [pr for p in self.plugins for pr in p.providers]

    @property
    def actions(self) -> list[Action]:
        return [a for p in self.plugins for a in p.actions]

    @property
    def commands(self) -> list[Command]:
        return [c for p in self.plugins for c in p.commands]

    @property
    def characters(self) -> list[InstalledCharacter]:
        """The characters plugins provide for `/character`, keyed by username, else name."""
        return [
            InstalledCharacter(
                character_key(character.username or character.name), character, f"plugin {p.name}"
            )
            for p in self.plugins
            for character in p.characters
        ]

    def plugin_of(self, part: Evaluator | Provider | Action | Command | Task) -> Plugin:
        # Identity, not equality: two frozen dataclasses with equal fields are still two parts.
        for plugin in self.plugins:
            owned = (
                *plugin.evaluators,
                *plugin.providers,
                *plugin.actions,
                *plugin.commands,
                *plugin.tasks,
            )
            if any(part is own for own in owned):
                return plugin
        raise KeyError(part.name)

    def offline_answers(self) -> dict[str, list[OfflineAnswer]]:
        """Task -> the offline answers plugins registered for it, in registration order."""
        answers: dict[str, list[OfflineAnswer]] = {}
        for plugin in self.plugins:
            for evaluator in plugin.evaluators:
                if evaluator.offline is not None:
                    answers.setdefault(f"evaluator:{evaluator.name}", []).append(evaluator.offline)
            for action in plugin.actions:
                if action.offline is not None:
                    answers.setdefault(f"action:{action.name}", []).append(action.offline)
            for task, answer in plugin.offline_answers.items():
                answers.setdefault(task, []).append(answer)
        return answers

    def use_settings(self, name: str, settings: BaseModel) -> None:
        """Hand plugin `name` these settings instead of the ones read from the environment
        (tests and benchmarks configure plugins in code)."""
        plugin = next((p for p in self.plugins if p.name.casefold() == name.casefold()), None)
        if plugin is None:
            raise KeyError(f"no plugin {name!r} is registered")
        model = plugin.settings_model
        if model is None or not isinstance(settings, model):
            expected = model.__name__ if model is not None else "no settings"
            raise TypeError(f"plugin {plugin.name} takes {expected}, not {type(settings).__name__}")
        self.settings[plugin.name] = settings

    @property
    def idle_marks(self) -> list[str]:
        """The room marks evaluators keep of what they have read (see Evaluator.idle_mark)."""
        return list(dict.fromkeys(e.idle_mark for e in self.evaluators if e.idle_mark))

    def find_action(self, name: str | None) -> Action | None:
        if not name:
            return None
        wanted = name.strip().upper()
        for action in self.actions:
            if wanted == action.name.upper() or wanted in (s.upper() for s in action.similes):
                return action
        return None

    def add(
        self, plugin: object, source: str, *, env_file: Path | None = None, origin: str = ""
    ) -> None:
        """Register a plugin, or raise PluginError and leave the registry as it was.

        `source` says where the plugin came from (a path, an entry point) for messages;
        `origin` the group it is listed with (`Registry.loaded_from`).

        Names of plugins and of their evaluators, providers, actions and commands must be
        unique, ignoring case: the model names evaluators and actions back to us in any case.
        """
        if not isinstance(plugin, Plugin):
            raise PluginError(f"plugin {source}: `plugin` is {kind_name(plugin)}, not a Plugin")
        if not isinstance(plugin.name, str) or not plugin.name.strip():
            raise PluginError(f"plugin {source}: the Plugin has no name")
        where = source
        for other in self.plugins:
            if other.name.casefold() == plugin.name.casefold():
                raise PluginError(
                    f"plugin {plugin.name} ({where}): the name {plugin.name!r} is already "
                    f"taken by the plugin from {self.sources.get(other.name, other.name)}"
                )
        check_parts(plugin, where)
        for kind, existing, new in (
            ("evaluator", self.evaluators, plugin.evaluators),
            ("provider", self.providers, plugin.providers),
            ("action", self.actions, plugin.actions),
            ("command", self.commands, plugin.commands),
        ):
            taken = {part.name.casefold(): self.plugin_of(part).name for part in existing}
            for part in new:
                owner = taken.get(part.name.casefold())
                if owner is not None:
                    by = "itself" if owner == plugin.name else f"plugin {owner}"
                    raise PluginError(
                        f"plugin {plugin.name} ({where}): {kind} {part.name!r} repeats a name "
                        f"already registered by {by}"
                    )
                taken[part.name.casefold()] = plugin.name
        settings = read_settings(plugin, where, env_file)
        if plugin.settings_model is not None:
            self.settings[plugin.name] = settings
        self.sources[plugin.name] = where
        if origin:
            self.origins[plugin.name] = origin
        self.plugins.append(plugin)


def _folder_package(folder: Path) -> tuple[str, bool]:
    """The package a folder's plugins import under, and whether it is the folder's own name."""
    resolved = folder.resolve()
    name = resolved.name
    if name.isidentifier() and not keyword.iskeyword(name):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        locations = spec.submodule_search_locations if spec is not None else None
        if locations and any(Path(place).resolve() == resolved for place in locations):
            return name, True
    digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    return f"_mnemo_plugins_{digest}", False


def _ensure_private_package(package: str, folder: Path) -> None:
    """Register an empty package whose submodules are the folder's files and folders."""
    # Drop what an earlier discover() imported from this folder: a discovery reflects the
    # folder as it is now (tests rewrite plugin files between runs).
    for module_name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[module_name]
    spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
    spec.submodule_search_locations = [str(folder.resolve())]
    module = importlib.util.module_from_spec(spec)
    module.__doc__ = f"Mnemo plugins from {folder}"
    sys.modules[package] = module


def plugin_sources(folder: Path) -> list[Path]:
    """Plugin candidates in a folder, sorted for a stable registration order."""
    if not folder.is_dir():
        return []
    found = []
    for entry in sorted(folder.iterdir(), key=lambda path: path.name):
        if entry.name.startswith(("_", ".")):
            continue
        if entry.is_dir():
            if (entry / "__init__.py").is_file():
                found.append(entry)
            elif any(entry.glob("*.py")):
                log.warning("plugin folder %s has no __init__.py; not loaded", entry)
        elif entry.is_file() and entry.suffix == ".py":
            found.append(entry)
    return found


def _source_name(source: Path) -> str:
    return source.stem if source.is_file() else source.name


def _import_plugin(source: Path, package: str) -> object:
    """The module's `plugin`, whatever it is: Registry.add says what is wrong with it."""
    name = _source_name(source)
    if not name.isidentifier() or keyword.iskeyword(name):
        raise PluginError(
            f"plugin {name} ({source}): {name!r} is not a valid Python module name "
            "(use letters, digits and underscores)"
        )
    try:
        module = importlib.import_module(f"{package}.{name}")
    except (Exception, SystemExit) as error:
        # SyntaxError is an Exception; its text carries the file and line.
        raise PluginError(
            f"plugin {name} ({source}): failed to import: {type(error).__name__}: {error}"
        ) from error
    if not hasattr(module, "plugin"):
        raise PluginError(f"plugin {name} ({source}): defines no `plugin = Plugin(...)`")
    return module.plugin


def _entry_point_plugins(skip: set[str]) -> list[tuple[str, Any]]:
    """Plugins installed as packages, sorted by entry-point name."""
    seen: set[tuple[str, str]] = set()
    found: list[tuple[str, Any]] = []
    # The same distribution can be visible twice (an editable install plus a stray
    # *.egg-info in the working directory); one entry point is one plugin.
    entries = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value))
    for entry in entries:
        if (entry.name, entry.value) in seen or entry.name.casefold() in skip:
            continue
        seen.add((entry.name, entry.value))
        where = f"entry point {entry.name} = {entry.value}"
        try:
            loaded = entry.load()
        except (Exception, SystemExit) as error:
            raise PluginError(
                f"plugin {entry.name} ({where}): failed to import: {type(error).__name__}: {error}"
            ) from error
        if isinstance(loaded, ModuleType):
            if not hasattr(loaded, "plugin"):
                raise PluginError(
                    f"plugin {entry.name} ({where}): defines no `plugin = Plugin(...)`"
                )
            loaded = loaded.plugin
        found.append((where, loaded))
    return found


def folder_origin(folder: Path) -> str:
    """How a plugin folder is named to a person: `built-in` for the plugins shipped with
    Mnemo, else the path, relative when it lies under the working folder."""
    resolved = folder.resolve()
    if resolved == BUILTIN_PLUGINS.resolve():
        return "built-in"
    try:
        return str(resolved.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(folder)


def discover(
    folders: Path | Sequence[Path],
    *,
    disabled: Iterable[str] = (),
    use_entry_points: bool = True,
    env_file: Path | None = None,
) -> Registry:
    """Load every plugin from the folders and from installed packages, or raise PluginError.

    Each folder's plugins register in name order, the folders in the order given, then
    entry-point plugins in name order; a name already taken by an earlier folder's plugin is
    an error, not an override. `disabled` names plugins (module or Plugin names, any case)
    to leave out. `env_file`, when given, is also read by plugins' settings models (as
    `load_settings` reads it).
    """
    registry = Registry()
    skip = {name.strip().casefold() for name in disabled if name.strip()}
    # Files written a moment ago (tests, hot edits) are invisible to the import system's
    # cached directory listings until this.
    importlib.invalidate_caches()
    # Every name a plugin answers to, to tell a typo in `disabled` from a real plugin.
    known: set[str] = set()
    for folder in [folders] if isinstance(folders, Path) else folders:
        if folder.exists() and not folder.is_dir():
            raise PluginError(f"plugins folder {folder}: not a folder")
        if not folder.is_dir():
            log.warning("plugins folder %s not found; no plugins loaded from it", folder)
        everything = plugin_sources(folder)
        known.update(_source_name(s) for s in everything)
        sources = [s for s in everything if _source_name(s).casefold() not in skip]
        if not sources:
            continue
        package, own_name = _folder_package(folder)
        if not own_name:
            _ensure_private_package(package, folder)
        origin = folder_origin(folder)
        for source in sources:
            plugin = _import_plugin(source, package)
            if isinstance(plugin, Plugin):
                known.add(plugin.name)
                if plugin.name.casefold() in skip:
                    continue
            registry.add(plugin, str(source), env_file=env_file, origin=origin)
    if use_entry_points:
        for where, plugin in _entry_point_plugins(skip):
            if isinstance(plugin, Plugin):
                known.add(plugin.name)
                if plugin.name.casefold() in skip:
                    continue
            registry.add(plugin, where, env_file=env_file, origin="installed package")
    # A misspelt name would silently leave the plugin running.
    named = sorted({name.strip() for name in disabled if name.strip()}, key=str.casefold)
    unknown = [name for name in named if name.casefold() not in {k.casefold() for k in known}]
    if unknown and use_entry_points:  # a disabled entry point was never loaded: ask for names
        known.update(entry.name for entry in entry_points(group=ENTRY_POINT_GROUP))
        unknown = [name for name in unknown if name.casefold() not in {k.casefold() for k in known}]
    if unknown:
        raise PluginError(
            f"setting MNEMO_DISABLED_PLUGINS: no plugin named {', '.join(unknown)}; "
            f"known plugins: {', '.join(sorted(known, key=str.casefold)) or 'none'}"
        )
    for plugin in registry.plugins:
        log.info("plugin %s loaded from %s", plugin.name, registry.sources[plugin.name])
    return registry
