"""The bot's own words in a person's language: gettext message catalogs (docs/languages.md).

English is the source language: the msgids are the English texts, written where they are
shown, so a language without a catalog (or a text not yet translated) reads in English. Each
other language is a catalog in `locales/<code>/LC_MESSAGES/mnemo.po`, compiled to the `.mo`
beside it by `make messages`, which also extracts the texts from `bot/` into `mnemo.pot`.

Only what a person reads of the bot itself goes through here (answers to commands, notices,
fallback lines); log lines and what is sent to the model stay in English.
"""

from bot.i18n.catalogs import (
    DOMAIN,
    LOCALES,
    N_,
    SOURCE_LANGUAGE,
    SOURCE_TEXTS,
    Texts,
    UnknownLanguage,
    available_languages,
    day_and_month,
    language_name,
    language_of,
    match_language,
    texts_for,
)

__all__ = [
    "DOMAIN",
    "LOCALES",
    "N_",
    "SOURCE_LANGUAGE",
    "SOURCE_TEXTS",
    "Texts",
    "UnknownLanguage",
    "available_languages",
    "day_and_month",
    "language_name",
    "language_of",
    "match_language",
    "texts_for",
]
