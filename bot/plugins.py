"""Plugins: evaluators, providers and actions, and how they are found.

A plugin is a module or package in `plugins/` (names starting with `_` are skipped) or an
installed package exposing the `mnemo.plugins` entry point; either way it exposes
`plugin = Plugin(...)`. A plugin that fails to import, lacks `plugin`, or repeats a name stops
start-up with its name and the reason (`PluginError`).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from bot.models import Content, Memory

if TYPE_CHECKING:
    from bot.runtime import AgentRuntime
    from bot.state import State

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "mnemo.plugins"

# Sends extra content to the room the message came from (actions and evaluators may speak).
Callback = Callable[[Content], Awaitable[None]]


async def _no_callback(content: Content) -> None:
    log.debug("no callback for content: %s", content.text[:80])


@dataclass(frozen=True)
class Context:
    """What a handler gets: everything it may touch is passed in, nothing is global."""

    runtime: AgentRuntime
    message: Memory
    state: State
    settings: Any = None
    callback: Callback = _no_callback


@dataclass(frozen=True)
class ExampleTurn:
    user: str
    text: str
    action: str | None = None


@dataclass(frozen=True)
class EvaluatorExample:
    """A worked example shown to the model: the scene, the messages and the expected outcome."""

    context: str
    messages: Sequence[ExampleTurn]
    outcome: str


async def _always(ctx: Context) -> bool:
    return True


@dataclass(frozen=True)
class Evaluator:
    name: str
    description: str
    handler: Callable[[Context], Awaitable[Any]] | None
    validate: Callable[[Context], Awaitable[bool]] = _always
    similes: Sequence[str] = ()
    examples: Sequence[EvaluatorExample] = ()
    # Run even when the bot did not reply (it still learns from messages it only overheard).
    always_run: bool = False


@dataclass(frozen=True)
class Provider:
    """Contributes text to the prompt; `get` returns "" when it has nothing to say."""

    name: str
    get: Callable[[Context], Awaitable[str]]
    description: str = ""


@dataclass(frozen=True)
class Action:
    name: str
    description: str
    handler: Callable[[Context], Awaitable[Any]]
    validate: Callable[[Context], Awaitable[bool]] = _always
    similes: Sequence[str] = ()
    examples: Sequence[Sequence[ExampleTurn]] = ()
    # The action speaks for itself: the reply text the model wrote is not sent.
    suppress_initial_message: bool = False


@dataclass(frozen=True)
class Plugin:
    name: str
    description: str = ""
    evaluators: Sequence[Evaluator] = ()
    providers: Sequence[Provider] = ()
    actions: Sequence[Action] = ()
    # A pydantic(-settings) model; read once at start-up and handed to handlers as ctx.settings.
    settings_model: type[BaseModel] | None = None
    setup: Callable[[AgentRuntime], Awaitable[None]] | None = None
    teardown: Callable[[], Awaitable[None]] | None = None


class PluginError(Exception):
    """A plugin cannot be loaded; the message names the plugin and the reason."""


@dataclass
class Registry:
    """Every loaded plugin's parts, in registration order, with each plugin's settings."""

    plugins: list[Plugin] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)

    @property
    def evaluators(self) -> list[Evaluator]:
        return [e for p in self.plugins for e in p.evaluators]

    @property
    def providers(self) -> list[Provider]:
        return [pr for p in self.plugins for pr in p.providers]

    @property
    def actions(self) -> list[Action]:
        return [a for p in self.plugins for a in p.actions]

    def plugin_of(self, part: Evaluator | Provider | Action) -> Plugin:
        for plugin in self.plugins:
            if part in (*plugin.evaluators, *plugin.providers, *plugin.actions):
                return plugin
        raise KeyError(part.name)

    def settings_for(self, part: Evaluator | Provider | Action) -> Any:
        return self.settings.get(self.plugin_of(part).name)

    def find_action(self, name: str | None) -> Action | None:
        if not name:
            return None
        wanted = name.strip().upper()
        for action in self.actions:
            if wanted == action.name.upper() or wanted in (s.upper() for s in action.similes):
                return action
        return None

    def add(self, plugin: Plugin, source: str) -> None:
        """Register a plugin; names of plugins and of their parts must be unique."""
        if not isinstance(plugin, Plugin):
            raise PluginError(f"plugin {source}: `plugin` is a {type(plugin).__name__}, not Plugin")
        if any(p.name == plugin.name for p in self.plugins):
            raise PluginError(f"plugin {source}: the name {plugin.name!r} is already taken")
        for kind, existing, new in (
            ("evaluator", self.evaluators, plugin.evaluators),
            ("provider", self.providers, plugin.providers),
            ("action", self.actions, plugin.actions),
        ):
            taken = {part.name for part in existing}
            for part in new:
                if part.name in taken:
                    raise PluginError(
                        f"plugin {plugin.name}: {kind} {part.name!r} repeats a name "
                        "another plugin registered"
                    )
                taken.add(part.name)
        if plugin.settings_model is not None:
            try:
                self.settings[plugin.name] = plugin.settings_model()
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(x) for x in first["loc"])
                raise PluginError(
                    f"plugin {plugin.name}: setting {where}: {first['msg']}"
                ) from None
        self.plugins.append(plugin)


def _import_from_folder(path: Path, package_root: Path) -> Any:
    """Import `plugins/<name>` (module or package) as `plugins.<name>`."""
    root = str(package_root.parent.resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    module_name = f"{package_root.name}.{path.stem if path.is_file() else path.name}"
    return importlib.import_module(module_name)


def plugin_sources(folder: Path) -> list[Path]:
    """Plugin candidates in a folder, sorted for a stable registration order."""
    if not folder.is_dir():
        return []
    found = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith(("_", ".")):
            continue
        if (entry.is_dir() and (entry / "__init__.py").exists()) or (
            entry.is_file() and entry.suffix == ".py"
        ):
            found.append(entry)
    return found


def discover(
    folder: Path, *, disabled: Iterable[str] = (), use_entry_points: bool = True
) -> Registry:
    """Load every plugin from the folder and from installed packages, or raise PluginError."""
    registry = Registry()
    skip = set(disabled)
    for source in plugin_sources(folder):
        name = source.stem if source.is_file() else source.name
        if name in skip:
            continue
        try:
            module = _import_from_folder(source, folder)
        except Exception as error:
            raise PluginError(
                f"plugin {name}: failed to import: {type(error).__name__}: {error}"
            ) from error
        if not hasattr(module, "plugin"):
            raise PluginError(f"plugin {name}: {source} defines no `plugin = Plugin(...)`")
        if module.plugin.name in skip:
            continue
        registry.add(module.plugin, name)
    if use_entry_points:
        for entry in entry_points(group=ENTRY_POINT_GROUP):
            if entry.name in skip:
                continue
            try:
                plugin = entry.load()
            except Exception as error:
                raise PluginError(
                    f"plugin {entry.name}: failed to import: {type(error).__name__}: {error}"
                ) from error
            registry.add(plugin, entry.name)
    return registry
