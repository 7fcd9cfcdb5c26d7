"""PluginHost: the loaded plugins as one runtime sees them.

It builds each part's context (the plugin's settings, the state its `setup()` returned, its
collections and logger, a model handle under the part's task), runs setup and teardown,
commands and the privacy hooks. The runtime asks it for contexts and never looks inside a
plugin; adapters ask it for commands.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from bot.i18n import N_, SOURCE_TEXTS, Texts
from bot.knowledge.retrieval import MessageRetriever
from bot.memory.world import WorldFacts
from bot.plugin.api import (
    Action,
    Agent,
    Callback,
    Collections,
    Command,
    CommandContext,
    Context,
    Conversations,
    Evaluator,
    ModelHandle,
    Plugin,
    PluginContext,
    Provider,
    Rooms,
    Task,
    TaskContext,
    WorldVoice,
)
from bot.storage.mongo import CORE_COLLECTIONS

if TYPE_CHECKING:
    from bot.domain.characters import WorldChoice
    from bot.domain.records import Fact, Memory, Trigger
    from bot.domain.state import State
    from bot.llm.accounting import UsageLedger
    from bot.llm.base import LanguageModel
    from bot.memory.store import Knowledge
    from bot.plugin.loading import Registry
    from bot.storage.mongo import MongoStore

log = logging.getLogger(__name__)

# In English, shown in the asker's language (bot/i18n); the command's own answers are the
# plugin's words.
ADMIN_ONLY_REPLY = N_("Only an admin can use /{name}.")
COMMAND_FAILED_REPLY = N_("Sorry, /{name} failed. Please try again later.")

Part = Evaluator | Provider | Action


def part_task(part: Part | Command) -> str:
    """The task a part's model calls are accounted under (and the offline model answers)."""
    kind = {Evaluator: "evaluator", Provider: "provider", Action: "action", Command: "command"}
    return f"{kind[type(part)]}:{part.name}"


class PluginHost:
    def __init__(
        self,
        registry: Registry,
        *,
        store: MongoStore,
        knowledge: Knowledge,
        model: LanguageModel,
        agent: Agent,
        templates: Mapping[str, str],
        max_message_chars: int,
        ledger: UsageLedger | None = None,
    ) -> None:
        self.registry = registry
        self._store = store
        self._knowledge = knowledge
        self._model = model
        self._agent = agent
        self._templates = templates
        self._ledger = ledger
        self.conversations = Conversations(
            store,
            agent=agent,
            max_message_chars=max_message_chars,
            search=lambda options: MessageRetriever.over(knowledge, options=options),
        )
        self._states: dict[str, Any] = {}
        self._collections: dict[str, Collections] = {}
        # Adapters connect here once running, so plugins' tasks can speak in a room later.
        self.rooms = Rooms(store, agent_id=agent.id)
        # Each world's character and model names, for tasks (`ctx.world`); the runtime sets
        # it. Unset, every world speaks as the process's character.
        self._world_choice: Callable[[str], Awaitable[WorldChoice]] | None = None

    def use_world_choices(self, world_choice: Callable[[str], Awaitable[WorldChoice]]) -> None:
        """Where tasks find a world's choice (bot/runtime/worlds.py `WorldChoices.of`)."""
        self._world_choice = world_choice

    # ------------------------------------------------------------------ lifecycle
    async def setup(self) -> None:
        """Run every plugin's setup in registration order, keeping what each returns."""
        for plugin in self.registry.plugins:
            if plugin.setup is not None:
                self._states[plugin.name] = await plugin.setup(self.plugin_context(plugin))

    async def teardown(self) -> None:
        """Run every plugin's teardown in reverse order; one failing does not stop the rest."""
        for plugin in reversed(self.registry.plugins):
            if plugin.teardown is None:
                continue
            try:
                await plugin.teardown(self.plugin_context(plugin))
            except Exception:
                log.exception("plugin %s teardown failed", plugin.name)

    # ------------------------------------------------------------------ contexts
    def collections(self, plugin: Plugin) -> Collections:
        found = self._collections.get(plugin.name)
        if found is None:
            found = Collections(
                self._store.db, plugin.name, plugin.stores, reserved=CORE_COLLECTIONS
            )
            self._collections[plugin.name] = found
        return found

    def logger(self, plugin: Plugin) -> logging.Logger:
        return logging.getLogger(f"mnemo.plugin.{plugin.name}")

    def plugin_context(self, plugin: Plugin) -> PluginContext:
        return PluginContext(
            settings=self.registry.settings.get(plugin.name),
            collections=self.collections(plugin),
            conversations=self.conversations,
            agent=self._agent,
            log=self.logger(plugin),
            plugin_state=self._states.get(plugin.name),
        )

    def memory(
        self,
        world_id: str,
        on_learned: Callable[[list[Fact]], Awaitable[None]] | None = None,
    ) -> WorldFacts:
        """One world's facts, as plugins read and propose to them."""
        return WorldFacts(self._knowledge, world_id, on_learned=on_learned)

    def _learned_hooks(
        self, message: Memory, state: State, job_id: str | None, trigger: Trigger
    ) -> Callable[[list[Fact]], Awaitable[None]] | None:
        """What tells every plugin with a `learned` hook what the memory just stored, each in
        its own context for the message being evaluated. A hook that fails fails the
        evaluation that proposed (retried: the same facts are handed again)."""
        hooked = [p for p in self.registry.plugins if p.learned is not None]
        if not hooked:
            return None

        async def tell(facts: list[Fact]) -> None:
            for plugin in hooked:
                assert plugin.learned is not None
                voice = self._voice(state.world, f"plugin:{plugin.name}", world_id=message.world_id)
                context = Context(
                    message=message,
                    state=state,
                    settings=self.registry.settings.get(plugin.name),
                    model=voice.model,
                    collections=self.collections(plugin),
                    conversations=self.conversations,
                    memory=self.memory(message.world_id),
                    agent=voice.agent,
                    log=self.logger(plugin),
                    plugin_state=self._states.get(plugin.name),
                    job_id=job_id,
                    trigger=trigger,
                )
                await plugin.learned(context, facts)

        return tell

    def context(
        self,
        part: Part,
        message: Memory,
        state: State,
        *,
        callback: Callback | None = None,
        job_id: str | None = None,
        trigger: Trigger = "message",
    ) -> Context:
        plugin = self.registry.plugin_of(part)
        extra: dict[str, Any] = {} if callback is None else {"callback": callback}
        voice = self._voice(state.world, part_task(part), world_id=message.world_id)
        return Context(
            message=message,
            state=state,
            settings=self.registry.settings.get(plugin.name),
            model=voice.model,
            collections=self.collections(plugin),
            conversations=self.conversations,
            memory=self.memory(
                message.world_id, self._learned_hooks(message, state, job_id, trigger)
            ),
            agent=voice.agent,
            log=self.logger(plugin),
            plugin_state=self._states.get(plugin.name),
            job_id=job_id,
            trigger=trigger,
            **extra,
        )

    def task_context(self, task: Task) -> TaskContext:
        plugin = self.registry.plugin_of(task)
        model_task = f"task:{task.name}"

        async def world(world_id: str) -> WorldVoice:
            # Read when asked (kept a few seconds by WorldChoices), so a task speaks as the
            # world's bot is now, whichever process changed it.
            found = None if self._world_choice is None else await self._world_choice(world_id)
            return self._voice(found, model_task, world_id=world_id)

        return TaskContext(
            settings=self.registry.settings.get(plugin.name),
            collections=self.collections(plugin),
            conversations=self.conversations,
            agent=self._agent,
            log=self.logger(plugin),
            model=ModelHandle(self._model, model_task, self._templates, self._ledger),
            rooms=self.rooms,
            plugin_state=self._states.get(plugin.name),
            world_lookup=world,
            memory_of=self.memory,
        )

    def _voice(self, choice: WorldChoice | None, model_task: str, *, world_id: str) -> WorldVoice:
        """The bot as a world's admins chose it (`/character`, `/model`); the process's
        character and model names without a choice."""
        if choice is None:
            return WorldVoice(
                world_id,
                self._agent,
                ModelHandle(
                    self._model, model_task, self._templates, self._ledger, world_id=world_id
                ),
            )
        character = choice.character
        agent = replace(
            self._agent,
            name=character.name,
            names=tuple(character.names),
            bio=" ".join(character.bio).strip(),
        )
        model_names = {
            size: name
            for size in ("small", "large")
            if (name := choice.model_name(size)) is not None
        }
        model = ModelHandle(
            self._model,
            model_task,
            character.templates,
            self._ledger,
            model_names=model_names,
            world_id=world_id,
        )
        return WorldVoice(world_id, agent, model)

    # ------------------------------------------------------------------ tasks
    def tasks(self) -> list[Task]:
        """Every plugin's timed tasks, in registration order."""
        return [task for plugin in self.registry.plugins for task in plugin.tasks]

    async def run_task(self, task: Task) -> Any:
        """One run of a plugin's task now (what the scheduler calls on its timer)."""
        return await task.run(self.task_context(task))

    async def run_tasks(self) -> None:
        """Every task once, now; one failing does not stop the rest (logged)."""
        for task in self.tasks():
            try:
                await self.run_task(task)
            except Exception:
                log.exception("plugin task %s failed; its next run tries again", task.name)

    # ------------------------------------------------------------------ commands
    def commands(self) -> list[Command]:
        """Every plugin's commands, in registration order."""
        return self.registry.commands

    def find_command(self, name: str) -> Command | None:
        wanted = name.strip().lstrip("/").casefold()
        return next((c for c in self.registry.commands if c.name == wanted), None)

    async def run_command(
        self,
        command: Command,
        *,
        account_id: str,
        world_id: str,
        room_id: str,
        args: str = "",
        is_admin: bool = False,
        texts: Texts = SOURCE_TEXTS,
    ) -> str:
        """The reply to a command; a refusal or a one-line apology, never an exception."""
        if command.admin_only and not is_admin:
            return texts.gettext(ADMIN_ONLY_REPLY).format(name=command.name)
        plugin = self.registry.plugin_of(command)
        context = CommandContext(
            account_id=account_id,
            world_id=world_id,
            room_id=room_id,
            args=args.strip(),
            is_admin=is_admin,
            settings=self.registry.settings.get(plugin.name),
            plugin_state=self._states.get(plugin.name),
            collections=self.collections(plugin),
            conversations=self.conversations,
            memory=self.memory(world_id),
            agent=self._agent,
            log=self.logger(plugin),
        )
        try:
            return await command.handler(context)
        except Exception:
            log.exception("command /%s of plugin %s failed", command.name, plugin.name)
            return texts.gettext(COMMAND_FAILED_REPLY).format(name=command.name)

    # ------------------------------------------------------------------ stats
    async def stats(self, world_id: str) -> list[str]:
        """Every plugin's `/stats` lines for a world, in registration order. A plugin whose
        hook fails is left out with a log line: the rest of /stats still answers."""
        lines: list[str] = []
        for plugin in self.registry.plugins:
            if plugin.stats is None:
                continue
            try:
                found = await plugin.stats(self.plugin_context(plugin), world_id)
            except Exception:
                log.exception("plugin %s stats failed", plugin.name)
                continue
            lines += [str(line) for line in found if str(line).strip()]
        return lines

    # ------------------------------------------------------------------ /me
    async def about(self, person_id: str, world_id: str) -> list[str]:
        """Every plugin's `/me` lines for a person in a world; a failing hook is left out."""
        lines: list[str] = []
        for plugin in self.registry.plugins:
            if plugin.about is None:
                continue
            try:
                found = await plugin.about(self.plugin_context(plugin), person_id, world_id)
            except Exception:
                log.exception("plugin %s /me lines failed", plugin.name)
                continue
            lines += [str(line) for line in found if str(line).strip()]
        return lines

    # ------------------------------------------------------------------ privacy
    async def forget(self, person_id: str, world_id: str) -> dict[str, int]:
        """Every plugin's `forget` hook for a person in a world: plugin name -> removed."""
        return await self._each("forget", lambda p: p.forget, person_id, world_id)

    async def export(self, person_id: str, world_id: str) -> dict[str, dict[str, Any]]:
        """Every plugin's `export` hook for a person in a world: plugin name -> its data."""
        return await self._each("export", lambda p: p.export, person_id, world_id)

    async def _each(
        self, what: str, hook_of: Callable[[Plugin], Any], person_id: str, world_id: str
    ) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for plugin in self.registry.plugins:
            hook = hook_of(plugin)
            if hook is None:
                continue
            # Not caught: a privacy request that half failed must say so, not report success.
            found[plugin.name] = await hook(self.plugin_context(plugin), person_id, world_id)
            log.info("plugin %s: %s for a person done", plugin.name, what)
        return found
