"""The slash commands' descriptions in each language Mnemo has a catalog for (bot/i18n).

Discord shows a command's description in the language of the person's client when the
registered command carries it (`description_localizations`); discord.py fills those from a
`Translator`, asked once per string and Discord locale when the payload is built. Names are
never translated: a command is typed by its name, and the help and the docs give one.
"""

from __future__ import annotations

import discord
from discord import app_commands

from bot.i18n import SOURCE_LANGUAGE, match_language, texts_for

# What a person reads of a command in Discord's picker.
_DESCRIBED = {
    app_commands.TranslationContextLocation.command_description,
    app_commands.TranslationContextLocation.group_description,
    app_commands.TranslationContextLocation.parameter_description,
}


class CatalogTranslator(app_commands.Translator):
    """Each description as the catalog of the locale's language has it; None (Discord shows
    the English) when the language has no catalog or the catalog lacks the text."""

    async def translate(
        self,
        string: app_commands.locale_str,
        locale: discord.Locale,
        context: app_commands.TranslationContextTypes,
    ) -> str | None:
        if context.location not in _DESCRIBED:
            return None
        language = match_language(locale.value)
        if language is None or language == SOURCE_LANGUAGE:
            return None
        translated = texts_for(language).gettext(string.message)
        # Discord refuses a description longer than 100 characters (the English is cut so too).
        return translated[:100] if translated != string.message else None
