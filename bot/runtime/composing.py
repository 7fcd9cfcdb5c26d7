"""StateComposer: what the runtime knows when it prompts about one message.

It gathers the conversation up to the message, the people in it and the room, then runs every
plugin provider concurrently and merges what they returned into the `State`. It also picks a
prompt template (the character's own, else the built-in one). The reply path and the
evaluation path both compose through it.

The character is the world's (`/character`; bot/runtime/worlds.py): every state carries its
world's choice (`State.world`), and the templates and model names follow it. The reply's
window read brings the world's settings along, so a reply always uses the stored choice.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from bot.domain.characters import Character, CharacterCatalog, WorldChoice
from bot.domain.names import distinct
from bot.domain.quotes import Quoted
from bot.domain.records import Fact, Memory, Room, utcnow
from bot.domain.state import State
from bot.memory.at_hand import PREFETCHED_FACTS, KnownFacts
from bot.memory.provider import FACTS, about_whom, people_named, relevant_facts, shown
from bot.memory.store import Knowledge
from bot.plugin.api import Provided, Provider
from bot.plugin.host import PluginHost
from bot.plugin.loading import Registry
from bot.runtime.prompts import BUILTIN_TEMPLATES, action_choice, character_values, format_actions
from bot.runtime.types import RuntimeOptions
from bot.runtime.worlds import WORLD_SETTINGS_READ, WorldChoices
from bot.storage.documents import load_all, millis
from bot.storage.mongo import MongoStore
from bot.storage.window_reads import Read, Window, read_window

log = logging.getLogger(__name__)

# Under this name a reply's window holds the current facts about its people (at_hand.py).
FACTS_AT_HAND = "facts_at_hand"
# Seconds a platform may take to hand over the message a reply quotes, before the reply
# goes without it.
QUOTE_WAIT = 5.0
# The room mark of a fresh start (`/reset`, `/new`): replies use nothing said before it.
FRESH_START = "fresh_start"


class StateComposer:
    def __init__(
        self,
        *,
        agent_id: str,
        character: Character,
        store: MongoStore,
        knowledge: Knowledge,
        registry: Registry,
        plugins: PluginHost,
        options: RuntimeOptions,
        worlds: WorldChoices | None = None,
    ) -> None:
        self.agent_id = agent_id
        # The process's character: every world's, until its admins choose another.
        self.character = character
        self.worlds = worlds or WorldChoices(
            store.worlds, CharacterCatalog.only(character, "default")
        )
        self.store = store
        self.knowledge = knowledge
        self.registry = registry
        self.plugins = plugins
        # Replaced by the runtime when its options change.
        self.options = options

    def template(self, name: str, default: str | None = None, *, state: State | None = None) -> str:
        """The template `name`: the character's own (the state's world's character when a
        state is given), else `default`, else the built-in one."""
        return self.character_of(state).template(name, default or BUILTIN_TEMPLATES[name])

    def character_of(self, state: State | None) -> Character:
        return state.world.character if state is not None and state.world else self.character

    @staticmethod
    def model_name(state: State | None, model_class: str) -> str | None:
        """The world's own model name for "small" or "large", or None (the process's)."""
        return state.world.model_name(model_class) if state is not None and state.world else None

    def names_in(self, world_id: str) -> list[str]:
        """What people call the bot in this world (its character's name and username), as last
        read for the world: at this message's intake, for a reply."""
        return self.worlds.kept(world_id).character.names

    async def world_of(self, world_id: str, window: Window | None = None) -> WorldChoice:
        """The world's choice: from the window when it read the world's settings, else kept
        or read (bot/runtime/worlds.py)."""
        if window is not None and WORLD_SETTINGS_READ in window.extra:
            return self.worlds.from_documents(world_id, window.extra[WORLD_SETTINGS_READ])
        return await self.worlds.of(world_id)

    async def compose_state(
        self,
        memory: Memory,
        *,
        data: dict[str, Any] | None = None,
        providers: bool = True,
        room: Room | None = None,
        window: Window | None = None,
        for_reply: bool = False,
    ) -> State:
        """The state for prompting about `memory`. `window` is what `window()` read for it,
        when the caller has it already (an evaluation finds its message in it). `for_reply`:
        the conversation starts at the room's fresh start, if it had one (learning still
        reads everything: what was said before is only not shown to the reply)."""
        if window is None:
            window = await self.window(memory, with_room=room is None or for_reply)
        room = room or window.room
        world = await self.world_of(memory.world_id, window)
        character = world.character
        recent = window.messages
        if not any(m.id == memory.id for m in recent):
            recent = [*recent, memory][-self.options.recent_messages :]
        since = await self._fresh_start(memory.room_id, window) if for_reply else None
        if since is not None:
            recent = [m for m in recent if m.created_at >= since or m.id == memory.id]
        people = ({m.user_id for m in recent} | {memory.user_id} | set(memory.mentions)) - {
            self.agent_id
        }
        actors = {i: a for i, a in window.accounts.items() if i in people}
        if unread := sorted(people - set(window.accounts) - window.asked):
            actors.update(await self.store.accounts.get_many(unread))
        # A told name belongs to the world it was told in (never used in another); no two
        # accounts, nor one and the bot, go by names that read alike in the prompt.
        actors = distinct(actors, memory.world_id, taken=[character.name])
        state = State(
            message=memory,
            agent_id=self.agent_id,
            agent_name=character.name,
            sender=actors.get(memory.user_id),
            room=room,
            recent_messages=recent,
            actors=actors,
            data=dict(data or {}),
            world=world,
            conversation_since=since,
        )
        if for_reply:
            await self._show_quotes(state)
        state.data.setdefault("actions", [a.name for a in self.registry.actions])
        state.values.update(character_values(character))
        state.values.update(
            senderName=state.name_of(memory.user_id),
            recentMessages=self.format_messages(state, recent),
            actors=", ".join(a.name for a in actors.values()),
            actions=format_actions(self.registry.actions),
            actionNames=", ".join(a.name for a in self.registry.actions),
            actionChoice=action_choice(self.registry.actions),
            currentTime=utcnow().strftime("%Y-%m-%d %H:%M UTC"),
        )
        if providers:
            read = window.extra.get(FACTS_AT_HAND)
            known = None if read is None else KnownFacts(load_all(Fact, read))
            facts, sections = await asyncio.gather(
                self._facts(memory, state, known), self._run_providers(memory, state)
            )
            state.values["providers"] = "\n\n".join(s for s in [facts, *sections] if s)
        return state

    async def _show_quotes(self, state: State) -> None:
        """Mark each person's message that replies to another with the message it replies
        to (`Memory.show_quoted`, shown by `Conversations.words` in both shapes of the reply's
        prompt): from the conversation, else the stored messages of this world, else, for
        the message answered, its platform (the adapter's loader), if its author may be
        spoken of here. Not marked: a reply to the bot's line just before it (the turns say
        that already), and after a fresh start (`/reset`), a message from before it. Only
        the reply's prompt shows quotes; learning reads a person's own words only."""
        conversation = [m for m in state.recent_messages if m.id != state.message.id]
        conversation.append(state.message)
        replying = [m for m in conversation if m.user_id != self.agent_id and m.content.in_reply_to]
        if not replying:
            return
        found = {m.id: m for m in conversation}
        wanted = sorted({m.content.in_reply_to or "" for m in replying} - set(found))
        if wanted:
            since = state.conversation_since
            found.update(
                {
                    m.id: m
                    for m in await self.store.memories.get_many(wanted)
                    if m.world_id == state.message.world_id
                    and (since is None or m.created_at >= since)
                }
            )
        quotes = {i: Quoted(m.user_id, m.content.text) for i, m in found.items()}
        answered = state.message.content.in_reply_to
        if (
            answered
            and answered not in quotes
            and state.message.user_id != self.agent_id
            and state.conversation_since is None  # nothing from before a fresh start
        ):
            fetched = await self._platform_quote(state.message)
            if fetched is not None:
                quotes[answered] = fetched
        names = await self.display_names(
            state, {q.author_id for q in quotes.values() if q.text.strip()}
        )
        before = {m.id: conversation[i - 1].id for i, m in enumerate(conversation) if i}
        for message in replying:
            quoted = quotes.get(message.content.in_reply_to or "")
            if quoted is None or not quoted.text.strip():
                continue
            if quoted.author_id == self.agent_id and before.get(message.id) == (
                message.content.in_reply_to
            ):
                continue
            name = names.get(quoted.author_id) or quoted.name
            for same in (m for m in [*state.recent_messages, state.message] if m.id == message.id):
                same.show_quoted(replace(quoted, name=name))

    async def _platform_quote(self, memory: Memory) -> Quoted | None:
        """The message `memory` replies to, from its platform (not stored here: said before
        the bot came, or by someone whose words are not kept); None when the platform has it
        not, or its author may not be spoken of here (opted out, learning off)."""
        loader = memory.quote_loader
        if loader is None:
            return None
        try:
            quoted = await asyncio.wait_for(loader(), QUOTE_WAIT)
        except Exception as error:  # a slow or failing platform costs the quote, not the reply
            log.info("the message %s replies to could not be fetched: %r", memory.id, error)
            return None
        if quoted is None or quoted.author_id == self.agent_id:
            return quoted
        allowed = await self.plugins.rooms.allowed(
            quoted.author_id, memory.room_id, memory.world_id
        )
        return quoted if allowed else None

    async def _fresh_start(self, room_id: str, window: Window) -> datetime | None:
        """When the room's conversation was last started afresh (`/reset`), if ever: from
        the window's room read (a reply's always has it), else read."""
        if window.room is not None or window.marks:
            return window.marks.get(FRESH_START)
        return await self.store.rooms.get_mark(room_id, FRESH_START)

    async def _facts(self, memory: Memory, state: State, known: KnownFacts | None) -> str:
        """The memory's section of the prompt: the facts about the message's people."""
        try:
            found = await relevant_facts(
                self.knowledge, memory, limit=self.options.relevant_facts, known=known
            )
            names = await self.display_names(state, people_named(found, memory))
        except Exception:
            log.exception("facts for the reply failed")
            return ""
        section = shown(found, memory, names)
        state.values[FACTS] = section.text
        state.markup.extend(section.markup)
        state.provided[FACTS] = section.facts
        return section.text

    async def reply_window(
        self, memory: Memory, *, extra: Mapping[str, Read | list[Read]]
    ) -> Window:
        """`window()` for a reply, read at intake with the `extra` reads, the current facts
        about the sender and the people mentioned (the facts provider's read, done here), and
        the room with its marks (a fresh start cuts the conversation the reply is shown)."""
        facts = self.store.facts.about_read(
            about_whom(memory), memory.world_id, limit=PREFETCHED_FACTS
        )
        world = {WORLD_SETTINGS_READ: self.worlds.read(memory.world_id)}
        window = await self.window(
            memory, with_room=True, extra={**extra, FACTS_AT_HAND: facts, **world}
        )
        # Kept at once: whether to answer is decided by the names of the world's character.
        self.worlds.from_documents(memory.world_id, window.extra[WORLD_SETTINGS_READ])
        return window

    async def window(
        self,
        memory: Memory,
        *,
        with_room: bool = False,
        with_people: bool = True,
        extra: Mapping[str, Read | list[Read]] | None = None,
    ) -> Window:
        """The conversation up to and including this message, never what came after it: an
        evaluation that runs late (a slow model, a busy room) reads what was said then. With
        the accounts of everyone in it (the sender and the people mentioned too, unless
        `with_people` is False), and the room: one round trip (bot/storage/window_reads.py)."""
        return await self.window_through(
            memory.room_id,
            millis(memory.created_at),
            people=[memory.user_id, *memory.mentions] if with_people else [],
            with_room=with_room,
            extra=extra,
        )

    async def window_through(
        self,
        room_id: str,
        through_ms: int,
        *,
        people: list[str],
        with_room: bool,
        extra: Mapping[str, Read | list[Read]] | None = None,
    ) -> Window:
        """The window up to and including `through_ms` (integer milliseconds)."""
        return await read_window(
            self.store.db,
            room_id,
            self.options.recent_messages,
            before_ms=through_ms + 1,
            people=[p for p in people if p != self.agent_id],
            with_room=with_room,
            extra=extra,
        )

    async def display_names(self, state: State, ids: set[str]) -> dict[str, str]:
        """Names for account ids: from the state's actors, else looked up."""
        return await self.plugins.conversations.display_names(state, ids)

    async def _run_providers(self, memory: Memory, state: State) -> list[str]:
        """Run the providers concurrently, then merge what they returned into the state in
        registration order (providers never write into the shared state themselves)."""

        async def one(provider: Provider) -> Provided:
            context = self.plugins.context(provider, memory, state)
            try:
                output = await provider.get(context)
            except Exception:
                log.exception("provider %s failed", provider.name)
                return Provided()
            return output if isinstance(output, Provided) else Provided(text=output or "")

        providers = self.registry.providers
        outputs = await asyncio.gather(*(one(p) for p in providers))
        for provider, output in zip(providers, outputs, strict=True):
            state.values[provider.name] = output.text
            if output.text:
                state.markup.extend(output.markup)
            if output.data is not None:
                state.provided[provider.name] = output.data
        return [output.text for output in outputs]

    def format_messages(self, state: State, messages: list[Memory]) -> str:
        # The prompts composed here (the reply's, the evaluator selection's) show what people
        # attached, by title; the images themselves go beside the reply's prompt only, when
        # the model sees images (bot/runtime/replying.py).
        return self.plugins.conversations.format(state, messages, attachments=True)
