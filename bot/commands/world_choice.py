"""`/character [name]`, `/model [small|large] [name|default]` and `/language [code|default]`:
a world's own character, model names and language of the bot's own words, chosen by its
admins (issue 21.3, issue 31). Without arguments each shows the current choice and the
options. The choice is kept in `world_settings` (bot/storage/world_settings.py) and used for
everything done in the world (bot/runtime/worlds.py, bot/runtime/languages.py); `/stats`
shows the character and models.

A model costs the operator, not the admin: `/model` chooses only among the names the operator
lists in MNEMO_MODEL_CHOICES (none by default: then it shows the models and changes nothing).

Registered with the other built-in commands in bot/commands/command_set.py (`BUILT_IN` and
the handlers), from `COMMANDS` and `handlers()` here.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from bot.commands.parsing import echo
from bot.commands.types import CommandInfo, Request
from bot.domain.characters import InstalledCharacter, WorldChoice
from bot.i18n import (
    N_,
    SOURCE_TEXTS,
    Texts,
    available_languages,
    language_name,
    match_language,
    texts_for,
)
from bot.llm.base import LanguageModel, ModelClass, ModelError, ModelRequest
from bot.llm.caps import WORLD_CAP_REPLY, OverCap
from bot.runtime.languages import Languages
from bot.runtime.worlds import WorldChoices

log = logging.getLogger(__name__)

COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo(
        "character", N_("Admins: the character I speak as here"), usage="[name]", admin_only=True
    ),
    CommandInfo(
        "model",
        N_("Admins: the models I use here"),
        usage="[small|large] [name|default]",
        admin_only=True,
    ),
    CommandInfo(
        "language",
        N_("Admins: the language of my own words here"),
        usage="[code|default]",
        admin_only=True,
    ),
)

DEFAULT_WORDS = ("default", "reset", "none")
MODEL_USAGE = (
    "Usage: /model small|large <model name> to choose one here, "
    "/model small|large default to go back to the bot's setting."
)
# With MNEMO_MODEL_CHOICES empty: what /model says instead of changing anything.
NO_MODEL_CHOICES = (
    "Whoever runs this bot has not allowed other models, so every server and group uses the "
    "configured ones (they can list the names admins may choose in MNEMO_MODEL_CHOICES)."
)
# The task a model name's check is accounted under.
MODEL_CHECK_TASK = "model_check"

# An answer, given the catalog of the asker's language (bot/i18n).
Handler = Callable[[Request, Texts], Awaitable[str]]


def handlers(
    worlds: WorldChoices, model: LanguageModel, languages: Languages
) -> dict[str, Handler]:
    """The answers to /character, /model and /language, by command name."""
    choosing = WorldChoosing(worlds, model, languages)
    return {
        "character": choosing.character,
        "model": choosing.model,
        "language": choosing.language,
    }


class WorldChoosing:
    def __init__(self, worlds: WorldChoices, model: LanguageModel, languages: Languages) -> None:
        self.worlds = worlds
        self.language_model = model
        self.languages = languages

    # ------------------------------------------------------------------ /language
    async def language(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        wanted = request.args.strip()
        if not wanted:
            chosen = await self.languages.chosen(request.world_id)
            if chosen is None:
                shown = texts.gettext(
                    "Here I speak each person's language when I have it, else {default}."
                ).format(default=_language_shown(self.languages.default))
            else:
                shown = texts.gettext("Here I speak {language}.").format(
                    language=_language_shown(chosen)
                )
            return f"{shown}\n{_languages_available(texts)}"
        if wanted.casefold() in DEFAULT_WORDS:
            await self.languages.change(request.world_id, None)
            log.info("%s: world %s went back to the default language", *_where(request))
            now = texts_for(self.languages.language(None, request.locale))
            return now.gettext(
                "Here I speak each person's language again when I have it, else {default}."
            ).format(default=_language_shown(self.languages.default))
        found = match_language(wanted)
        if found is None:
            unknown = texts.gettext("I have no language {code}; nothing changed.")
            return f"{unknown.format(code=echo(wanted, 20))}\n{_languages_available(texts)}"
        await self.languages.change(request.world_id, found)
        log.info("%s: world %s chose the language %s", *_where(request), found)
        # Said in the language just chosen: the first answer in it.
        return (
            texts_for(found)
            .gettext("Here I speak {language} now.")
            .format(language=_language_shown(found))
        )

    # ------------------------------------------------------------------ /character and /model
    # Their answers are for admins and stay in English for now (docs/languages.md).
    async def character(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        return await self._character(request)

    async def model(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        return await self._model(request)

    async def _character(self, request: Request) -> str:
        wanted = request.args.strip()
        choice = await self.worlds.of(request.world_id)
        if not wanted:
            return f"{describe_character(choice)}\n{self._options(choice)}"
        if wanted.casefold() in DEFAULT_WORDS:
            await self.worlds.change(request.world_id, character=None)
            log.info("%s: world %s went back to the default character", *_where(request))
            return f"Here I am {_called(self.worlds.catalog.default)} again (the default)."
        found = self.worlds.catalog.find(wanted)
        if found is None:
            return f"I have no character called {echo(wanted)}.\n{self._options(choice)}"
        await self.worlds.change(request.world_id, character=found.key)
        log.info("%s: world %s chose the character %s", *_where(request), found.key)
        return f"Here I am now {_called(found)}."

    def _options(self, choice: WorldChoice) -> str:
        names = ", ".join(
            _called(installed) + (" (default)" if installed is self.worlds.catalog.default else "")
            for installed in self.worlds.catalog.all
        )
        return (
            f"Installed: {names}.\n"
            "/character <name> chooses one here; /character default goes back to the default."
        )

    async def _model(self, request: Request) -> str:
        words = request.args.split()
        choice = await self.worlds.of(request.world_id)
        choices = self.worlds.model_choices
        if not words:
            shown = describe_models(choice, self.worlds.default_models)
            if not choices:
                return f"{shown}\n{NO_MODEL_CHOICES}"
            return f"{shown}\n{_may_choose(choices)}\n{MODEL_USAGE}"
        size = words[0].casefold()
        if size not in (ModelClass.SMALL, ModelClass.LARGE) or len(words) != 2:
            return MODEL_USAGE
        model_class = ModelClass(size)
        field = f"{model_class.value}_model"
        wanted = words[1]
        if wanted.casefold() in DEFAULT_WORDS:
            # Always allowed: it only ever goes back to what the operator configured.
            await self.worlds.change(request.world_id, **{field: None})
            log.info("%s: world %s went back to the default %s model", *_where(request), size)
            default = self.worlds.default_models.get(size)
            shown = f" ({default})" if default else ""
            return f"Here the {size} model is the bot's setting again{shown}."
        if not choices:
            return f"{NO_MODEL_CHOICES} Nothing changed."
        name = self.worlds.allowed(wanted)
        if name is None:
            log.info("%s: world %s asked for a model not allowed", *_where(request))
            return (
                f"{echo(wanted)} is not one of the models allowed here. "
                f"{_may_choose(choices)} Nothing changed."
            )
        note = ""
        if not self.worlds.default_models:
            note = (
                " (I run on the offline model now, which answers the same whatever the name: "
                "it is used once a model endpoint is set)"
            )
        else:
            refused = await self._check(model_class, name, request.world_id)
            if refused is not None:
                return refused
        await self.worlds.change(request.world_id, **{field: name})
        log.info("%s: world %s chose the %s model %s", *_where(request), size, name)
        return f"Here the {size} model is now {name}{note}."

    async def _check(self, model_class: ModelClass, name: str, world_id: str) -> str | None:
        """One tiny request with the model name: None when the endpoint answers it, else why
        it is refused (a name the operator lists may still be one the endpoint does not
        serve, which would fail every reply here). Made for the world: its daily cap counts it."""
        try:
            await self.language_model.generate(
                ModelRequest(
                    "Answer with the word OK.",
                    model_class=model_class,
                    task=MODEL_CHECK_TASK,
                    max_tokens=1,
                    model_name=name,
                    world_id=world_id,
                )
            )
        except OverCap:
            return f"{WORLD_CAP_REPLY} I cannot try {name} before then. Nothing changed."
        except ModelError as error:
            log.info("the model %s was refused by the endpoint: %s", name, error)
            return f"The model endpoint did not answer with {name}: {error}. Nothing changed."
        return None


# ---------------------------------------------------------------------- descriptions
def describe_character(choice: WorldChoice) -> str:
    if choice.missing_character is not None:
        return (
            f"Here I am {choice.character.name}: the character chosen here "
            f"({echo(choice.missing_character)}) is no longer installed."
        )
    return f"Here I am {choice.character.name} ({choice.character_key})."


def describe_models(choice: WorldChoice, defaults: dict[str, str]) -> str:
    parts = []
    for size in (ModelClass.SMALL.value, ModelClass.LARGE.value):
        own = choice.model_name(size)
        if own is not None:
            parts.append(f"{size}: {own} (chosen here)")
            continue
        default = defaults.get(size)
        shown = f"{size}: {default} (the default" if default else f"{size}: the default"
        refused = choice.refused_model(size)
        if refused is not None:
            # Chosen before the operator took it off the list: kept, but never used.
            shown += "; " if default else " ("
            shown += f"{echo(refused)}, chosen here, is not allowed now"
        parts.append(shown + ")" if default or refused is not None else shown)
    offline = "" if defaults else " (the offline model is in use)"
    return f"Models here: {', '.join(parts)}{offline}."


def _may_choose(choices: Sequence[str]) -> str:
    return f"Models you may choose: {', '.join(choices)}."


def describe_world(choice: WorldChoice, defaults: dict[str, str]) -> str:
    """The `/stats` line: "Character: Archivist (archivist). Models here: ..." """
    character = describe_character(choice).removeprefix("Here I am ")
    return f"Character: {character} {describe_models(choice, defaults)}"


def _language_shown(code: str) -> str:
    """ "es (español)": the code to type, and the language's own name for itself."""
    name = language_name(code)
    return code if name == code else f"{code} ({name})"


def _languages_available(texts: Texts) -> str:
    shown = ", ".join(_language_shown(code) for code in available_languages())
    available = texts.gettext("Available: {languages}.").format(languages=shown)
    usage = texts.gettext(
        "/language <code> chooses one here; /language default goes back to each person's."
    )
    return f"{available}\n{usage}"


def _called(installed: InstalledCharacter) -> str:
    name = installed.character.name
    return name if name.casefold() == installed.key.casefold() else f"{name} ({installed.key})"


def _where(request: Request) -> tuple[str, str]:
    return request.platform, request.world_id
