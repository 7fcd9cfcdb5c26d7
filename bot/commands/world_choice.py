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
MODEL_USAGE = N_(
    "Usage: /model small|large <model name> to choose one here, "
    "/model small|large default to go back to the bot's setting."
)
# With MNEMO_MODEL_CHOICES empty: what /model says instead of changing anything.
NO_MODEL_CHOICES = N_(
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

    # ------------------------------------------------------------------ /character
    async def character(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        wanted = request.args.strip()
        choice = await self.worlds.of(request.world_id)
        if not wanted:
            return f"{describe_character(choice, texts)}\n{self._options(texts)}"
        if wanted.casefold() in DEFAULT_WORDS:
            await self.worlds.change(request.world_id, character=None)
            log.info("%s: world %s went back to the default character", *_where(request))
            back = texts.gettext("Here I am {name} again (the default).")
            return back.format(name=_called(self.worlds.catalog.default))
        found = self.worlds.catalog.find(wanted)
        if found is None:
            none = texts.gettext("I have no character called {name}.").format(name=echo(wanted))
            return f"{none}\n{self._options(texts)}"
        await self.worlds.change(request.world_id, character=found.key)
        log.info("%s: world %s chose the character %s", *_where(request), found.key)
        return texts.gettext("Here I am now {name}.").format(name=_called(found))

    def _options(self, texts: Texts) -> str:
        default = self.worlds.catalog.default
        names = ", ".join(
            texts.gettext("{name} (default)").format(name=_called(installed))
            if installed is default
            else _called(installed)
            for installed in self.worlds.catalog.all
        )
        installed = texts.gettext("Installed: {names}.").format(names=names)
        usage = texts.gettext(
            "/character <name> chooses one here; /character default goes back to the default."
        )
        return f"{installed}\n{usage}"

    # ------------------------------------------------------------------ /model
    async def model(self, request: Request, texts: Texts = SOURCE_TEXTS) -> str:
        words = request.args.split()
        choice = await self.worlds.of(request.world_id)
        choices = self.worlds.model_choices
        if not words:
            shown = describe_models(choice, self.worlds.default_models, texts)
            if not choices:
                return f"{shown}\n{texts.gettext(NO_MODEL_CHOICES)}"
            return f"{shown}\n{_may_choose(choices, texts)}\n{texts.gettext(MODEL_USAGE)}"
        size = words[0].casefold()
        if size not in (ModelClass.SMALL, ModelClass.LARGE) or len(words) != 2:
            return texts.gettext(MODEL_USAGE)
        model_class = ModelClass(size)
        field = f"{model_class.value}_model"
        wanted = words[1]
        if wanted.casefold() in DEFAULT_WORDS:
            # Always allowed: it only ever goes back to what the operator configured.
            await self.worlds.change(request.world_id, **{field: None})
            log.info("%s: world %s went back to the default %s model", *_where(request), size)
            default = self.worlds.default_models.get(size)
            if default:
                back = texts.gettext("Here the {size} model is the bot's setting again ({name}).")
                return back.format(size=size, name=default)
            back = texts.gettext("Here the {size} model is the bot's setting again.")
            return back.format(size=size)
        unchanged = texts.gettext("Nothing changed.")
        if not choices:
            return f"{texts.gettext(NO_MODEL_CHOICES)} {unchanged}"
        name = self.worlds.allowed(wanted)
        if name is None:
            log.info("%s: world %s asked for a model not allowed", *_where(request))
            refused = texts.gettext("{name} is not one of the models allowed here.")
            return f"{refused.format(name=echo(wanted))} {_may_choose(choices, texts)} {unchanged}"
        chosen = texts.gettext("Here the {size} model is now {name}.")
        if not self.worlds.default_models:
            chosen = texts.gettext(
                "Here the {size} model is now {name} (I run on the offline model now, which "
                "answers the same whatever the name: it is used once a model endpoint is set)."
            )
        else:
            refused_by = await self._check(model_class, name, request.world_id, texts)
            if refused_by is not None:
                return refused_by
        await self.worlds.change(request.world_id, **{field: name})
        log.info("%s: world %s chose the %s model %s", *_where(request), size, name)
        return chosen.format(size=size, name=name)

    async def _check(
        self, model_class: ModelClass, name: str, world_id: str, texts: Texts = SOURCE_TEXTS
    ) -> str | None:
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
            later = texts.gettext("I cannot try {name} before then. Nothing changed.")
            return f"{texts.gettext(WORLD_CAP_REPLY)} {later.format(name=name)}"
        except ModelError as error:
            log.info("the model %s was refused by the endpoint: %s", name, error)
            refused = texts.gettext(
                "The model endpoint did not answer with {name}: {error}. Nothing changed."
            )
            return refused.format(name=name, error=error)
        return None


# ---------------------------------------------------------------------- descriptions
def describe_character(choice: WorldChoice, texts: Texts = SOURCE_TEXTS) -> str:
    if choice.missing_character is not None:
        gone = texts.gettext(
            "Here I am {name}: the character chosen here ({chosen}) is no longer installed."
        )
        return gone.format(name=choice.character.name, chosen=echo(choice.missing_character))
    here = texts.gettext("Here I am {name} ({key}).")
    return here.format(name=choice.character.name, key=choice.character_key)


def describe_models(
    choice: WorldChoice, defaults: dict[str, str], texts: Texts = SOURCE_TEXTS
) -> str:
    parts = []
    for size in (ModelClass.SMALL.value, ModelClass.LARGE.value):
        own = choice.model_name(size)
        default = defaults.get(size)
        # Chosen before the operator took it off the list: kept, but never used.
        refused = choice.refused_model(size)
        if own is not None:
            part = texts.gettext("{size}: {name} (chosen here)")
        elif refused is not None and default:
            part = texts.gettext(
                "{size}: {name} (the default; {refused}, chosen here, is not allowed now)"
            )
        elif refused is not None:
            part = texts.gettext("{size}: the default ({refused}, chosen here, is not allowed now)")
        elif default:
            part = texts.gettext("{size}: {name} (the default)")
        else:
            part = texts.gettext("{size}: the default")
        shown = own or default
        parts.append(part.format(size=size, name=shown, refused=echo(refused or "")))
    if defaults:
        return texts.gettext("Models here: {models}.").format(models=", ".join(parts))
    offline = texts.gettext("Models here: {models} (the offline model is in use).")
    return offline.format(models=", ".join(parts))


def _may_choose(choices: Sequence[str], texts: Texts = SOURCE_TEXTS) -> str:
    return texts.gettext("Models you may choose: {names}.").format(names=", ".join(choices))


def describe_world(
    choice: WorldChoice, defaults: dict[str, str], texts: Texts = SOURCE_TEXTS
) -> str:
    """The `/stats` line: "Character: Archivist (archivist). Models here: ..." """
    if choice.missing_character is not None:
        character = texts.gettext(
            "Character: {name}: the character chosen here ({chosen}) is no longer installed."
        ).format(name=choice.character.name, chosen=echo(choice.missing_character))
    else:
        character = texts.gettext("Character: {name} ({key}).").format(
            name=choice.character.name, key=choice.character_key
        )
    return f"{character} {describe_models(choice, defaults, texts)}"


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
