"""Checking a plugin before it is registered: its parts are well formed, its hooks are
`async def`, its commands can be shown on every surface, and its settings read.

Malformed plugins fail at start-up with the plugin's name and the reason (`PluginError`),
not at the first message.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_settings import BaseSettings
from pydantic_settings.exceptions import SettingsError

from bot.config.settings import describe_error
from bot.domain.characters import Character
from bot.plugin.api import Action, Command, Evaluator, Plugin, Provider, Task


class PluginError(Exception):
    """A plugin cannot be loaded; the message names the plugin and the reason."""


def kind_name(value: object) -> str:
    """`None`, `a dict`, `an int`: for messages saying what was found instead."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"


def _check_callable(owner: str, what: str, value: object, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if not callable(value):
        raise PluginError(f"{owner}: {what} is {kind_name(value)}, not an async function")
    # A plain `def` would only fail at the first message ("object is not awaitable"); catch
    # it now. Other callables (partials, objects with an async __call__) are trusted.
    if inspect.isfunction(value) and not inspect.iscoroutinefunction(value):
        raise PluginError(f"{owner}: {what} must be declared with `async def`")


def _check_handler_takes_found(owner: str, label: str, handler: Callable[..., Any]) -> None:
    """An evaluator's handler is called as `handler(ctx, found)`, `found` being what its
    validate returned: a handler taking only `ctx` would fail at the first evaluation."""
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):
        return  # a callable without a readable signature (a C function) is trusted
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    takes_many = any(p.kind is p.VAR_POSITIONAL for p in parameters)
    if (len(positional) >= 2 or takes_many) and len(required) <= 2:
        return
    names = ", ".join(p.name for p in parameters) or "nothing"
    raise PluginError(
        f"{owner}: {label} handler takes ({names}); an evaluator's handler must be "
        "`async def handler(ctx, found)`, where `found` is what its validate returned"
    )


_COMMAND_NAME = re.compile(r"^[a-z0-9_]{1,32}$")
_COLLECTION_NAME = re.compile(r"^[a-z0-9_]{1,48}$")
MAX_COMMAND_DESCRIPTION = 100


def _check_sequence(owner: str, attribute: str, parts: object) -> Sequence[Any]:
    if isinstance(parts, str | bytes) or not isinstance(parts, Sequence):
        raise PluginError(f"{owner}: {attribute} must be a list, not {kind_name(parts)}")
    return parts


def check_parts(plugin: Plugin, where: str) -> None:
    """Malformed plugins fail at start-up with a reason, not at the first message."""
    owner = f"plugin {plugin.name} ({where})"
    Part = type[Evaluator] | type[Provider] | type[Action] | type[Command]
    kinds: tuple[tuple[str, Sequence[Any], Part], ...] = (
        ("evaluators", plugin.evaluators, Evaluator),
        ("providers", plugin.providers, Provider),
        ("actions", plugin.actions, Action),
        ("commands", plugin.commands, Command),
    )
    for attribute, parts, expected in kinds:
        for index, part in enumerate(_check_sequence(owner, attribute, parts)):
            if not isinstance(part, expected):
                raise PluginError(
                    f"{owner}: {attribute}[{index}] is {kind_name(part)}, not {expected.__name__}"
                )
            if not isinstance(part.name, str) or not part.name.strip():
                raise PluginError(f"{owner}: {attribute}[{index}] has no name")
            label = f"{expected.__name__.lower()} {part.name!r}"
            if isinstance(part, Evaluator | Action):
                _check_callable(owner, f"{label} validate", part.validate)
                _check_callable(
                    owner, f"{label} handler", part.handler, optional=isinstance(part, Evaluator)
                )
                if isinstance(part, Evaluator) and part.handler is not None:
                    _check_handler_takes_found(owner, label, part.handler)
                if part.offline is not None and not callable(part.offline):
                    raise PluginError(f"{owner}: {label} offline is not a function")
            elif isinstance(part, Command):
                _check_command(owner, label, part)
            else:
                _check_callable(owner, f"{label} get", part.get)
    for hook in ("setup", "teardown", "forget", "export", "stats", "about", "learned"):
        _check_callable(owner, hook, getattr(plugin, hook), optional=True)
    for index, task in enumerate(_check_sequence(owner, "tasks", plugin.tasks)):
        if not isinstance(task, Task):
            raise PluginError(f"{owner}: tasks[{index}] is {kind_name(task)}, not Task")
        if not _COMMAND_NAME.fullmatch(task.name):
            raise PluginError(
                f"{owner}: task {task.name!r} name must be 1-32 lower-case letters, digits "
                "or underscores"
            )
        if not task.every_seconds > 0:
            raise PluginError(f"{owner}: task {task.name!r} every_seconds must be positive")
        _check_callable(owner, f"task {task.name!r} run", task.run)
    _check_stores(owner, plugin)
    answers = plugin.offline_answers
    if not isinstance(answers, Mapping):
        raise PluginError(f"{owner}: offline_answers must be a dict, not {kind_name(answers)}")
    for task, answer in answers.items():
        if not isinstance(task, str) or not task.strip() or not callable(answer):
            raise PluginError(f"{owner}: offline_answers[{task!r}] must map a task to a function")
    for character in plugin.characters:
        if not isinstance(character, Character):
            raise PluginError(
                f"{owner}: characters must be Character objects (bot.load_character), "
                f"not {kind_name(character)}"
            )
    model = plugin.settings_model
    if model is not None and not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise PluginError(
            f"{owner}: settings_model must be a pydantic(-settings) model class, "
            f"not {getattr(model, '__name__', None) or kind_name(model)}"
        )


def _check_stores(owner: str, plugin: Plugin) -> None:
    """A plugin that keeps data names its collections and lets people see and delete it."""
    stores = _check_sequence(owner, "stores", plugin.stores)
    for name in stores:
        if not isinstance(name, str) or not _COLLECTION_NAME.fullmatch(name):
            raise PluginError(
                f"{owner}: stores entry {name!r} is not a collection name "
                "(1-48 lower-case letters, digits or underscores)"
            )
    missing = [hook for hook in ("forget", "export") if getattr(plugin, hook) is None]
    if stores and missing:
        raise PluginError(
            f"{owner}: it stores {', '.join(stores)} but has no {' or '.join(missing)} hook; "
            "a plugin that keeps data about people must let them forget and export it"
        )


def _check_command(owner: str, label: str, command: Command) -> None:
    # Every surface must be able to show it: Telegram and Discord both allow 1-32 of
    # a-z0-9_ (Discord also allows "-", Telegram does not), Discord 100 description chars.
    if not _COMMAND_NAME.fullmatch(command.name):
        raise PluginError(
            f"{owner}: {label} name must be 1-32 lower-case letters, digits or underscores"
        )
    description = command.description
    if not isinstance(description, str) or not description.strip() or "\n" in description:
        raise PluginError(f"{owner}: {label} needs a one-line description")
    if len(description) > MAX_COMMAND_DESCRIPTION:
        raise PluginError(
            f"{owner}: {label} description is {len(description)} characters; "
            f"surfaces show at most {MAX_COMMAND_DESCRIPTION}"
        )
    _check_callable(owner, f"{label} handler", command.handler)


def read_settings(plugin: Plugin, where: str, env_file: Path | None) -> Any:
    model = plugin.settings_model
    if model is None:
        return None
    owner = f"plugin {plugin.name} ({where})"
    try:
        if issubclass(model, BaseSettings):
            # Only pass a file when told to: `_env_file=None` would switch the model's own
            # `.env` off rather than leave it alone.
            return model(_env_file=env_file) if env_file is not None else model()
        return model()
    except ValidationError as error:
        if issubclass(model, BaseSettings):
            # Same wording as Mnemo's own settings: the env variable, never a secret value.
            raise PluginError(f"{owner}: {describe_error(model, error)}") from None
        first = error.errors()[0]
        where_in = ".".join(str(part) for part in first["loc"]) or model.__name__
        raise PluginError(f"{owner}: setting {where_in}: {first['msg']}") from None
    except SettingsError as error:
        raise PluginError(f"{owner}: settings: {error}") from None
    except Exception as error:
        raise PluginError(f"{owner}: settings: {type(error).__name__}: {error}") from error
